//! Policy shards: one cache's lines split among independent policy cores.
//!
//! A production cache that takes one lock per request cannot scale with cores (SPEC §4.1), so
//! it shards: each shard is a whole policy core (replacement list, promotion table, cleaner)
//! over its own share of the slots, owning the lines whose 64 KiB chunk hashes to it. That
//! changes the policy (replacement is per shard, each shard cleans by itself), so it is a
//! property of the cache (`cache.shards`), not of an executor: [`ShardLayout`] is the one
//! description both executors use. The engine puts a lock on each shard; the simulator runs
//! [`ShardedCache`], the same shards in one thread. Same config, same decisions.
//!
//! Chunks rather than lines are hashed so that a sequential run stays in one shard for a
//! chunk (one lock, contiguous device ops); the hash mixes the chunk number so neighbouring
//! chunks spread.

use crate::cache::{AccessOutcome, Cache, DemoteOutcome, ExecutorState, FlushJob, PolicyError};
use crate::config::{CacheConfig, WritePolicy};
use crate::stats::CacheStats;
use tiercache_core::{Device, LineGeometry, Nanos, Plan, Request, VolumeId};

/// Bytes of a sharding chunk: every line of a chunk belongs to one shard.
pub const CHUNK_BYTES: u64 = 64 * 1024;

/// Most shards a cache may have.
pub const MAX_SHARDS: u32 = 4096;

/// How a cache's lines and slots are split among its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLayout {
    geo: LineGeometry,
    /// Lines per chunk (64 KiB of lines, at least one).
    chunk_lines: u64,
    /// First slot of each shard, then the total: shard k owns slots `bases[k]..bases[k + 1]`.
    bases: Vec<u32>,
}

impl ShardLayout {
    /// The layout of `cfg`: `cfg.shards` shards (fewer when the cache has fewer lines), the
    /// lines dealt out evenly, the first shards taking one more when they do not divide.
    pub fn new(cfg: &CacheConfig) -> Result<Self, PolicyError> {
        let geo = LineGeometry::new(cfg.line_size).map_err(|e| PolicyError::Config {
            field: "line_size",
            reason: e.to_string(),
        })?;
        if cfg.shards == 0 || cfg.shards > MAX_SHARDS {
            return Err(PolicyError::Config {
                field: "shards",
                reason: format!("{} must be in 1..={MAX_SHARDS}", cfg.shards),
            });
        }
        if cfg.shards > 1 && !cfg.partitions.is_empty() {
            return Err(PolicyError::Config {
                field: "shards",
                reason: "static partitions need one shard (shards = 1)".into(),
            });
        }
        if cfg.shards > 1 && cfg.tenancy.partitions() {
            return Err(PolicyError::Config {
                field: "shards",
                reason: format!(
                    "tenancy mode {:?} partitions the cache and needs one shard (shards = 1)",
                    cfg.tenancy.mode
                ),
            });
        }
        let total = cfg.capacity / geo.line_size();
        if total >= u64::from(u32::MAX / 2) {
            // Said here, with the configured count (the shards' own check sees a clamped one).
            return Err(PolicyError::Config {
                field: "capacity",
                reason: format!(
                    "{} bytes are {total} lines of {} bytes, more than the limit of {} lines",
                    cfg.capacity,
                    geo.line_size(),
                    u32::MAX / 2 - 1
                ),
            });
        }
        let n = u64::from(cfg.shards).min(total.max(1));
        let mut bases = Vec::with_capacity(n as usize + 1);
        let mut base = 0u64;
        for k in 0..n {
            bases.push(base as u32);
            base += total / n + u64::from(k < total % n);
        }
        bases.push(base as u32);
        Ok(Self {
            geo,
            chunk_lines: (CHUNK_BYTES / geo.line_size()).max(1),
            bases,
        })
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.bases.len() - 1
    }

    /// Lines per sharding chunk.
    pub fn chunk_lines(&self) -> u64 {
        self.chunk_lines
    }

    /// First slot of shard `k`: its slot `s` is the cache's slot `base(k) + s`.
    pub fn base(&self, k: usize) -> u32 {
        self.bases[k]
    }

    /// Lines of shard `k`.
    pub fn lines(&self, k: usize) -> u32 {
        self.bases[k + 1] - self.bases[k]
    }

