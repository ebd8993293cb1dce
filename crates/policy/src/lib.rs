//! The deterministic cache policy core of tiercache (SPEC §3–§4).
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
//! - `promotion/`: admission policies (always, nhit, SMQ, never);
//! - `cleaning/`: when to flush (lazy, aggressive, threshold);
//! - `partition/`: the replacement domains (per-volume partitions, resizable at run time);
//! - replacement policies live in the `tiercache-eviction` crate.

#![warn(missing_docs)]

pub mod cache;
pub mod cleaning;
pub mod config;
pub mod engine;
pub mod metadata;
pub mod partition;
pub mod promotion;
pub mod stats;

pub use cache::{
    AccessOutcome, Cache, ExecutorState, FlushJob, LineState, MetaUpdate, PolicyError,
};
pub use config::{
    CacheConfig, CleaningConfig, DirtyFullPolicy, EvictionKind, PartitionConfig, PromotionConfig,
    WritePolicy,
};
pub use partition::{PartitionId, PartitionInfo};
pub use stats::{BypassReason, CacheStats, PartitionStats};
pub use tiercache_core::Plan;
