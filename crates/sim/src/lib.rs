//! The discrete-event simulator of tiercache (docs/design.md §3, §5).
//!
//! [`simulate`] runs a [`Cache`](tiercache_policy::Cache) — the deterministic policy core —
//! against device models in virtual time: requests from a
//! [`RequestSource`](tiercache_core::RequestSource) (closed or open loop) go through the host CPU
//! model ([`host`]), the cache yields a plan of device ops per request, the executor runs the
//! plan's stages on the cache device and backend models ([`device`]), acknowledges the request
//! when its critical ops complete, polls the cleaner and runs its flush jobs. The result is a
//! [`RunMetrics`] and an optional per-interval timeline.
//!
//! [`hit_ratio_only`] drives the same cache with no timing at all, as fast as possible.
//!
//! Same inputs, same output: the event queue orders events by time and then by a sequence
//! number, and nothing depends on hashing or wall-clock time.
//!
//! ```
//! use tiercache_policy::{Cache, CacheConfig};
//! use tiercache_sim::{simulate, DeviceConfig, HostConfig, RaidLevel, RunLimits, SimConfig};
//! use tiercache_sim::testing::UniformSource;
//!
//! let mut cache = Cache::new(&CacheConfig { capacity: 64 << 20, ..Default::default() }).unwrap();
//! // 4 submitters × queue depth 8, 70 % reads over 1 GiB.
//! let mut source = UniformSource::closed(7, 4, 8, 5_000, 1 << 30, 4096, 0.7);
//! let cfg = SimConfig {
//!     cache_device: DeviceConfig::preset("optane-p5800x"),
//!     backend: DeviceConfig::array(RaidLevel::Raid5, 8, DeviceConfig::preset("hdd-7200"), 65536),
//!     host: Some(HostConfig::default()),
//!     run: RunLimits { warmup_requests: 5_000, final_flush: true, ..Default::default() },
//!     ..Default::default()
//! };
//! let out = simulate(&mut cache, &mut source, &cfg).unwrap();
//! assert_eq!(out.metrics.requests, 15_000);
//! assert!(out.metrics.iops > 0.0 && out.metrics.latency_us.all.p99 > 0.0);
//! assert_eq!(cache.dirty_lines(), 0); // the final flush wrote everything back
//! ```
//!
//! Configuration (TOML, as the config crate embeds it): devices are a preset name or a table
//! overriding preset fields, arrays are `{ raid = "raid5", members = 8, member = { preset =
//! "sata-ssd-5100" }, stripe_unit = "64KiB" }`, and any device may sit behind a `link`; see
//! [`DeviceConfig`], [`HostConfig`], [`RunLimits`] and [`SimConfig`].

#![warn(missing_docs)]

pub mod config;
/// Device models, from their own crate (the engine's emulation uses the same ones).
pub mod device {
    pub use tiercache_devices::*;
}
mod exec;
pub mod hierarchy;
mod hit_ratio;
pub mod host;
mod stats;
mod tenancy;
pub mod testing;

pub use config::{RunLimits, SimConfig, VolumeBackend, WriteBackBarrier};
pub use device::{DeviceConfig, DeviceModel, LinkConfig, RaidLevel, PRESETS};
pub use exec::{simulate, simulate_with, PowerCutReport, SimObserver, SimOutput};
pub use hit_ratio::{
    batched_supports, hit_ratio_batched, hit_ratio_belady, hit_ratio_belady_with_index,
    hit_ratio_only, hit_ratio_only_iter, BatchedOutcome, IterBatches, RequestBatches,
};
pub use host::{HostConfig, LookupArch};
pub use stats::{fill_policy_metrics, stats_diff};
pub use tiercache_metrics::{RunMetrics, TimelineRow};

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is invalid; `field` is its dotted path (e.g. `backend.member.channels`).
    #[error("{field}: {reason}")]
    Config {
        /// Dotted path of the field.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A device configuration is invalid.
    #[error(transparent)]
    Device(#[from] tiercache_devices::DeviceError),
    /// The policy core rejected a request.
    #[error("request #{index} ({request:?}): {source}")]
    Request {
        /// 0-based index of the request in arrival order.
        index: u64,
        /// The request.
        request: tiercache_core::Request,
        /// The policy's error.
        #[source]
        source: tiercache_policy::PolicyError,
    },
}
