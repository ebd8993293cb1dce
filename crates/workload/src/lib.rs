//! fio-like synthetic block workloads for tiercache (docs/design.md §6 and the §4.7 archetypes).
//!
//! A [`WorkloadSpec`] (deserialised from a config, with documented defaults) describes jobs and
//! queue depth (closed loop) or an arrival rate (open loop), the read/write/trim mix, a weighted
//! block-size distribution, alignment, footprint, volumes, an address distribution (uniform,
//! zipf, pareto, normal, zoned, sequential, loop) and optional on/off bursts.
//! [`SyntheticWorkload::new`] validates it and yields a deterministic generator implementing
//! [`tiercache_core::RequestSource`]; [`SyntheticWorkload::into_stream`] (or [`stream`]) turns it
//! into one interleaved [`Iterator`] of requests for hit-ratio-only runs.
//!
//! Guarantees:
//! - **Determinism**: the same spec (seed included) gives the same requests bit for bit. Each job
//!   has its own random stream (xoshiro256++ seeded from `seed`, advanced by `job` jumps of
//!   2^128), so what job `j` generates does not depend on how an executor interleaves the jobs.
//! - **Bounds**: every offset is a multiple of the alignment and every request lies inside
//!   `0..footprint` of its volume; sizes come from `block_sizes` with their weights.
//! - **Timing**: open-loop requests carry their arrival time (non-decreasing; none in an off
//!   period of `bursts`). Closed-loop requests from [`RequestSource::next_request`] carry
//!   `time_ns = 0` (issue when a slot frees); an executor that knows its clock should call
//!   [`SyntheticWorkload::next_request_at`], which pushes issue times out of off periods and
//!   ends jobs at `duration_ns`.
//! - **Speed**: no allocation per request; zipf sampling uses tables and no transcendental
//!   function on its fast path (see [`dist::Zipf`]).
//!
//! [`RequestSource::next_request`]: tiercache_core::RequestSource::next_request
//!
//! ```
//! use tiercache_workload::{AddressDist, SyntheticWorkload, WorkloadSpec};
//! let spec = WorkloadSpec {
//!     footprint: 1 << 30,
//!     distribution: AddressDist::Zipf { theta: 0.9, scramble: true },
//!     requests: Some(1000),
//!     ..WorkloadSpec::default()
//! };
//! let reqs: Vec<_> = SyntheticWorkload::new(&spec).unwrap().into_stream().collect();
//! assert_eq!(reqs.len(), 1000);
//! assert!(reqs.iter().all(|r| r.offset % 4096 == 0 && r.end() <= 1 << 30));
//! ```
#![warn(missing_docs)]

pub mod archetype;
pub mod dist;
pub mod error;
mod generator;
pub mod mix;
pub mod spec;

pub use archetype::Archetype;
pub use error::WorkloadError;
pub use generator::{stream, SyntheticWorkload, WorkloadStream};
pub use mix::VolumeMix;
pub use spec::{AddressDist, ArrivalProcess, BlockSize, Bursts, WorkloadSpec, Zone};
