//! The deterministic cache policy core of tiercache (docs/design.md §3–§4).
//!
//! [`Cache`] knows nothing of time, threads or files. For each request it decides hit or miss,
//! what to promote, what to evict, how a write is handled and what to bypass, updates its
//! metadata at once, and yields the device operations the request needs as a [`Plan`]. Cleaning
//! is asked for separately with the executor's view of the devices ([`ExecutorState`]) and
//! yields [`FlushJob`]s whose lines stay pinned until the executor reports them done.
//!
//! The layout follows the policy families of OCF:
//! - `metadata/`: the line table (slots, tags, sector bitmaps) and the dirty list;
//! - `engine/`: the write policies (cache modes) as one table;
//! - `promotion/`: which read misses to promote (always, nhit, SMQ, never);
//! - `admission/`: whether a missed line may take a line at all, victim in view (all,
//!   probabilistic, TinyLFU, Bloom-filter second hit), for reads and writes;
//! - `cleaning/`: when to flush (lazy, aggressive, threshold);
//! - `victim/`: what happens to clean victims (drop, or demote to the level below);
//! - `balancing/`: load balancing between cache and backend, polled per interval by both
//!   executors (none, LBICA, SIB);
//! - `executor`: the contract both executors drive a core through (the [`Decide`],
//!   [`Background`] and [`Report`] traits, [`PolicyCore`] for all three, the engine-only
//!   [`EngineCore`]), its protocol, and the executor's view of the devices;
//! - `shards`: one cache's lines split among independent policy cores (`cache.shards`), the
//!   same in both executors, and the one helper that cuts a request into pieces and counts
//!   it once ([`RequestPieces`]);
//! - `partition/`: the replacement domains (per-volume partitions, resizable at run time);
//! - `tenancy/`: how volumes share the cache (shared, static shares, ECI-Cache, TRD), polled
//!   per interval by both executors, resizing the partitions and setting write policies;
//! - replacement policies live in the `tiercache-eviction` crate.

#![warn(missing_docs)]

pub mod admission;
pub mod balancing;
pub mod cache;
pub mod cleaning;
pub mod config;
pub mod engine;
pub mod executor;
pub mod metadata;
pub mod partition;
pub mod promotion;
pub mod shards;
pub mod stats;
pub mod tenancy;
pub mod victim;

pub use balancing::{BalanceDecision, BalanceReport, Balancer, BalancingConfig};
pub use cache::{
    AccessOutcome, Cache, DemoteOutcome, ExecutorState, FlushJob, LineState, MetaUpdate,
    PolicyError,
};
pub use cleaning::CleaningOrder;
pub use config::{
    AdmissionConfig, CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, PartitionConfig,
    PromotionConfig, WritePolicy,
};
pub use executor::{Background, Decide, DeviceLoad, EngineCore, PolicyCore, Report};
pub use partition::{PartitionId, PartitionInfo};
pub use shards::{DemotePieces, RequestPieces, ShardLayout, ShardedCache};
pub use stats::{BypassReason, CacheStats, PartitionStats};
pub use tenancy::{
    FixedVolume, TenancyConfig, TenancyModeKind, TenancyReport, VolumeStats, VolumeTenancy,
};
pub use tiercache_core::Plan;
pub use victim::{VictimConfig, VictimPolicy};
