//! File-level against block-level caching on the same file workloads (SPEC §4.9).
//!
//! The file-level cache is [`FileCache`] keyed by (file, block), exactly the core the mount
//! runs: a delete frees the file's blocks and cancels their write-back. The block-level cache
//! is the same core keyed by one volume's block addresses; a simple file allocator (lowest free
//! address first, as file systems reuse freed space) places each file's blocks. Without TRIM
//! the block cache never learns that a deleted file's blocks are dead: it keeps them and
//! writes the dirty ones back; with TRIM each freed address is discarded. Block-level writes
//! are whole blocks (the file system writes pages); file-level writes are what the
//! application wrote, so a partial append to an uncached block reads it first.

use std::collections::{BTreeSet, HashMap};

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

struct Sim {
    cfg: SimConfig,
    cache: FileCache,
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

    /// Writes bytes [from, to) of `file` (which had `old` bytes).
    fn write(&mut self, file: u32, old: u64, from: u64, to: u64) {
        let bs = self.cfg.block_size;
        for block in from / bs..to.div_ceil(bs) {
            match self.cfg.level {
                Level::File => {
                    let start = block * bs;
                    let needs_fill = start < old && from > start;
                    self.cache
                        .write(BlockKey::new(file as u64, block), needs_fill, &mut self.ops);
                }
                Level::Block { .. } => {
                    let extent = self.extents.entry(file).or_default();
                    while extent.len() as u64 <= block {
                        extent.push(self.alloc.alloc());
                    }
                    let lba = self.extents[&file][block as usize];
                    // The file system writes whole pages: no fill at block level.
                    self.cache
                        .write(BlockKey::new(0, lba), false, &mut self.ops);
                }
            }
            self.account();
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
                    let key = match self.cfg.level {
                        Level::File => BlockKey::new(file as u64, block),
                        Level::Block { .. } => {
                            BlockKey::new(0, self.extents[&file][block as usize])
                        }
                    };
                    self.result.block_reads += 1;
                    if self.cache.read(key, &mut self.ops) {
                        self.result.read_hits += 1;
                    }
                    self.account();
                }
            }
            FileOp::Delete { file } => {
                self.result.files_deleted += 1;
                self.sizes.remove(&file);
                match self.cfg.level {
                    Level::File => self.cache.delete_file(file as u64, &mut self.ops),
                    Level::Block { trim } => {
                        for lba in self.extents.remove(&file).unwrap_or_default() {
                            self.alloc.free.insert(lba);
                            if trim {
                                self.cache.discard(BlockKey::new(0, lba), &mut self.ops);
                            }
                        }
                    }
                }
                self.account();
            }
        }
    }
}

/// Runs `ops` through one cache, then flushes what is dirty (it must reach the store too).
pub fn simulate(ops: &[FileOp], cfg: SimConfig) -> SimResult {
    let mut sim = Sim {
        cfg,
        cache: FileCache::new(cfg.capacity_blocks, cfg.variant),
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
    sim.cache.flush(None, &mut sim.ops);
    sim.account();
    let core = sim.cache.stats();
    sim.result.freed_by_delete = core.freed_by_delete;
    sim.result.write_backs_cancelled = core.write_backs_cancelled;
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