    /// Lines of every shard together.
    pub fn total_lines(&self) -> u32 {
        *self.bases.last().expect("bases end with the total")
    }

    /// The shard holding cache slot `slot` (of the whole cache).
    pub fn shard_of_slot(&self, slot: u32) -> usize {
        debug_assert!(slot < self.total_lines());
        self.bases.partition_point(|&b| b <= slot) - 1
    }

    /// The config of shard `k`'s policy core: the cache's, with the shard's lines.
    pub fn shard_config(&self, cfg: &CacheConfig, k: usize) -> CacheConfig {
        CacheConfig {
            capacity: u64::from(self.lines(k)) * self.geo.line_size(),
            shards: 1,
            ..cfg.clone()
        }
    }

    /// The shard owning line `index` of `volume`.
    #[inline]
    pub fn shard_of(&self, volume: VolumeId, index: u64) -> usize {
        let n = self.shards();
        if n == 1 {
            return 0;
        }
        // A volume's lines lie 2^48 apart, as in `LineKey`: volume 0 hashes as its index.
        let key = (u64::from(volume.0) << 48) | index;
        let h = (key / self.chunk_lines).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((h >> 32) % n as u64) as usize
    }

    /// `len` bytes at `offset` of `volume` cut where the owning shard changes:
    /// `(shard, offset, len)` in address order, one piece with one shard.
    pub fn pieces(
        &self,
        volume: VolumeId,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let line = self.geo.line_size();
        let chunk = self.chunk_lines * line;
        let end = offset.saturating_add(len);
        let one = self.shards() == 1;
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let k = self.shard_of(volume, at / line);
            let start = at;
            if one {
                at = end;
            } else {
                while at < end && self.shard_of(volume, at / line) == k {
                    at = ((at / chunk) + 1) * chunk;
                }
                at = at.min(end);
            }
            Some((k, start, at - start))
        })
    }
}

/// The interface an executor drives a policy core through: one [`Cache`] or the shards of a
/// [`ShardedCache`], the same calls either way.
pub trait PolicyCore {
    /// Processes one request (see [`Cache::access`]).
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError>;
    /// A clean line demoted from the level above (see [`Cache::accept_demote`]).
    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError>;
    /// Asks the cleaners for work (see [`Cache::clean`]).
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>);
    /// When a cleaner wants to be polled again (the earliest of them).
    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos>;
    /// Whether polling the cleaners while the cache device serves foreground I/O, with a
    /// poll already scheduled, can change nothing, so the executor may skip it (see
    /// [`Cache::cleaning_waits_for_idle_cache`]). Default: `false`.
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        false
    }
    /// The executor completed every op of `job`.
    fn flush_done(&mut self, job: FlushJob);
    /// Jobs covering every dirty, unpinned line (the final flush).
    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>);
    /// Counters so far (of every shard together).
    fn stats_snapshot(&self) -> CacheStats;
    /// Lines resident now.
    fn resident_lines(&self) -> u64;
    /// Dirty lines now.
    fn dirty_lines(&self) -> u64;
    /// Lines the cache can hold.
    fn capacity_lines(&self) -> u64;
    /// Bytes of metadata.
    fn metadata_bytes(&self) -> usize;
    /// Line geometry.
    fn geometry(&self) -> LineGeometry;
    /// Changes the write policy of one volume or of all (see [`Cache::set_write_policy`]).
    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy);
    /// Write policy in force for a volume.
    fn write_policy(&self, volume: VolumeId) -> WritePolicy;
    /// Polls the load balancer if an interval ended (see [`Cache::balance`]); returns when
    /// to call again (`None`: never).
    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos>;
    /// What the balancer saw and decided at its last poll.
    fn balance_report(&self) -> Option<crate::balancing::BalanceReport>;
    /// The write policy the balancer has in force (`None`: the configured one).
    fn balanced_write_policy(&self) -> Option<WritePolicy>;
    /// Polls the tenancy mode if an interval ended and applies its decision (see
    /// [`Cache::repartition`]); returns when to call again (`None`: never). Shrinks' flush
    /// jobs wait for [`take_resize_jobs`](Self::take_resize_jobs) or the next `clean`.
    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos>;
    /// Moves the flush jobs of the last resize to `jobs` (see [`Cache::take_resize_jobs`]).
    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>);
    /// What the tenancy mode decided at its last boundary (see [`Cache::tenancy_report`]).
    fn tenancy_report(&self) -> Option<crate::tenancy::TenancyReport>;
    /// What each volume did so far (index = volume id).
    fn volume_stats(&self) -> Vec<crate::tenancy::VolumeStats>;
    /// Hint that `req` is processed soon (see [`Cache::prefetch`]); changes nothing. Default:
    /// no hint.
    #[inline]
    fn prefetch(&self, req: &Request, stage: u8) {
        let _ = (req, stage);
    }
    /// The hints a lookahead of two gives each time it issues a request, in one call (see
    /// [`Cache::prefetch_ahead`]): stage 1 for `newest`, stage 2 for `soon`, stage 3 for the
    /// request issued. Default: those three [`PolicyCore::prefetch`] calls.
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

