//! Multi-tenancy at run time (docs/design.md §4.10): the cache feeds each request to its tenancy
//! mode, applies the mode's decision at interval boundaries (partition sizes and per-volume write
//! policies), and counts what each volume did.
//!
//! A decision gives each listed volume a partition of its allocation (creating it, with the
//! volume's resident lines moved in from the shared partition, the first time); the shared
//! partition keeps what no volume was given, for volumes not seen yet. Shrinks evict at once
//! and write dirty victims back through flush jobs (see `resize`), which wait in the cache
//! until the executor takes them ([`Cache::take_resize_jobs`], or the next
//! [`Cache::clean`]): a resize loses no dirty data and reuses no slot before its data is
//! safe.

use super::{config_error, Cache, ExecutorState, FlushJob, PolicyError};
use crate::shards::{split_lines, ShardShare, TenancySplit};
use crate::tenancy::{
    FixedVolume, TenancyMode, TenancyReport, VolumePlan, VolumeStats, VolumeTenancy,
};
use std::sync::{Arc, Mutex};
use tiercache_core::{Nanos, Op, Request, VolumeId, MAX_VOLUMES};

/// A tenancy mode: the cache's own, or one a sharded cache's shards share (held by the
/// leader, fed by every shard; docs/design.md §4.10, "On shards").
pub(super) enum ModeCell {
    Own(Box<dyn TenancyMode>),
    Shared(Arc<Mutex<Box<dyn TenancyMode>>>),
}

