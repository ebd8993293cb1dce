//! The real cache (docs/design.md §1, §3): the deterministic policy core of `tiercache-policy`,
//! executed with real I/O on files and block devices by concurrent threads — the same plans
//! the simulator executes in virtual time.
//!
//! - [`device`]: device-model emulation, crash-logging devices, remote and multi-volume
//!   backends (files and memory are `tiercache-blockdev`'s; every device, the engine too, is a
//!   `tiercache_blockdev::BlockDevice`);
//! - [`ordering`]: conflicting plans take effect in the order the core decided them;
//! - [`exec`]: one plan's ops with real bytes, routed by volume address;
//! - [`slot_table`]: crash-consistent metadata on the cache device;
//! - [`Engine`]: requests in, background flusher, detach, live counters, demotes;
//! - [`ram_level`]: a RAM cache level above the engine, exclusive with demote or inclusive;
//! - [`health`]: device errors counted, degraded mode (docs/design.md §11).
#![warn(missing_docs)]

pub mod config;
pub mod device;
mod engine;
pub mod exec;
pub mod fuzzing;
pub mod health;
mod load;
pub mod ordering;
pub mod partition_log;
pub mod pass_through_mark;
pub mod ram_level;
pub mod slot_table;
mod stats;
pub mod testing;

pub use config::{EngineConfig, IoEngine, Lookup, VolumeConfig, DEFAULT_BACKEND_SIZE};
pub use engine::{
    EarlyStats, Engine, EngineError, EngineMemory, OpeningEngine, VolumeHandle, VolumeStats,
};
pub use health::{HealthStats, OnErrorAction, OnErrorConfig};
pub use ram_level::{RamLevelConfig, TwoLevel, TwoLevelStats};
pub use stats::{DemoteStats, EngineStats, LatencyBuckets, LatencySummary};
