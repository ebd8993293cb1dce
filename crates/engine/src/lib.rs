//! The real cache (SPEC §1, §3): the deterministic policy core of `tiercache-policy`,
//! executed with real I/O on files and block devices by concurrent threads — the same plans
//! the simulator executes in virtual time.
//!
//! - [`device`]: files, in-memory devices, device-model emulation, crash-logging devices;
//! - [`ordering`]: conflicting plans take effect in the order the core decided them;
//! - [`exec`]: one plan's ops with real bytes, routed by volume address;
//! - [`slot_table`]: crash-consistent metadata on the cache device;
//! - [`Engine`]: requests in, background flusher, detach, live counters.
#![warn(missing_docs)]

pub mod config;
pub mod device;
mod engine;
pub mod exec;
mod load;
pub mod ordering;
pub mod partition_log;
pub mod slot_table;
mod stats;

pub use config::{EngineConfig, IoEngine, Lookup, VolumeConfig, DEFAULT_BACKEND_SIZE};
pub use engine::{Engine, EngineError, VolumeHandle, VolumeStats};
pub use stats::{EngineStats, LatencyBuckets, LatencySummary};