impl PolicyCore for Cache {
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        Cache::access(self, req, plan)
    }
    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        Cache::accept_demote(self, req, plan)
    }
    fn clean(&mut self, state: &ExecutorState, jobs: &mut Vec<FlushJob>) {
        Cache::clean(self, state, jobs)
    }
    fn next_clean_poll(&self, state: &ExecutorState) -> Option<Nanos> {
        Cache::next_clean_poll(self, state)
    }
    fn cleaning_waits_for_idle_cache(&self) -> bool {
        Cache::cleaning_waits_for_idle_cache(self)
    }
    fn flush_done(&mut self, job: FlushJob) {
        Cache::flush_done(self, job)
    }
    fn flush_all(&mut self, jobs: &mut Vec<FlushJob>) {
        Cache::flush_all(self, jobs)
    }
    fn stats_snapshot(&self) -> CacheStats {
        self.stats().clone()
    }
    fn resident_lines(&self) -> u64 {
        Cache::resident_lines(self)
    }
    fn dirty_lines(&self) -> u64 {
        Cache::dirty_lines(self)
    }
    fn capacity_lines(&self) -> u64 {
        Cache::capacity_lines(self)
    }
    fn metadata_bytes(&self) -> usize {
        Cache::metadata_bytes(self)
    }
    fn geometry(&self) -> LineGeometry {
        Cache::geometry(self)
    }
    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        Cache::set_write_policy(self, volume, policy)
    }
    fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        Cache::write_policy(self, volume)
    }
    fn balance(&mut self, state: &ExecutorState) -> Option<Nanos> {
        Cache::balance(self, state)
    }
    fn balance_report(&self) -> Option<crate::balancing::BalanceReport> {
        Cache::balance_report(self)
    }
    fn balanced_write_policy(&self) -> Option<WritePolicy> {
        Cache::balanced_write_policy(self)
    }
    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        Cache::repartition(self, state)
    }
    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        Cache::take_resize_jobs(self, jobs)
    }
    fn tenancy_report(&self) -> Option<crate::tenancy::TenancyReport> {
        Cache::tenancy_report(self)
    }
    fn volume_stats(&self) -> Vec<crate::tenancy::VolumeStats> {
        Cache::volume_stats(self).to_vec()
    }
    #[inline]
    fn prefetch(&self, req: &Request, stage: u8) {
        Cache::prefetch(self, req, stage)
    }
    #[inline]
    fn prefetch_ahead(&self, newest: Option<&Request>, soon: Option<&Request>, _: &Request) {
        Cache::prefetch_ahead(self, newest, soon)
    }
}

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
        let shards = (0..layout.shards())
            .map(|k| Cache::new(&layout.shard_config(cfg, k)))
            .collect::<Result<_, _>>()?;
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
    pub fn set_balancer(&mut self, b: Box<dyn crate::balancing::Balancer>) {
        self.shards[0].set_balancer(b);
    }

    /// Checks every shard's invariants (see [`Cache::audit`]).
    pub fn audit(&self) {
        for c in &self.shards {
            c.audit();
        }
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

impl PolicyCore for ShardedCache {
    fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].access(req, plan);
        }
        let geo = self.layout.geo;
        geo.check_request(req.volume, req.offset, req.len)?;
        let line = geo.line_size();
        let mut out: Option<AccessOutcome> = None;
        let mut plan = plan;
        if let Some(p) = plan.as_deref_mut() {
            p.clear();
        }
        let mut piece_plan = std::mem::take(&mut self.piece_plan);
        let pieces: Vec<(usize, u64, u64)> = if req.len == 0 {
            // A flush (or an empty request) covers no line: shard 0 plans it, once.
            vec![(0, req.offset, 0)]
        } else {
            self.layout
                .pieces(req.volume, req.offset, req.len)
                .collect()
        };
        let first_shard = pieces.first().map_or(0, |p| p.0);
        for (k, off, n) in pieces {
            let piece = Request {
                offset: off,
                len: n,
                ..*req
            };
            let o = self.shards[k].access_part(&piece, plan.as_ref().map(|_| &mut piece_plan))?;
            if let Some(p) = plan.as_deref_mut() {
                Self::append_rebased(p, &piece_plan, u64::from(self.layout.base(k)) * line);
            }
            out = Some(out.map_or(o, |a| a.combine(&o)));
        }
        self.piece_plan = piece_plan;
        if let Some(p) = plan {
            // Pieces are independent: their ops run side by side, stage by stage. The sort is
            // stable, so each piece keeps its own order within a stage.
            p.ops.sort_by_key(|o| o.stage);
        }
        let out = out.unwrap_or_default();
        // The volume's request counters move once per request, not once per piece.
        self.shards[first_shard].count_volume_request(req.volume, req.op);
        let lines = if req.len == 0 {
            0
        } else {
            geo.split(req.offset, req.len).count() as u32
        };
        self.requests.count_request(req.op, &out, lines);
        Ok(out)
    }

    fn accept_demote(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<DemoteOutcome, PolicyError> {
        if self.shards.len() == 1 {
            return self.shards[0].accept_demote(req, plan);
        }
        let geo = self.layout.geo;
        geo.check_request(req.volume, req.offset, req.len)?;
        let line = geo.line_size();
        let mut plan = plan;
        if let Some(p) = plan.as_deref_mut() {
            p.clear();
        }
        let mut piece_plan = std::mem::take(&mut self.piece_plan);
        let pieces: Vec<(usize, u64, u64)> = self
            .layout
            .pieces(req.volume, req.offset, req.len)
            .collect();
        let mut out: Option<DemoteOutcome> = None;
        for (k, off, n) in pieces {
            let piece = Request {
                offset: off,
                len: n,
                ..*req
            };
            let o = self.shards[k]
                .accept_demote_piece(&piece, plan.as_ref().map(|_| &mut piece_plan))?;
            if let Some(p) = plan.as_deref_mut() {
                Self::append_rebased(p, &piece_plan, u64::from(self.layout.base(k)) * line);
            }
            out = Some(out.map_or(o, |a| a.combine(o)));
        }
        self.piece_plan = piece_plan;
        // An empty demote carries nothing to take.
        let out = out.unwrap_or(DemoteOutcome::Rejected);
        self.requests.count_demote(out);
        Ok(out)
    }

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

    fn stats_snapshot(&self) -> CacheStats {
        let mut s = CacheStats::default();
        for c in &self.shards {
            s.merge(c.stats());
        }
        if self.shards.len() > 1 {
            let r = &self.requests;
            s.requests = r.requests;
            s.read_requests = r.read_requests;
            s.write_requests = r.write_requests;
            s.full_hit_requests = r.full_hit_requests;
            s.read_hit_requests = r.read_hit_requests;
            s.write_hit_requests = r.write_hit_requests;
            s.demotes_received = r.demotes_received;
            s.demotes_accepted = r.demotes_accepted;
            s.demotes_already_held = r.demotes_already_held;
            s.demotes_rejected = r.demotes_rejected;
        }
        s
    }

    fn resident_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.resident_lines()).sum()
    }

    fn dirty_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.dirty_lines()).sum()
    }

    fn capacity_lines(&self) -> u64 {
        self.shards.iter().map(|c| c.capacity_lines()).sum()
    }

    fn metadata_bytes(&self) -> usize {
        self.shards.iter().map(|c| c.metadata_bytes()).sum()
    }

    fn geometry(&self) -> LineGeometry {
        self.layout.geo
    }

    fn set_write_policy(&mut self, volume: Option<VolumeId>, policy: WritePolicy) {
        for c in &mut self.shards {
            c.set_write_policy(volume, policy);
        }
    }

    fn write_policy(&self, volume: VolumeId) -> WritePolicy {
        self.shards[0].write_policy(volume)
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

    fn balance_report(&self) -> Option<crate::balancing::BalanceReport> {
        self.shards[0].balance_report()
    }

    fn balanced_write_policy(&self) -> Option<WritePolicy> {
        self.shards[0].balanced_write_policy()
    }

    fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        // Partitioning modes need one shard (checked by the layout); a shared cache is never
        // polled.
        self.shards[0].repartition(state)
    }

    fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        // Only shard 0 can resize (see `repartition`); its slots start at 0.
        self.shards[0].take_resize_jobs(jobs);
    }

    fn tenancy_report(&self) -> Option<crate::tenancy::TenancyReport> {
        self.shards[0].tenancy_report()
    }

    fn volume_stats(&self) -> Vec<crate::tenancy::VolumeStats> {
        let mut out: Vec<crate::tenancy::VolumeStats> = Vec::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: u64, shards: u32) -> CacheConfig {
        CacheConfig {
            capacity: lines * 4096,
            shards,
            ..CacheConfig::default()
        }
    }

    #[test]
    fn lines_are_dealt_evenly_and_slots_map_back_to_their_shard() {
        let l = ShardLayout::new(&cfg(100, 16)).unwrap();
        assert_eq!(l.shards(), 16);
        assert_eq!(l.total_lines(), 100);
        assert_eq!((0..16).map(|k| l.lines(k)).sum::<u32>(), 100);
        assert_eq!(l.lines(0), 7);
        assert_eq!(l.lines(15), 6);
        for slot in 0..100 {
            let k = l.shard_of_slot(slot);
            assert!(l.base(k) <= slot && slot < l.base(k) + l.lines(k));
        }
        // Fewer lines than shards: one line each.
        assert_eq!(ShardLayout::new(&cfg(3, 16)).unwrap().shards(), 3);
    }

    #[test]
    fn bad_shard_counts_are_named() {
        for n in [0, MAX_SHARDS + 1] {
            let e = ShardLayout::new(&cfg(100, n)).unwrap_err().to_string();
            assert!(e.contains("cache.shards"), "{e}");
        }
    }

    /// A capacity past the line limit is named with its own line count (it was said to be
    /// the clamped limit itself).
    #[test]
    fn a_capacity_past_the_limit_names_its_line_count() {
        let e = ShardLayout::new(&cfg(1 << 34, 4)).unwrap_err().to_string();
        assert!(e.contains("cache.capacity"), "{e}");
        assert!(e.contains("17179869184 lines"), "{e}");
    }

    #[test]
    fn pieces_cover_the_range_and_change_shard_at_each_cut() {
        let l = ShardLayout::new(&cfg(1024, 16)).unwrap();
        for (off, len) in [
            (0u64, 1u64 << 20),
            (4096 * 7 + 512, 300_000),
            (65536, 65536),
        ] {
            let p: Vec<_> = l.pieces(VolumeId(0), off, len).collect();
            assert_eq!(p[0].1, off);
            assert_eq!(p.iter().map(|x| x.2).sum::<u64>(), len);
            for w in p.windows(2) {
                assert_eq!(w[0].1 + w[0].2, w[1].1, "contiguous");
                assert_ne!(w[0].0, w[1].0, "a cut changes shard");
                assert_eq!(w[1].1 % CHUNK_BYTES, 0, "cuts fall on chunk boundaries");
            }
            for &(k, o, n) in &p {
                for b in (o..o + n).step_by(4096) {
                    assert_eq!(l.shard_of(VolumeId(0), b / 4096), k);
                }
            }
        }
    }

    #[test]
    fn shards_spread_chunks() {
        let l = ShardLayout::new(&cfg(1 << 16, 16)).unwrap();
        let mut n = [0u32; 16];
        for chunk in 0..16_000u64 {
            n[l.shard_of(VolumeId(0), chunk * 16)] += 1;
        }
        assert!(n.iter().all(|&c| c > 700 && c < 1300), "{n:?}");
    }
}
