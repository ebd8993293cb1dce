//! The policy core: one request in, metadata updated and a plan of device operations out.
//!
//! This file holds the types, the cache's state and its entry point ([`Cache::access`]); the
//! rest is split by concern: `read` (the read path), `write` (the write path), `allocate`
//! (slots and victims), `jobs` (flush jobs), `journal` (metadata updates and recovery),
//! `modes` (write policies in force and the load balancer's state, `modes::Balancing`),
//! `tenancy` (multi-tenant partitioning at run time, `tenancy::TenancyState`), `resize`
//! (partitions resized or created at run time; the domains themselves are
//! `partition::Partitions`) and `counters` (the counters of the cache, its partitions and
//! its volumes, moved by one `counters::Counters::record` per `counters::Event`). Flush
//! jobs in flight are tracked by `jobs::JobTracker`.

use crate::admission::{self, Admission};
use crate::cleaning::CleaningPolicy;
use crate::config::{CacheConfig, WritePolicy};
use crate::metadata::LineTable;
use crate::partition::Partitions;
use crate::promotion::{self, Promotion};
use crate::stats::CacheStats;
use tiercache_core::{
    DevOp, Device, GeometryError, IoKind, LineGeometry, LineKey, Op, OpCause, Plan, Request, Stage,
    VolumeId,
};
use tiercache_eviction::Slot;

mod allocate;
mod counters;
mod demote;
mod jobs;
mod journal;
mod live;
mod modes;
mod prefetch;
mod read;
mod resize;
mod restore;
mod tenancy;
mod validate;
mod write;
mod write_back;

use counters::{Counters, Event};
use jobs::JobTracker;
use modes::Balancing;
use tenancy::TenancyState;

pub use crate::executor::ExecutorState;
pub use demote::DemoteOutcome;
pub use restore::RestoredLine;

/// A batch of dirty lines to write back. Stage 0 of `plan` reads them from the cache, stage 1
/// writes them to the backend. Its lines stay pinned until [`Cache::flush_done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushJob {
    /// Job number, unique within a cache.
    pub id: u64,
    /// Device operations of the job.
    pub plan: Plan,
    slots: Vec<Slot>,
    /// Policy shard that made the job (0 for an unsharded cache), set by
    /// [`crate::shards::ShardedCache`] so that completion returns to that shard.
    pub(crate) shard: u32,
}

impl FlushJob {
    /// Lines written back by this job.
    pub fn lines(&self) -> usize {
        self.slots.len()
    }

    /// Slots written back by this job.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Policy shard that made the job (0 for an unsharded cache).
    pub fn shard(&self) -> usize {
        self.shard as usize
    }
}

/// The state of one slot after a change, for a persistent journal (see
/// [`Cache::set_journal`]). Recovery replays the last update of each slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaUpdate {
    /// The slot that changed.
    pub slot: Slot,
    /// Line now held (volume, line index), or `None` when the slot became free.
    pub line: Option<(VolumeId, u64)>,
    /// Valid sub-blocks.
    pub valid: u64,
    /// Dirty sub-blocks.
    pub dirty: u64,
}

/// Public view of one resident line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineState {
    /// Slot (cache-device address = slot × line size).
    pub slot: Slot,
    /// Valid sub-blocks.
    pub valid: u64,
    /// Dirty sub-blocks.
    pub dirty: u64,
    /// Under write-back.
    pub pinned: bool,
}

/// What one request found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessOutcome {
    /// Lines found with all needed data.
    pub line_hits: u32,
    /// Lines found with part of the needed data.
    pub line_partial_hits: u32,
    /// Lines not found.
    pub line_misses: u32,
    /// Lines served around the cache (not promoted or not allocated): a subset of
    /// `line_misses`.
    pub line_bypasses: u32,
    /// Every line was a full hit (reads: served by the cache alone); false for a request
    /// over no line.
    pub full_hit: bool,
}

