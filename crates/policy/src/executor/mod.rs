//! The executor contract: the traits through which both executors (the simulator and the
//! engine) drive a policy core, and the view of the devices they give it (docs/design.md §3).
//!
//! A policy core is one [`Cache`](crate::Cache) or the shards of a
//! [`ShardedCache`](crate::ShardedCache). It is split by role:
//!
//! | trait | role | methods |
//! | --- | --- | --- |
//! | [`Decide`] | decide requests and demotes | `access`, `access_piece`, `accept_demote`, `would_hit`, `would_absorb`, `prefetch`, `prefetch_ahead` |
//! | [`Background`] | cleaning, balancing, repartitioning, jobs done | `clean`, `next_clean_poll`, `cleaning_waits_for_idle_cache`, `flush_done`, `flush_all`, `balance`, `balance_decision`, `follow_balancing`, `set_balancer`, `repartition`, `take_resize_jobs`, `set_write_policy` |
//! | [`Report`] | counters, occupancy, reports (read only) | `stats_snapshot`, `volume_stats`, `resident_lines`, `dirty_lines`, `capacity_lines`, `jobs_in_flight`, `metadata_bytes`, `geometry`, `write_policy`, `balance_report`, `balanced_write_policy`, `tenancy_report`, `audit` |
//! | [`PolicyCore`] | all three (blanket) | — |
//! | [`EngineCore`] | engine only: journaling, failures, run-time partitions | `set_journal`, `drain_meta_updates`, `slot_record`, `restore_line`, `flush_failed`, `drop_clean`, `line_state`, `partition_stats`, `partition_info`, `partition_of`, `set_partition` |
//!
//! # Protocol
//!
//! Who calls what, in which order:
//!
//! 1. **Build.** The executor builds the core from a [`CacheConfig`](crate::CacheConfig)
//!    (`Cache::new`, `ShardedCache::new`; the engine builds one `Cache` per shard of
//!    [`ShardLayout`](crate::ShardLayout) and puts a lock on each). The engine then turns
//!    journaling on ([`EngineCore::set_journal`]) and restores recovered lines
//!    ([`EngineCore::restore_line`]) before the first request.
//! 2. **Requests**, one at a time per core, in decision order:
//!    [`Decide::access`] (or, for a request cut into shard pieces, [`Decide::access_piece`]
//!    per piece through [`RequestPieces`](crate::shards::RequestPieces)) updates the
//!    metadata at once and fills the request's [`Plan`]. The executor runs the plan's
//!    stages in order; the next request may be decided before this plan ran (its lines are
//!    already in their new state). [`Decide::would_hit`], [`Decide::would_absorb`] and the
//!    `prefetch` hints may be called at any time and change nothing.
//! 3. **Demotes** from the level above: [`Decide::accept_demote`], as a request.
//! 4. **Background work**, between requests, with the executor's [`ExecutorState`]:
//!    [`Background::clean`] when [`Background::next_clean_poll`] says (or on any wake);
//!    each [`FlushJob`] runs, then [`Background::flush_done`] (the engine reports a failed
//!    one with [`EngineCore::flush_failed`] instead). [`Background::balance`] and
//!    [`Background::repartition`] when the time they returned has come; a resize's jobs are
//!    taken with [`Background::take_resize_jobs`] and run as the cleaners' are. An executor
//!    that locks shards separately polls the balancer of shard 0 only and hands its
//!    [`Background::balance_decision`] to the others ([`Background::follow_balancing`]).
//!    At the end, [`Background::flush_all`] yields jobs for every dirty line.
//! 5. **Reports** ([`Report`]) may be read between any two calls; they change nothing.
//! 6. **Engine only** ([`EngineCore`]): after every call that changes metadata, the engine
//!    drains the slot records to persist ([`EngineCore::drain_meta_updates`]); after a
//!    failed plan it forgets what the plan left undefined ([`EngineCore::drop_clean`]).
//!
//! What the core promises:
//! - **Determinism**: the same calls with the same arguments give the same plans, jobs and
//!   counters, whichever executor makes them (`crates/cli/tests/differential.rs`).
//! - **No time, threads or I/O**: time reaches the core only through `Request::time_ns` and
//!   [`ExecutorState`]; no call blocks.
//! - **Plans** are ordered by stage (see [`Plan`]); cache-device addresses lie in the core's
//!   own slots.
//! - **Jobs**: the lines of a flush job stay pinned (neither evicted nor reused) until the
//!   executor reports the job done or failed; a request that writes them meanwhile keeps
//!   its data dirty.
//! - **Counting once**: a request is counted once, however many shard pieces it was cut
//!   into ([`RequestPieces`](crate::shards::RequestPieces)).

use crate::balancing::{BalanceDecision, BalanceReport, Balancer};
use crate::cache::{AccessOutcome, DemoteOutcome, FlushJob, LineState, MetaUpdate, PolicyError};
use crate::config::WritePolicy;
use crate::partition::{PartitionId, PartitionInfo};
use crate::stats::CacheStats;
use crate::tenancy::{TenancyReport, VolumeStats};
use tiercache_core::{LineGeometry, Nanos, Plan, Request, VolumeId};
use tiercache_eviction::Slot;

