//! The discrete-event executor.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use tiercache_core::{
    Arrival, DevOp, Device, LineGeometry, Nanos, Op, OpCause, Plan, Request, RequestSource,
};
use tiercache_metrics::{
    DeviceMetrics, LatencyBreakdown, LatencyRecorder, RunMetrics, TimelineRow,
};
use tiercache_policy::{CacheStats, DeviceLoad, ExecutorState, FlushJob, PolicyCore};

use crate::config::SimConfig;
use crate::device::{DeviceCounters, DeviceModel, CAUSE_NAMES};
use crate::host::Host;
use crate::stats::{fill_policy_metrics, stats_diff};
use crate::SimError;

/// Result of a simulation.
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// Metrics of the measured window.
    pub metrics: RunMetrics,
    /// One row per timeline interval (empty without `timeline_interval_ns`).
    pub timeline: Vec<TimelineRow>,
    /// Latencies of every measured request, ns (for CDF plots).
    pub latency: LatencyRecorder,
    /// Latencies of measured reads.
    pub read_latency: LatencyRecorder,
    /// Latencies of measured writes.
    pub write_latency: LatencyRecorder,
    /// The policy's cumulative counters at the end (warm-up and final flush included).
    pub final_stats: CacheStats,
    /// Bytes written to each backend device by write-back ops (causes `clean` and
    /// `evict-flush`) over the whole run, for conservation checks against the policy.
    pub backend_written_back_bytes: u64,
    /// Virtual time when everything (including background ops and the final flush) finished.
    pub end_ns: Nanos,
}

/// What an event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    /// A fetched request reaches the cache.
    Arrive(u32),
    /// Submission CPU done: issue the first stage.
    Issue(u32),
    /// Phase `phase` of op `op` of a task completed.
    Phase { task: u32, op: u32, phase: u8 },
    /// Completion CPU done: acknowledge.
    Ack(u32),
    /// The cleaner asked to be polled.
    Poll,
    /// A load-balancing interval ended.
    Balance,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Event {
    time: Nanos,
    seq: u64,
    what: What,
}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (time, seq): earliest first, ties in scheduling order.
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskKind {
    Request,
    Flush,
}

/// A request or flush job in flight. Slots are reused with their plan buffers.
#[derive(Debug)]
struct Task {
    kind: TaskKind,
    plan: Plan,
    req: Request,
    job: u32,
    arrival: Nanos,
    stage_start: Nanos,
    next_op: u32,
    stage_pending: u32,
    crit_left: u32,
    ops_left: u32,
    measured: bool,
    ack_started: bool,
    acked: bool,
    flush: Option<FlushJob>,
    /// Allocated (guards against releasing a slot twice).
    live: bool,
}

impl Task {
    fn empty() -> Self {
        Task {
            kind: TaskKind::Request,
            plan: Plan::new(),
            req: Request::read(0, 0),
            job: 0,
            arrival: 0,
            stage_start: 0,
            next_op: 0,
            stage_pending: 0,
            crit_left: 0,
            ops_left: 0,
            measured: false,
            ack_started: false,
            acked: false,
            flush: None,
            live: false,
        }
    }
}

/// State at the start of the measured window.
struct Window {
    at: Nanos,
    stats: CacheStats,
    devs: Vec<DeviceCounters>,
    host_busy: u128,
}

struct TimelineState {
    interval: Nanos,
    next_tick: Nanos,
    prev_stats: CacheStats,
    prev_devs: Vec<DeviceCounters>,
    done: u64,
    bytes: u64,
    latency_sum: u128,
    rows: Vec<TimelineRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Requests are being issued.
    Running,
    /// The measured window closed; background work drains.
    Draining,
}

