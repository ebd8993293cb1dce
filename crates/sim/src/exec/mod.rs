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

use crate::config::{RunLimits, SimConfig};
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
    /// What the power cut took (with `run.power_cut_ns`: then the run ended at the cut).
    pub power_cut: Option<PowerCutReport>,
}

mod background;
mod durability;
mod events;
mod levels;
mod lookahead;
mod queue;
mod requests;
mod window;

pub use durability::PowerCutReport;

use events::{Task, TaskKind, What, BACKEND, NOT_SERVED};
use levels::{Client, Level};
pub(crate) use levels::{ClientSetup, LevelCounters, LevelSetup, LevelsOutput};
use lookahead::Lookahead;
use queue::EventQueue;
use window::TimelineState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Requests are being issued.
    Running,
    /// The measured window closed; background work drains.
    Draining,
}

/// The executor: one or more cache levels (docs/design.md §4.7) fed by one or more clients,
/// one event loop. A single-level run is one level and one client; a hierarchy's level passes
/// its backend ops as requests to the level below (across its link), the lowest level to its
/// backend devices.
///
/// `MULTI` is a hierarchy run: per-client and per-level hierarchy figures are kept. A
/// single-level run (`MULTI` false) skips them and its level and client lookups are constants,
/// so its event loop compiles to what one level and one client need.
struct Sim<'a, const MULTI: bool> {
    /// The cache levels; a client's requests enter at its top level.
    levels: PerRun<Level<'a>, MULTI>,
    /// The request sources.
    clients: PerRun<Client<'a>, MULTI>,
    run_limits: &'a RunLimits,
    now: Nanos,
    events: EventQueue,
    /// A request arriving now whose arrival comes before every event queued: it is handled
    /// next without going through the queue (a closed-loop request arrives the instant its
    /// predecessor is acknowledged, once per request).
    arrival_next: Option<u32>,
    tasks: Vec<Task>,
    free: Vec<u32>,
    pending_arrivals: u64,
    arrived: u64,
    measured_arrived: u64,
    /// The warm-up is over (both its request count and its time passed at an arrival).
    warm: bool,
    /// When the measured window opened.
    window_at: Option<Nanos>,
    inflight_requests: u64,
    phase: Phase,
    stop_at: Option<Nanos>,
    cleaning: bool,
    last_ack: Nanos,
    error: Option<SimError>,
    observer: Option<&'a mut dyn SimObserver>,
    window_end: Option<Nanos>,
    /// Measured client requests served by the backend (hierarchy runs).
    backend_served: u64,
    /// The levels keep timelines (`run.timeline_interval_ns`).
    timelines: bool,
    /// Completions a queueing disk handed back, `(tag, time)` (scratch, reused).
    device_done: Vec<(u64, Nanos)>,
    /// The backend writes of finished flush jobs (kept with `run.power_cut_ns` only).
    write_backs: Vec<durability::WriteBack>,
    /// What the power cut took, once it happened.
    power_cut: Option<PowerCutReport>,
}

/// The levels or the clients of a run, indexed by number. In a single-level run (`MULTI`
/// false) there is exactly one (`PerRun::new` checks) and every index is 0: a constant the
/// event loop's lookups fold, rather than a number read from a task and checked against the
/// length at every event.
struct PerRun<T, const MULTI: bool>(Vec<T>);

impl<T, const MULTI: bool> PerRun<T, MULTI> {
    /// Panics when a single-level run is given other than one item: `index` relies on it.
    fn new(items: Vec<T>) -> Self {
        assert!(
            MULTI || items.len() == 1,
            "a single-level run has one level and one client"
        );
        PerRun(items)
    }

    /// The items, handed back once the run is over.
    fn into_vec(self) -> Vec<T> {
        self.0
    }
}

// Only slices are lent out, never the `Vec`: the number of items is fixed from `new` on.
impl<T, const MULTI: bool> std::ops::Deref for PerRun<T, MULTI> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const MULTI: bool> std::ops::DerefMut for PerRun<T, MULTI> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T, const MULTI: bool> std::ops::Index<usize> for PerRun<T, MULTI> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        if MULTI {
            &self.0[i]
        } else {
            // SAFETY: without MULTI, `new` checked there is exactly one item, and the `Vec`
            // is never lent out mutably (only its slice, whose length cannot change), so
            // index 0 is in bounds.
            unsafe { self.0.get_unchecked(0) }
        }
    }
}

