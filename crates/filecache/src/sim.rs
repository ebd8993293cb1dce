//! File-level against block-level caching on the same file workloads (docs/design.md §4.9).
//!
//! The file-level cache is [`FileCache`] keyed by (file, block), exactly the cache the mount
//! runs: a delete frees the file's blocks and cancels their write-back. The block-level cache
//! is the project's block cache itself, [`tiercache_policy::Cache`] (docs/design.md §3), over
//! one volume of block addresses with the same settings (lines of one block, LRU, promotion
//! always, the variant's write mode, no cleaning); a simple file allocator (lowest free
//! address first, as file systems reuse freed space) places each file's blocks. Without TRIM
//! the block cache never learns that a deleted file's blocks are dead: it keeps them and
//! writes the dirty ones back; with TRIM each freed address is the core's TRIM. Block-level writes
//! are whole blocks (the file system writes pages); file-level writes are what the
//! application wrote, so a partial append to an uncached block reads it first.

use std::collections::{BTreeSet, HashMap};

use tiercache_core::{Device, IoKind, OpCause, Plan, Request};
use tiercache_policy::Cache;

use crate::core::{BlockKey, DevOp, FileCache, Variant};
use crate::workload::FileOp;

/// Which cache sees the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Keyed by (file, block); deletes free blocks.
    File,
    /// Keyed by block address behind a file allocator; `trim`: deletes discard addresses.
    Block {
        /// Whether the file system sends TRIM for freed blocks.
        trim: bool,
    },
}

impl Level {
    /// Name in tables: `file`, `block`, `block+trim`.
    pub fn name(self) -> &'static str {
        match self {
            Level::File => "file",
            Level::Block { trim: false } => "block",
            Level::Block { trim: true } => "block+trim",
        }
    }
}

/// One simulation's setup.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// File or block level.
    pub level: Level,
    /// Write policy and allocation.
    pub variant: Variant,
    /// Capacity in blocks.
    pub capacity_blocks: u32,
    /// Block size in bytes.
    pub block_size: u64,
}

/// What one simulation counted (blocks are `block_size` bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SimResult {
    /// `file`, `block` or `block+trim`.
    pub level: String,
    /// Variant name.
    pub variant: String,
    /// Capacity in blocks.
    pub capacity_blocks: u32,
    /// Files created.
    pub files_created: u64,
    /// Files deleted.
    pub files_deleted: u64,
    /// Block reads that hit.
    pub read_hits: u64,
    /// Block reads in all.
    pub block_reads: u64,
    /// Blocks read from the store.
    pub store_blocks_read: u64,
    /// Blocks written to the store (write-through, write-around and write-backs).
    pub store_blocks_written: u64,
    /// Dirty blocks written back (evictions and the final flush).
    pub write_backs: u64,
    /// Of those, blocks of data already deleted when written back.
    pub dead_write_backs: u64,
    /// Blocks freed from the cache by deletes (file level) or TRIM (block level).
    pub freed_by_delete: u64,
    /// Dirty blocks whose write-back a delete or TRIM cancelled.
    pub write_backs_cancelled: u64,
    /// Blocks written to the cache device (fills and writes).
    pub cache_blocks_written: u64,
}

impl SimResult {
    /// Read hit ratio at block granularity.
    pub fn hit_ratio(&self) -> f64 {
        if self.block_reads == 0 {
            0.0
        } else {
            self.read_hits as f64 / self.block_reads as f64
        }
    }
}

/// The lowest-free-address allocator of a block-level file system.
#[derive(Default)]
struct Allocator {
    free: BTreeSet<u64>,
    frontier: u64,
}

impl Allocator {
    fn alloc(&mut self) -> u64 {
        match self.free.pop_first() {
            Some(lba) => lba,
            None => {
                self.frontier += 1;
                self.frontier - 1
            }
        }
    }
}

/// The cache a simulation runs.
enum Under {
    /// The file-level cache.
    File(Box<FileCache>),
    /// The block-level policy core (`None` for a cache of zero blocks: all to the store).
    Block(Option<Box<Cache>>, Plan),
}

/// The block-level core: the file cache's core settings (one line a block, LRU, promotion
/// always, the variant's write mode, no cleaning), so that the two levels differ only in their
/// keys (docs/design.md §4.9).
fn block_core(cfg: &SimConfig) -> Option<Box<Cache>> {
    if cfg.capacity_blocks == 0 {
        return None;
    }
    let core_cfg = FileCache::core_config(cfg.capacity_blocks, cfg.variant, cfg.block_size)
        .expect("a simulated block size is a power of two of at least 512");
    Some(Box::new(
        Cache::new(&core_cfg).expect("the file cache's core settings"),
    ))
}

struct Sim {
    cfg: SimConfig,
    cache: Under,
    sizes: HashMap<u32, u64>,
    /// Block level: each file's block addresses.
    extents: HashMap<u32, Vec<u64>>,
    alloc: Allocator,
    result: SimResult,
    ops: Vec<DevOp>,
}

