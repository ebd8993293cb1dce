//! The file-level policy core (SPEC §4.9): (file, block) → cache slot, a dirty bit per block,
//! LRU replacement, admission on read miss, and the four write variants as a table.
//!
//! The core moves no data. Each call appends the device operations the request needs to a
//! [`DevOp`] list, in the order they must happen; the FUSE file system ([`crate::fs`]) and the
//! simulator ([`crate::sim`]) execute the same lists, so both run one policy.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use tiercache_core::LineKey;
use tiercache_eviction::{build, Eviction, EvictionKind, Slot};

/// Identity of a file in the store (its inode number there: stable across renames).
pub type FileId = u64;

/// One block of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// The file.
    pub file: FileId,
    /// Block index within the file (byte offset / block size).
    pub block: u64,
}

impl BlockKey {
    /// A key for `block` of `file`.
    pub fn new(file: FileId, block: u64) -> Self {
        BlockKey { file, block }
    }
}

/// When written data reaches the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WritePolicy {
    /// Acknowledge once the cache holds it; the store gets it on eviction or flush.
    WriteBack,
    /// Acknowledge once both the cache and the store hold it.
    WriteThrough,
}

/// Whether a write miss takes cache space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Allocation {
    /// A write miss allocates a block in the cache.
    WriteAllocate,
    /// A write miss goes to the store only (write-no-allocate).
    WriteAround,
}

/// One of the four file-level variants (SPEC §4.5, §4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Write policy.
    pub write: WritePolicy,
    /// Allocation policy on write misses.
    pub alloc: Allocation,
}

impl Variant {
    /// Write-back, write-allocate.
    pub const WB: Variant = Variant {
        write: WritePolicy::WriteBack,
        alloc: Allocation::WriteAllocate,
    };
    /// Write-back, write-around.
    pub const WB_AROUND: Variant = Variant {
        write: WritePolicy::WriteBack,
        alloc: Allocation::WriteAround,
    };
    /// Write-through, write-allocate.
    pub const WT: Variant = Variant {
        write: WritePolicy::WriteThrough,
        alloc: Allocation::WriteAllocate,
    };
    /// Write-through, write-around.
    pub const WT_AROUND: Variant = Variant {
        write: WritePolicy::WriteThrough,
        alloc: Allocation::WriteAround,
    };
    /// The four variants in table order.
    pub const ALL: [Variant; 4] = [
        Variant::WB,
        Variant::WB_AROUND,
        Variant::WT,
        Variant::WT_AROUND,
    ];

    /// Name as written on the command line: `wb`, `wb-around`, `wt`, `wt-around`.
    pub fn name(self) -> &'static str {
        match (self.write, self.alloc) {
            (WritePolicy::WriteBack, Allocation::WriteAllocate) => "wb",
            (WritePolicy::WriteBack, Allocation::WriteAround) => "wb-around",
            (WritePolicy::WriteThrough, Allocation::WriteAllocate) => "wt",
            (WritePolicy::WriteThrough, Allocation::WriteAround) => "wt-around",
        }
    }

    /// Whether dirty data can exist (write-back).
    pub fn is_write_back(self) -> bool {
        self.write == WritePolicy::WriteBack
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A variant name that is none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown file-cache variant {0:?}: expected wb, wb-around, wt or wt-around")]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| UnknownVariant(s.to_string()))
    }
}

/// One device operation of a plan, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevOp {
    /// Copy the dirty block in `slot` (holding `key`) to the store; the slot is then clean
    /// (a victim about to be reused, or a flush).
    WriteBack {
        /// Cache slot.
        slot: Slot,
        /// Block it holds.
        key: BlockKey,
    },
    /// `slot` (holding `key`) leaves the cache without reaching the store: the file was
    /// deleted or truncated. `was_dirty` says a write-back was cancelled.
    Discard {
        /// Cache slot.
        slot: Slot,
        /// Block it held.
        key: BlockKey,
        /// Whether the block was dirty (its write-back is cancelled).
        was_dirty: bool,
    },
    /// Read the whole block `key` from the store into `slot`.
    Fill {
        /// Cache slot.
        slot: Slot,
        /// Block.
        key: BlockKey,
    },
    /// Serve the request's bytes of `key` from `slot`.
    CacheRead {
        /// Cache slot.
        slot: Slot,
        /// Block.
        key: BlockKey,
    },
    /// Write the request's bytes of `key` into `slot`. `fresh`: the slot was just allocated
    /// without a fill, so its bytes outside the write are zeros, not stale data. `dirty`: the
    /// block is dirty afterwards (write-back).
    CacheWrite {
        /// Cache slot.
        slot: Slot,
        /// Block.
        key: BlockKey,
        /// Slot newly allocated without fill.
        fresh: bool,
        /// Block dirty after the write.
        dirty: bool,
    },
    /// Write the request's bytes of `key` to the store.
    StoreWrite {
        /// Block.
        key: BlockKey,
    },
    /// Read the request's bytes of `key` from the store (uncached: a cache of zero blocks).
    StoreRead {
        /// Block.
        key: BlockKey,
    },
}