mod cache;
mod state;

pub use state::{service_ewma, DeviceLoad, ExecutorState};

/// Deciding requests and demotes: the per-request path (hot: implementations inline it).
pub trait Decide {
    /// Processes one whole request: metadata changes at once; unless `plan` is `None`
    /// (hit-ratio-only mode) the plan is cleared and filled with the device operations the
    /// request needs. Counts the request once.
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError>;

    /// Processes one piece of a request cut by shard (see
    /// [`RequestPieces`](crate::shards::RequestPieces), which calls it): every line-level
    /// counter moves, the request-level ones do not. `first`: the request's first piece,
    /// which counts the request for its volume (once per request).
    fn access_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
        first: bool,
    ) -> Result<AccessOutcome, PolicyError>;

    /// A clean line demoted from the level above (docs/design.md §4.7). Counts the demote
    /// once.
    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError>;

    /// Takes one piece of a demote cut by shard (see
    /// [`DemotePieces`](crate::shards::DemotePieces), which calls it): counts nothing, the
    /// caller counts the whole demote once.
    fn accept_demote_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError>;

    /// Whether reading `req` now would be served by the cache alone. Changes nothing; a
    /// hint (a balancer may still send the request to the backend).
    fn would_hit(&self, req: &Request) -> bool;

    /// Whether writing `req` now would touch the cache device alone. Changes nothing; a
    /// hint as [`Decide::would_hit`] is.
    fn would_absorb(&self, req: &Request) -> bool;

    /// Hint that `req` is processed soon (memory prefetches); changes nothing. Default: no
    /// hint.
    #[inline]
    fn prefetch(&self, req: &Request, stage: u8) {
        let _ = (req, stage);
    }

    /// The hints a lookahead of two gives each time it issues a request, in one call: stage
    /// 1 for `newest`, stage 2 for `soon`, stage 3 for the request issued. Default: those
    /// three [`Decide::prefetch`] calls.
    #[inline]
    fn prefetch_ahead(&self, newest: Option<&Request>, soon: Option<&Request>, issued: &Request) {
        if let Some(r) = newest {
            self.prefetch(r, 1);
        }
        if let Some(r) = soon {
            self.prefetch(r, 2);
        }
        self.prefetch(issued, 3);
    }
}

/// Background work: cleaning, flush jobs done, load balancing and repartitioning, polled by
/// the executor between requests.
pub trait Background {
    /// Asks the cleaners for work: appends flush jobs to `jobs`.
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>);
    /// When a cleaner wants to be polled again (the earliest of them).
    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos>;
    /// Whether polling the cleaners while the cache device serves foreground I/O, with a
    /// poll already scheduled, can change nothing, so the executor may skip it. Default:
    /// `false`.
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        false
    }
    /// The executor completed every op of `job`: its lines are clean and unpinned.
    fn flush_done(&mut self, job: FlushJob);
    /// Jobs covering every dirty, unpinned line (the final flush).
    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>);
    /// Polls the load balancer if an interval ended; returns when to call again (`None`:
    /// never).
    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos>;
    /// The balancer's decision in force (for shards locked separately to follow).
    fn balance_decision(&self) -> BalanceDecision;
    /// Applies another core's balancer decision (this core's own balancer is not polled).
    fn follow_balancing(&mut self, d: BalanceDecision);
    /// Replaces the load balancer (of the first shard, which every shard follows).
    fn set_balancer(&mut self, b: Box<dyn Balancer>);
    /// Polls the tenancy mode if an interval ended and applies its decision; returns when
    /// to call again (`None`: never). Shrinks' flush jobs wait for
    /// [`take_resize_jobs`](Self::take_resize_jobs) or the next `clean`.
    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos>;
    /// Moves the flush jobs of the last resize to `jobs`.
    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>);
    /// Changes the write policy of one volume or of all.
    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy);
}

/// Reporting: counters, occupancy and the policies' reports. Reads only.
pub trait Report {
    /// Counters so far (of every shard together).
    fn stats_snapshot(&self) -> CacheStats;
    /// What each volume did so far (index = volume id).
    fn volume_stats(&self) -> Vec<VolumeStats>;
    /// Lines resident now.
    fn resident_lines(&self) -> u64;
    /// Dirty lines now.
    fn dirty_lines(&self) -> u64;
    /// Whether line `index` of `volume` is resident and dirty now, or under a write-back not
    /// finished (a flush job not reported done): not yet counted clean (`None`: not known to
    /// this core; a simulator's power cut then counts the line as clean, docs/design.md
    /// §5.1).
    fn line_awaits_write_back(&self, volume: VolumeId, index: u64) -> Option<bool> {
        let _ = (volume, index);
        None
    }
    /// Lines the cache can hold.
    fn capacity_lines(&self) -> u64;
    /// Flush jobs issued and not yet reported done.
    fn jobs_in_flight(&self) -> u32;
    /// Bytes of metadata.
    fn metadata_bytes(&self) -> usize;
    /// Line geometry.
    fn geometry(&self) -> LineGeometry;
    /// Write policy in force for a volume.
    fn write_policy(&self, volume: VolumeId) -> WritePolicy;
    /// What the balancer saw and decided at its last poll.
    fn balance_report(&self) -> Option<BalanceReport>;
    /// The write policy the balancer has in force (`None`: the configured one).
    fn balanced_write_policy(&self) -> Option<WritePolicy>;
    /// What the tenancy mode decided at its last boundary.
    fn tenancy_report(&self) -> Option<TenancyReport>;
    /// Checks every invariant of the metadata; panics with a description on violation
    /// (tests and debug runs, O(lines)).
    fn audit(&self);
}

