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
use crate::tenancy::{TenancyMode, TenancyReport, VolumePlan, VolumeStats, VolumeTenancy};
use tiercache_core::{Nanos, Op, Request, VolumeId, MAX_VOLUMES};

/// How volumes share the cache at run time: the tenancy mode, its schedule, the plan in
/// force and what was decided so far.
pub(super) struct TenancyState {
    /// The mode (docs/design.md §4.10).
    pub(super) mode: Box<dyn TenancyMode>,
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
            mode,
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
            .observe(req.volume, first, last - first + 1, is_write);
    }

    /// What each volume did so far (index = volume id; volumes never seen are zero).
    pub fn volume_stats(&self) -> &[VolumeStats] {
        &self.counters.volumes
    }

    /// Replaces the tenancy mode (the configured one is built with the cache); the schedule
    /// restarts at the next [`Cache::repartition`].
    pub fn set_tenancy(&mut self, mode: Box<dyn crate::tenancy::TenancyMode>) {
        self.tenancy.observes = mode.observes();
        self.tenancy.mode = mode;
        self.tenancy.next_poll = None;
    }

    /// Polls the tenancy mode if an interval ended by `state.now` and applies its decision
    /// (partition sizes, per-volume write policies); returns when it wants the next poll
    /// (`None`: never, a shared cache). Executors call it at that time; the first call, at any
    /// time, starts the schedule (and applies fixed shares at once). Shrinks' flush jobs wait
    /// for [`Cache::take_resize_jobs`] (or the next [`Cache::clean`]).
    pub fn repartition(&mut self, state: &ExecutorState) -> Option<Nanos> {
        let interval = self.tenancy.mode.interval_ns()?.max(1);
        match self.tenancy.next_poll {
            None => {
                if self.tenancy.mode.decides_at_start() {
                    self.decide_tenancy(state.now);
                }
                self.tenancy.next_poll = Some(state.now.saturating_add(interval));
            }
            Some(at) if state.now >= at => {
                self.decide_tenancy(state.now);
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

    /// Asks the mode for its decision, applies it and records the report.
    fn decide_tenancy(&mut self, now: Nanos) {
        let capacity = self.capacity_lines();
        let interval: Vec<VolumeStats> = self
            .counters
            .volumes
            .iter()
            .enumerate()
            .map(|(v, s)| s.since(self.tenancy.base.get(v)))
            .collect();
        self.tenancy.base = self.counters.volumes.clone();
        let fixed = self.cfg.tenancy.fixed_lines(self.geo.line_size());
        // Partitions the mode will not plan (static ones of volumes it has not seen or was
        // not given) keep their lines: the mode decides over the rest.
        let kept = self.unplanned_partition_lines();
        let Some(mut plans) = self
            .tenancy
            .mode
            .decide(capacity.saturating_sub(fixed + kept))
        else {
            self.tenancy.decisions += 1;
            self.record_tenancy_report(now, capacity, &interval);
            return;
        };
        self.apply_fixed(&mut plans);
        let mut jobs = std::mem::take(&mut self.jobs.resize_jobs);
        let applied = self.apply_allocation(&plans, &mut jobs);
        self.jobs.resize_jobs = jobs;
        match applied {
            Ok(()) => {
                for p in &plans {
                    if let Some(wp) = p.write_policy {
                        self.set_write_policy(Some(p.volume), wp);
                    }
                }
                self.tenancy.plans = plans;
                self.tenancy.decisions += 1;
            }
            Err(e) => {
                // Nothing changed; the report says so rather than showing a decision that
                // did not take effect.
                self.tenancy.refusals += 1;
                self.tenancy.last_refusal = Some(e.to_string());
            }
        }
        self.record_tenancy_report(now, capacity, &interval);
    }

    /// Lines of the volumes' own partitions that the tenancy mode will not plan: neither a
    /// volume it may plan nor one with a fixed size.
    fn unplanned_partition_lines(&self) -> u64 {
        self.parts
            .iter()
            .filter(|p| {
                p.volume().is_some_and(|v| {
                    !self.tenancy.mode.plans_volume(v)
                        && !self
                            .cfg
                            .tenancy
                            .fixed
                            .iter()
                            .any(|f| f.volume == v.0 && f.bytes.is_some())
                })
            })
            .map(|p| u64::from(p.capacity))
            .sum()
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
            mode: self.tenancy.mode.name(),
            decisions: self.tenancy.decisions,
            at_ns: now,
            capacity_lines: capacity,
            allocated_lines: self.tenancy.plans.iter().map(|p| p.allocation_lines).sum(),
            volumes,
            refused_decisions: self.tenancy.refusals,
            last_refusal: self.tenancy.last_refusal.clone(),
        });
    }

    /// Puts the fixed settings of `cache.tenancy.fixed` over a mode's plan: their sizes and
    /// write policies replace the mode's (a fixed volume the mode did not plan is added).
    fn apply_fixed(&self, plans: &mut Vec<VolumePlan>) {
        let line = self.geo.line_size();
        for f in &self.cfg.tenancy.fixed {
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