/// Counters of the core's decisions (block granularity).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreStats {
    /// Block reads that hit.
    pub read_hits: u64,
    /// Block reads that missed.
    pub read_misses: u64,
    /// Block writes that found the block cached.
    pub write_hits: u64,
    /// Block writes that did not.
    pub write_misses: u64,
    /// Blocks admitted (read-miss fills and write allocations).
    pub admissions: u64,
    /// Blocks evicted to make room.
    pub evictions: u64,
    /// Dirty blocks written back (eviction or flush).
    pub write_backs: u64,
    /// Blocks freed because their file was deleted or truncated.
    pub freed_by_delete: u64,
    /// Dirty blocks whose write-back was cancelled by a delete or truncate.
    pub write_backs_cancelled: u64,
}

#[derive(Debug, Clone, Copy)]
struct SlotState {
    key: BlockKey,
    dirty: bool,
}

/// The file-level cache policy: deterministic, no I/O.
pub struct FileCache {
    variant: Variant,
    capacity: u32,
    slots: Vec<Option<SlotState>>,
    free: Vec<Slot>,
    files: HashMap<FileId, BTreeMap<u64, Slot>>,
    lru: Box<dyn Eviction>,
    dirty: u64,
    stats: CoreStats,
}

fn line_key(key: BlockKey) -> LineKey {
    // Only ghost-keeping policies look at keys; LRU stores nothing for them. Mix both parts so
    // distinct blocks get distinct keys in practice.
    LineKey(key.file.rotate_left(32) ^ key.block)
}

impl FileCache {
    /// A cache of `capacity` blocks (0: every request goes to the store) running `variant`.
    pub fn new(capacity: u32, variant: Variant) -> Self {
        FileCache {
            variant,
            capacity,
            slots: vec![None; capacity as usize],
            free: (0..capacity).rev().collect(),
            files: HashMap::new(),
            lru: build(
                EvictionKind::Lru,
                capacity as usize,
                capacity.max(1) as usize,
            ),
            dirty: 0,
            stats: CoreStats::default(),
        }
    }

