//! Two cache levels in one process (docs/design.md §4.7): a RAM level (process memory) above the
//! engine's cache device above the backend.
//!
//! The RAM level is the same policy core, run by a second [`Engine`] whose cache device is
//! memory and whose backend is the engine below itself (an engine is a [`BlockDevice`] like
//! any other). It holds only clean data (write-through or read-only: every write reaches the
//! level below before it is acknowledged), so crash consistency is the lower engine's,
//! unchanged. Exclusive (`exclusive = true`): the RAM level's clean victims are demoted into
//! the engine below ([`Engine::demote`]), which keeps them at its evict-last end; inclusive:
//! they are dropped.
//!
//! Demotes need no race check here: the RAM level's ordering table runs a demote of a line
//! before any later write of it (both write that backend line), and nothing else writes to
//! the engine below.

use crate::{Engine, EngineConfig, EngineError, EngineStats};
use serde::{Deserialize, Serialize};
use std::io;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, DemoteReply, MemDevice};
use tiercache_core::units::{de_bytes, de_opt_bytes};
use tiercache_core::Lookup;
use tiercache_policy::{CacheConfig, EvictionKind, ShardLayout, VictimConfig, WritePolicy};

/// The `[ram_level]` section: a RAM cache above the engine's cache device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RamLevelConfig {
    /// Bytes of process memory for cached lines.
    #[serde(deserialize_with = "de_bytes")]
    pub capacity: u64,
    /// Line size (default: the level below's).
    #[serde(
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub line_size: Option<u64>,
    /// Replacement policy of the RAM level.
    pub eviction: EvictionKind,
    /// Demote clean victims into the level below (exclusive caching); `false`: drop them
    /// (inclusive, the usual stack of caches).
    pub exclusive: bool,
    /// How writes are handled: `write-through` (update the RAM copy too) or `read-only`
    /// (invalidate it). Both keep the RAM level clean.
    pub write_policy: WritePolicy,
    /// Policy shards of the RAM level (a lock each).
    pub shards: u32,
}

impl Default for RamLevelConfig {
    fn default() -> Self {
        Self {
            capacity: 256 << 20,
            line_size: None,
            eviction: EvictionKind::Lru,
            exclusive: true,
            write_policy: WritePolicy::WriteThrough,
            shards: crate::config::SUGGESTED_SHARDS,
        }
    }
}

impl RamLevelConfig {
    /// The RAM level's policy settings over a level below configured as `below`.
    pub fn cache_config(&self, below: &CacheConfig) -> Result<CacheConfig, EngineError> {
        if !matches!(
            self.write_policy,
            WritePolicy::WriteThrough | WritePolicy::ReadOnly
        ) {
            return Err(EngineError::Setting {
                field: "ram_level.write_policy",
                reason: format!(
                    "{}: the RAM level holds only clean data (write-through or read-only), \
                     so a crash loses nothing",
                    self.write_policy.name()
                ),
            });
        }
        let line_size = self.line_size.unwrap_or(below.line_size);
        if self.capacity < line_size {
            return Err(EngineError::Setting {
                field: "ram_level.capacity",
                reason: format!("{} bytes holds no line of {line_size} bytes", self.capacity),
            });
        }
        Ok(CacheConfig {
            capacity: self.capacity,
            line_size,
            eviction: self.eviction,
            write_policy: self.write_policy,
            shards: self.shards.max(1),
            victim: if self.exclusive {
                VictimConfig::Demote
            } else {
                VictimConfig::Drop
            },
            ..CacheConfig::default()
        })
    }
}

/// A RAM level over an engine: serve it as any block device.
pub struct TwoLevel {
    ram: Engine,
    lower: Arc<Engine>,
}

/// Counters of both levels.
#[derive(Debug, Clone, Serialize)]
pub struct TwoLevelStats {
    /// The RAM level (its `demotes.sent*` are the demotes into the level below).
    pub ram: EngineStats,
    /// The engine below (its `demotes.received*` are the RAM level's demotes).
    pub lower: EngineStats,
}