struct Sim<'a> {
    cache: &'a mut dyn PolicyCore,
    source: &'a mut dyn RequestSource,
    cfg: &'a SimConfig,
    geo: LineGeometry,
    devs: Vec<DeviceModel>,
    /// Backend device index per volume (volumes past the end use device 1).
    vol_dev: Vec<u16>,
    host: Option<Host>,
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Event>,
    tasks: Vec<Task>,
    free: Vec<u32>,
    closed: bool,
    jobs_done: Vec<bool>,
    pending_arrivals: u64,
    arrived: u64,
    measured_arrived: u64,
    inflight_requests: u64,
    phase: Phase,
    window: Option<Window>,
    stop_at: Option<Nanos>,
    cleaning: bool,
    poll_at: Option<Nanos>,
    job_buf: Vec<FlushJob>,
    cache_fg_inflight: u32,
    cache_last_fg: Nanos,
    backend_inflight: u32,
    lat_all: LatencyRecorder,
    lat_read: LatencyRecorder,
    lat_write: LatencyRecorder,
    measured_done: u64,
    measured_reads: u64,
    measured_writes: u64,
    measured_bytes: u64,
    last_ack: Nanos,
    dirty_max: u64,
    timeline: Option<TimelineState>,
    error: Option<SimError>,
    observer: Option<&'a mut dyn SimObserver>,
    window_end: Option<Nanos>,
    end_stats: Option<(CacheStats, Vec<DeviceCounters>)>,
    dirty_end: u64,
    resident_end: u64,
    host_busy_end: u128,
}

/// Runs `cache` on the devices of `cfg` with requests from `source` until the source ends or a
/// limit of `cfg.run` is reached, then (optionally) flushes every dirty line.
///
/// Closed-loop sources have `jobs × iodepth` requests in flight; a slot issues its next request
/// when the previous one is acknowledged, but not before the request's `time_ns`. Open-loop
/// requests arrive at their `time_ns`. Metrics cover requests arriving after the warm-up; the
/// window ends when the last of them is acknowledged. Background work (promotion writes, flush
/// jobs) still running then completes before the optional final flush; the cleaner is not polled
/// any more. An endless source needs `run.requests` or `run.duration_ns`.
pub fn simulate(
    cache: &mut dyn PolicyCore,
    source: &mut dyn RequestSource,
    cfg: &SimConfig,
) -> Result<SimOutput, SimError> {
    simulate_inner(cache, source, cfg, None)
}

/// Hooks into a running simulation.
pub trait SimObserver {
    /// Called at the end of every timeline interval (so only with `run.timeline_interval_ns`),
    /// after its row is recorded and before later events run. It may act on the cache — e.g. a
    /// load balancer (SPEC §4.8) switching write policies with
    /// [`PolicyCore::set_write_policy`] when the row shows the cache device is the bottleneck.
    fn on_interval(&mut self, row: &TimelineRow, cache: &mut dyn PolicyCore);
}

/// As [`simulate`], calling `observer` at every timeline interval.
pub fn simulate_with(
    cache: &mut dyn PolicyCore,
    source: &mut dyn RequestSource,
    cfg: &SimConfig,
    observer: &mut dyn SimObserver,
) -> Result<SimOutput, SimError> {
    simulate_inner(cache, source, cfg, Some(observer))
}

fn simulate_inner<'a>(
    cache: &'a mut dyn PolicyCore,
    source: &'a mut dyn RequestSource,
    cfg: &'a SimConfig,
    observer: Option<&'a mut dyn SimObserver>,
) -> Result<SimOutput, SimError> {
    cfg.validate()?;
    let mut devs = vec![
        DeviceModel::new("cache", &cfg.cache_device)?,
        DeviceModel::new("backend", &cfg.backend)?,
    ];
    let mut vol_dev = Vec::new();
    for vb in &cfg.volume_backends {
        devs.push(DeviceModel::new(
            &format!("backend-vol{}", vb.volume),
            &vb.device,
        )?);
        let v = vb.volume as usize;
        if vol_dev.len() <= v {
            vol_dev.resize(v + 1, 1u16);
        }
        vol_dev[v] = (devs.len() - 1) as u16;
    }
    let host = match &cfg.host {
        Some(h) => Some(Host::new(h)?),
        None => None,
    };
    let timeline = cfg.run.timeline_interval_ns.map(|interval| TimelineState {
        interval,
        next_tick: interval,
        prev_stats: cache.stats_snapshot(),
        prev_devs: devs.iter().map(|d| d.counters(0)).collect(),
        done: 0,
        bytes: 0,
        latency_sum: 0,
        rows: Vec::new(),
    });
    let geo = cache.geometry();
    let sim = Sim {
        cache,
        source,
        cfg,
        geo,
        devs,
        vol_dev,
        host,
        now: 0,
        seq: 0,
        heap: BinaryHeap::with_capacity(1024),
        tasks: Vec::new(),
        free: Vec::new(),
        closed: false,
        jobs_done: Vec::new(),
        pending_arrivals: 0,
        arrived: 0,
        measured_arrived: 0,
        inflight_requests: 0,
        phase: Phase::Running,
        window: None,
        stop_at: None,
        cleaning: true,
        poll_at: None,
        job_buf: Vec::new(),
        cache_fg_inflight: 0,
        cache_last_fg: 0,
        backend_inflight: 0,
        lat_all: LatencyRecorder::new(),
        lat_read: LatencyRecorder::new(),
        lat_write: LatencyRecorder::new(),
        measured_done: 0,
        measured_reads: 0,
        measured_writes: 0,
        measured_bytes: 0,
        last_ack: 0,
        dirty_max: 0,
        timeline,
        error: None,
        observer,
        window_end: None,
        end_stats: None,
        dirty_end: 0,
        resident_end: 0,
        host_busy_end: 0,
    };
    sim.run()
}