    /// The variant this cache runs.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Capacity in blocks.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Blocks resident.
    pub fn len(&self) -> usize {
        self.lru.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dirty blocks resident.
    pub fn dirty_blocks(&self) -> u64 {
        self.dirty
    }

    /// Decision counters so far.
    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// Where `key` is cached and whether it is dirty.
    pub fn lookup(&self, key: BlockKey) -> Option<(Slot, bool)> {
        let slot = *self.files.get(&key.file)?.get(&key.block)?;
        let state = self.slots[slot as usize].expect("indexed slot is occupied");
        Some((slot, state.dirty))
    }

    /// The block `slot` holds, and whether it is dirty.
    pub fn slot_state(&self, slot: Slot) -> Option<(BlockKey, bool)> {
        self.slots
            .get(slot as usize)
            .copied()
            .flatten()
            .map(|s| (s.key, s.dirty))
    }

    /// Dirty blocks of `file`, by block index.
    pub fn dirty_of_file(&self, file: FileId) -> Vec<(BlockKey, Slot)> {
        let Some(blocks) = self.files.get(&file) else {
            return Vec::new();
        };
        blocks
            .iter()
            .filter(|(_, &slot)| self.slots[slot as usize].is_some_and(|s| s.dirty))
            .map(|(&block, &slot)| (BlockKey::new(file, block), slot))
            .collect()
    }

    /// A read of (part of) block `key`. Admission on miss: the block is filled from the store.
    /// Returns whether it hit.
    pub fn read(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) -> bool {
        if let Some((slot, _)) = self.lookup(key) {
            self.stats.read_hits += 1;
            self.lru.hit(slot);
            ops.push(DevOp::CacheRead { slot, key });
            return true;
        }
        self.stats.read_misses += 1;
        match self.allocate(key, ops) {
            Some(slot) => {
                ops.push(DevOp::Fill { slot, key });
                ops.push(DevOp::CacheRead { slot, key });
            }
            None => ops.push(DevOp::StoreRead { key }),
        }
        false
    }

    /// A write of (part of) block `key`. `needs_fill`: the block holds store data the write
    /// does not cover (a partial write inside the file), so allocating it reads the block first.
    pub fn write(&mut self, key: BlockKey, needs_fill: bool, ops: &mut Vec<DevOp>) -> bool {
        let write_back = self.variant.is_write_back();
        if let Some((slot, was_dirty)) = self.lookup(key) {
            self.stats.write_hits += 1;
            self.lru.hit(slot);
            ops.push(DevOp::CacheWrite {
                slot,
                key,
                fresh: false,
                dirty: write_back,
            });
            if write_back {
                if !was_dirty {
                    self.set_dirty(slot, true);
                }
            } else {
                ops.push(DevOp::StoreWrite { key });
            }
            return true;
        }
        self.stats.write_misses += 1;
        if self.variant.alloc == Allocation::WriteAround {
            ops.push(DevOp::StoreWrite { key });
            return false;
        }
        match self.allocate(key, ops) {
            Some(slot) => {
                if needs_fill {
                    ops.push(DevOp::Fill { slot, key });
                }
                ops.push(DevOp::CacheWrite {
                    slot,
                    key,
                    fresh: !needs_fill,
                    dirty: write_back,
                });
                if write_back {
                    self.set_dirty(slot, true);
                } else {
                    ops.push(DevOp::StoreWrite { key });
                }
            }
            None => ops.push(DevOp::StoreWrite { key }),
        }
        false
    }

    /// `file` was deleted: every cached block is freed and no write-back of it happens.
    pub fn delete_file(&mut self, file: FileId, ops: &mut Vec<DevOp>) {
        self.truncate(file, 0, ops);
        self.files.remove(&file);
    }

    /// `file` was truncated to `first_dropped` blocks: blocks from there on are freed and
    /// their write-backs cancelled. (The executor trims the tail of a partial last block.)
    pub fn truncate(&mut self, file: FileId, first_dropped: u64, ops: &mut Vec<DevOp>) {
        let Some(blocks) = self.files.get_mut(&file) else {
            return;
        };
        let dropped = blocks.split_off(&first_dropped);
        if blocks.is_empty() {
            self.files.remove(&file);
        }
        for (block, slot) in dropped {
            let state = self.slots[slot as usize]
                .take()
                .expect("indexed slot is occupied");
            self.lru.remove(slot);
            self.free.push(slot);
            self.stats.freed_by_delete += 1;
            if state.dirty {
                self.dirty -= 1;
                self.stats.write_backs_cancelled += 1;
            }
            ops.push(DevOp::Discard {
                slot,
                key: BlockKey::new(file, block),
                was_dirty: state.dirty,
            });
        }
    }

    /// One block leaves the cache without write-back (a block cache told by TRIM).
    pub fn discard(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) {
        let Some(blocks) = self.files.get_mut(&key.file) else {
            return;
        };
        let Some(slot) = blocks.remove(&key.block) else {
            return;
        };
        if blocks.is_empty() {
            self.files.remove(&key.file);
        }
        let state = self.slots[slot as usize]
            .take()
            .expect("indexed slot is occupied");
        self.lru.remove(slot);
        self.free.push(slot);
        self.stats.freed_by_delete += 1;
        if state.dirty {
            self.dirty -= 1;
            self.stats.write_backs_cancelled += 1;
        }
        ops.push(DevOp::Discard {
            slot,
            key,
            was_dirty: state.dirty,
        });
    }

    /// Writes every dirty block of `file` (or of all files) back; they stay cached, clean.
    pub fn flush(&mut self, file: Option<FileId>, ops: &mut Vec<DevOp>) {
        let mut dirty: Vec<(BlockKey, Slot)> = match file {
            Some(f) => self.dirty_of_file(f),
            None => self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(slot, s)| s.filter(|s| s.dirty).map(|s| (s.key, slot as Slot)))
                .collect(),
        };
        // Store order (file, block): sequential runs for the store.
        dirty.sort_unstable();
        for (key, slot) in dirty {
            ops.push(DevOp::WriteBack { slot, key });
            self.set_dirty(slot, false);
            self.stats.write_backs += 1;
        }
    }