impl Sim {
    fn live(&self, key: BlockKey) -> bool {
        match self.cfg.level {
            Level::File => self
                .sizes
                .get(&(key.file as u32))
                .is_some_and(|&s| key.block < s.div_ceil(self.cfg.block_size)),
            Level::Block { .. } => !self.alloc.free.contains(&key.block),
        }
    }

    /// Counts the file-level cache's ops.
    fn account(&mut self) {
        let ops = std::mem::take(&mut self.ops);
        for op in &ops {
            match *op {
                DevOp::WriteBack { key, .. } => {
                    self.result.write_backs += 1;
                    self.result.store_blocks_written += 1;
                    if !self.live(key) {
                        self.result.dead_write_backs += 1;
                    }
                }
                DevOp::Fill { .. } => {
                    self.result.store_blocks_read += 1;
                    self.result.cache_blocks_written += 1;
                }
                DevOp::CacheWrite { .. } => self.result.cache_blocks_written += 1,
                DevOp::StoreWrite { .. } => self.result.store_blocks_written += 1,
                DevOp::StoreRead { .. } => self.result.store_blocks_read += 1,
                DevOp::CacheRead { .. } | DevOp::Discard { .. } => {}
            }
        }
        self.ops = ops;
        self.ops.clear();
    }

    /// Counts the block-level core's plan, in blocks (ops of contiguous lines are merged).
    fn account_plan(&mut self, plan: &Plan) {
        let bs = self.line();
        for o in &plan.ops {
            let blocks = o.len.div_ceil(bs);
            match (o.device, o.kind, o.cause) {
                (Device::Backend, IoKind::Write, OpCause::EvictFlush | OpCause::Clean) => {
                    self.result.write_backs += blocks;
                    self.result.store_blocks_written += blocks;
                    for lba in o.offset / bs..o.offset / bs + blocks {
                        if !self.live(BlockKey::new(0, lba)) {
                            self.result.dead_write_backs += 1;
                        }
                    }
                }
                (Device::Backend, IoKind::Write, _) => self.result.store_blocks_written += blocks,
                (Device::Backend, IoKind::Read, _) => self.result.store_blocks_read += blocks,
                // Writes and promotions (a read miss's fill).
                (Device::Cache, IoKind::Write, _) => self.result.cache_blocks_written += blocks,
                _ => {}
            }
        }
    }

    /// The block-level core's line size (the block size up to 1 MiB).
    fn line(&self) -> u64 {
        self.cfg.block_size.min(tiercache_core::geometry::MAX_LINE)
    }

    /// One request of one block to the block-level core; returns whether it hit.
    fn block_access(&mut self, req: Request) -> bool {
        let Under::Block(core, plan) = &mut self.cache else {
            unreachable!("block level")
        };
        let Some(core) = core else {
            match req.op {
                tiercache_core::Op::Read => self.result.store_blocks_read += 1,
                tiercache_core::Op::Write => self.result.store_blocks_written += 1,
                _ => {}
            }
            return false;
        };
        let out = core
            .access(&req, Some(plan))
            .expect("block addresses stay far below the core's range");
        let plan = std::mem::take(plan);
        self.account_plan(&plan);
        if let Under::Block(_, p) = &mut self.cache {
            *p = plan;
        }
        out.line_hits == 1
    }

    /// Writes bytes [from, to) of `file` (which had `old` bytes).
    fn write(&mut self, file: u32, old: u64, from: u64, to: u64) {
        let bs = self.cfg.block_size;
        for block in from / bs..to.div_ceil(bs) {
            match &mut self.cache {
                Under::File(cache) => {
                    let start = block * bs;
                    let needs_fill = start < old && from > start;
                    cache
                        .write(BlockKey::new(file as u64, block), needs_fill, &mut self.ops)
                        .expect("workload files stay within the cache's key space");
                    self.account();
                }
                Under::Block(..) => {
                    let extent = self.extents.entry(file).or_default();
                    while extent.len() as u64 <= block {
                        extent.push(self.alloc.alloc());
                    }
                    let lba = self.extents[&file][block as usize];
                    // The file system writes whole pages: no fill at block level.
                    let line = self.line();
                    self.block_access(Request::write(lba * line, line));
                }
            }
        }
    }

    fn step(&mut self, op: &FileOp) {
        let bs = self.cfg.block_size;
        match *op {
            FileOp::Create { file, size } => {
                self.result.files_created += 1;
                self.sizes.insert(file, size);
                self.write(file, 0, 0, size);
            }
            FileOp::Append { file, bytes } => {
                let old = self.sizes.get(&file).copied().unwrap_or(0);
                self.sizes.insert(file, old + bytes);
                self.write(file, old, old, old + bytes);
            }
            FileOp::Read { file } => {
                let size = self.sizes.get(&file).copied().unwrap_or(0);
                for block in 0..size.div_ceil(bs) {
                    self.result.block_reads += 1;
                    let hit = match &mut self.cache {
                        Under::File(cache) => {
                            let key = BlockKey::new(file as u64, block);
                            let hit = cache
                                .read(key, &mut self.ops)
                                .expect("workload files stay within the cache's key space");
                            self.account();
                            hit
                        }
                        Under::Block(..) => {
                            let lba = self.extents[&file][block as usize];
                            let line = self.line();
                            self.block_access(Request::read(lba * line, line))
                        }
                    };
                    if hit {
                        self.result.read_hits += 1;
                    }
                }
            }
            FileOp::Delete { file } => {
                self.result.files_deleted += 1;
                self.sizes.remove(&file);
                match (&mut self.cache, self.cfg.level) {
                    (Under::File(cache), _) => {
                        cache.delete_file(file as u64, &mut self.ops);
                        self.account();
                    }
                    (Under::Block(..), Level::Block { trim }) => {
                        let line = self.line();
                        for lba in self.extents.remove(&file).unwrap_or_default() {
                            self.alloc.free.insert(lba);
                            if trim {
                                self.block_access(Request::trim(lba * line, line));
                            }
                        }
                    }
                    (Under::Block(..), Level::File) => unreachable!("a level has its cache"),
                }
            }
        }
    }