impl ModeCell {
    fn with<R>(&self, f: impl FnOnce(&dyn TenancyMode) -> R) -> R {
        match self {
            Self::Own(m) => f(&**m),
            Self::Shared(m) => f(&**m.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }

    fn with_mut<R>(&mut self, f: impl FnOnce(&mut dyn TenancyMode) -> R) -> R {
        match self {
            Self::Own(m) => f(&mut **m),
            Self::Shared(m) => f(&mut **m.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

/// A cache's part in its tenancy.
enum Role {
    /// The whole cache (one shard, or a mode that does not partition).
    Whole,
    /// Shard 0 of a sharded cache: decides for every shard; `fixed` is the whole cache's
    /// `tenancy.fixed` (the shard's own config holds only its split).
    Leader { fixed: Vec<FixedVolume> },
    /// Shard `shard` (> 0) of a sharded cache: applies the leader's decisions.
    Follower { shard: usize },
}

/// How volumes share the cache at run time: the tenancy mode, its schedule, the plan in
/// force and what was decided so far.
pub(super) struct TenancyState {
    /// The mode (docs/design.md §4.10).
    pub(super) mode: ModeCell,
    /// Whole cache, leader or follower.
    role: Role,
    /// A leader's last decision, split over the shards (for its followers).
    split: Option<TenancySplit>,
    /// A follower's last split applied (its `seq`; 0: none).
    followed: u64,
    /// Whether the mode watches requests (asked once: the request path tests the flag).
    pub(super) observes: bool,
    /// When the mode is polled next (`None`: not yet scheduled).
    next_poll: Option<Nanos>,
    /// The mode's plan in force.
    plans: Vec<VolumePlan>,
    /// Decisions so far.
    decisions: u64,
    /// Decisions whose partitions did not fit (not applied), and why the last one did not.
    refusals: u64,
    last_refusal: Option<String>,
    /// What the mode decided at its last boundary.
    report: Option<TenancyReport>,
    /// What each volume did at the last decision (index = volume id).
    base: Vec<VolumeStats>,
}

impl TenancyState {
    /// `mode`'s state before its first poll.
    pub(super) fn new(mode: Box<dyn TenancyMode>) -> Self {
        Self {
            observes: mode.observes(),
            mode: ModeCell::Own(mode),
            role: Role::Whole,
            split: None,
            followed: 0,
            next_poll: None,
            plans: Vec::new(),
            decisions: 0,
            refusals: 0,
            last_refusal: None,
            report: None,
            base: Vec::new(),
        }
    }
}

impl Cache {
    /// Feeds a read or write to the tenancy mode (only called when the mode observes).
    #[inline]
    pub(super) fn observe_tenancy(&mut self, req: &Request) {
        let is_write = match req.op {
            Op::Read => false,
            Op::Write => true,
            _ => return,
        };
        if req.len == 0 {
            return;
        }
        let first = self.geo.line_of(req.offset);
        let last = self.geo.line_of(req.end() - 1);
        self.tenancy
            .mode
            .with_mut(|m| m.observe(req.volume, first, last - first + 1, is_write));
    }

    /// What each volume did so far (index = volume id; volumes never seen are zero).
    pub fn volume_stats(&self) -> &[VolumeStats] {
        &self.counters.volumes
    }

    /// Replaces the tenancy mode (the configured one is built with the cache); the schedule
    /// restarts at the next [`Cache::repartition`]. The cache decides for itself from then on
    /// (a shard of a sharded cache leaves its leader).
    pub fn set_tenancy(&mut self, mode: Box<dyn crate::tenancy::TenancyMode>) {
        self.tenancy.observes = mode.observes();
        self.tenancy.mode = ModeCell::Own(mode);
        self.tenancy.role = Role::Whole;
        self.tenancy.next_poll = None;
    }

    /// Makes this cache shard `k` of a sharded cache whose shards share `mode` (see
    /// [`crate::shards::link_tenancy`]): shard 0 leads, deciding with the whole cache's
    /// `fixed` sizes; the others follow.
    pub(crate) fn join_tenancy(
        &mut self,
        mode: Arc<Mutex<Box<dyn TenancyMode>>>,
        k: usize,
        fixed: &[FixedVolume],
    ) {
        let cell = ModeCell::Shared(mode);
        self.tenancy.observes = cell.with(|m| m.observes());
        self.tenancy.mode = cell;
        self.tenancy.role = if k == 0 {
            Role::Leader {
                fixed: fixed.to_vec(),
            }
        } else {
            Role::Follower { shard: k }
        };
        self.tenancy.next_poll = None;
    }

    /// Whether this cache is shard 0 of a sharded cache deciding for every shard
    /// ([`Cache::lead_repartition`]).
    pub fn leads_tenancy(&self) -> bool {
        matches!(self.tenancy.role, Role::Leader { .. })
    }

    /// Whether [`Cache::lead_repartition`] at `now` would decide (the executor then gathers
    /// every shard's [`ShardShare`] for it).
    pub fn tenancy_due(&self, now: Nanos) -> bool {
        if self.tenancy.mode.with(|m| m.interval_ns()).is_none() {
            return false;
        }
        match self.tenancy.next_poll {
            None => self.tenancy.mode.with(|m| m.decides_at_start()),
            Some(at) => now >= at,
        }
    }

    /// This shard's lines and its volumes' own partitions, for its leader.
    pub fn shard_share(&self) -> ShardShare {
        ShardShare {
            lines: self.table.slots() as u64,
            partitions: self
                .parts
                .iter()
                .filter_map(|p| p.volume().map(|v| (v, u64::from(p.capacity))))
                .collect(),
        }
    }

    /// As [`Cache::repartition`], for the leader of a sharded cache: a decision is for the
    /// whole cache, whose shards are `shares` (index = shard; gathered when
    /// [`Cache::tenancy_due`], else ignored), split over them ([`split_lines`] of each
    /// shard's lines less the partitions the mode will not plan); the leader applies shard
    /// 0's share and keeps the split for the others ([`Cache::tenancy_split`],
    /// [`Cache::follow_tenancy`]). On a cache that does not lead: nothing, `None`.
    pub fn lead_repartition(
        &mut self,
        state: &ExecutorState,
        shares: &[ShardShare],
    ) -> Option<Nanos> {
        if !self.leads_tenancy() {
            return None;
        }
        self.poll_tenancy(state, shares)
    }

    /// A leader's last decision split over the shards (`None` before its first).
    pub fn tenancy_split(&self) -> Option<&TenancySplit> {
        self.tenancy.split.as_ref()
    }

    /// Applies a leader's decision to this follower, once (a split already applied, or a
    /// cache that does not follow, is left alone): its share of each volume's lines and the
    /// volumes' write policies. Shrinks' flush jobs wait for [`Cache::take_resize_jobs`].
    pub fn follow_tenancy(&mut self, split: &TenancySplit, now: Nanos) {
        let Role::Follower { shard } = self.tenancy.role else {
            return;
        };
        if split.seq <= self.tenancy.followed {
            return;
        }
        self.tenancy.followed = split.seq;
        let interval = self.interval_stats();
        // The demands are the leader's, reported once (by the leader).
        let plans: Vec<VolumePlan> = split
            .shard_plans(shard)
            .into_iter()
            .map(|p| VolumePlan {
                demand_lines: 0,
                ..p
            })
            .collect();
        match self.apply_plans(plans) {
            Ok(()) => self.tenancy.decisions += 1,
            Err(e) => {
                self.tenancy.refusals += 1;
                self.tenancy.last_refusal = Some(e.to_string());
            }
        }
        let capacity = self.capacity_lines();
        self.record_tenancy_report(now, capacity, &interval);
    }

    /// Polls the tenancy mode if an interval ended by `state.now` and applies its decision
    /// (partition sizes, per-volume write policies); returns when it wants the next poll
    /// (`None`: never, a shared cache). Executors call it at that time; the first call, at any
    /// time, starts the schedule (and applies fixed shares at once). Shrinks' flush jobs wait
    /// for [`Cache::take_resize_jobs`] (or the next [`Cache::clean`]).
    ///
    /// A shard of a sharded cache whose mode partitions is polled through its leader
    /// ([`Cache::lead_repartition`], [`Cache::follow_tenancy`]): here it does nothing.
    pub fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        if !matches!(self.tenancy.role, Role::Whole) {
            return None;
        }
        self.poll_tenancy(state, &[])
    }

    /// The schedule of [`Cache::repartition`] and [`Cache::lead_repartition`].
    fn poll_tenancy(&mut self, state: &ExecutorState, shares: &[ShardShare]) -> Option<Nanos> {
        let interval = self.tenancy.mode.with(|m| m.interval_ns())?.max(1);
        match self.tenancy.next_poll {
            None => {
                if self.tenancy.mode.with(|m| m.decides_at_start()) {
                    self.decide_tenancy(state.now, shares);
                }
                self.tenancy.next_poll = Some(state.now.saturating_add(interval));
            }
            Some(at) if state.now >= at => {
                self.decide_tenancy(state.now, shares);
                // Intervals with no poll in them (an idle executor) are skipped, not replayed.
                self.tenancy.next_poll = Some(super::modes::next_on_grid(at, state.now, interval));
            }
            Some(_) => {}
        }
        self.tenancy.next_poll
    }

    /// Moves the flush jobs of the last resize's shrinks to `jobs` (the executor runs them
    /// like cleaning jobs and reports them with [`Cache::flush_done`]).
    pub fn take_resize_jobs(&mut self, jobs: &mut Vec<FlushJob>) {
        jobs.append(&mut self.jobs.resize_jobs);
    }

    /// Whether flush jobs of a resize wait to be taken.
    pub(super) fn has_resize_jobs(&self) -> bool {
        !self.jobs.resize_jobs.is_empty()
    }

    /// What the tenancy mode decided at its last boundary and what each volume did in the
    /// interval before (`None` for a shared cache, or before the first decision).
    pub fn tenancy_report(&self) -> Option<TenancyReport> {
        self.tenancy.report.clone()
    }

    /// What each volume did since the last decision (which this one becomes).
    fn interval_stats(&mut self) -> Vec<VolumeStats> {
        let interval = self
            .counters
            .volumes
            .iter()
            .enumerate()
            .map(|(v, s)| s.since(self.tenancy.base.get(v)))
            .collect();
        self.tenancy.base = self.counters.volumes.clone();
        interval
    }

    /// Applies `plans` (partition sizes of this cache, write policies) and makes them the
    /// plans in force; on error nothing changes.
    fn apply_plans(&mut self, plans: Vec<VolumePlan>) -> Result<(), PolicyError> {
        let mut jobs = std::mem::take(&mut self.jobs.resize_jobs);
        let applied = self.apply_allocation(&plans, &mut jobs);
        self.jobs.resize_jobs = jobs;
        applied?;
        for p in &plans {
            if let Some(wp) = p.write_policy {
                self.set_write_policy(Some(p.volume), wp);
            }
        }
        self.tenancy.plans = plans;
        Ok(())
    }

    /// Asks the mode for its decision, applies it and records the report. A whole cache is
    /// the one shard of its own decision; a leader decides for the shards of `shares` and
    /// keeps the split for its followers.
    fn decide_tenancy(&mut self, now: Nanos, shares: &[ShardShare]) {
        let leads = self.leads_tenancy();
        let (fixed, shares) = match &self.tenancy.role {
            Role::Leader { fixed } => (fixed.clone(), shares.to_vec()),
            _ => (self.cfg.tenancy.fixed.clone(), vec![self.shard_share()]),
        };
        let line = self.geo.line_size();
        // Each shard's room: its lines less its partitions the mode will not plan (static ones
        // of volumes it has not seen or was not given keep their lines); the mode decides over
        // the rooms less the fixed sizes.
        let room: Vec<u64> = shares
            .iter()
            .map(|s| {
                s.lines
                    .saturating_sub(self.unplanned_lines(&s.partitions, &fixed))
            })
            .collect();
        let total: u64 = room.iter().sum();
        let fixed_lines: u64 = fixed.iter().filter_map(|f| f.bytes).map(|b| b / line).sum();
        let capacity = self.capacity_lines();
        let interval = self.interval_stats();
        let Some(mut plans) = self
            .tenancy
            .mode
            .with_mut(|m| m.decide(total.saturating_sub(fixed_lines)))
        else {
            self.tenancy.decisions += 1;
            self.record_tenancy_report(now, capacity, &interval);
            return;
        };
        apply_fixed(&fixed, line, &mut plans);
        let wanted = plans
            .iter()
            .fold(0u64, |a, p| a.saturating_add(p.allocation_lines));
        // One shard: the split is the identity and the cache's own check refuses what does not
        // fit. Several: `split_lines` needs targets within the rooms.
        let applied = if leads && (shares.is_empty() || wanted > total) {
            Err(config_error(
                "tenancy",
                format!("allocations of {wanted} lines exceed the shards' {total}"),
            ))
        } else {
            let targets: Vec<u64> = plans.iter().map(|p| p.allocation_lines).collect();
            let split = TenancySplit {
                seq: self.tenancy.decisions + self.tenancy.refusals + 1,
                shares: split_lines(&targets, &room),
                plans,
            };
            // Published only once applied here: followers never apply what the leader
            // refused.
            let applied = self.apply_plans(split.shard_plans(0));
            if applied.is_ok() && leads {
                self.tenancy.split = Some(split);
            }
            applied
        };
        match applied {
            Ok(()) => self.tenancy.decisions += 1,
            Err(e) => {
                // Nothing changed; the report says so rather than showing a decision that
                // did not take effect.
                self.tenancy.refusals += 1;
                self.tenancy.last_refusal = Some(e.to_string());
            }
        }
        self.record_tenancy_report(now, capacity, &interval);
    }

    /// Lines of the partitions `own` (volume, lines) that the mode will not plan: neither a
    /// volume it may plan nor one with a size in `fixed` (the fixed sizes in force).
    fn unplanned_lines(&self, own: &[(VolumeId, u64)], fixed: &[FixedVolume]) -> u64 {
        self.tenancy.mode.with(|m| {
            own.iter()
                .filter(|(v, _)| {
                    !m.plans_volume(*v)
                        && !fixed.iter().any(|f| f.volume == v.0 && f.bytes.is_some())
                })
                .map(|(_, lines)| lines)
                .sum()
        })
    }

    /// Records the report of a decision (or refusal) at `now`.
    fn record_tenancy_report(&mut self, now: Nanos, capacity: u64, interval: &[VolumeStats]) {
        let volumes = self
            .tenancy
            .plans
            .iter()
            .map(|p| {
                let v = p.volume.0 as usize;
                let iv = interval.get(v).copied().unwrap_or_default();
                VolumeTenancy {
                    volume: p.volume.0,
                    demand_lines: p.demand_lines,
                    allocation_lines: p.allocation_lines,
                    used_lines: self.parts.own(p.volume).map_or(0, |i| self.parts[i].used) as u64,
                    write_policy: self.write_policy(p.volume),
                    interval_hits: iv.line_hits,
                    // Bypasses are among the misses.
                    interval_misses: iv.line_partial_hits + iv.line_misses,
                    interval_cache_bytes_written: iv.cache_bytes_written,
                }
            })
            .collect();
        self.tenancy.report = Some(TenancyReport {
            mode: self.tenancy.mode.with(|m| m.name()),
            decisions: self.tenancy.decisions,
            at_ns: now,
            capacity_lines: capacity,
            allocated_lines: self.tenancy.plans.iter().map(|p| p.allocation_lines).sum(),
            volumes,
            refused_decisions: self.tenancy.refusals,
            last_refusal: self.tenancy.last_refusal.clone(),
        });
    }

    /// Gives every planned volume a partition of its allocation; the shared partition gets
    /// the lines no partition holds. Shrinks append flush jobs to `jobs`. On error (the
    /// allocations exceed the cache, a volume id out of range) nothing changes.
    pub fn apply_allocation(
        &mut self,
        plans: &[VolumePlan],
        jobs: &mut Vec<FlushJob>,
    ) -> Result<(), PolicyError> {
        let lines = self.table.slots() as u64;
        let shared = self.parts.shared();
        let mut planned = vec![false; self.parts.len()];
        let mut total = 0u64;
        for (i, p) in plans.iter().enumerate() {
            if p.volume.0 >= MAX_VOLUMES {
                return Err(config_error(
                    "tenancy",
                    format!("plan {i}: volume {} beyond the limit", p.volume.0),
                ));
            }
            if let Some(own) = self.parts.own(p.volume) {
                if std::mem::replace(&mut planned[own], true) {
                    return Err(config_error(
                        "tenancy",
                        format!("plan {i}: volume {} planned twice", p.volume.0),
                    ));
                }
            }
            total = total.saturating_add(p.allocation_lines);
        }
        // Partitions of volumes left out of the plan keep their capacity.
        let kept: u64 = (0..self.parts.len())
            .filter(|&i| i != shared && !planned[i])
            .map(|i| u64::from(self.parts[i].capacity))
            .sum();
        if total.saturating_add(kept) > lines {
            return Err(config_error(
                "tenancy",
                format!(
                    "allocations of {total} lines (and {kept} kept) exceed the cache's {lines}"
                ),
            ));
        }
        let mut caps: Vec<u64> = self.parts.iter().map(|p| u64::from(p.capacity)).collect();
        for p in plans {
            let i = match self.parts.own(p.volume) {
                Some(i) => i,
                None => {
                    let i = self.parts.add(p.volume)?;
                    caps.push(0);
                    self.move_volume_lines(p.volume, shared, i);
                    i
                }
            };
            caps[i] = p.allocation_lines;
        }
        caps[shared] = 0;
        caps[shared] = lines - caps.iter().sum::<u64>();
        self.apply_capacities(&caps, jobs);
        Ok(())
    }
}

/// Puts fixed settings (`cache.tenancy.fixed`) over a mode's plan: their sizes (bytes of
/// `line`-byte lines) and write policies replace the mode's (a fixed volume the mode did not
/// plan is added).
fn apply_fixed(fixed: &[FixedVolume], line: u64, plans: &mut Vec<VolumePlan>) {
    for f in fixed {
        let v = VolumeId(f.volume);
        let i = match plans.iter().position(|p| p.volume == v) {
            Some(i) => i,
            None if f.bytes.is_some() => {
                plans.push(VolumePlan {
                    volume: v,
                    demand_lines: 0,
                    allocation_lines: 0,
                    write_policy: None,
                });
                plans.len() - 1
            }
            None => continue,
        };
        if let Some(b) = f.bytes {
            plans[i].allocation_lines = b / line;
            plans[i].demand_lines = b / line;
        }
        if f.write_policy.is_some() {
            plans[i].write_policy = f.write_policy;
        }
    }
}
