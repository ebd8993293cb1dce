//! [`ShardedCache`]: the shards of one cache run one after another under `&mut`, for an
//! executor with one thread (the simulator).

use super::{DemotePieces, RequestPieces, ShardLayout};
use crate::balancing::{BalanceDecision, BalanceReport, Balancer};
use crate::cache::{AccessOutcome, Cache, DemoteOutcome, FlushJob, PolicyError};
use crate::config::{CacheConfig, WritePolicy};
use crate::executor::{Background, Decide, ExecutorState, Report};
use crate::stats::CacheStats;
use crate::tenancy::{TenancyReport, VolumeStats};
use tiercache_core::{Device, LineGeometry, Nanos, Plan, Request, VolumeId};

/// A cache of `cache.shards` policy cores, run one after another: what the engine runs with
/// a lock per shard, for an executor with one thread (the simulator). A request crossing
/// shards is cut into pieces, each planned by its shard; the plans are merged (cache-device
/// addresses moved to the shard's slots) into one plan of the request, and the request is
/// counted once.
pub struct ShardedCache {
    layout: ShardLayout,
    shards: Vec<Cache>,
    /// Request-level counters (the shards count lines only).
    requests: CacheStats,
    piece_plan: Plan,
}

impl std::fmt::Debug for ShardedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedCache")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl ShardedCache {
    /// Builds the shards of `cfg`; every invalid field is named in the error.
    pub fn new(cfg: &CacheConfig) -> Result<Self, PolicyError> {
        let layout = ShardLayout::new(cfg)?;
        let mut shards: Vec<Cache> = (0..layout.shards())
            .map(|k| Cache::new(&layout.shard_config(cfg, k)))
            .collect::<Result<_, _>>()?;
        super::link_tenancy(&mut shards, &layout, cfg);
        Ok(Self {
            layout,
            shards,
            requests: CacheStats::default(),
            piece_plan: Plan::new(),
        })
    }

    /// The layout of the shards.
    pub fn layout(&self) -> &ShardLayout {
        &self.layout
    }

    /// The shards' policy cores.
    pub fn shards(&self) -> &[Cache] {
        &self.shards
    }

    /// Replaces the cache's load balancer: shard 0's, which every shard follows.
    pub fn set_balancer(&mut self, b: Box<dyn Balancer>) {
        self.shards[0].set_balancer(b);
    }

    /// Checks every shard's invariants (see [`Cache::audit`]).
    pub fn audit(&self) {
        for c in &self.shards {
            c.audit();
        }
    }

    /// What every request or demote spread over the shards starts with: the request checked
    /// against the whole cache's geometry, the caller's plan cleared. Returns the line size.
    fn begin(&self, req: &Request, plan: &mut Option<&mut Plan>) -> Result<u64, PolicyError> {
        let geo = self.layout.geo;
        geo.check_request(req.volume, req.offset, req.len)?;
        if let Some(p) = plan.as_deref_mut() {
            p.clear();
        }
        Ok(geo.line_size())
    }

    /// Moves a shard's plan to the whole cache's slots and appends it to `plan`.
    fn append_rebased(plan: &mut Plan, piece: &Plan, base_bytes: u64) {
        for o in &piece.ops {
            let mut o = *o;
            if o.device == Device::Cache && o.len > 0 {
                o.offset += base_bytes;
            }
            plan.ops.push(o);
        }
    }
}

impl ShardedCache {
    /// Runs `each` on every `(shard, piece)` of `req` (a request's pieces when `request`: an
    /// empty one is one piece; else a demote's, [`ShardLayout::demote_pieces`]), merging the
    /// pieces' plans into `plan` (cache-device addresses moved to each shard's slots).
    fn each_piece(
        &mut self,
        req: &Request,
        plan: &mut Option<&mut Plan>,
        request: bool,
        mut each: impl FnMut(&mut Cache, &Request, Option<&mut Plan>) -> Result<(), PolicyError>,
    ) -> Result<(), PolicyError> {
        let line = self.begin(req, plan)?;
        let Self {
            layout,
            shards,
            piece_plan,
            ..
        } = self;
        for (k, piece) in layout.cut(req, request) {
            each(
                &mut shards[k],
                &piece,
                plan.as_ref().map(|_| &mut *piece_plan),
            )?;
            if let Some(p) = plan.as_deref_mut() {
                Self::append_rebased(p, piece_plan, u64::from(layout.base(k)) * line);
            }
        }
        Ok(())
    }