impl Sim<'_> {
    fn run(mut self) -> Result<SimOutput, SimError> {
        match self.source.arrival() {
            Arrival::Closed { jobs, iodepth } => {
                self.closed = true;
                self.jobs_done = vec![false; jobs as usize];
                for _ in 0..iodepth {
                    for job in 0..jobs {
                        self.fetch(job);
                    }
                }
            }
            Arrival::Open => {
                self.jobs_done = vec![false];
                self.fetch(0);
            }
        }
        self.poll_cleaner();
        self.poll_balancer();
        self.check_window_end();
        let mut metrics = None;
        let mut flush_start = None;
        loop {
            while let Some(ev) = self.heap.pop() {
                if self.timeline.is_some() && self.phase == Phase::Running {
                    self.ticks_until(ev.time);
                }
                debug_assert!(ev.time >= self.now);
                self.now = ev.time;
                self.handle(ev.what);
                if let Some(e) = self.error.take() {
                    return Err(e);
                }
                if self.phase == Phase::Running {
                    self.check_window_end();
                }
            }
            if metrics.is_none() {
                // The window closed and background work drained: final flush, if asked.
                metrics = Some(self.build_metrics());
                if self.cfg.run.final_flush {
                    flush_start = Some(self.now);
                    let mut jobs = Vec::new();
                    self.cache.flush_all(&mut jobs);
                    for job in jobs {
                        self.start_flush(job);
                    }
                    if !self.heap.is_empty() {
                        continue;
                    }
                }
            }
            break;
        }
        let mut metrics = metrics.expect("built above");
        if let Some(start) = flush_start {
            metrics.final_flush_ns = self.now - start;
        }
        let backend_written_back_bytes = self.devs[1..]
            .iter()
            .map(|d| {
                let c = d.counters(self.now);
                c.written_by_cause[crate::device::cause_index(OpCause::Clean)]
                    + c.written_by_cause[crate::device::cause_index(OpCause::EvictFlush)]
            })
            .sum();
        Ok(SimOutput {
            metrics,
            timeline: self.timeline.take().map(|t| t.rows).unwrap_or_default(),
            latency: std::mem::take(&mut self.lat_all),
            read_latency: std::mem::take(&mut self.lat_read),
            write_latency: std::mem::take(&mut self.lat_write),
            final_stats: self.cache.stats_snapshot(),
            backend_written_back_bytes,
            end_ns: self.now,
        })
    }

    #[inline]
    fn schedule(&mut self, time: Nanos, what: What) {
        self.seq += 1;
        self.heap.push(Event {
            time,
            seq: self.seq,
            what,
        });
    }

    fn alloc_task(&mut self) -> u32 {
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

    fn free_task(&mut self, idx: u32) {
        let t = &mut self.tasks[idx as usize];
        assert!(t.live, "task slot {idx} released twice");
        t.live = false;
        t.flush = None;
        self.free.push(idx);
    }

    /// Fetches the next request of `job` and schedules its arrival, unless limits forbid.
    fn fetch(&mut self, job: u32) {
        if self.jobs_done[job as usize] || self.phase != Phase::Running {
            return;
        }
        if let (Some(limit), Some(_)) = (self.cfg.run.requests, &self.window) {
            if self.measured_arrived + self.pending_arrivals >= limit {
                self.jobs_done[job as usize] = true;
                return;
            }
        }
        let Some(req) = self.source.next_request_at(job, self.now) else {
            self.jobs_done[job as usize] = true;
            return;
        };
        if self.stop_at.is_some_and(|s| req.time_ns > s) {
            self.jobs_done[job as usize] = true;
            return;
        }
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        t.req = req;
        t.job = job;
        self.pending_arrivals += 1;
        let at = req.time_ns.max(self.now);
        self.schedule(at, What::Arrive(idx));
    }

    fn handle(&mut self, what: What) {
        match what {
            What::Arrive(idx) => self.arrive(idx),
            What::Issue(idx) => self.issue_first(idx),
            What::Phase { task, op, phase } => self.phase_done(task, op, phase),
            What::Ack(idx) => {
                self.ack(idx);
                if self.tasks[idx as usize].ops_left == 0 {
                    self.free_task(idx);
                }
            }
            What::Poll => {
                if self.poll_at == Some(self.now) {
                    self.poll_at = None;
                    self.poll_cleaner();
                }
            }
            What::Balance => self.poll_balancer(),
        }
    }

    fn take_window_snapshot(&mut self) {
        let now = self.now;
        self.window = Some(Window {
            at: now,
            stats: self.cache.stats_snapshot(),
            devs: self.devs.iter().map(|d| d.counters(now)).collect(),
            host_busy: self.host.as_ref().map_or(0, |h| h.busy_ns()),
        });
        self.stop_at = self.cfg.run.duration_ns.map(|d| now.saturating_add(d));
    }

    fn arrive(&mut self, idx: u32) {
        self.pending_arrivals -= 1;
        let (req, job) = {
            let t = &self.tasks[idx as usize];
            (t.req, t.job)
        };
        let warm =
            self.arrived >= self.cfg.run.warmup_requests && self.now >= self.cfg.run.warmup_ns;
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
        if let Err(source) = self.cache.access(&req, Some(&mut t.plan)) {
            self.error = Some(SimError::Request {
                index,
                request: req,
                source,
            });
            return;
        }
        let mut crit = 0;
        let mut promos = 0;
        for o in &t.plan.ops {
            crit += o.critical as u32;
            promos += (o.cause == OpCause::Promotion) as u32;
        }
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
        self.dirty_max = self.dirty_max.max(self.cache.dirty_lines());
        match &mut self.host {
            Some(h) => {
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

    fn issue_first(&mut self, idx: u32) {
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

    #[inline]
    fn dev_of(&self, op: &DevOp) -> usize {
        match op.device {
            Device::Cache => 0,
            Device::Backend => self
                .vol_dev
                .get(op.volume.0 as usize)
                .map_or(1, |&d| d as usize),
        }
    }

    /// Issues every op of the next stage of a task.
    fn issue_stage(&mut self, idx: u32) {
        let now = self.now;
        let n = self.tasks[idx as usize].plan.ops.len();
        let first = self.tasks[idx as usize].next_op as usize;
        if first >= n {
            return;
        }
        let fg = self.tasks[idx as usize].kind == TaskKind::Request;
        let stage = self.tasks[idx as usize].plan.ops[first].stage;
        let mut j = first;
        while j < n {
            let op = self.tasks[idx as usize].plan.ops[j];
            if op.stage != stage {
                break;
            }
            let d = self.dev_of(&op);
            let dev = &mut self.devs[d];
            dev.op_started(now, op.cause);
            let phases = dev.phases(op.kind, op.offset, op.len);
            let done = if phases == 0 {
                now
            } else {
                dev.submit_phase(now, op.kind, op.offset, op.len, 0)
            };
            if d == 0 {
                self.cache_fg_inflight += fg as u32;
            } else {
                self.backend_inflight += 1;
            }
            self.schedule(
                done,
                What::Phase {
                    task: idx,
                    op: j as u32,
                    phase: 0,
                },
            );
            j += 1;
        }
        let t = &mut self.tasks[idx as usize];
        t.stage_start = now;
        t.stage_pending = (j - first) as u32;
        t.next_op = j as u32;
    }

    fn phase_done(&mut self, idx: u32, j: u32, phase: u8) {
        let now = self.now;
        let op = self.tasks[idx as usize].plan.ops[j as usize];
        let d = self.dev_of(&op);
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
        let t = &mut self.tasks[idx as usize];
        dev.op_finished(now, t.stage_start, op.kind, op.len, op.cause);
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
        t.crit_left -= op.critical as u32;
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

    fn start_ack(&mut self, idx: u32) {
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
    fn ack(&mut self, idx: u32) {
        let now = self.now;
        let t = &mut self.tasks[idx as usize];
        t.acked = true;
        let lat = now - t.arrival;
        let (req, job, measured) = (t.req, t.job, t.measured);
        let bytes = if matches!(req.op, Op::Read | Op::Write) {
            req.len
        } else {
            0
        };
        self.inflight_requests -= 1;
        if measured {
            self.lat_all.record(lat);
            match req.op {
                Op::Read => {
                    self.lat_read.record(lat);
                    self.measured_reads += 1;
                }
                Op::Write => {
                    self.lat_write.record(lat);
                    self.measured_writes += 1;
                }
                _ => {}
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

    fn exec_state(&self) -> ExecutorState {
        let load = |d: &DeviceModel| DeviceLoad {
            queued: d.inflight(),
            by_origin: d.inflight_by_origin(),
            service_ns: d.service_ns(),
        };
        let mut backend = DeviceLoad::default();
        let mut weighted = 0u128;
        for d in &self.devs[1..] {
            let l = load(d);
            backend.queued += l.queued;
            for (a, b) in backend.by_origin.iter_mut().zip(l.by_origin) {
                *a += b;
            }
            weighted += u128::from(l.service_ns) * u128::from(l.queued.max(1));
        }
        // Several backend devices (one per volume): their service times weighted by what is
        // queued on each, so the drain-time estimate is the sum of theirs.
        let weights: u128 = self.devs[1..]
            .iter()
            .map(|d| u128::from(d.inflight().max(1)))
            .sum();
        backend.service_ns = (weighted / weights.max(1)) as u64;
        debug_assert_eq!(self.backend_inflight, backend.queued);
        ExecutorState {
            now: self.now,
            cache_idle_ns: if self.cache_fg_inflight > 0 {
                0
            } else {
                self.now - self.cache_last_fg
            },
            cache: load(&self.devs[0]),
            backend,
        }
    }

    fn poll_cleaner(&mut self) {
        if !self.cleaning {
            return;
        }
        let st = self.exec_state();
        let mut jobs = std::mem::take(&mut self.job_buf);
        self.cache.clean(&st, &mut jobs);
        for job in jobs.drain(..) {
            self.start_flush(job);
        }
        self.job_buf = jobs;
        let st = self.exec_state();
        if let Some(t) = self.cache.next_clean_poll(&st) {
            // A poll time in the past means "as soon as possible": the next nanosecond.
            let t = t.max(self.now + 1);
            if self.poll_at.is_none_or(|p| t < p) {
                self.poll_at = Some(t);
                self.schedule(t, What::Poll);
            }
        }
    }

    /// Polls the load balancer at the end of each of its intervals while requests run (as
    /// the engine's flusher thread does in real time).
    fn poll_balancer(&mut self) {
        if self.phase != Phase::Running {
            return;
        }
        let st = self.exec_state();
        if let Some(t) = self.cache.balance(&st) {
            self.schedule(t.max(self.now + 1), What::Balance);
        }
    }

    fn start_flush(&mut self, mut job: FlushJob) {
        let idx = self.alloc_task();
        let t = &mut self.tasks[idx as usize];
        std::mem::swap(&mut t.plan, &mut job.plan);
        t.kind = TaskKind::Flush;
        t.next_op = 0;
        t.stage_pending = 0;
        t.ops_left = t.plan.ops.len() as u32;
        t.crit_left = t.plan.ops.iter().filter(|o| o.critical).count() as u32;
        t.measured = false;
        t.flush = Some(job);
        if t.ops_left == 0 {
            self.finish_flush(idx);
        } else {
            self.issue_stage(idx);
        }
    }

    fn finish_flush(&mut self, idx: u32) {
        let t = &mut self.tasks[idx as usize];
        let mut job = t.flush.take().expect("flush task holds its job");
        // Give the job its plan back and keep the spare buffer in the slot.
        std::mem::swap(&mut t.plan, &mut job.plan);
        self.free_task(idx);
        self.cache.flush_done(job);
        self.poll_cleaner();
    }

    /// Closes the measured window once no request can arrive any more and none is in flight.
    fn check_window_end(&mut self) {
        if self.inflight_requests == 0 && self.pending_arrivals == 0 {
            if let Some(tl) = &self.timeline {
                // Emit the partial last interval.
                if self.now > tl.next_tick - tl.interval {
                    let end = self.now;
                    self.emit_row(end);
                }
            }
            self.phase = Phase::Draining;
            self.cleaning = false;
            if self.window.is_none() {
                self.take_window_snapshot();
            }
            self.window_end = Some(self.now.max(self.last_ack));
            self.end_stats = Some((
                self.cache.stats_snapshot(),
                self.devs.iter().map(|d| d.counters(self.now)).collect(),
            ));
            self.dirty_max = self.dirty_max.max(self.cache.dirty_lines());
            self.dirty_end = self.cache.dirty_lines();
            self.resident_end = self.cache.resident_lines();
            self.host_busy_end = self.host.as_ref().map_or(0, |h| h.busy_ns());
        }
    }

    /// Emits the rows of the intervals that end at or before `time`, the time of the next
    /// event. The first holds what happened since the last row; no event happened in the ones
    /// after it (events are handled in time order, and this runs before the one at `time`), so
    /// they become one row spanning them all: rows grow with the activity, not with the clock
    /// (a trace idle for a year at a 1 ms interval makes one row, not 3e10).
    fn ticks_until(&mut self, time: Nanos) {
        let mut idle = false;
        while let Some(tl) = &self.timeline {
            if tl.next_tick > time {
                break;
            }
            let end = if idle {
                tl.next_tick + (time - tl.next_tick) / tl.interval * tl.interval
            } else {
                tl.next_tick
            };
            self.emit_row(end);
            idle = true;
        }
    }

    /// Emits the row of the interval ending at `end` (normally the next tick).
    fn emit_row(&mut self, end: Nanos) {
        let stats = self.cache.stats_snapshot();
        let devs: Vec<DeviceCounters> = self.devs.iter().map(|d| d.counters(end)).collect();
        let dirty = self.cache.dirty_lines();
        let resident = self.cache.resident_lines();
        self.dirty_max = self.dirty_max.max(dirty);
        let warm_at = self.window.as_ref().map(|w| w.at);
        let Some(tl) = &mut self.timeline else { return };
        let start = tl.next_tick - tl.interval;
        let secs = (end - start) as f64 / 1e9;
        let d = stats_diff(&tl.prev_stats, &stats);
        let loads: Vec<_> = devs
            .iter()
            .zip(&tl.prev_devs)
            .map(|(a, b)| a.load_since(b))
            .collect();
        let backends = &loads[1..];
        // Drain-time estimate per device: ops in flight now × device time per op in the window.
        let qtime_us = |i: usize| {
            let (a, b) = (&tl.prev_devs[i], &devs[i]);
            let ops = b.ops - a.ops;
            let per_op_ps = if ops == 0 {
                0.0
            } else {
                (b.cost_ps - a.cost_ps.min(b.cost_ps)) as f64 / ops as f64
            };
            self.devs[i].inflight() as f64 * per_op_ps / 1e6
        };
        let cache_qtime_us = qtime_us(0);
        let backend_qtime_us: f64 = (1..devs.len()).map(qtime_us).sum();
        let by = |c: OpCause| {
            let i = crate::device::cause_index(c);
            devs[0].by_cause[i] - tl.prev_devs[0].by_cause[i]
        };
        let queued = self.devs[0].inflight_by_cause();
        let q = |c: OpCause| queued[crate::device::cause_index(c)] as u64;
        tl.rows.push(TimelineRow {
            start_ns: start,
            end_ns: end,
            warmup: warm_at.is_none_or(|w| w > start),
            requests: tl.done,
            iops: tl.done as f64 / secs,
            bandwidth_bytes_per_s: tl.bytes as f64 / secs,
            hit_ratio: tiercache_metrics::ratio(d.line_hits, d.line_accesses),
            read_hit_ratio: tiercache_metrics::ratio(d.read_line_hits, d.read_line_accesses),
            mean_latency_us: if tl.done == 0 {
                0.0
            } else {
                tl.latency_sum as f64 / tl.done as f64 / 1e3
            },
            dirty_lines: dirty,
            resident_lines: resident,
            cache_queue_depth: loads[0].mean_queue_depth,
            backend_queue_depth: backends.iter().map(|l| l.mean_queue_depth).sum(),
            cache_utilisation: loads[0].utilisation,
            backend_utilisation: backends.iter().map(|l| l.utilisation).sum::<f64>()
                / backends.len() as f64,
            promotions: d.promotions,
            evictions: d.evictions,
            flushes: d.cleaned_lines,
            bypasses: d.total_bypasses(),
            cache_qtime_us,
            backend_qtime_us,
            cache_bottleneck: cache_qtime_us > backend_qtime_us,
            cache_ops_r: by(OpCause::ReadHit),
            cache_ops_w: by(OpCause::Write) + by(OpCause::Fill),
            cache_ops_p: by(OpCause::Promotion),
            cache_ops_e: by(OpCause::Clean) + by(OpCause::EvictFlush),
            cache_queued_r: q(OpCause::ReadHit),
            cache_queued_w: q(OpCause::Write) + q(OpCause::Fill),
            cache_queued_p: q(OpCause::Promotion),
            cache_queued_e: q(OpCause::Clean) + q(OpCause::EvictFlush),
        });

        tl.prev_stats = stats;
        tl.prev_devs = devs;
        tl.done = 0;
        tl.bytes = 0;
        tl.latency_sum = 0;
        tl.next_tick = end + tl.interval;
        let row = *tl.rows.last().expect("just pushed");
        if let Some(obs) = self.observer.as_deref_mut() {
            obs.on_interval(&row, &mut *self.cache);
        }
    }

    fn build_metrics(&mut self) -> RunMetrics {
        let w = self
            .window
            .as_ref()
            .expect("window opened before it closed");
        let (end_stats, end_devs) = self.end_stats.take().expect("window closed");
        let end = self.window_end.expect("window closed");
        let duration = end - w.at;
        let secs = duration as f64 / 1e9;
        let mut m = RunMetrics {
            requests: self.measured_done,
            read_requests: self.measured_reads,
            write_requests: self.measured_writes,
            bytes: self.measured_bytes,
            duration_ns: duration,
            iops: if duration == 0 {
                0.0
            } else {
                self.measured_done as f64 / secs
            },
            bandwidth_bytes_per_s: if duration == 0 {
                0.0
            } else {
                self.measured_bytes as f64 / secs
            },
            latency_us: LatencyBreakdown {
                all: self.lat_all.summary(),
                read: self.lat_read.summary(),
                write: self.lat_write.summary(),
            },
            dirty_lines_end: self.dirty_end,
            dirty_lines_max: self.dirty_max,
            resident_lines_end: self.resident_end,
            metadata_bytes: self.cache.metadata_bytes() as u64,
            ..Default::default()
        };
        fill_policy_metrics(&mut m, &stats_diff(&w.stats, &end_stats));
        let mut devices = BTreeMap::new();
        for ((dev, a), b) in self.devs.iter().zip(&w.devs).zip(&end_devs) {
            let load = b.load_since(a);
            let ops = b.ops - a.ops;
            devices.insert(
                dev.name().to_string(),
                DeviceMetrics {
                    utilisation: load.utilisation,
                    mean_queue_depth: load.mean_queue_depth,
                    max_queue_depth: dev.max_inflight() as u64,
                    ops,
                    bytes_read: b.bytes_read - a.bytes_read,
                    bytes_written: b.bytes_written - a.bytes_written,
                    mean_op_latency_us: if ops == 0 {
                        0.0
                    } else {
                        (b.latency_ns - a.latency_ns) as f64 / ops as f64 / 1e3
                    },
                    ops_by_cause: CAUSE_NAMES
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| b.by_cause[*i] > a.by_cause[*i])
                        .map(|(i, n)| (n.to_string(), b.by_cause[i] - a.by_cause[i]))
                        .collect(),
                },
            );
        }
        if let Some(h) = &self.host {
            let busy = self.host_busy_end - w.host_busy;
            let util = if duration == 0 {
                0.0
            } else {
                busy as f64 / (duration as f64 * h.servers() as f64)
            };
            devices.insert(
                "host-cpu".to_string(),
                DeviceMetrics {
                    utilisation: util.clamp(0.0, 1.0),
                    ..Default::default()
                },
            );
        }
        m.devices = devices;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_by_time_then_scheduling_order() {
        let mut heap = BinaryHeap::new();
        let times = [50, 10, 50, 10, 0, 50];
        for (seq, &time) in times.iter().enumerate() {
            heap.push(Event {
                time,
                seq: seq as u64,
                what: What::Arrive(seq as u32),
            });
        }
        let order: Vec<(Nanos, u64)> = std::iter::from_fn(|| heap.pop())
            .map(|e| (e.time, e.seq))
            .collect();
        assert_eq!(
            order,
            vec![(0, 4), (10, 1), (10, 3), (50, 0), (50, 2), (50, 5)]
        );
    }
}