impl AccessOutcome {
    /// The outcome of a request made of pieces (one per policy shard) from theirs.
    pub fn combine(&self, o: &AccessOutcome) -> AccessOutcome {
        AccessOutcome {
            line_hits: self.line_hits + o.line_hits,
            line_partial_hits: self.line_partial_hits + o.line_partial_hits,
            line_misses: self.line_misses + o.line_misses,
            line_bypasses: self.line_bypasses + o.line_bypasses,
            full_hit: self.full_hit && o.full_hit,
        }
    }
}

/// Errors of the policy core.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A configuration value is invalid.
    #[error("cache.{field}: {reason}")]
    Config {
        /// Field name, relative to the cache section.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A request cannot be addressed.
    #[error("request: {0}")]
    Request(#[from] GeometryError),
}

fn config_error(field: &'static str, reason: impl Into<String>) -> PolicyError {
    PolicyError::Config {
        field,
        reason: reason.into(),
    }
}

/// Contiguous runs of set bits of a mask, as (first, one past last) bit numbers.
fn runs(mut mask: u64) -> impl Iterator<Item = (u32, u32)> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let lo = mask.trailing_zeros();
        let shifted = mask >> lo;
        let len = if shifted == u64::MAX {
            64
        } else {
            (!shifted).trailing_zeros()
        };
        let hi = lo + len;
        mask &= if hi >= 64 { 0 } else { u64::MAX << hi };
        Some((lo, hi))
    })
}

/// The deterministic policy core of one cache.
pub struct Cache {
    cfg: CacheConfig,
    geo: LineGeometry,
    table: LineTable,
    parts: Partitions,
    /// Slots evicted by a shrink whose write-back job is in flight: resident and pinned but
    /// no longer in their partition's replacement policy (hits must not touch it).
    leaving: rustc_hash::FxHashSet<Slot>,
    promotion: Box<dyn Promotion>,
    promotion_learns: bool,
    admission: Box<dyn Admission>,
    /// The admission policy's [`Admission::learns_from_accesses`], asked once.
    admission_learns: bool,
    /// Whether an admission policy filters at all (`all` does not: the miss path skips it).
    admission_filters: bool,
    cleaner: Box<dyn CleaningPolicy>,
    /// The cleaner's [`CleaningPolicy::acts_only_on_idle_cache`], asked once.
    cleaner_waits_for_idle: bool,
    victims: Box<dyn crate::victim::VictimPolicy>,
    /// The load balancer, its decision in force and its schedule.
    balancing: Balancing,
    default_mode: WritePolicy,
    volume_modes: Vec<Option<WritePolicy>>,
    /// A write policy over every other (an executor's degraded mode, docs/design.md §11).
    forced_mode: Option<WritePolicy>,
    /// The counters of the cache and its volumes (each partition keeps its own), all moved
    /// by [`Cache::record`].
    counters: Counters,
    /// Flush jobs in flight, and what waits for them.
    jobs: JobTracker,
    /// Ops of the request being planned, before stage ordering.
    scratch: Vec<DevOp>,
    /// Victim write-backs of the plan being built: (volume, start, end, stage).
    plan_write_backs: Vec<(VolumeId, u64, u64, Stage)>,
    build_plan: bool,
    /// How volumes share the cache (docs/design.md §4.10): the mode and its decisions.
    tenancy: TenancyState,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("config", &self.cfg)
            .field("resident", &self.table.resident_count())
            .field("dirty", &self.table.dirty_count())
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// Builds a cache; every invalid field is named in the error.
    pub fn new(cfg: &CacheConfig) -> Result<Self, PolicyError> {
        let geo = LineGeometry::new(cfg.line_size)
            .map_err(|e| config_error("line_size", e.to_string()))?;
        let lines = cfg.capacity / cfg.line_size;
        if lines == 0 {
            return Err(config_error(
                "capacity",
                format!("{} bytes hold no {}-byte line", cfg.capacity, cfg.line_size),
            ));
        }
        if lines >= u32::MAX as u64 / 2 {
            return Err(config_error(
                "capacity",
                format!("{lines} lines exceed the limit of {}", u32::MAX / 2),
            ));
        }
        validate::check(cfg, lines)?;
        let parts = Partitions::new(cfg, lines as u32)?;
        let promotion = promotion::build(&cfg.promotion, lines);
        let admission = admission::build(&cfg.admission, lines);
        let cleaner = crate::cleaning::build(&cfg.cleaning);
        let tenancy =
            crate::tenancy::build(&cfg.tenancy, lines - cfg.tenancy.fixed_lines(cfg.line_size));
        let mut cache = Self {
            cfg: cfg.clone(),
            geo,
            table: LineTable::with_sub_blocks(lines as u32, geo.subs_per_line()),
            parts,
            leaving: Default::default(),
            // Asked once through the trait and kept, so the hit path skips the call for
            // policies that ignore hits.
            promotion_learns: promotion.learns_from_hits(),
            promotion,
            admission_learns: admission.learns_from_accesses(),
            admission_filters: cfg.admission != crate::config::AdmissionConfig::All,
            admission,
            cleaner_waits_for_idle: cleaner.acts_only_on_idle_cache(),
            cleaner,
            victims: crate::victim::build(cfg.victim),
            balancing: Balancing::new(crate::balancing::build(&cfg.balancing)),
            default_mode: cfg.write_policy,
            volume_modes: Vec::new(),
            forced_mode: None,
            counters: Counters::default(),
            jobs: JobTracker::default(),
            scratch: Vec::with_capacity(64),
            plan_write_backs: Vec::new(),
            build_plan: false,
            tenancy: TenancyState::new(tenancy),
        };
        for f in &cfg.tenancy.fixed {
            if let Some(p) = f.write_policy {
                cache.set_write_policy(Some(VolumeId(f.volume)), p);
            }
        }
        Ok(cache)
    }

