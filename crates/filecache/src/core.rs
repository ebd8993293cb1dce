//! The file-level cache (docs/design.md §4.9) on the policy core: (file, block) keys, the four
//! write variants, deletes and truncates, and the [`DevOp`] lists the FUSE file system
//! ([`crate::fs`]) and the simulator ([`crate::sim`]) execute.
//!
//! Every decision — hit or miss, the victim, promotion, write-back, what a write does in each
//! variant — is made by the project's policy core, [`tiercache_policy::Cache`] (§3), with
//! lines of one block, LRU, promotion on every read miss, and the variant as its write mode
//! (§4.5: wb → WB, wb-around → WBA, wt → WT, wt-around → WA). This module only maps keys and
//! translates: (file, block) onto the core's (volume, line) through per-file extents
//! (`keys`, limits [`MAX_BLOCKS_PER_FILE`] and [`FileCache::max_files`]), the core's
//! [`tiercache_policy::Plan`] into [`DevOp`]s (`translate`; a cache-device op's offset / line
//! size is the slot). A delete or truncate is the core's TRIM of each cached block: the line
//! is dropped and its dirty data never written back. A flush is a write-back job over the
//! chosen lines (`Cache::write_back_lines`), completed at once.
//!
//! The core writes whole lines: a write that leaves old bytes of an allocated block in place
//! (`needs_fill`) gets a [`DevOp::Fill`] before its [`DevOp::CacheWrite`], the executor's way
//! of completing the line the core made valid.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use tiercache_core::{Plan, Request};
use tiercache_eviction::Slot;
use tiercache_policy::{
    Cache, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, MetaUpdate, PromotionConfig,
};

mod keys;
mod mirror;
mod translate;
mod versions;

pub use keys::MAX_BLOCKS_PER_FILE;

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

/// One of the four file-level variants (docs/design.md §4.5, §4.9).
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

    /// The policy core's write mode running this variant (docs/design.md §4.5).
    pub fn core_mode(self) -> tiercache_policy::WritePolicy {
        use tiercache_policy::WritePolicy as M;
        match (self.write, self.alloc) {
            (WritePolicy::WriteBack, Allocation::WriteAllocate) => M::WriteBack,
            (WritePolicy::WriteBack, Allocation::WriteAround) => M::WriteBackAround,
            (WritePolicy::WriteThrough, Allocation::WriteAllocate) => M::WriteThrough,
            (WritePolicy::WriteThrough, Allocation::WriteAround) => M::WriteAround,
        }
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

/// Why a call of the file-level cache cannot be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileCacheError {
    /// A block index at or past [`MAX_BLOCKS_PER_FILE`].
    #[error("block {block} of file {file} is past the {MAX_BLOCKS_PER_FILE} blocks a cached file may have")]
    BlockOutOfRange {
        /// The file.
        file: FileId,
        /// The block asked for.
        block: u64,
    },
    /// Every extent of the key space is in use ([`FileCache::max_files`] files have cached
    /// blocks).
    #[error("more than {max} files with cached blocks")]
    TooManyFiles {
        /// Files that may have cached blocks at once.
        max: u64,
    },
    /// The policy core refused the geometry or a request (a block size that is not a power of
    /// two from 512 B to 1 MiB, a capacity past its limit, a bad restore).
    #[error("policy core: {0}")]
    Core(String),
}

impl From<tiercache_policy::PolicyError> for FileCacheError {
    fn from(e: tiercache_policy::PolicyError) -> Self {
        FileCacheError::Core(e.to_string())
    }
}

/// The file-level cache: deterministic, no I/O; its decisions are the policy core's.
pub struct FileCache {
    variant: Variant,
    capacity: u32,
    /// The policy core (`None` for a cache of zero blocks, which the core does not build:
    /// every request goes to the store).
    core: Option<Cache>,
    line: u64,
    extents: keys::Extents,
    /// The block each core slot holds, mirrored from the core's slot updates
    /// (`Cache::drain_meta_updates`): names victims and serves `slot_state`.
    slots: Vec<Option<BlockKey>>,
    /// Whether each slot's block is dirty (mirrored likewise; `mirror`).
    slot_dirty: Vec<bool>,
    /// Cached blocks of each file (mirrored likewise; deletes, truncates and per-file
    /// flushes visit only those), its count of dirty ones and its content version.
    files: HashMap<FileId, versions::CachedFile>,
    /// The last content version given (docs/design.md §14).
    last_version: u64,
    plan: Plan,
    updates: Vec<MetaUpdate>,
    /// Counters of a cache of zero blocks.
    uncached: CoreStats,
}