impl<T, const MULTI: bool> std::ops::IndexMut<usize> for PerRun<T, MULTI> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        if MULTI {
            &mut self.0[i]
        } else {
            // SAFETY: as in `index`: exactly one item, a length that cannot change.
            unsafe { self.0.get_unchecked_mut(0) }
        }
    }
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
    let level = LevelSetup {
        cache,
        cache_device: &cfg.cache_device,
        cache_device_name: "cache",
        backend: Some((&cfg.backend, &cfg.volume_backends)),
        host: cfg.host.as_ref(),
        link: None,
        below: None,
        depth: 0,
        sync_demotes: false,
    };
    let client = ClientSetup {
        source,
        top: 0,
        offset: 0,
        link: None,
    };
    let mut sim = Sim::<false>::new(vec![level], vec![client], &cfg.run, observer)?;
    let mut metrics = sim.run()?;
    let mut metrics = metrics.swap_remove(0);
    metrics.power_cut = sim.power_cut.clone();
    let end = sim.now;
    let lv = sim.levels.into_vec().swap_remove(0);
    let counters: Vec<DeviceCounters> = lv.devs.iter().map(|d| d.counters(end)).collect();
    let backend_written_back_bytes = counters[1..]
        .iter()
        .map(|c| {
            c.written_by_cause[crate::device::cause_index(OpCause::Clean)]
                + c.written_by_cause[crate::device::cause_index(OpCause::EvictFlush)]
        })
        .sum();
    Ok(SimOutput {
        metrics,
        timeline: lv.timeline.map(|t| t.rows).unwrap_or_default(),
        latency: lv.m.lat_all(),
        read_latency: lv.m.lat_read.to_recorder(),
        write_latency: lv.m.lat_write.to_recorder(),
        final_stats: lv.cache.stats_snapshot(),
        backend_written_back_bytes,
        devices: lv
            .devs
            .iter()
            .map(|d| d.name().to_string())
            .zip(counters)
            .collect(),
        end_ns: end,
        power_cut: sim.power_cut,
    })
}

/// Runs the levels of a hierarchy (docs/design.md §4.7) fed by its clients in one event loop.
pub(crate) fn simulate_levels<'a>(
    levels: Vec<LevelSetup<'a>>,
    clients: Vec<ClientSetup<'a>>,
    run: &'a RunLimits,
) -> Result<LevelsOutput, SimError> {
    let mut sim = Sim::<true>::new(levels, clients, run, None)?;
    let metrics = sim.run()?;
    Ok(sim.levels_output(metrics))
}