    /// Writes back what is dirty (it must reach the store too) and takes the counters of
    /// blocks freed and write-backs cancelled.
    fn finish(&mut self) {
        let line = self.line();
        match &mut self.cache {
            Under::File(cache) => {
                cache.flush(None, &mut self.ops);
                let core = cache.stats();
                self.account();
                self.result.freed_by_delete = core.freed_by_delete;
                self.result.write_backs_cancelled = core.write_backs_cancelled;
            }
            Under::Block(None, _) => {}
            Under::Block(Some(core), _) => {
                let mut jobs = Vec::new();
                core.flush_all(&mut jobs);
                let s = core.stats().clone();
                for job in jobs {
                    self.account_plan(&job.plan);
                    if let Under::Block(Some(core), _) = &mut self.cache {
                        core.flush_done(job);
                    }
                }
                self.result.freed_by_delete = s.invalidations;
                self.result.write_backs_cancelled = s.trimmed_dirty_bytes / line;
            }
        }
    }
}

/// Runs `ops` through one cache, then flushes what is dirty (it must reach the store too).
pub fn simulate(ops: &[FileOp], cfg: SimConfig) -> SimResult {
    let mut sim = Sim {
        cfg,
        cache: match cfg.level {
            Level::File => Under::File(Box::new(
                FileCache::with_block_size(cfg.capacity_blocks, cfg.variant, cfg.block_size)
                    .expect("a simulated block size is a power of two of at least 512"),
            )),
            Level::Block { .. } => Under::Block(block_core(&cfg), Plan::new()),
        },
        sizes: HashMap::new(),
        extents: HashMap::new(),
        alloc: Allocator::default(),
        result: SimResult {
            level: cfg.level.name().to_string(),
            variant: cfg.variant.name().to_string(),
            capacity_blocks: cfg.capacity_blocks,
            ..SimResult::default()
        },
        ops: Vec::new(),
    };
    for op in ops {
        sim.step(op);
    }
    sim.finish();
    sim.result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{generate, WorkloadKind, WorkloadSpec};

    fn mail() -> Vec<FileOp> {
        generate(&WorkloadSpec {
            kind: WorkloadKind::Mail,
            files: 200,
            transactions: 2000,
            seed: 11,
        })
    }

    fn cfg(level: Level, capacity_blocks: u32) -> SimConfig {
        SimConfig {
            level,
            variant: Variant::WB,
            capacity_blocks,
            block_size: 4096,
        }
    }

    #[test]
    fn file_level_never_writes_back_dead_data_and_block_level_without_trim_does() {
        let ops = mail();
        let file = simulate(&ops, cfg(Level::File, 256));
        let block = simulate(&ops, cfg(Level::Block { trim: false }, 256));
        let trim = simulate(&ops, cfg(Level::Block { trim: true }, 256));
        assert_eq!(file.dead_write_backs, 0);
        assert!(block.dead_write_backs > 0);
        assert!(trim.dead_write_backs == 0);
        assert!(file.freed_by_delete > 0 && trim.freed_by_delete > 0);
        assert_eq!(block.freed_by_delete, 0);
        assert!(
            file.store_blocks_written < block.store_blocks_written,
            "file {} vs block {}",
            file.store_blocks_written,
            block.store_blocks_written
        );
    }

    #[test]
    fn conservation_every_write_back_is_a_store_write_and_nothing_dirty_is_left() {
        for variant in Variant::ALL {
            for level in [
                Level::File,
                Level::Block { trim: false },
                Level::Block { trim: true },
            ] {
                let r = simulate(
                    &mail(),
                    SimConfig {
                        variant,
                        ..cfg(level, 128)
                    },
                );
                assert!(r.write_backs <= r.store_blocks_written);
                assert!(r.read_hits <= r.block_reads);
                assert_eq!(r.files_created, r.files_deleted);
                if !variant.is_write_back() {
                    assert_eq!(r.write_backs, 0, "{variant} {}", level.name());
                }
            }
        }
    }

    #[test]
    fn simulation_is_deterministic() {
        let ops = mail();
        assert_eq!(
            simulate(&ops, cfg(Level::File, 64)),
            simulate(&ops, cfg(Level::File, 64))
        );
    }
}