    /// The configuration this cache was built from.
    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// Line geometry.
    pub fn geometry(&self) -> LineGeometry {
        self.geo
    }

    /// Counters so far.
    pub fn stats(&self) -> &CacheStats {
        &self.counters.global
    }

    /// Lines the cache can hold.
    pub fn capacity_lines(&self) -> u64 {
        self.table.slots() as u64
    }

    /// Lines resident now.
    pub fn resident_lines(&self) -> u64 {
        self.table.resident_count()
    }

    /// Dirty lines now.
    pub fn dirty_lines(&self) -> u64 {
        self.table.dirty_count()
    }

    /// Flush jobs issued and not yet reported done.
    pub fn jobs_in_flight(&self) -> u32 {
        self.jobs.in_flight()
    }

    /// Bytes of metadata: line table, index, dirty list, replacement and promotion structures.
    pub fn metadata_bytes(&self) -> usize {
        self.metadata_bytes_holding(LineKey(0))
    }

    /// [`metadata_bytes`](Self::metadata_bytes) once a line of `key`'s volume and index
    /// (the largest of each an executor placed) is held too: the line entries' width depends
    /// on the keys held (docs/design.md §13). The simulator's batched path, which models
    /// this cache without its table, reports this.
    pub fn metadata_bytes_holding(&self, key: LineKey) -> usize {
        self.table.memory_bytes_holding(key)
            + self
                .parts
                .iter()
                .map(|p| p.evict.memory_bytes())
                .sum::<usize>()
            + self.parts.numbers_bytes()
            + self.promotion.memory_bytes()
            + self.admission.memory_bytes()
    }

    /// Bytes of metadata by structure (their [`total`](crate::metadata::MetadataMemory::total)
    /// is [`metadata_bytes`](Self::metadata_bytes) plus the journal's pending list).
    pub fn metadata_memory(&self) -> crate::metadata::MetadataMemory {
        crate::metadata::MetadataMemory {
            eviction: self
                .parts
                .iter()
                .map(|p| p.evict.memory_bytes())
                .sum::<usize>(),
            partitions: self.parts.numbers_bytes(),
            promotion: self.promotion.memory_bytes(),
            admission: self.admission.memory_bytes(),
            ..self.table.memory()
        }
    }