    /// Plans `req`'s pieces on their shards into `pieces`, merging their plans into `plan`
    /// (ops ordered by stage).
    fn plan_pieces(
        &mut self,
        req: &Request,
        mut plan: Option<&mut Plan>,
        mut pieces: RequestPieces,
    ) -> Result<RequestPieces, PolicyError> {
        self.each_piece(req, &mut plan, true, |shard, piece, p| {
            pieces.access(shard, piece, p).map(|_| ())
        })?;
        if let Some(p) = plan {
            // Pieces are independent: their ops run side by side, stage by stage. The sort is
            // stable, so each piece keeps its own order within a stage.
            p.ops.sort_by_key(|o| o.stage);
        }
        Ok(pieces)
    }

    /// Offers `req`'s pieces to their shards, merging their plans into `plan` as
    /// [`Self::plan_pieces`] does; counts nothing.
    fn demote_pieces(
        &mut self,
        req: &Request,
        mut plan: Option<&mut Plan>,
    ) -> Result<DemotePieces, PolicyError> {
        let mut pieces = DemotePieces::new();
        self.each_piece(req, &mut plan, false, |shard, piece, p| {
            pieces.accept(shard, piece, p).map(|_| ())
        })?;
        Ok(pieces)
    }
}

impl Decide for ShardedCache {
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].access(req, plan);
        }
        let pieces = self.plan_pieces(req, plan, RequestPieces::new())?;
        let geo = self.layout.geo;
        Ok(pieces
            .finish(req, geo, &mut self.requests)
            .unwrap_or_default())
    }

    fn access_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
        first: bool,
    ) -> Result<AccessOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].access_piece(piece, plan, first);
        }
        let pieces = if first {
            RequestPieces::new()
        } else {
            RequestPieces::continuing()
        };
        let pieces = self.plan_pieces(piece, plan, pieces)?;
        Ok(pieces.outcome().unwrap_or_default())
    }

    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].accept_demote(req, plan);
        }
        let pieces = self.demote_pieces(req, plan)?;
        Ok(pieces.finish(&mut self.requests))
    }

    fn accept_demote_piece(
        &mut self,
        piece: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].accept_demote_piece(piece, plan);
        }
        let pieces = self.demote_pieces(piece, plan)?;
        Ok(pieces.outcome())
    }

    fn would_hit(&self, req: &Request) -> bool {
        self.layout
            .request_pieces(req)
            .all(|(k, p)| self.shards[k].would_hit(&p))
    }

    fn would_absorb(&self, req: &Request) -> bool {
        self.layout
            .request_pieces(req)
            .all(|(k, p)| self.shards[k].would_absorb(&p))
    }
}