/// A whole policy core: what both executors drive ([`Decide`], [`Background`],
/// [`Report`]). Implemented for every type implementing the three; usable as `dyn
/// PolicyCore`.
pub trait PolicyCore: Decide + Background + Report {}

impl<T: Decide + Background + Report + ?Sized> PolicyCore for T {}

/// The engine-only extension of a policy core: what persistent metadata, real device
/// failures and volumes attached at run time need. The simulator has no journal and no
/// failures, and never calls these; only [`Cache`](crate::Cache) (one engine shard)
/// implements it.
pub trait EngineCore: PolicyCore {
    /// Turns journaling on or off: with it on, every slot change is queued for
    /// [`drain_meta_updates`](Self::drain_meta_updates).
    fn set_journal(&mut self, on: bool);
    /// Moves the slot changes queued since the last call to `out` (in change order; the
    /// last of each slot wins).
    fn drain_meta_updates(&mut self, out: &mut Vec<MetaUpdate>);
    /// The record of `slot` as it stands now.
    fn slot_record(&self, slot: Slot) -> MetaUpdate;
    /// Recovery: puts line `index` of `volume` back in `slot` with its valid and dirty
    /// sub-blocks, before any request.
    fn restore_line(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        valid: u64,
        dirty: u64,
    ) -> Result<(), PolicyError>;
    /// The executor could not complete `job`: its lines stay dirty and are unpinned.
    fn flush_failed(&mut self, job: FlushJob);
    /// Forces `policy` over every other write policy (`None`: lifts it): the engine serving
    /// past a failing cache device (see
    /// [`Cache::force_write_policy`](crate::Cache::force_write_policy)).
    fn force_write_policy(&mut self, policy: Option<WritePolicy>);
    /// Forgets the clean sub-blocks of line `index` of `volume` (a failed plan left them
    /// undefined); returns whether the line was resident.
    fn drop_clean(&mut self, volume: VolumeId, index: u64) -> bool;
    /// Puts back dirty line `index` of `volume`, evicted from `slot` by a plan whose
    /// write-back never read it (see
    /// [`Cache::reinstate_evicted`](crate::Cache::reinstate_evicted)).
    fn reinstate_evicted(
        &mut self,
        slot: Slot,
        volume: VolumeId,
        index: u64,
        dirty: u64,
    ) -> Result<(), PolicyError>;
    /// State of line `index` of `volume`, if resident.
    fn line_state(&self, volume: VolumeId, index: u64) -> Option<LineState>;
    /// Every partition's occupancy and counters.
    fn partition_stats(&self) -> Vec<PartitionInfo>;
    /// One partition's occupancy and counters (`None`: no such partition).
    fn partition_info(&self, id: PartitionId) -> Option<PartitionInfo>;
    /// The partition a volume's lines go to.
    fn partition_of(&self, volume: VolumeId) -> PartitionId;
    /// Gives `volume` a partition of `lines` lines (a volume attached at run time), made on
    /// first use with its resident lines moved in; shrinks' flush jobs are appended to
    /// `jobs`.
    fn set_partition(
        &mut self,
        volume: VolumeId,
        lines: u64,
        jobs: &mut Vec<FlushJob>,
    ) -> Result<PartitionId, PolicyError>;
    /// Whether this core is shard 0 of a sharded cache leading its tenancy (see
    /// [`Cache::lead_repartition`](crate::Cache::lead_repartition)).
    fn leads_tenancy(&self) -> bool;
    /// Whether the leader's poll at `now` would decide.
    fn tenancy_due(&self, now: Nanos) -> bool;
    /// This shard's lines and own partitions, for its leader.
    fn shard_share(&self) -> crate::shards::ShardShare;
    /// The leader's poll of a sharded cache's tenancy, over every shard's `shares`.
    fn lead_repartition(
        &mut self,
        state: &ExecutorState,
        shares: &[crate::shards::ShardShare],
    ) -> Option<Nanos>;
    /// The leader's last decision, split over the shards.
    fn tenancy_split(&self) -> Option<crate::shards::TenancySplit>;
    /// The write policy `volume` was given of its own, if any.
    fn volume_write_policy(&self, volume: VolumeId) -> Option<WritePolicy>;
    /// A follower applies its share of the leader's decision (once).
    fn follow_tenancy(&mut self, split: &crate::shards::TenancySplit, now: Nanos);
}