impl<const MULTI: bool> Sim<'_, MULTI> {
    /// The event loop (one copy for single-level and hierarchy runs: `handle` and what it
    /// calls are inlined into it).
    #[inline(never)]
    fn run(&mut self) -> Result<Vec<RunMetrics>, SimError> {
        for c in 0..self.clients.len() {
            match self.clients[c].source.arrival() {
                Arrival::Closed { jobs, iodepth } => {
                    let cl = &mut self.clients[c];
                    cl.closed = true;
                    cl.jobs_done = vec![false; jobs as usize];
                    cl.lookahead = Lookahead::new(&*cl.source, jobs);
                    for _ in 0..iodepth {
                        for job in 0..jobs {
                            self.fetch(c as u16, job);
                        }
                    }
                }
                Arrival::Open => {
                    self.clients[c].jobs_done = vec![false];
                    self.fetch(c as u16, 0);
                }
            }
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for l in 0..self.levels.len() as u16 {
            self.poll_cleaner(l);
            self.poll_balancer(l);
            self.poll_repartition(l);
        }
        self.check_window_end();
        let mut metrics = None;
        let mut flush_start = None;
        // The final flush runs level by level, top to bottom: a level's write-backs are
        // writes at the level below, flushed in its turn.
        let mut flush_level = 0;
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
                if let Some(cut) = self.run_limits.power_cut_ns {
                    if time > cut {
                        // Nothing after the cut happens: its events are dropped.
                        self.power_off(cut);
                        break;
                    }
                }
                if self.timelines && self.phase == Phase::Running {
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
            if let (Some(cut), None) = (self.run_limits.power_cut_ns, &self.power_cut) {
                // Everything drained before the cut: it falls on an idle system.
                self.power_off(cut.max(self.now));
            }
            if self.power_cut.is_some() {
                // The run ended at the power cut: no drain, no final flush.
                metrics = Some(
                    (0..self.levels.len())
                        .map(|l| self.build_metrics(l))
                        .collect::<Vec<_>>(),
                );
                break;
            }
            if metrics.is_none() {
                // The window closed and background work drained: final flush, if asked.
                metrics = Some(
                    (0..self.levels.len())
                        .map(|l| self.build_metrics(l))
                        .collect::<Vec<_>>(),
                );
                if self.run_limits.final_flush {
                    flush_start = Some(self.now);
                } else {
                    break;
                }
            }
            if flush_level == self.levels.len() {
                break;
            }
            let l = flush_level;
            flush_level += 1;
            let mut jobs = Vec::new();
            self.levels[l].cache.flush_all(&mut jobs);
            for job in jobs {
                self.start_flush(l as u16, job);
            }
        }
        let mut metrics = metrics.expect("built above");
        if let Some(start) = flush_start {
            for m in &mut metrics {
                m.final_flush_ns = self.now - start;
            }
        }
        Ok(metrics)
    }

    /// The power cut at `cut`: the clock moves there, the measured window closes if open,
    /// and the disks lose what their caches held.
    #[cold]
    fn power_off(&mut self, cut: Nanos) {
        self.now = self.now.max(cut);
        if self.phase == Phase::Running {
            self.close_window();
        }
        self.cut_power(cut);
    }

    /// The hierarchy's counters count: the measured window is open.
    fn counting(&self) -> bool {
        self.window_at.is_some() && self.phase == Phase::Running
    }

    #[inline]
    fn schedule(&mut self, time: Nanos, what: What) {
        if time == Nanos::MAX {
            // A timer that far off never fires. A request or an op cannot: device models and
            // sources saturate there rather than wrap.
            if !matches!(
                what,
                What::Poll(_) | What::Balance(_) | What::Repartition(_)
            ) {
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

    #[inline(always)]
    fn handle(&mut self, what: What) {
        match what {
            What::Arrive(idx) => self.arrive(idx),
            What::Issue(idx) => self.issue_first(idx),
            What::Phase { task, op, phase } => self.phase_done(task, op, phase),
            What::Below { task, op, served } => self.below_done(task, op, served),
            What::Ack(idx) => {
                self.ack(idx);
                if self.tasks[idx as usize].ops_left == 0 {
                    self.free_task(idx);
                }
            }
            What::Poll(l) => {
                if self.levels[l as usize].poll_at == Some(self.now) {
                    self.levels[l as usize].poll_at = None;
                    self.poll_cleaner(l);
                }
            }
            What::Balance(l) => self.poll_balancer(l),
            What::Repartition(l) => self.poll_repartition(l),
            What::Wake { level, dev } => self.wake_device(level, dev),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PerRun;

    #[test]
    fn single_run_lookups_all_reach_its_one_item() {
        let mut one = PerRun::<u32, false>::new(vec![7]);
        // Every index is the one item (the unchecked lookup), read and written.
        assert_eq!(one[0], 7);
        assert_eq!(one[3], 7);
        one[5] += 1;
        assert_eq!(one[0], 8);
        assert_eq!(one.len(), 1);
        assert_eq!(one.into_vec(), vec![8]);
    }

    #[test]
    fn hierarchy_lookups_are_by_index() {
        let mut many = PerRun::<u32, true>::new(vec![1, 2, 3]);
        many[2] += 10;
        assert_eq!((many[0], many[1], many[2]), (1, 2, 13));
    }

    #[test]
    #[should_panic(expected = "one level and one client")]
    fn single_run_refuses_two_items() {
        let _ = PerRun::<u32, false>::new(vec![1, 2]);
    }

    #[test]
    #[should_panic(expected = "one level and one client")]
    fn single_run_refuses_none() {
        let _ = PerRun::<u32, false>::new(Vec::new());
    }
}
