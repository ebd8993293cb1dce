//! The file-level core as it was before it ran on the policy core (docs/design.md §4.9): its
//! own slot table, per-file index, LRU from `tiercache_eviction` and the four variants as
//! code. Kept, unchanged in its decisions, as the reference the equivalence test
//! (`tests/equivalence.rs`) drives side by side with [`tiercache_filecache::FileCache`].

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use tiercache_core::LineKey;
use tiercache_eviction::{build, Eviction, EvictionKind, Slot};
use tiercache_filecache::core::CoreStats;
use tiercache_filecache::{Allocation, BlockKey, DevOp, FileId, Variant};

#[derive(Debug, Clone, Copy)]
struct SlotState {
    key: BlockKey,
    dirty: bool,
}

/// The file-level cache policy: deterministic, no I/O.
pub struct RefCache {
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

impl RefCache {
    /// A cache of `capacity` blocks (0: every request goes to the store) running `variant`.
    pub fn new(capacity: u32, variant: Variant) -> Self {
        RefCache {
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