impl fmt::Debug for FileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileCache")
            .field("variant", &self.variant)
            .field("capacity", &self.capacity)
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl FileCache {
    /// A cache of `capacity` blocks of 4 KiB (0: every request goes to the store) running
    /// `variant`. Panics if the policy core refuses the capacity (2^31 blocks or more); see
    /// [`FileCache::with_block_size`].
    pub fn new(capacity: u32, variant: Variant) -> Self {
        Self::with_block_size(capacity, variant, 4096)
            .expect("the policy core takes this capacity of 4 KiB lines")
    }

    /// The policy core's settings for a cache of `capacity` blocks of `block_size` bytes (a
    /// power of two of at least 512) running `variant`: a block is one line, of the block's
    /// size up to the core's largest line (1 MiB; the core moves no data, so past that only
    /// its byte counters are in 1 MiB units); LRU; promotion on every miss; the variant's
    /// write mode; no cleaning, a full cache evicting its LRU block dirty or not
    /// (docs/design.md §4.5, §4.6, §4.9). The simulator's block level runs the same.
    pub fn core_config(
        capacity: u32,
        variant: Variant,
        block_size: u64,
    ) -> Result<CacheConfig, FileCacheError> {
        if block_size < tiercache_core::geometry::MIN_LINE || !block_size.is_power_of_two() {
            return Err(FileCacheError::Core(format!(
                "block size {block_size} is not a power of two of at least 512"
            )));
        }
        let line = block_size.min(tiercache_core::geometry::MAX_LINE);
        Ok(CacheConfig {
            capacity: capacity as u64 * line,
            line_size: line,
            eviction: EvictionKind::Lru,
            promotion: PromotionConfig::Always,
            write_policy: variant.core_mode(),
            cleaning: CleaningConfig::None,
            dirty_full: DirtyFullPolicy::EvictThenWrite,
            ..CacheConfig::default()
        })
    }

    /// A cache of `capacity` blocks of `block_size` bytes running `variant` (see
    /// [`FileCache::core_config`]).
    pub fn with_block_size(
        capacity: u32,
        variant: Variant,
        block_size: u64,
    ) -> Result<Self, FileCacheError> {
        Self::with_cleaning(capacity, variant, block_size, CleaningConfig::None)
    }

    /// A cache as [`FileCache::with_block_size`] whose core runs the cleaning policy
    /// `cleaning` when asked ([`FileCache::clean`]): the mount's background cleaner.
    pub fn with_cleaning(
        capacity: u32,
        variant: Variant,
        block_size: u64,
        cleaning: CleaningConfig,
    ) -> Result<Self, FileCacheError> {
        let mut cfg = Self::core_config(capacity, variant, block_size)?;
        cfg.cleaning = cleaning;
        let line = cfg.line_size;
        let core = if capacity == 0 {
            None
        } else {
            let mut core = Cache::new(&cfg)?;
            core.set_journal(true);
            Some(core)
        };
        Ok(FileCache {
            variant,
            capacity,
            core,
            line,
            extents: keys::Extents::new(line),
            slots: vec![None; capacity as usize],
            slot_dirty: vec![false; capacity as usize],
            files: HashMap::new(),
            last_version: 0,
            plan: Plan::new(),
            updates: Vec::new(),
            uncached: CoreStats::default(),
        })
    }

    /// The variant this cache runs.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Capacity in blocks.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Most files that may have cached blocks at once (past it a read or write of another
    /// file's block is refused with [`FileCacheError::TooManyFiles`]): 2^32 with 4 KiB blocks.
    pub fn max_files(&self) -> u64 {
        self.extents.max_files()
    }

    /// Caps the files that may have cached blocks at once at `max` (checked at every
    /// admission of a new file's first block: past it the block is refused with
    /// [`FileCacheError::TooManyFiles`]); files cached already stay.
    pub fn set_max_files(&mut self, max: u64) {
        self.extents.set_cap(max);
    }

    /// Whether a request of `file` may go to the cache: the file has cached blocks, or the
    /// cap on cached files leaves room for one more.
    pub fn admits(&self, file: FileId) -> bool {
        self.extents.get(file).is_some() || (self.extents.mapped() as u64) < self.max_files()
    }

    /// Files with cached blocks now.
    pub fn cached_files(&self) -> usize {
        self.extents.mapped()
    }

    /// The policy core (`None` for a cache of zero blocks): its counters and metadata.
    pub fn policy(&self) -> Option<&Cache> {
        self.core.as_ref()
    }

    /// Blocks resident.
    pub fn len(&self) -> usize {
        self.core
            .as_ref()
            .map_or(0, |c| c.resident_lines() as usize)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dirty blocks resident.
    pub fn dirty_blocks(&self) -> u64 {
        self.core.as_ref().map_or(0, |c| c.dirty_lines())
    }

    /// Decision counters so far, read off the core's counters: a block is one line, a
    /// dropped line was dropped by a delete, truncate or discard (TRIM), and a dirty line is
    /// dirty whole (the core writes whole lines).
    pub fn stats(&self) -> CoreStats {
        let Some(core) = &self.core else {
            return self.uncached;
        };
        let s = core.stats();
        CoreStats {
            read_hits: s.read_line_hits,
            read_misses: s.read_line_accesses - s.read_line_hits,
            write_hits: s.write_line_hits,
            write_misses: s.write_line_accesses - s.write_line_hits,
            admissions: s.promotions,
            evictions: s.evictions,
            write_backs: s.dirty_evictions + s.cleaned_lines,
            freed_by_delete: s.invalidations,
            write_backs_cancelled: s.trimmed_dirty_bytes / self.line,
        }
    }

    /// Where `key` is cached and whether it is dirty.
    pub fn lookup(&self, key: BlockKey) -> Option<(Slot, bool)> {
        let core = self.core.as_ref()?;
        if key.block >= MAX_BLOCKS_PER_FILE {
            return None;
        }
        let (volume, index) = self.extents.line(self.extents.get(key.file)?, key.block);
        let s = core.line_state(volume, index)?;
        Some((s.slot, s.dirty != 0))
    }

    /// The block `slot` holds, and whether it is dirty.
    pub fn slot_state(&self, slot: Slot) -> Option<(BlockKey, bool)> {
        let key = (*self.slots.get(slot as usize)?)?;
        let (_, dirty) = self.lookup(key)?;
        Some((key, dirty))
    }

    /// Dirty blocks of `file`, by block index.
    pub fn dirty_of_file(&self, file: FileId) -> Vec<(BlockKey, Slot)> {
        let Some(cached) = self.files.get(&file).filter(|f| f.dirty > 0) else {
            return Vec::new();
        };
        cached
            .blocks
            .iter()
            .filter_map(|&b| {
                let key = BlockKey::new(file, b);
                self.lookup(key)
                    .filter(|&(_, dirty)| dirty)
                    .map(|(slot, _)| (key, slot))
            })
            .collect()
    }

    /// Every dirty block, in (file, block) order.
    pub fn dirty_all(&self) -> Vec<(BlockKey, Slot)> {
        let mut files: Vec<FileId> = self.files.keys().copied().collect();
        files.sort_unstable();
        files
            .into_iter()
            .flat_map(|f| self.dirty_of_file(f))
            .collect()
    }

    /// Every cached block that is clean.
    pub fn clean_all(&self) -> Vec<BlockKey> {
        self.slots
            .iter()
            .flatten()
            .filter(|&&k| self.lookup(k).is_some_and(|(_, dirty)| !dirty))
            .copied()
            .collect()
    }

    /// A read of (part of) block `key`; a miss promotes the block (filled from the store).
    /// Returns whether it hit.
    pub fn read(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) -> Result<bool, FileCacheError> {
        if self.core.is_none() {
            self.uncached.read_misses += 1;
            ops.push(DevOp::StoreRead { key });
            return Ok(false);
        }
        let (volume, index) = self.map(key)?;
        let req = Request::read(index * self.line, self.line).on_volume(volume);
        self.access(key, &req, false, ops)
    }

    /// A write of (part of) block `key`. `needs_fill`: the block holds store data the write
    /// does not cover (a partial write inside the file), so allocating it reads the block
    /// first. Returns whether it hit.
    pub fn write(
        &mut self,
        key: BlockKey,
        needs_fill: bool,
        ops: &mut Vec<DevOp>,
    ) -> Result<bool, FileCacheError> {
        if self.core.is_none() {
            self.uncached.write_misses += 1;
            ops.push(DevOp::StoreWrite { key });
            return Ok(false);
        }
        let (volume, index) = self.map(key)?;
        let req = Request::write(index * self.line, self.line).on_volume(volume);
        let hit = self.access(key, &req, needs_fill, ops);
        self.content_changed(key.file);
        hit
    }

    /// The content version of `file`: a value never given before at each change of its
    /// cached content (a write of a block, a block admitted, evicted or dropped, and what
    /// [`FileCache::content_changed`] reports), `None` while it has no cached block. A copy of
    /// the file made at version `v` equals the cache's content while this is `Some(v)`.
    pub fn content_version(&self, file: FileId) -> Option<u64> {
        self.files.get(&file).map(|f| f.version)
    }

    /// `file`'s content changed outside the core's view (a write past the cache, a truncate's
    /// partial last block): it gets a new version if it has one.
    pub fn content_changed(&mut self, file: FileId) {
        if let Some(f) = self.files.get_mut(&file) {
            f.version = versions::next(&mut self.last_version);
        }
    }

    /// `file` was deleted: every cached block is freed and no write-back of it happens.
    pub fn delete_file(&mut self, file: FileId, ops: &mut Vec<DevOp>) {
        self.truncate(file, 0, ops);
    }

    /// `file` was truncated to `first_dropped` blocks: blocks from there on are freed and
    /// their write-backs cancelled. (The executor trims the tail of a partial last block.)
    pub fn truncate(&mut self, file: FileId, first_dropped: u64, ops: &mut Vec<DevOp>) {
        let Some(cached) = self.files.get(&file) else {
            return;
        };
        let dropped: Vec<u64> = cached.blocks.range(first_dropped..).copied().collect();
        for block in dropped {
            self.trim(BlockKey::new(file, block), ops);
        }
        self.sync();
    }

    /// One block leaves the cache without write-back (a block cache told by TRIM).
    pub fn discard(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) {
        self.trim(key, ops);
        self.sync();
    }

    /// Writes every dirty block of `file` (or of all files) back, in (file, block) order;
    /// they stay cached, clean.
    pub fn flush(&mut self, file: Option<FileId>, ops: &mut Vec<DevOp>) {
        let mut dirty: Vec<BlockKey> = match file {
            Some(f) => self.dirty_of_file(f).into_iter().map(|(k, _)| k).collect(),
            None => self
                .files
                .keys()
                .flat_map(|&f| self.dirty_of_file(f))
                .map(|(k, _)| k)
                .collect(),
        };
        // Store order (file, block): sequential runs for the store.
        dirty.sort_unstable();
        let lines: Vec<_> = dirty
            .iter()
            .filter_map(|k| Some(self.extents.line(self.extents.get(k.file)?, k.block)))
            .collect();
        let Some(core) = self.core.as_mut() else {
            return;
        };
        if let Some(job) = core.write_back_lines(lines) {
            for &slot in job.slots() {
                let key = self.slots[slot as usize].expect("a dirty slot is mirrored");
                ops.push(DevOp::WriteBack { slot, key });
            }
            // The executor runs the ops before its next call: the job is done as far as the
            // policy goes (the old core marked the blocks clean at once, too).
            core.flush_done(job);
        }
        self.sync();
    }

    /// Asks the core's cleaning policy (docs/design.md §4.6; chosen by
    /// [`FileCache::with_cleaning`], none by default) for write-backs now, `now_ns` being the
    /// time and `idle_ns` how long the cache has served no request: the blocks it picks (least
    /// recently written first) become [`DevOp::WriteBack`]s, done as far as the policy goes,
    /// as in [`FileCache::flush`]. Returns when the policy wants to be asked again (`None`:
    /// only after the next request).
    pub fn clean(&mut self, now_ns: u64, idle_ns: u64, ops: &mut Vec<DevOp>) -> Option<u64> {
        let core = self.core.as_mut()?;
        let state = tiercache_policy::ExecutorState {
            now: now_ns,
            cache_idle_ns: idle_ns,
            ..Default::default()
        };
        let mut jobs = Vec::new();
        core.clean(&state, &mut jobs);
        for job in jobs {
            for &slot in job.slots() {
                let key = self.slots[slot as usize].expect("a dirty slot is mirrored");
                ops.push(DevOp::WriteBack { slot, key });
            }
            core.flush_done(job);
        }
        let next = core.next_clean_poll(&state);
        self.sync();
        next
    }

    /// Recovery: puts block `key` back into `slot` (dirty or clean) before any request, as
    /// the engine restores lines from its journal (`Cache::restore_line`). Restore in
    /// ascending slot order.
    pub fn restore(
        &mut self,
        slot: Slot,
        key: BlockKey,
        dirty: bool,
    ) -> Result<(), FileCacheError> {
        let Some(core) = self.core.as_ref() else {
            return Err(FileCacheError::Core(
                "a cache of zero blocks holds none".into(),
            ));
        };
        let full = core.geometry().full_mask();
        let (volume, index) = self.map(key)?;
        let core = self.core.as_mut().expect("checked");
        let restored = core.restore_line(slot, volume, index, full, if dirty { full } else { 0 });
        self.sync();
        if self
            .files
            .get(&key.file)
            .is_none_or(|f| f.blocks.is_empty())
        {
            self.extents.unmap(key.file);
        }
        restored.map_err(Into::into)
    }

    /// The core's line for `key`, mapping its file to an extent if it has none.
    fn map(&mut self, key: BlockKey) -> Result<(tiercache_core::VolumeId, u64), FileCacheError> {
        if key.block >= MAX_BLOCKS_PER_FILE {
            return Err(FileCacheError::BlockOutOfRange {
                file: key.file,
                block: key.block,
            });
        }
        let extent = self.extents.get_or_map(key.file)?;
        Ok(self.extents.line(extent, key.block))
    }

    /// Runs one line's read or write through the core and translates its plan.
    fn access(
        &mut self,
        key: BlockKey,
        req: &Request,
        needs_fill: bool,
        ops: &mut Vec<DevOp>,
    ) -> Result<bool, FileCacheError> {
        let core = self.core.as_mut().expect("callers check");
        let result = core.access(req, Some(&mut self.plan));
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                self.sync();
                if !self.files.contains_key(&key.file) {
                    self.extents.unmap(key.file);
                }
                return Err(e.into());
            }
        };
        let dirty = core
            .line_state(req.volume, req.offset / self.line)
            .is_some_and(|s| s.dirty != 0);
        let hit = out.line_hits == 1;
        translate::plan_ops(
            &self.plan,
            self.line,
            &self.slots,
            key,
            translate::Line {
                hit,
                needs_fill,
                dirty,
            },
            ops,
        );
        self.sync();
        if !self.files.contains_key(&key.file) {
            // Nothing of it cached (a write around the cache): the extent goes back.
            self.extents.unmap(key.file);
        }
        Ok(hit)
    }

    /// Drops `key`'s line with the core's TRIM (its dirty data is not written back) and
    /// reports it discarded. The mirror is brought up to date by the caller (`sync`).
    fn trim(&mut self, key: BlockKey, ops: &mut Vec<DevOp>) {
        let Some(state) = self.lookup(key) else {
            return;
        };
        let (volume, index) = self
            .extents
            .line(self.extents.get(key.file).expect("cached"), key.block);
        let core = self.core.as_mut().expect("a cached block has a core");
        let req = Request::trim(index * self.line, self.line).on_volume(volume);
        // Planned as nothing: the store forgets the block through the file system (delete,
        // truncate) or the executor's own TRIM, not through this op list.
        core.access(&req, None)
            .expect("a mapped block's line is addressable");
        ops.push(DevOp::Discard {
            slot: state.0,
            key,
            was_dirty: state.1,
        });
    }
}
#[cfg(test)]
mod tests;