impl TwoLevel {
    /// Starts a RAM level configured by `cfg` over `lower` (configured as `lower_cache`).
    pub fn new(
        cfg: &RamLevelConfig,
        lower_cache: &CacheConfig,
        lower: Arc<Engine>,
    ) -> Result<Self, EngineError> {
        let ram_cache = cfg.cache_config(lower_cache)?;
        let lines = ShardLayout::new(&ram_cache)?.total_lines();
        let layout = crate::slot_table::Layout::new(lines, ram_cache.line_size);
        let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(
            usize::try_from(layout.device_len()).map_err(|_| EngineError::Setting {
                field: "ram_level.capacity",
                reason: "larger than this machine's address space".into(),
            })?,
        ));
        let ram_engine = EngineConfig {
            // Memory starts empty; its records are the engine's bookkeeping, never recovered.
            format: true,
            force_format: true,
            lookup: Lookup::HtFg,
            cache_mapped_reads: false,
            ..EngineConfig::default()
        };
        let backend: Arc<dyn BlockDevice> = lower.clone();
        let ram = Engine::with_devices(&ram_cache, &ram_engine, mem, backend)?;
        Ok(Self { ram, lower })
    }

    /// The engine below.
    pub fn lower(&self) -> &Arc<Engine> {
        &self.lower
    }

    /// The RAM level's engine.
    pub fn ram(&self) -> &Engine {
        &self.ram
    }

    /// Counters of both levels.
    pub fn stats(&self) -> TwoLevelStats {
        TwoLevelStats {
            ram: self.ram.stats(),
            lower: self.lower.stats(),
        }
    }

    /// Why either level stopped serving, if one halted.
    pub fn halted(&self) -> Option<&str> {
        self.ram.halted().or_else(|| self.lower.halted())
    }

    /// A RAM miss that the level below serves from memory costs a few copies (its hit, the
    /// RAM fill, a victim dropped or demoted into that memory): run on the caller's thread, as
    /// a hit is, rather than handed to another (a hand-off per miss cost more than the copies).
    /// `None` when the level below would have to reach its device or backend.
    fn read_from_lower_memory(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        self.lower
            .serves_from_memory(off, buf.len() as u64)
            .then(|| self.ram.read(buf, off))
    }

    /// Stops both levels and makes everything durable (the RAM level first: it may still be
    /// finishing fills and demotes into the level below).
    pub fn shutdown(&self) -> io::Result<()> {
        self.ram.shutdown()?;
        self.lower.shutdown()
    }
}

impl BlockDevice for TwoLevel {
    fn size(&self) -> u64 {
        self.ram.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.ram.read(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.ram.write(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        // The RAM level syncs the level below only if it wrote there since its last sync;
        // the level below may have been written by nobody else, so that is enough.
        self.ram.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.ram.trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.ram.write_zeroes(off, len, fua)
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        BlockDevice::read_fast(&self.ram, buf, off)
            .or_else(|| self.read_from_lower_memory(buf, off))
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        // The RAM level's hits of a batch under one pass (the default asks one at a time).
        let mut out = BlockDevice::read_fast_many(&self.ram, reads);
        for ((off, buf), r) in reads.iter_mut().zip(&mut out) {
            if r.is_none() {
                *r = self.read_from_lower_memory(buf, *off);
            }
        }
        out
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        BlockDevice::write_fast(&self.ram, data, off)
    }
    fn multi_conn(&self) -> bool {
        true
    }
    fn takes_demotes(&self) -> bool {
        true
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        // From a cache above this whole stack: into the top level.
        self.ram.demote(off, data, still_valid)
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        // The RAM level's backend is the level below, whose backend is the volume's.
        BlockDevice::allocation(&self.ram, off, len)
    }
    /// Either level holding a byte makes it resident; either holding it dirty, dirty.
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        let both = (|| {
            let top = BlockDevice::cache_state(&self.ram, off, len).transpose()?;
            let below = BlockDevice::cache_state(&*self.lower, off, len).transpose()?;
            Ok(match (top, below) {
                (Some(a), Some(b)) => tiercache_blockdev::extent::zip_with(&a, &b, |x, y| x | y),
                (a, b) => a.or(b).unwrap_or_default(),
            })
        })();
        Some(both)
    }
}
