//! A request's life: fetched from its source, planned by the policy core on arrival, its
//! stages issued to the devices, acknowledged when its critical ops are done.

use super::*;

impl Sim<'_> {
    #[inline]
    pub(super) fn alloc_task(&mut self) -> u32 {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.tasks.push(Task::empty());
                (self.tasks.len() - 1) as u32
            }
        };
        self.tasks[idx as usize].live = true;
        idx
    }

    #[inline]
    pub(super) fn free_task(&mut self, idx: u32) {
        let t = &mut self.tasks[idx as usize];
        assert!(t.live, "task slot {idx} released twice");
        t.live = false;
        if t.kind == TaskKind::Flush {
            // A request's slot never holds a job: only a flush's may need dropping.
            t.flush = None;
        }
        self.free.push(idx);
    }

    /// Fetches the next request of `job` and schedules its arrival, unless limits forbid.
    pub(super) fn fetch(&mut self, job: u32) {
        if self.jobs_done[job as usize] || self.phase != Phase::Running {
            return;
        }
        if let (Some(limit), Some(_)) = (self.cfg.run.requests, &self.window) {
            if self.measured_arrived + self.pending_arrivals >= limit {
                self.jobs_done[job as usize] = true;
                return;
            }
        }
        // The request is drawn into a task slot, taken first (and given back when there is
        // none): a request is 40 bytes, copied once rather than returned and stored.
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        let drawn = match &mut self.lookahead {
            Some(ahead) => {
                ahead.next_into(job, self.now, &mut *self.source, &*self.cache, &mut t.req)
            }
            None => match self.source.next_request_at(job, self.now) {
                Some(req) => {
                    // Start loading the request's index bucket now: its arrival is planned a
                    // few events later (a hint; it changes nothing).
                    self.cache.prefetch(&req, 1);
                    t.req = req;
                    true
                }
                None => false,
            },
        };
        if !drawn || self.stop_at.is_some_and(|s| t.req.time_ns > s) {
            self.jobs_done[job as usize] = true;
            self.free_task(idx);
            return;
        }
        t.job = job;
        let req_time = t.req.time_ns;
        self.pending_arrivals += 1;
        let at = req_time.max(self.now);
        if at == self.now && self.arrival_next.is_none() && self.events.none_due() {
            // Nothing is queued for this instant, so the arrival would be the next event
            // popped, before anything scheduled after it: it skips the queue.
            self.arrival_next = Some(idx);
        } else {
            self.schedule(at, What::Arrive(idx));
        }
    }

    pub(super) fn arrive(&mut self, idx: u32) {
        self.pending_arrivals -= 1;
        // Arrivals and the clock only grow: once warm, every later arrival is.
        let warm = self.warm || {
            self.warm =
                self.arrived >= self.cfg.run.warmup_requests && self.now >= self.cfg.run.warmup_ns;
            self.warm
        };
        if warm && self.window.is_none() {
            self.take_window_snapshot();
        }
        let over_time = self.stop_at.is_some_and(|s| self.now > s);
        let over_count = warm
            && self
                .cfg
                .run
                .requests
                .is_some_and(|l| self.measured_arrived >= l);
        if over_time || over_count {
            let job = self.tasks[idx as usize].job;
            self.jobs_done[job as usize] = true;
            self.free_task(idx);
            return;
        }
        let index = self.arrived;
        self.arrived += 1;
        if warm {
            self.measured_arrived += 1;
        }
        let t = &mut self.tasks[idx as usize];
        if let Err(source) = self.cache.access(&t.req, Some(&mut t.plan)) {
            self.error = Some(SimError::Request {
                index,
                request: t.req,
                source,
            });
            return;
        }
        let crit = t.plan.ops.iter().map(|o| o.critical as u32).sum();
        t.kind = TaskKind::Request;
        t.arrival = self.now;
        t.next_op = 0;
        t.stage_pending = 0;
        t.crit_left = crit;
        t.ops_left = t.plan.ops.len() as u32;
        t.measured = warm;
        t.ack_started = false;
        t.acked = false;
        self.inflight_requests += 1;
        if warm {
            // The figure covers the measured window, as in the hit-ratio runner.
            self.dirty_max = self.dirty_max.max(self.cache.dirty_lines());
        }
        match &mut self.host {
            Some(h) => {
                let t = &self.tasks[idx as usize];
                let promos = t
                    .plan
                    .ops
                    .iter()
                    .filter(|o| o.cause == OpCause::Promotion)
                    .count() as u32;
                let req = &t.req;
                let key = ((req.volume.0 as u64) << 48) ^ self.geo.line_of(req.offset);
                let at = h.submit(self.now, key, promos);
                self.schedule(at, What::Issue(idx));
            }
            None => self.issue_first(idx),
        }
        if !self.closed {
            self.fetch(0);
        }
        self.poll_cleaner();
    }

    #[inline(always)]
    pub(super) fn issue_first(&mut self, idx: u32) {
        self.issue_stage(idx);
        let t = &self.tasks[idx as usize];
        if t.crit_left == 0 && !t.ack_started {
            self.start_ack(idx);
        }
        let t = &self.tasks[idx as usize];
        if t.ops_left == 0 && t.acked {
            self.free_task(idx);
        }
    }

    /// Issues every op of the next stage of a task, if any is left (the test is inlined: a
    /// task's last completions find none).
    #[inline]
    pub(super) fn issue_stage(&mut self, idx: u32) {
        let t = &self.tasks[idx as usize];
        if (t.next_op as usize) < t.plan.ops.len() {
            self.issue_next_stage(idx);
        }
    }

    #[inline(never)]
    fn issue_next_stage(&mut self, idx: u32) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        let first = t.next_op as usize;
        let ops = &t.plan.ops[first..];
        let stage = ops[0].stage;
        let fg = t.kind == TaskKind::Request;
        let (mut issued, mut overflow) = (0, false);
        for op in ops.iter().take_while(|o| o.stage == stage) {
            let d = dev_index(&self.vol_dev, op);
            let done = self.devs[d].start_op(now, op.kind, op.offset, op.len, op.cause);
            if d == 0 {
                self.cache_fg_inflight += fg as u32;
            } else {
                self.backend_inflight += 1;
            }
            // As `schedule` does: an op cannot complete at the end of time.
            if done == Nanos::MAX {
                overflow = true;
            } else {
                let what = What::Phase {
                    task: idx,
                    op: (first + issued) as u32,
                    phase: 0,
                };
                self.events.push(done, what);
            }
            issued += 1;
        }
        t.stage_start = now;
        t.stage_pending = issued as u32;
        t.next_op = (first + issued) as u32;
        if overflow {
            self.time_overflow();
        }
    }

    pub(super) fn phase_done(&mut self, idx: u32, j: u32, phase: u8) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        // The op is read in place: most ops have one phase and need only a few of its fields.
        let op = &t.plan.ops[j as usize];
        let d = dev_index(&self.vol_dev, op);
        let dev = &mut self.devs[d];
        if phase + 1 < dev.phases(op.kind, op.offset, op.len) {
            let done = dev.submit_phase(now, op.kind, op.offset, op.len, phase + 1);
            self.schedule(
                done,
                What::Phase {
                    task: idx,
                    op: j,
                    phase: phase + 1,
                },
            );
            return;
        }
        dev.op_finished(now, t.stage_start, op.kind, op.len, op.cause);
        let critical = op.critical;
        if d == 0 {
            if t.kind == TaskKind::Request {
                self.cache_fg_inflight -= 1;
                if self.cache_fg_inflight == 0 {
                    self.cache_last_fg = now;
                }
            }
        } else {
            self.backend_inflight -= 1;
        }
        t.ops_left -= 1;
        t.crit_left -= critical as u32;
        t.stage_pending -= 1;
        let start_ack = t.kind == TaskKind::Request && t.crit_left == 0 && !t.ack_started;
        if t.stage_pending == 0 {
            self.issue_stage(idx);
        }
        if start_ack {
            self.start_ack(idx);
        }
        let t = &self.tasks[idx as usize];
        if t.ops_left == 0 {
            match t.kind {
                TaskKind::Request => {
                    if t.acked {
                        self.free_task(idx);
                    }
                }
                TaskKind::Flush => self.finish_flush(idx),
            }
        }
    }

    #[inline(always)]
    pub(super) fn start_ack(&mut self, idx: u32) {
        self.tasks[idx as usize].ack_started = true;
        match &mut self.host {
            Some(h) => {
                let at = h.complete(self.now);
                self.schedule(at, What::Ack(idx));
            }
            None => self.ack(idx),
        }
    }

    /// Acknowledges a request (its slot is released by the caller once its ops are done too).
    #[inline(always)]
    pub(super) fn ack(&mut self, idx: u32) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        t.acked = true;
        let lat = now - t.arrival;
        let (op, volume, job, measured) = (t.req.op, t.req.volume, t.job, t.measured);
        let bytes = if matches!(op, Op::Read | Op::Write) {
            t.req.len
        } else {
            0
        };
        self.inflight_requests -= 1;
        if measured {
            // Each latency is recorded once, by kind; the all-requests histogram is their sum
            // (`build_metrics`).
            self.tenancy.record_latency(volume, lat);
            match op {
                Op::Read => {
                    self.lat_read.record(lat);
                    self.measured_reads += 1;
                }
                Op::Write => {
                    self.lat_write.record(lat);
                    self.measured_writes += 1;
                }
                _ => self.lat_other.record(lat),
            }
            self.measured_done += 1;
            self.measured_bytes += bytes;
            self.last_ack = now;
        }
        if let Some(tl) = &mut self.timeline {
            tl.done += 1;
            tl.bytes += bytes;
            tl.latency_sum += lat as u128;
        }
        if self.closed {
            self.fetch(job);
        }
        self.poll_cleaner();
    }
}

/// The model index of the device `op` addresses (volumes past `vol_dev`'s end use device 1).
#[inline]
fn dev_index(vol_dev: &[u16], op: &DevOp) -> usize {
    match op.device {
        Device::Cache => 0,
        Device::Backend => vol_dev.get(op.volume.0 as usize).map_or(1, |&d| d as usize),
    }
}