    fn set_dirty(&mut self, slot: Slot, dirty: bool) {
        let state = self.slots[slot as usize]
            .as_mut()
            .expect("slot is occupied");
        if state.dirty != dirty {
            state.dirty = dirty;
            if dirty {
                self.dirty += 1;
            } else {
                self.dirty -= 1;
            }
        }
    }

    /// Finds a slot for `key` (evicting the LRU block, written back first if dirty) and
    /// indexes it. `None` for a cache of zero blocks.
    fn allocate(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) -> Option<Slot> {
        if self.capacity == 0 {
            return None;
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let victim = self
                    .lru
                    .evict(line_key(key), &|_| false)
                    .expect("a full cache has a victim");
                let state = self.slots[victim as usize]
                    .take()
                    .expect("victim slot is occupied");
                let blocks = self
                    .files
                    .get_mut(&state.key.file)
                    .expect("victim's file is indexed");
                blocks.remove(&state.key.block);
                if blocks.is_empty() {
                    self.files.remove(&state.key.file);
                }
                self.stats.evictions += 1;
                if state.dirty {
                    self.dirty -= 1;
                    self.stats.write_backs += 1;
                    ops.push(DevOp::WriteBack {
                        slot: victim,
                        key: state.key,
                    });
                }
                victim
            }
        };
        self.slots[slot as usize] = Some(SlotState { key, dirty: false });
        self.files
            .entry(key.file)
            .or_default()
            .insert(key.block, slot);
        self.lru.insert(slot, line_key(key));
        self.stats.admissions += 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(file: u64, block: u64) -> BlockKey {
        BlockKey::new(file, block)
    }

    #[test]
    fn variants_parse_by_name() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert!("wx".parse::<Variant>().is_err());
    }

    #[test]
    fn read_miss_admits_then_hits() {
        let mut c = FileCache::new(2, Variant::WB);
        let mut ops = Vec::new();
        assert!(!c.read(k(1, 0), &mut ops));
        assert_eq!(
            ops,
            vec![
                DevOp::Fill {
                    slot: 0,
                    key: k(1, 0)
                },
                DevOp::CacheRead {
                    slot: 0,
                    key: k(1, 0)
                }
            ]
        );
        ops.clear();
        assert!(c.read(k(1, 0), &mut ops));
        assert_eq!(
            ops,
            vec![DevOp::CacheRead {
                slot: 0,
                key: k(1, 0)
            }]
        );
    }

    #[test]
    fn the_four_variants_on_a_write_miss() {
        for v in Variant::ALL {
            let mut c = FileCache::new(4, v);
            let mut ops = Vec::new();
            c.write(k(1, 0), false, &mut ops);
            let to_store = ops.iter().any(|o| matches!(o, DevOp::StoreWrite { .. }));
            let to_cache = ops.iter().any(|o| matches!(o, DevOp::CacheWrite { .. }));
            match v.name() {
                "wb" => assert!(to_cache && !to_store && c.dirty_blocks() == 1),
                "wb-around" | "wt-around" => assert!(!to_cache && to_store && c.is_empty()),
                "wt" => assert!(to_cache && to_store && c.dirty_blocks() == 0),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn delete_frees_blocks_and_cancels_write_back() {
        let mut c = FileCache::new(4, Variant::WB);
        let mut ops = Vec::new();
        for b in 0..3 {
            c.write(k(7, b), false, &mut ops);
        }
        ops.clear();
        c.delete_file(7, &mut ops);
        assert_eq!(ops.len(), 3);
        assert!(ops.iter().all(|o| matches!(
            o,
            DevOp::Discard {
                was_dirty: true,
                ..
            }
        )));
        assert!(c.is_empty());
        assert_eq!(c.dirty_blocks(), 0);
        ops.clear();
        c.flush(None, &mut ops);
        assert!(ops.is_empty(), "nothing of a deleted file is written back");
    }

    #[test]
    fn eviction_writes_back_dirty_victim_in_lru_order() {
        let mut c = FileCache::new(2, Variant::WB);
        let mut ops = Vec::new();
        c.write(k(1, 0), false, &mut ops);
        c.read(k(1, 1), &mut ops);
        c.read(k(1, 0), &mut ops); // 1/1 is now least recent
        ops.clear();
        c.write(k(2, 0), false, &mut ops);
        assert!(!ops.iter().any(|o| matches!(o, DevOp::WriteBack { .. })));
        ops.clear();
        c.read(k(3, 0), &mut ops); // victim 1/0, dirty
        assert_eq!(
            ops[0],
            DevOp::WriteBack {
                slot: 0,
                key: k(1, 0)
            }
        );
    }
}