    /// Bytes of metadata excluding the promotion table (the per-line budget of 64 bytes).
    pub fn line_metadata_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self
                .parts
                .iter()
                .map(|p| p.evict.memory_bytes())
                .sum::<usize>()
            + self.parts.numbers_bytes()
    }

    /// State of the line `index` of `volume`, if resident.
    pub fn line_state(&self, volume: VolumeId, index: u64) -> Option<LineState> {
        let slot = self.table.lookup(LineKey::new(volume, index))?;
        let m = self.table.meta(slot);
        Some(LineState {
            slot,
            valid: m.valid,
            dirty: m.dirty,
            pinned: m.pinned,
        })
    }

    /// Whether reading `req` now would be served by the cache alone (every line resident
    /// with the needed sub-blocks valid, in a mode that reads from the cache). Changes
    /// nothing: executors use it to run cheap requests inline. A hint: a balancer's bypass
    /// share (`mode_for`) may still send the request to the backend when it is planned.
    pub fn would_hit(&self, req: &Request) -> bool {
        req.op == Op::Read
            && !self.write_policy(req.volume).rules().reads_bypass_cache
            && self.all_valid(req)
    }

    /// Whether writing `req` now would touch the cache device alone: a write hit on resident
    /// lines whose touched sub-blocks are valid (no fill) in a mode that keeps write hits in
    /// the cache (dirty). Changes nothing: executors use it to run cheap writes inline. A
    /// hint, as [`Cache::would_hit`] is.
    pub fn would_absorb(&self, req: &Request) -> bool {
        req.op == Op::Write
            && self.write_policy(req.volume).rules().write_hit
                == crate::engine::WriteHit::CacheDirty
            && self.all_valid(req)
    }

    /// Every line `req` touches is resident with the touched sub-blocks valid.
    fn all_valid(&self, req: &Request) -> bool {
        req.len != 0
            && self
                .geo
                .check_request(req.volume, req.offset, req.len)
                .is_ok()
            && self.geo.split(req.offset, req.len).all(|s| {
                let need = self.geo.touched_mask(s.start, s.end);
                self.table
                    .lookup(LineKey::new(req.volume, s.index))
                    .is_some_and(|slot| self.table.meta(slot).valid & need == need)
            })
    }

    #[inline]
    fn partition(&self, volume: VolumeId) -> usize {
        self.parts.of_volume(volume)
    }

    /// Counts `e` at every level it concerns (see [`Counters::record`]).
    #[inline(always)]
    fn record(&mut self, e: Event) {
        self.counters.record(&mut self.parts, e);
    }

    /// Tells partition `p`'s policy that resident `slot` was hit, unless the line is leaving
    /// its partition (a shrink's victim under write-back, out of the policy already). Only
    /// pinned lines can be leaving, so the common case costs one test of a loaded flag.
    #[inline(always)]
    fn policy_hit(&mut self, p: usize, slot: Slot, pinned: bool) {
        if !(pinned && self.leaving.contains(&slot)) {
            self.parts.order(p).hit(slot);
        }
    }

    /// Processes one request. Metadata changes at once; unless `plan` is `None` (hit-ratio-only
    /// mode) the plan is cleared and filled with the device operations the request needs.
    pub fn access(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        self.geo.check_request(req.volume, req.offset, req.len)?;
        if plan.is_none() {
            if let Some(out) = self.untimed_read_hit(req) {
                if self.tenancy.observes {
                    self.observe_tenancy(req);
                }
                return Ok(out);
            }
        }
        let out = self.access_lines(req, plan)?;
        let lines = self.geo.split(req.offset, req.len).count() as u32;
        self.record(Event::Request {
            volume: req.volume,
            op: req.op,
            out,
            lines,
        });
        Ok(out)
    }

    /// As [`Cache::access`] for one piece of a request that other pieces (on other policy
    /// shards) share: every line-level counter moves, the request-level ones (`requests`,
    /// `read_hit_requests`, …) do not; the caller counts the whole request once
    /// ([`crate::shards::RequestPieces`], which calls this). `first`: the request's first
    /// piece, which counts the request for its volume ([`crate::tenancy::VolumeStats`]'
    /// `read_requests`, `write_requests`), so that the volume counts it once too.
    pub fn access_piece(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
        first: bool,
    ) -> Result<AccessOutcome, PolicyError> {
        self.geo.check_request(req.volume, req.offset, req.len)?;
        let out = self.access_lines(req, plan)?;
        self.record(Event::Piece {
            volume: req.volume,
            op: req.op,
            out,
            first,
        });
        Ok(out)
    }

    fn access_lines(
        &mut self,
        req: &Request,
        plan: Option<&mut Plan>,
    ) -> Result<AccessOutcome, PolicyError> {
        if self.tenancy.observes {
            self.observe_tenancy(req);
        }
        self.build_plan = plan.is_some();
        self.scratch.clear();
        self.plan_write_backs.clear();
        let mut out = AccessOutcome::default();
        let mode = self.mode_for(req);
        match req.op {
            // Most requests lie in one line: their slice is cut directly, not by a split.
            Op::Read => match self.geo.single_line(req.offset, req.len) {
                Some(s) => self.read_line(req.volume, s, mode, &mut out),
                None => self.read_lines(req, mode, &mut out),
            },
            Op::Write => match self.geo.single_line(req.offset, req.len) {
                Some(s) => self.write_line(req.volume, s, mode, &mut out),
                None => self.write_lines(req, mode, &mut out),
            },
            Op::Trim => {
                for s in self.geo.split(req.offset, req.len) {
                    self.trim_line(req.volume, s);
                }
                if req.len > 0 {
                    self.emit(DevOp::backend(
                        IoKind::Trim,
                        req.volume,
                        req.offset,
                        req.len,
                        OpCause::Trim,
                    ));
                }
            }
            Op::Flush => {
                self.emit(DevOp::cache(
                    IoKind::Flush,
                    req.volume,
                    0,
                    0,
                    0,
                    OpCause::Flush,
                ));
                self.emit(DevOp::backend(
                    IoKind::Flush,
                    req.volume,
                    0,
                    0,
                    OpCause::Flush,
                ));
            }
        }
        // A request over no line (zero length) found nothing: not a hit.
        // The other three counters tested together, in one comparison.
        out.full_hit =
            out.line_hits > 0 && (out.line_partial_hits | out.line_misses | out.line_bypasses) == 0;
        if let Some(plan) = plan {
            plan.clear();
            if self.scratch.len() <= 1 {
                // One op (most requests) merges with nothing: the plan takes the buffer
                // whole, leaving its own (empty) as the next scratch.
                std::mem::swap(&mut plan.ops, &mut self.scratch);
            } else {
                // Lines were planned one after another; order all ops by stage (stable, so
                // ops of one stage keep address order and contiguous ones merge).
                self.scratch.sort_by_key(|o| o.stage);
                for o in self.scratch.drain(..) {
                    plan.push(o);
                }
            }
        }
        Ok(out)
    }

    /// Counts an op's bytes and, when planning, records it, returning the stage it got: a
    /// backend read of bytes that a victim write-back of this same plan writes is moved after
    /// that write (a request can evict a dirty line it reads further on).
    ///
    /// Inlined at every call site: each builds its op with a constant device, kind and
    /// cause, so the counting below folds to the one counter that op moves.
    #[inline(always)]
    fn emit(&mut self, mut o: DevOp) -> Stage {
        if self.build_plan && o.device == Device::Backend {
            let (lo, hi) = (o.offset, o.offset + o.len);
            match (o.kind, o.cause) {
                (IoKind::Write, OpCause::EvictFlush) => {
                    self.plan_write_backs.push((o.volume, lo, hi, o.stage))
                }
                (IoKind::Read, _) => {
                    for &(v, a, b, st) in &self.plan_write_backs {
                        if v == o.volume && a < hi && lo < b {
                            o.stage = o.stage.max(st + 1);
                        }
                    }
                }
                _ => {}
            }
        }
        // Cache writes are counted where they are planned (`Event::CacheWrite`), where the
        // partition is at hand; write-backs by `write_back_ops` (`Event::WrittenBack`).
        self.record(Event::Op(o));
        if self.build_plan {
            self.scratch.push(o);
        }
        o.stage
    }

    fn cache_addr(&self, slot: Slot, within: u64) -> u64 {
        slot as u64 * self.geo.line_size() + within
    }

    #[inline]
    fn occupancy(&self, p: usize) -> f64 {
        let part = &self.parts[p];
        if part.capacity == 0 {
            1.0
        } else {
            part.used as f64 / part.capacity as f64
        }
    }

    /// Checks every invariant of the metadata; panics with a description on violation.
    /// Meant for tests and debug runs (O(lines)).
    pub fn audit(&self) {
        self.table.audit();
        let mut used = vec![0u32; self.parts.len()];
        let mut dirty = vec![0u32; self.parts.len()];
        let mut pinned = vec![0u32; self.parts.len()];
        let mut dirty_pinned = vec![0u32; self.parts.len()];
        let mut leaving = vec![0u32; self.parts.len()];
        let mut in_order: Vec<Vec<Slot>> = vec![Vec::new(); self.parts.len()];
        for s in self.table.resident_slots() {
            let m = self.table.meta(s);
            let p = m.partition as usize;
            used[p] += 1;
            dirty[p] += (m.dirty != 0) as u32;
            pinned[p] += m.pinned as u32;
            dirty_pinned[p] += (m.pinned && m.dirty != 0) as u32;
            if self.leaving.contains(&s) {
                assert!(m.pinned, "slot {s}: leaving but not under write-back");
                assert!(
                    !self.parts[p].evict.is_out(self.parts.numbers(), s),
                    "slot {s}: leaving but held out"
                );
                leaving[p] += 1;
            } else {
                in_order[p].push(s);
                let order = &self.parts[p].evict;
                assert_eq!(
                    order.is_out(self.parts.numbers(), s),
                    order.holds_out_dirty() && m.dirty != 0,
                    "slot {s}: held out of the policy exactly when dirty (dirty {:#x})",
                    m.dirty
                );
            }
        }
        assert_eq!(
            leaving.iter().map(|&n| n as usize).sum::<usize>(),
            self.leaving.len(),
            "leaving slots are resident"
        );
        assert!(
            self.parts.total_capacity() <= self.table.slots() as u64,
            "partition capacities exceed the cache"
        );
        for (i, part) in self.parts.iter().enumerate() {
            assert_eq!(part.used, used[i], "partition {i}: used");
            assert_eq!(part.dirty, dirty[i], "partition {i}: dirty");
            assert_eq!(part.pinned, pinned[i], "partition {i}: pinned");
            assert_eq!(
                part.dirty_pinned, dirty_pinned[i],
                "partition {i}: dirty and pinned"
            );
            assert_eq!(part.leaving, leaving[i], "partition {i}: leaving");
            // A partition may hold more lines than its capacity after a shrink (lines pinned
            // or written again while leaving) until `settle_partitions` (run by `clean`);
            // it never grows meanwhile, and the tests check it fits once settled.
            assert_eq!(
                part.evict.len(),
                part.linked() as usize,
                "partition {i}: eviction policy size"
            );
            part.evict.audit(self.parts.numbers(), &in_order[i]);
            assert_eq!(
                part.evict.capacity(),
                part.capacity as usize,
                "partition {i}: eviction policy capacity"
            );
        }
        let s = &self.counters.global;
        assert_eq!(
            s.line_hits + s.line_partial_hits + s.line_misses,
            s.line_accesses,
            "hits + misses = accesses"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_of_bits() {
        assert_eq!(runs(0).collect::<Vec<_>>(), vec![]);
        assert_eq!(
            runs(0b1011_0110).collect::<Vec<_>>(),
            vec![(1, 3), (4, 6), (7, 8)]
        );
        assert_eq!(runs(u64::MAX).collect::<Vec<_>>(), vec![(0, 64)]);
        assert_eq!(runs(1 << 63).collect::<Vec<_>>(), vec![(63, 64)]);
    }
}
