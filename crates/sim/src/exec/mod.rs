//! The discrete-event executor: requests and flush jobs run their plans on device models in
//! virtual time.
//!
//! Split by concern: this file holds the public entry points, the executor's state and its
//! event loop; `events` the event and task types; `requests` a request's life (fetch, arrival,
//! planning, stages, acknowledgement); `background` what runs beside the requests (the
//! executor state the policies see, cleaning, load balancing, flush jobs); `window` the
//! measured window, the timeline and the final metrics.

use std::collections::BTreeMap;

use tiercache_core::{
    Arrival, DevOp, Device, LineGeometry, Nanos, Op, OpCause, Plan, Request, RequestSource,
};
use tiercache_metrics::{
    DeviceMetrics, LatencyBreakdown, LatencyRecorder, LatencyTally, RunMetrics, TimelineRow,
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
    /// Each device's counters over the whole run (warm-up, the drain after the measured
    /// window and the final flush included), by device name: its bytes read and written are
    /// what the policy's `final_stats` planned, op for op. (The window's device figures can
    /// trail the policy's by the ops still in flight when the last measured request is
    /// acknowledged.)
    pub devices: BTreeMap<String, DeviceCounters>,
    /// Virtual time when everything (including background ops and the final flush) finished.
    pub end_ns: Nanos,
}

mod background;
mod events;
mod lookahead;
mod queue;
mod requests;
mod window;

use events::{Task, TaskKind, What};
use lookahead::Lookahead;
use queue::EventQueue;
use window::{TimelineState, Window};

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
    /// Closed-loop requests drawn ahead, when the source allows it.
    lookahead: Option<Lookahead>,
    cfg: &'a SimConfig,
    geo: LineGeometry,
    devs: Vec<DeviceModel>,
    /// Backend device index per volume (volumes past the end use device 1).
    vol_dev: Vec<u16>,
    host: Option<Host>,
    now: Nanos,
    events: EventQueue,
    /// A request arriving now whose arrival comes before every event queued: it is handled
    /// next without going through the queue (a closed-loop request arrives the instant its
    /// predecessor is acknowledged, once per request).
    arrival_next: Option<u32>,
    tasks: Vec<Task>,
    free: Vec<u32>,
    closed: bool,
    jobs_done: Vec<bool>,
    pending_arrivals: u64,
    arrived: u64,
    measured_arrived: u64,
    /// The warm-up is over (both its request count and its time passed at an arrival).
    warm: bool,
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
    /// Latencies of measured requests that neither read nor write (trims, flushes). Tallies
    /// (the histogram's buckets in an array), made recorders when the metrics are built.
    lat_other: LatencyTally,
    lat_read: LatencyTally,
    lat_write: LatencyTally,
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
    tenancy: crate::tenancy::TenancyRecorder,
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
    /// load balancer (docs/design.md §4.8) switching write policies with
    /// [`Background::set_write_policy`](tiercache_policy::Background::set_write_policy) when the row shows the cache device is the bottleneck.
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
        lookahead: None,
        cfg,
        geo,
        devs,
        vol_dev,
        host,
        now: 0,
        events: EventQueue::new(),
        arrival_next: None,
        tasks: Vec::new(),
        free: Vec::new(),
        closed: false,
        jobs_done: Vec::new(),
        pending_arrivals: 0,
        arrived: 0,
        measured_arrived: 0,
        warm: false,
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
        lat_other: LatencyTally::new(),
        lat_read: LatencyTally::new(),
        lat_write: LatencyTally::new(),
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
        tenancy: Default::default(),
    };
    sim.run()
}
impl Sim<'_> {
    #[inline(always)]
    fn run(mut self) -> Result<SimOutput, SimError> {
        match self.source.arrival() {
            Arrival::Closed { jobs, iodepth } => {
                self.closed = true;
                self.jobs_done = vec![false; jobs as usize];
                self.lookahead = Lookahead::new(&*self.source, jobs);
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
        self.poll_repartition();
        self.check_window_end();
        let mut metrics = None;
        let mut flush_start = None;
        loop {
            loop {
                let (time, what) = match self.arrival_next.take() {
                    // An arrival at this instant, before anything queued (see `fetch`).
                    Some(idx) => (self.now, What::Arrive(idx)),
                    None => match self.events.pop() {
                        Some(ev) => (ev.time, ev.what),
                        None => break,
                    },
                };
                if self.timeline.is_some() && self.phase == Phase::Running {
                    self.ticks_until(time);
                }
                debug_assert!(time >= self.now);
                self.now = time;
                self.handle(what);
                // Tested before taken: `take` would store at every event.
                if self.error.is_some() {
                    return Err(self.error.take().expect("checked"));
                }
                self.check_window_end();
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
                    if !self.events.is_empty() || self.arrival_next.is_some() {
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
        let counters: Vec<DeviceCounters> =
            self.devs.iter().map(|d| d.counters(self.now)).collect();
        let backend_written_back_bytes = counters[1..]
            .iter()
            .map(|c| {
                c.written_by_cause[crate::device::cause_index(OpCause::Clean)]
                    + c.written_by_cause[crate::device::cause_index(OpCause::EvictFlush)]
            })
            .sum();
        Ok(SimOutput {
            metrics,
            timeline: self.timeline.take().map(|t| t.rows).unwrap_or_default(),
            latency: self.lat_all(),
            read_latency: self.lat_read.to_recorder(),
            write_latency: self.lat_write.to_recorder(),
            final_stats: self.cache.stats_snapshot(),
            backend_written_back_bytes,
            devices: self
                .devs
                .iter()
                .map(|d| d.name().to_string())
                .zip(counters)
                .collect(),
            end_ns: self.now,
        })
    }

    #[inline]
    fn schedule(&mut self, time: Nanos, what: What) {
        if time == Nanos::MAX {
            // A timer that far off never fires. A request or an op cannot: device models and
            // sources saturate there rather than wrap.
            if !matches!(what, What::Poll | What::Balance | What::Repartition) {
                self.time_overflow();
            }
            return;
        }
        self.events.push(time, what);
    }

    /// An event would fall at or past 2^64 ns: the run ends with an error (it panicked, or
    /// wrapped to an earlier time).
    #[cold]
    fn time_overflow(&mut self) {
        if self.error.is_none() {
            self.error = Some(SimError::Config {
                field: "run".into(),
                reason: "simulated time reached 2^64 ns (585 years): a setting puts events \
                         that late (an IOPS or bandwidth ceiling near zero, a huge base \
                         latency, a near-zero workload.rate_iops or a huge burst off period)"
                    .into(),
            });
        }
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
            What::Repartition => self.poll_repartition(),
        }
    }
}
