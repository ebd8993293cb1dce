//! What runs beside the requests: the executor state the policies see, cleaning, load
//! balancing, and flush jobs.

use super::*;

impl<const MULTI: bool> Sim<'_, MULTI> {
    pub(super) fn exec_state(&self, l: u16) -> ExecutorState {
        let lv = &self.levels[l as usize];
        let load = |d: &DeviceModel| DeviceLoad {
            queued: d.inflight(),
            by_origin: d.inflight_by_origin(),
            service_ns: d.service_ns(),
            latency_ns: d.latency_ns(),
        };
        let backend = if let Some(b) = lv.below {
            // The level below is this level's backend: what this level has queued there, at
            // the pace of the level below's device plus the link's latency.
            let below = load(&self.levels[b as usize].devs[0]);
            DeviceLoad {
                queued: lv.backend_inflight,
                by_origin: Default::default(),
                service_ns: below.service_ns,
                latency_ns: below.latency_ns + lv.link.as_ref().map_or(0, |link| link.latency_ns()),
            }
        } else if lv.devs.len() == 2 {
            // One backend device: its own figures (what the weighted sums below give for one).
            load(&lv.devs[1])
        } else {
            let mut backend = DeviceLoad::default();
            let (mut weighted, mut weighted_latency) = (0u128, 0u128);
            for d in &lv.devs[1..] {
                let l = load(d);
                backend.queued += l.queued;
                for (a, b) in backend.by_origin.iter_mut().zip(l.by_origin) {
                    *a += b;
                }
                weighted += u128::from(l.service_ns) * u128::from(l.queued.max(1));
                weighted_latency += u128::from(l.latency_ns) * u128::from(l.queued.max(1));
            }
            // Several backend devices (one per volume): their service times weighted by what
            // is queued on each, so the drain-time estimate is the sum of theirs; their
            // latencies the same way, the latency of where the queued work is.
            let weights: u128 = lv.devs[1..]
                .iter()
                .map(|d| u128::from(d.inflight().max(1)))
                .sum();
            backend.service_ns = (weighted / weights.max(1)) as u64;
            backend.latency_ns = (weighted_latency / weights.max(1)) as u64;
            backend
        };
        debug_assert_eq!(lv.backend_inflight, backend.queued);
        ExecutorState {
            now: self.now,
            cache_idle_ns: if lv.cache_fg_inflight > 0 {
                0
            } else {
                self.now - lv.cache_last_fg
            },
            cache: load(&lv.devs[0]),
            backend,
        }
    }

    /// Polls level `l`'s cleaner (after every arrival and acknowledgement there): the test
    /// that the poll would change nothing is inlined at those call sites, the poll itself is
    /// not.
    #[inline]
    pub(super) fn poll_cleaner(&mut self, l: u16) {
        if !self.cleaning {
            return;
        }
        let lv = &self.levels[l as usize];
        if lv.poll_at.is_some()
            && lv.cache_fg_inflight > 0
            && lv.cache.cleaning_waits_for_idle_cache()
        {
            // The cleaner cannot act on a busy cache device, nor ask for a poll before the one
            // scheduled: this poll would change nothing.
            return;
        }
        self.run_cleaner(l);
    }

    #[inline(never)]
    fn run_cleaner(&mut self, l: u16) {
        let mut st = self.exec_state(l);
        let lv = &mut self.levels[l as usize];
        let mut jobs = std::mem::take(&mut lv.job_buf);
        lv.cache.clean(&st, &mut jobs);
        let started = !jobs.is_empty();
        for job in jobs.drain(..) {
            self.start_flush(l, job);
        }
        self.levels[l as usize].job_buf = jobs;
        if started {
            // Flush jobs changed the devices' load; otherwise the state is the one just read.
            st = self.exec_state(l);
        }
        let lv = &mut self.levels[l as usize];
        if let Some(t) = lv.cache.next_clean_poll(&st) {
            // A poll time in the past means "as soon as possible": the next nanosecond.
            let t = t.max(self.now + 1);
            if lv.poll_at.is_none_or(|p| t < p) {
                lv.poll_at = Some(t);
                self.schedule(t, What::Poll(l));
            }
        }
    }

    /// Polls level `l`'s load balancer at the end of each of its intervals while requests run
    /// (as the engine's flusher thread does in real time), from the start of the measured
    /// window: the warm-up brings the cache to its steady state under the configured policy.
    /// (A balancer reacting to a cold cache's flood of promotions changes what the warm-up
    /// leaves: in `experiments/load-balancing`, LBICA switching an NVMe cache to RO while it
    /// filled dropped hot lines, and the extra promotions kept the cache over its write IOPS
    /// for the whole run.)
    pub(super) fn poll_balancer(&mut self, l: u16) {
        if self.phase != Phase::Running || self.window_at.is_none() {
            return;
        }
        let st = self.exec_state(l);
        if let Some(t) = self.levels[l as usize].cache.balance(&st) {
            self.schedule(t.max(self.now + 1), What::Balance(l));
        }
    }

    /// Polls level `l`'s tenancy mode at the end of each of its intervals while requests run
    /// (as the engine's flusher thread does in real time) and starts the write-backs of the
    /// partitions it shrank.
    pub(super) fn poll_repartition(&mut self, l: u16) {
        if self.phase != Phase::Running {
            return;
        }
        let st = self.exec_state(l);
        let lv = &mut self.levels[l as usize];
        let next = lv.cache.repartition(&st);
        lv.tenancy.after_poll(&*lv.cache);
        let mut jobs = std::mem::take(&mut lv.job_buf);
        lv.cache.take_resize_jobs(&mut jobs);
        for job in jobs.drain(..) {
            self.start_flush(l, job);
        }
        self.levels[l as usize].job_buf = jobs;
        if let Some(t) = next {
            self.schedule(t.max(self.now + 1), What::Repartition(l));
        }
    }

    pub(super) fn start_flush(&mut self, l: u16, mut job: FlushJob) {
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        std::mem::swap(&mut t.plan, &mut job.plan);
        t.kind = TaskKind::Flush;
        t.level = l;
        t.next_op = 0;
        t.stage_pending = 0;
        t.ops_left = t.plan.ops.len() as u32;
        t.crit_left = t.plan.ops.iter().filter(|o| o.critical).count() as u32;
        t.measured = false;
        t.barrier_ops = 0;
        t.flush = Some(job);
        if t.ops_left == 0 {
            self.finish_flush(idx);
        } else {
            self.issue_stage(idx);
        }
    }

    pub(super) fn finish_flush(&mut self, idx: u32) {
        if self.flush_barrier(idx) {
            // Its lines count as clean once the FLUSH completes.
            return;
        }
        self.after_flush_job(idx);
        let t = &mut self.tasks[idx as usize];
        let l = t.level;
        let mut job = t.flush.take().expect("flush task holds its job");
        // Give the job its plan back and keep the spare buffer in the slot.
        std::mem::swap(&mut t.plan, &mut job.plan);
        self.free_task(idx);
        self.levels[l as usize].cache.flush_done(job);
        self.poll_cleaner(l);
    }
}
