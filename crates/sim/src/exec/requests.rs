//! A request's life: fetched from its source, planned by the policy core on arrival, its
//! stages issued to the devices, acknowledged when its critical ops are done.

use super::durability::flush_after_evictions;
use super::events::{deliver, task_op_tag};
use super::levels::dev_index;
use super::*;
use crate::config::WriteBackBarrier;

impl<const MULTI: bool> Sim<'_, MULTI> {
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

    /// Fetches the next request of `job` of client `c` and schedules its arrival, unless
    /// limits forbid.
    pub(super) fn fetch(&mut self, c: u16, job: u32) {
        let cl = &mut self.clients[c as usize];
        if cl.jobs_done[job as usize] || self.phase != Phase::Running {
            return;
        }
        if let (Some(limit), Some(_)) = (self.run_limits.requests, self.window_at) {
            if self.measured_arrived + self.pending_arrivals >= limit {
                cl.jobs_done[job as usize] = true;
                return;
            }
        }
        // The request is drawn into a task slot, taken first (and given back when there is
        // none): a request is 40 bytes, copied once rather than returned and stored.
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        let cl = &mut self.clients[c as usize];
        let cache = &*self.levels[cl.top as usize].cache;
        let drawn = match &mut cl.lookahead {
            Some(ahead) => ahead.next_into(job, self.now, &mut *cl.source, cache, &mut t.req),
            None => match cl.source.next_request_at(job, self.now) {
                Some(req) => {
                    // Start loading the request's index bucket now: its arrival is planned a
                    // few events later (a hint; it changes nothing).
                    cache.prefetch(&req, 1);
                    t.req = req;
                    true
                }
                None => false,
            },
        };
        if !drawn || self.stop_at.is_some_and(|s| t.req.time_ns > s) {
            cl.jobs_done[job as usize] = true;
            self.free_task(idx);
            return;
        }
        // A single-level run's client has no offset.
        if MULTI && cl.offset != 0 {
            // The client's place on the backend, added: past 2^64 it is an error of that
            // request (as the cache's own range check reports it).
            let Some(offset) = t.req.offset.checked_add(cl.offset) else {
                self.error = Some(SimError::Request {
                    index: self.arrived,
                    request: t.req,
                    source: tiercache_core::GeometryError::Range {
                        offset: t.req.offset,
                        len: t.req.len,
                    }
                    .into(),
                });
                return;
            };
            t.req.offset = offset;
        }
        t.kind = TaskKind::Request;
        t.job = job;
        if MULTI {
            // A single-level run's tasks all stay at level 0, client 0 (`PerRun`).
            t.client = c;
            t.level = cl.top;
            t.crossed = false;
        }
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
        if MULTI {
            let t = &self.tasks[idx as usize];
            if t.kind != TaskKind::Request {
                return self.arrive_from_above(idx);
            }
            if !t.crossed && self.clients[t.client as usize].link.is_some() {
                return self.cross_client_link(idx);
            }
        }
        self.pending_arrivals -= 1;
        // Arrivals and the clock only grow: once warm, every later arrival is.
        let warm = self.warm || {
            self.warm = self.arrived >= self.run_limits.warmup_requests
                && self.now >= self.run_limits.warmup_ns;
            self.warm
        };
        if warm && self.window_at.is_none() {
            self.take_window_snapshot();
        }
        let over_time = self.stop_at.is_some_and(|s| self.now > s);
        let over_count = warm
            && self
                .run_limits
                .requests
                .is_some_and(|l| self.measured_arrived >= l);
        if over_time || over_count {
            let t = &self.tasks[idx as usize];
            let (c, job) = (t.client, t.job);
            self.clients[c as usize].jobs_done[job as usize] = true;
            self.free_task(idx);
            return;
        }
        let index = self.arrived;
        self.arrived += 1;
        if warm {
            self.measured_arrived += 1;
        }
        let t = &mut self.tasks[idx as usize];
        let l = t.level;
        let lv = &mut self.levels[l as usize];
        if let Err(source) = lv.cache.access(&t.req, Some(&mut t.plan)) {
            self.error = Some(SimError::Request {
                index,
                request: t.req,
                source,
            });
            return;
        }
        if MULTI && lv.sync_demotes {
            make_demotes_critical(&mut t.plan);
        }
        if self.run_limits.write_back_barrier == WriteBackBarrier::Flush
            && !(MULTI && lv.below.is_some())
        {
            flush_after_evictions(&mut t.plan, &lv.vol_dev, &lv.devs);
        }
        let crit = t.plan.ops.iter().map(|o| o.critical as u32).sum();
        if !MULTI || !t.crossed {
            t.arrival = self.now;
        }
        t.next_op = 0;
        t.stage_pending = 0;
        t.crit_left = crit;
        t.ops_left = t.plan.ops.len() as u32;
        t.measured = warm;
        t.ack_started = false;
        t.acked = false;
        if MULTI {
            t.served = l;
        }
        self.inflight_requests += 1;
        if warm {
            // The figure covers the measured window, as in the hit-ratio runner.
            lv.m.dirty_max = lv.m.dirty_max.max(lv.cache.dirty_lines());
            if MULTI {
                lv.c.requests_in += 1;
            }
        }
        self.submit(idx);
        let c = self.tasks[idx as usize].client;
        if !self.clients[c as usize].closed {
            self.fetch(c, 0);
        }
        self.poll_cleaner(l);
    }

    /// A planned request enters its level's host CPU (if modelled), then its first stage.
    #[inline(always)]
    fn submit(&mut self, idx: u32) {
        let t = &self.tasks[idx as usize];
        let lv = &mut self.levels[t.level as usize];
        match &mut lv.host {
            Some(h) => {
                let promos = t
                    .plan
                    .ops
                    .iter()
                    .filter(|o| o.cause == OpCause::Promotion)
                    .count() as u32;
                let req = &t.req;
                let key = ((req.volume.0 as u64) << 48) ^ lv.geo.line_of(req.offset);
                let at = h.submit(self.now, key, promos);
                self.schedule(at, What::Issue(idx));
            }
            None => self.issue_first(idx),
        }
    }

    /// A request of a client with a link of its own crosses it down before it arrives at its
    /// top level (its latency counts from now).
    #[cold]
    #[inline(never)]
    fn cross_client_link(&mut self, idx: u32) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        t.crossed = true;
        t.arrival = now;
        let (down, _) = payload(&t.req);
        let counting = self.window_at.is_some() && self.phase == Phase::Running;
        let cl = &mut self.clients[t.client as usize];
        if counting {
            cl.link_bytes.0 += down;
        }
        let at =
            cl.link
                .as_mut()
                .expect("checked")
                .run_op(now, tiercache_core::IoKind::Write, 0, down);
        self.schedule(at, What::Arrive(idx));
    }

    /// A request or demote from the level above arrives: planned by this level's core.
    #[cold]
    #[inline(never)]
    fn arrive_from_above(&mut self, idx: u32) {
        let now = self.now;
        let warm = self.window_at.is_some();
        let counting = self.counting();
        let index = self.arrived;
        let t = &mut self.tasks[idx as usize];
        let l = t.level;
        let lv = &mut self.levels[l as usize];
        let demote = t.kind == TaskKind::Demote;
        let result = if demote {
            lv.cache.accept_demote(&t.req, Some(&mut t.plan)).map(Some)
        } else {
            lv.cache.access(&t.req, Some(&mut t.plan)).map(|_| None)
        };
        let outcome = match result {
            Ok(o) => o,
            Err(source) => {
                self.error = Some(SimError::Request {
                    index: index.saturating_sub(1),
                    request: t.req,
                    source,
                });
                return;
            }
        };
        if self.run_limits.write_back_barrier == WriteBackBarrier::Flush && lv.below.is_none() {
            flush_after_evictions(&mut t.plan, &lv.vol_dev, &lv.devs);
        }
        t.arrival = now;
        t.next_op = 0;
        t.stage_pending = 0;
        if self.levels[l as usize].sync_demotes {
            make_demotes_critical(&mut t.plan);
        }
        t.crit_left = t.plan.ops.iter().map(|o| o.critical as u32).sum();
        t.ops_left = t.plan.ops.len() as u32;
        t.measured = warm;
        t.ack_started = false;
        t.acked = false;
        t.served = l;
        let parent = t.parent;
        if let Some(outcome) = outcome {
            let parent_level = self.tasks[parent as usize].level;
            let c = &mut self.levels[parent_level as usize].c;
            if counting {
                // Counted with its outcome: a demote crossing the link as the window closes
                // is in neither count.
                c.demotes_sent += 1;
                match outcome {
                    tiercache_policy::DemoteOutcome::Accepted => c.demotes_accepted += 1,
                    tiercache_policy::DemoteOutcome::AlreadyHeld => c.demotes_already_held += 1,
                    tiercache_policy::DemoteOutcome::Rejected => c.demotes_rejected += 1,
                }
            }
            if self.tasks[idx as usize].ops_left == 0 {
                self.finish_demote(idx);
            } else {
                self.issue_stage(idx);
            }
            return;
        }
        if counting {
            let lv = &mut self.levels[l as usize];
            lv.c.requests_in += 1;
            lv.m.dirty_max = lv.m.dirty_max.max(lv.cache.dirty_lines());
        }
        self.submit(idx);
        self.poll_cleaner(l);
    }

    /// A demote's writes at this level are done: its op at the level above is.
    #[inline(never)]
    fn finish_demote(&mut self, idx: u32) {
        let t = &self.tasks[idx as usize];
        let (parent, op) = (t.parent, t.parent_op);
        self.free_task(idx);
        self.schedule(
            self.now,
            What::Below {
                task: parent,
                op,
                served: NOT_SERVED,
            },
        );
    }

    /// `kind` is a request (a client's or the level above's); a single-level run has no
    /// sub-requests, so there it is one comparison.
    #[inline(always)]
    fn is_request(kind: TaskKind) -> bool {
        if MULTI {
            kind.is_request()
        } else {
            kind == TaskKind::Request
        }
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

    /// Issues the ops of the next stage: each to its device, or, at a level with a level
    /// below, a backend op down the link to that level (`send_below`), in plan order. The
    /// device call has this one call site, so it is inlined here.
    #[inline(never)]
    fn issue_next_stage(&mut self, idx: u32) {
        let now = self.now;
        let first = self.tasks[idx as usize].next_op as usize;
        let mut j = first;
        let mut overflow = false;
        loop {
            let t = &mut self.tasks[idx as usize];
            let lv = &mut self.levels[t.level as usize];
            let below = MULTI && lv.below.is_some();
            let ops = &t.plan.ops[first..];
            let stage = ops[0].stage;
            let fg = Self::is_request(t.kind);
            let mut send = None;
            for op in ops[j - first..].iter().take_while(|o| o.stage == stage) {
                j += 1;
                if below && op.device == Device::Backend {
                    // Sent once the task is no longer borrowed, then the stage goes on.
                    lv.backend_inflight += 1;
                    send = Some(*op);
                    break;
                }
                let d = dev_index(&lv.vol_dev, op);
                if d == 0 {
                    lv.cache_fg_inflight += fg as u32;
                } else {
                    lv.backend_inflight += 1;
                }
                let dev = &mut lv.devs[d];
                if dev.is_queued() {
                    // Its completion is known when the disk starts it, maybe later.
                    let tag = task_op_tag(idx, (j - 1) as u32);
                    let done = &mut self.device_done;
                    dev.start_queued(now, op.kind, op.offset, op.len, op.cause, tag, done);
                    let wake = dev.wake_request();
                    overflow |= deliver(&mut self.events, done, wake, t.level, d);
                    continue;
                }
                let done = dev.start_op(now, op.kind, op.offset, op.len, op.cause);
                // As `schedule` does: an op cannot complete at the end of time.
                if done == Nanos::MAX {
                    overflow = true;
                } else {
                    let what = What::Phase {
                        task: idx,
                        op: (j - 1) as u32,
                        phase: 0,
                    };
                    self.events.push(done, what);
                }
            }
            match send {
                Some(op) => self.send_below(idx, (j - 1) as u32, &op),
                None => break,
            }
        }
        let t = &mut self.tasks[idx as usize];
        t.stage_start = now;
        t.stage_pending = (j - first) as u32;
        t.next_op = j as u32;
        if overflow {
            self.time_overflow();
        }
    }

    /// Op `j` of task `parent` (a backend op of its level) crosses the level's link down and
    /// becomes a request (or, a demote, an offer) at the level below.
    #[inline(never)]
    fn send_below(&mut self, parent: u32, j: u32, op: &DevOp) {
        let now = self.now;
        let l = self.tasks[parent as usize].level as usize;
        let b = self.levels[l].below.expect("a level with a level below");
        let demote = op.cause == OpCause::Demote;
        let req = Request {
            time_ns: now,
            volume: op.volume,
            offset: op.offset,
            len: op.len,
            op: match op.kind {
                tiercache_core::IoKind::Read => Op::Read,
                tiercache_core::IoKind::Write => Op::Write,
                tiercache_core::IoKind::Trim => Op::Trim,
                tiercache_core::IoKind::Flush => Op::Flush,
            },
        };
        let (down, _) = payload(&req);
        let counting = self.counting();
        let lv = &mut self.levels[l];
        if demote && counting {
            lv.c.demote_bytes += op.len;
        }
        let at = lv.cross(now, down, true, counting);
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        t.kind = if demote {
            TaskKind::Demote
        } else {
            TaskKind::Sub
        };
        t.req = Request { time_ns: at, ..req };
        t.level = b;
        t.parent = parent;
        t.parent_op = j;
        self.schedule(at, What::Arrive(idx));
    }

    pub(super) fn phase_done(&mut self, idx: u32, j: u32, phase: u8) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        let lv = &mut self.levels[t.level as usize];
        // The op is read in place: most ops have one phase and need only a few of its fields.
        let op = &t.plan.ops[j as usize];
        let d = dev_index(&lv.vol_dev, op);
        let dev = &mut lv.devs[d];
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
            if Self::is_request(t.kind) {
                lv.cache_fg_inflight -= 1;
                if lv.cache_fg_inflight == 0 {
                    lv.cache_last_fg = now;
                }
            }
        } else {
            lv.backend_inflight -= 1;
            if MULTI && critical {
                t.served = BACKEND;
            }
        }
        self.op_done(idx, critical);
    }

    /// Op `j` of task `idx`, sent to the level below, is back; its data came from `served`.
    #[inline(never)]
    pub(super) fn below_done(&mut self, idx: u32, j: u32, served: u16) {
        let t = &mut self.tasks[idx as usize];
        let l = t.level as usize;
        self.levels[l].backend_inflight -= 1;
        let critical = t.plan.ops[j as usize].critical;
        if critical && served != NOT_SERVED && t.served != BACKEND {
            let deeper = served == BACKEND
                || self.levels[served as usize].depth > self.levels[t.served as usize].depth;
            if deeper {
                t.served = served;
            }
        }
        self.op_done(idx, critical);
    }

    /// One op of task `idx` is done: the next stage, the acknowledgement, the task's end.
    #[inline(always)]
    fn op_done(&mut self, idx: u32, critical: bool) {
        let t = &mut self.tasks[idx as usize];
        t.ops_left -= 1;
        t.crit_left -= critical as u32;
        t.stage_pending -= 1;
        let start_ack = Self::is_request(t.kind) && t.crit_left == 0 && !t.ack_started;
        if t.stage_pending == 0 {
            if self.run_limits.power_cut_ns.is_some() && Self::is_request(t.kind) {
                self.record_evictions(idx);
            }
            self.issue_stage(idx);
        }
        if start_ack {
            self.start_ack(idx);
        }
        let t = &self.tasks[idx as usize];
        if t.ops_left == 0 {
            match t.kind {
                TaskKind::Request | TaskKind::Sub => {
                    if t.acked {
                        self.free_task(idx);
                    }
                }
                TaskKind::Flush => self.finish_flush(idx),
                TaskKind::Demote => self.finish_demote(idx),
            }
        }
    }

    #[inline(always)]
    pub(super) fn start_ack(&mut self, idx: u32) {
        let t = &mut self.tasks[idx as usize];
        t.ack_started = true;
        let (l, c, kind) = (t.level, t.client, t.kind);
        match &mut self.levels[l as usize].host {
            Some(h) => {
                let mut at = h.complete(self.now);
                if MULTI && kind == TaskKind::Request {
                    at = self.cross_client_link_up(idx, c, at);
                }
                self.schedule(at, What::Ack(idx));
            }
            None => {
                if MULTI && kind == TaskKind::Request && self.clients[c as usize].link.is_some() {
                    let at = self.cross_client_link_up(idx, c, self.now);
                    self.schedule(at, What::Ack(idx));
                } else {
                    self.ack(idx)
                }
            }
        }
    }

    /// A client's request's answer crosses its link up from `at`: when it reaches the client.
    #[cold]
    #[inline(never)]
    fn cross_client_link_up(&mut self, idx: u32, c: u16, at: Nanos) -> Nanos {
        let (_, up) = payload(&self.tasks[idx as usize].req);
        let counting = self.counting();
        let cl = &mut self.clients[c as usize];
        match cl.link.as_mut() {
            Some(link) => {
                if counting {
                    cl.link_bytes.1 += up;
                }
                link.run_op(at, tiercache_core::IoKind::Write, 0, up)
            }
            None => at,
        }
    }

    /// Acknowledges a request (its slot is released by the caller once its ops are done too).
    #[inline(always)]
    pub(super) fn ack(&mut self, idx: u32) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        t.acked = true;
        let lat = now - t.arrival;
        let (op, volume, job, measured, l) = (t.req.op, t.req.volume, t.job, t.measured, t.level);
        let bytes = if matches!(op, Op::Read | Op::Write) {
            t.req.len
        } else {
            0
        };
        let sub = MULTI && t.kind == TaskKind::Sub;
        let lv = &mut self.levels[l as usize];
        if !sub {
            self.inflight_requests -= 1;
        }
        if measured {
            // Each latency is recorded once, by kind; the all-requests histogram is their sum
            // (`build_metrics`).
            let m = &mut lv.m;
            lv.tenancy.record_latency(volume, lat);
            match op {
                Op::Read => {
                    m.lat_read.record(lat);
                    m.measured_reads += 1;
                }
                Op::Write => {
                    m.lat_write.record(lat);
                    m.measured_writes += 1;
                }
                _ => m.lat_other.record(lat),
            }
            m.measured_done += 1;
            m.measured_bytes += bytes;
            if !sub {
                self.last_ack = now;
            }
        }
        if let Some(tl) = &mut lv.timeline {
            tl.done += 1;
            tl.bytes += bytes;
            tl.latency_sum += lat as u128;
        }
        if MULTI {
            self.ack_hierarchy(idx, lat);
        }
        if !sub {
            let c = self.tasks[idx as usize].client;
            if self.clients[c as usize].closed {
                self.fetch(c, job);
            }
        }
        self.poll_cleaner(l);
    }

    /// A hierarchy's side of an acknowledgement: a client's request counts where its data
    /// came from; a sub-request answers its op at the level above, across the link.
    #[cold]
    #[inline(never)]
    fn ack_hierarchy(&mut self, idx: u32, lat: Nanos) {
        let t = &self.tasks[idx as usize];
        match t.kind {
            TaskKind::Request => {
                if !t.measured {
                    return;
                }
                let served = t.served;
                let cl = &mut self.clients[t.client as usize];
                cl.requests += 1;
                cl.latency.record(lat);
                if served == BACKEND {
                    cl.served_backend += 1;
                    self.backend_served += 1;
                } else {
                    cl.served[served as usize] += 1;
                    self.levels[served as usize].c.served += 1;
                }
            }
            TaskKind::Sub => {
                let (parent, op, served) = (t.parent, t.parent_op, t.served);
                let (_, up) = payload(&t.req);
                let pl = self.tasks[parent as usize].level as usize;
                let counting = self.counting();
                let at = self.levels[pl].cross(self.now, up, false, counting);
                self.schedule(
                    at,
                    What::Below {
                        task: parent,
                        op,
                        served,
                    },
                );
            }
            TaskKind::Demote | TaskKind::Flush => {}
        }
    }
}

/// Bytes a request carries down (a write's data) and up (a read's data).
fn payload(req: &Request) -> (u64, u64) {
    match req.op {
        Op::Read => (0, req.len),
        Op::Write => (req.len, 0),
        Op::Trim | Op::Flush => (0, 0),
    }
}

/// Marks a plan's demote ops (the victim's reads from this level's device and its transfer
/// below, both `OpCause::Demote`) critical: the request is acknowledged once the level below
/// has taken the block (docs/design.md §4.7, `hierarchy.demote_cost = "synchronous"`).
#[cold]
fn make_demotes_critical(plan: &mut tiercache_core::Plan) {
    for op in &mut plan.ops {
        if op.cause == OpCause::Demote {
            op.critical = true;
        }
    }
}