impl Background for ShardedCache {
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        let line = self.layout.geo.line_size();
        for (k, c) in self.shards.iter_mut().enumerate() {
            let from = jobs.len();
            c.clean(state, jobs);
            for j in &mut jobs[from..] {
                rebase_job(j, k, u64::from(self.layout.bases[k]) * line);
            }
        }
    }

    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        self.shards
            .iter()
            .filter_map(|c| c.next_clean_poll(state))
            .min()
    }

    /// Every shard's: the shards share one cleaning configuration, so one `k` (see
    /// [`crate::cleaning::CleaningPolicy::acts_only_on_idle_cache`]) bounds them all.
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        self.shards
            .iter()
            .all(|c| c.cleaning_waits_for_idle_cache())
    }

    fn flush_done(&mut self, job: FlushJob) {
        let k = job.shard();
        self.shards[k].flush_done(job);
    }

    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        let line = self.layout.geo.line_size();
        for (k, c) in self.shards.iter_mut().enumerate() {
            let from = jobs.len();
            c.flush_all(jobs);
            for j in &mut jobs[from..] {
                rebase_job(j, k, u64::from(self.layout.bases[k]) * line);
            }
        }
    }

    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        // One balancer for the cache: shard 0's, which every shard follows (as the engine
        // runs it).
        let next = self.shards[0].balance(state);
        let d = self.shards[0].balance_decision();
        for c in &mut self.shards[1..] {
            c.follow_balancing(d);
        }
        next
    }

    fn balance_decision(&self) -> BalanceDecision {
        self.shards[0].balance_decision()
    }

    fn follow_balancing(&mut self, d: BalanceDecision) {
        for c in &mut self.shards {
            c.follow_balancing(d);
        }
    }

    fn set_balancer(&mut self, b: Box<dyn Balancer>) {
        ShardedCache::set_balancer(self, b)
    }

    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        if !self.shards[0].leads_tenancy() {
            // One shard, or a shared cache (never polled).
            return self.shards[0].repartition(state);
        }
        // Shard 0 leads (docs/design.md §4.10, "On shards"): it decides for the whole cache
        // from every shard's lines and partitions, and every shard applies its share of the
        // split, as the engine runs it.
        let shares: Vec<_> = if self.shards[0].tenancy_due(state.now) {
            self.shards.iter().map(Cache::shard_share).collect()
        } else {
            Vec::new()
        };
        let next = self.shards[0].lead_repartition(state, &shares);
        if let Some(split) = self.shards[0].tenancy_split().cloned() {
            for c in &mut self.shards[1..] {
                c.follow_tenancy(&split, state.now);
            }
        }
        next
    }

    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        let line = self.layout.geo.line_size();
        for (k, c) in self.shards.iter_mut().enumerate() {
            let from = jobs.len();
            c.take_resize_jobs(jobs);
            for j in &mut jobs[from..] {
                rebase_job(j, k, u64::from(self.layout.bases[k]) * line);
            }
        }
    }

    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        for c in &mut self.shards {
            c.set_write_policy(volume, policy);
        }
    }
}

impl Report for ShardedCache {
    fn stats_snapshot(&self) -> CacheStats {
        let mut s = CacheStats::default();
        for c in &self.shards {
            s.merge(c.stats());
        }
        if self.shards.len() > 1 {
            let r = &self.requests;
            s.take_request_counters(r);
        }
        s
    }

    fn volume_stats(&self) -> Vec<VolumeStats> {
        let mut out: Vec<VolumeStats> = Vec::new();
        for c in &self.shards {
            let s = c.volume_stats();
            if out.len() < s.len() {
                out.resize(s.len(), Default::default());
            }
            for (o, v) in out.iter_mut().zip(s) {
                o.merge(v);
            }
        }
        out
    }

    fn resident_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.resident_lines()).sum()
    }

    fn dirty_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.dirty_lines()).sum()
    }

    fn line_awaits_write_back(&self, volume: VolumeId, index: u64) -> Option<bool> {
        let shard = &self.shards[self.layout.shard_of(volume, index)];
        Some(
            shard
                .line_state(volume, index)
                .is_some_and(|s| s.dirty != 0 || s.pinned),
        )
    }

    fn capacity_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.capacity_lines()).sum()
    }

    fn jobs_in_flight(&self) -> u32 {
        self.shards.iter().map(|c| c.jobs_in_flight()).sum()
    }

    fn metadata_bytes(&self) -> usize {
        self.shards.iter().map(|c| c.metadata_bytes()).sum()
    }

    fn geometry(&self) -> LineGeometry {
        self.layout.geo
    }

    fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        self.shards[0].write_policy(volume)
    }

    fn balance_report(&self) -> Option<BalanceReport> {
        self.shards[0].balance_report()
    }

    fn balanced_write_policy(&self) -> Option<WritePolicy> {
        self.shards[0].balanced_write_policy()
    }

    fn tenancy_report(&self) -> Option<TenancyReport> {
        super::merge_reports(self.shards.iter().map(Cache::tenancy_report))
    }

    fn audit(&self) {
        ShardedCache::audit(self)
    }
}

/// Tags a job of shard `k` and moves its cache-device ops to the shard's slots.
fn rebase_job(job: &mut FlushJob, k: usize, base_bytes: u64) {
    job.shard = k as u32;
    for o in &mut job.plan.ops {
        if o.device == Device::Cache && o.len > 0 {
            o.offset += base_bytes;
        }
    }
}
