//! The executor's cache levels and clients: what each holds at run time, how they are built,
//! and what a run of several levels hands back.
//!
//! A single-level run (`simulate`) is one level, with the backend devices below it, and one
//! client. A hierarchy (docs/design.md §4.7) has several: a level with a level below sends its
//! backend ops there, across its link, as requests (`TaskKind::Sub`) or demotes
//! (`TaskKind::Demote`); only the lowest level has backend devices.

use super::*;

use crate::config::VolumeBackend;
use crate::device::DeviceConfig;

/// What a level is built from.
pub(crate) struct LevelSetup<'a> {
    /// Its policy core.
    pub cache: &'a mut dyn PolicyCore,
    /// Its cache device.
    pub cache_device: &'a DeviceConfig,
    /// The cache device's name in errors and in the metrics' `devices` (`cache` in a
    /// single-level run).
    pub cache_device_name: &'a str,
    /// The lowest level's backend devices: the shared one and the per-volume ones.
    pub backend: Option<(&'a DeviceConfig, &'a [VolumeBackend])>,
    /// Its host CPU model.
    pub host: Option<&'a crate::host::HostConfig>,
    /// Its link down (the level below's or the backend's side), as a device model.
    pub link: Option<DeviceModel>,
    /// The level below (None: the backend devices).
    pub below: Option<u16>,
    /// Order along a client's path down: where a request's data came from is the deepest
    /// level (highest depth) a critical op of it reached.
    pub depth: u32,
    /// Its demotes are on the requesting path (`hierarchy.demote_cost = "synchronous"`): a
    /// request that demotes a victim is acknowledged once the demote is done below.
    pub sync_demotes: bool,
}

/// What a client is built from.
pub(crate) struct ClientSetup<'a> {
    /// Its requests.
    pub source: &'a mut dyn RequestSource,
    /// The level its requests enter.
    pub top: u16,
    /// Added to every offset its source produces.
    pub offset: u64,
    /// The link its requests cross to reach `top` (a client without levels of its own).
    pub link: Option<DeviceModel>,
}

/// The hierarchy's counters of one level over the measured window (its policy's own are in
/// its `CacheStats`).
#[derive(Debug, Clone, Default)]
pub(crate) struct LevelCounters {
    /// Measured client requests whose data came from this level (the deepest level a
    /// critical op of theirs reached).
    pub served: u64,
    /// Requests that reached this level (from clients or the level above).
    pub requests_in: u64,
    /// Demotes this level sent down, and what became of them.
    pub demotes_sent: u64,
    pub demotes_accepted: u64,
    pub demotes_already_held: u64,
    pub demotes_rejected: u64,
    /// Bytes this level's link carried down (commands carry none; writes and demotes do) and
    /// up (read data).
    pub link_bytes_down: u64,
    pub link_bytes_up: u64,
    /// Demoted bytes sent over the link.
    pub demote_bytes: u64,
    /// The link's busy time over the measured window, ps.
    pub link_busy_ps: u128,
}

/// The measured window's figures of a level.
#[derive(Default)]
pub(super) struct LevelMetrics {
    /// State when the window opened.
    pub(super) window: Option<window::Window>,
    /// Latencies of measured requests that neither read nor write (trims, flushes). Tallies
    /// (the histogram's buckets in an array), made recorders when the metrics are built.
    pub(super) lat_other: LatencyTally,
    pub(super) lat_read: LatencyTally,
    pub(super) lat_write: LatencyTally,
    pub(super) measured_done: u64,
    pub(super) measured_reads: u64,
    pub(super) measured_writes: u64,
    pub(super) measured_bytes: u64,
    pub(super) dirty_max: u64,
    pub(super) end_stats: Option<(CacheStats, Vec<DeviceCounters>)>,
    /// The policy's counters when the window closed, once the metrics are built.
    pub(super) stats_end: Option<CacheStats>,
    pub(super) dirty_end: u64,
    pub(super) resident_end: u64,
    pub(super) host_busy_end: u128,
    pub(super) link_busy_end: u128,
}

impl LevelMetrics {
    /// Latencies of every measured request: reads, writes and the rest together.
    pub(super) fn lat_all(&self) -> LatencyRecorder {
        let mut all = self.lat_read.to_recorder();
        all.merge(&self.lat_write.to_recorder());
        all.merge(&self.lat_other.to_recorder());
        all
    }
}

/// One cache level at run time.
pub(super) struct Level<'a> {
    pub(super) cache: &'a mut dyn PolicyCore,
    pub(super) geo: LineGeometry,
    /// The cache device first, then (lowest level only) the backend devices.
    pub(super) devs: Vec<DeviceModel>,
    /// Backend device index per volume (volumes past the end use device 1).
    pub(super) vol_dev: Vec<u16>,
    pub(super) cache_device: DeviceConfig,
    pub(super) host: Option<Host>,
    pub(super) link: Option<DeviceModel>,
    pub(super) below: Option<u16>,
    pub(super) depth: u32,
    /// Demotes are critical ops of the request that makes them (see [`LevelSetup`]).
    pub(super) sync_demotes: bool,
    pub(super) poll_at: Option<Nanos>,
    pub(super) job_buf: Vec<FlushJob>,
    pub(super) cache_fg_inflight: u32,
    pub(super) cache_last_fg: Nanos,
    /// Ops in flight on the backend devices, or at the level below.
    pub(super) backend_inflight: u32,
    pub(super) m: LevelMetrics,
    pub(super) timeline: Option<TimelineState>,
    pub(super) tenancy: crate::tenancy::TenancyRecorder,
    pub(super) c: LevelCounters,
}

/// One request source at run time.
pub(super) struct Client<'a> {
    pub(super) source: &'a mut dyn RequestSource,
    /// Closed-loop requests drawn ahead, when the source allows it.
    pub(super) lookahead: Option<Lookahead>,
    pub(super) closed: bool,
    pub(super) jobs_done: Vec<bool>,
    pub(super) top: u16,
    pub(super) offset: u64,
    pub(super) link: Option<DeviceModel>,
    /// Hierarchy figures over the measured window.
    pub(super) latency: LatencyRecorder,
    pub(super) requests: u64,
    pub(super) served: Vec<u64>,
    pub(super) served_backend: u64,
    pub(super) link_bytes: (u64, u64),
    pub(super) link_busy_at_window: u128,
}

/// What a run of several levels hands back, per level and per client.
pub(crate) struct LevelsOutput {
    /// Per level, in the order given.
    pub levels: Vec<LevelOutput>,
    /// Per client, in the order given.
    pub clients: Vec<ClientOutput>,
    /// Measured client requests the backend served.
    pub backend_served: u64,
    /// The measured window, ns.
    pub window: (Nanos, Nanos),
}

/// One level's results.
pub(crate) struct LevelOutput {
    /// Its measured window's metrics, as a single-level run reports them: the requests that
    /// reached it, their latency there, its policy's counters and its devices.
    pub metrics: RunMetrics,
    /// The hierarchy's counters.
    pub counters: LevelCounters,
    /// Its policy's counters at the start and end of the measured window.
    pub stats: (CacheStats, CacheStats),
    /// One row per timeline interval (empty without `timeline_interval_ns`).
    pub timeline: Vec<TimelineRow>,
}

/// One client's results over the measured window.
pub(crate) struct ClientOutput {
    pub requests: u64,
    pub latency: LatencyRecorder,
    /// Per level, requests whose data came from it.
    pub served: Vec<u64>,
    pub served_backend: u64,
    /// Its link's bytes down and up and busy time (ps), when it has one.
    pub link: Option<(u64, u64, u128)>,
}

impl<'a, const MULTI: bool> Sim<'a, MULTI> {
    pub(super) fn new(
        levels: Vec<LevelSetup<'a>>,
        clients: Vec<ClientSetup<'a>>,
        run_limits: &'a RunLimits,
        observer: Option<&'a mut dyn SimObserver>,
    ) -> Result<Self, SimError> {
        let n = levels.len();
        let mut built = Vec::with_capacity(n);
        for s in levels {
            let mut devs = vec![DeviceModel::new(s.cache_device_name, s.cache_device)?];
            let mut vol_dev = Vec::new();
            if let Some((backend, volume_backends)) = s.backend {
                devs.push(DeviceModel::new("backend", backend)?);
                for vb in volume_backends {
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
            }
            let host = match s.host {
                Some(h) => Some(Host::new(h)?),
                None => None,
            };
            let timeline = run_limits
                .timeline_interval_ns
                .map(|interval| TimelineState {
                    interval,
                    next_tick: interval,
                    prev_stats: s.cache.stats_snapshot(),
                    prev_devs: devs.iter().map(|d| d.counters(0)).collect(),
                    done: 0,
                    bytes: 0,
                    latency_sum: 0,
                    rows: Vec::new(),
                });
            let geo = s.cache.geometry();
            built.push(Level {
                cache: s.cache,
                geo,
                devs,
                vol_dev,
                cache_device: s.cache_device.clone(),
                host,
                link: s.link,
                below: s.below,
                depth: s.depth,
                sync_demotes: s.sync_demotes,
                poll_at: None,
                job_buf: Vec::new(),
                cache_fg_inflight: 0,
                cache_last_fg: 0,
                backend_inflight: 0,
                m: LevelMetrics::default(),
                timeline,
                tenancy: Default::default(),
                c: LevelCounters::default(),
            });
        }
        let clients = clients
            .into_iter()
            .map(|c| Client {
                source: c.source,
                lookahead: None,
                closed: false,
                jobs_done: Vec::new(),
                top: c.top,
                offset: c.offset,
                link: c.link,
                latency: LatencyRecorder::new(),
                requests: 0,
                served: vec![0; n],
                served_backend: 0,
                link_bytes: (0, 0),
                link_busy_at_window: 0,
            })
            .collect();
        Ok(Sim {
            levels: PerRun::new(built),
            clients: PerRun::new(clients),
            run_limits,
            now: 0,
            events: EventQueue::new(),
            arrival_next: None,
            tasks: Vec::new(),
            free: Vec::new(),
            pending_arrivals: 0,
            arrived: 0,
            measured_arrived: 0,
            warm: false,
            window_at: None,
            inflight_requests: 0,
            phase: Phase::Running,
            stop_at: None,
            cleaning: true,
            last_ack: 0,
            error: None,
            observer,
            window_end: None,
            backend_served: 0,
            timelines: run_limits.timeline_interval_ns.is_some(),
            device_done: Vec::new(),
            write_backs: Vec::new(),
            power_cut: None,
        })
    }

    /// The results of a run of several levels, once `run` returned `metrics`.
    pub(super) fn levels_output(&mut self, metrics: Vec<RunMetrics>) -> LevelsOutput {
        let start = self.window_at.unwrap_or(0);
        let end = self.window_end.unwrap_or(start).max(start);
        let levels = self
            .levels
            .iter_mut()
            .zip(metrics)
            .map(|(lv, metrics)| {
                let w = lv.m.window.as_ref().expect("window opened");
                let end_stats = lv.m.stats_end.clone().expect("metrics built");
                let mut counters = lv.c.clone();
                counters.link_busy_ps = lv.m.link_busy_end - w.link_busy.min(lv.m.link_busy_end);
                LevelOutput {
                    metrics,
                    counters,
                    stats: (w.stats.clone(), end_stats),
                    timeline: lv.timeline.take().map(|t| t.rows).unwrap_or_default(),
                }
            })
            .collect();
        let clients = self
            .clients
            .iter()
            .map(|c| ClientOutput {
                requests: c.requests,
                latency: c.latency.clone(),
                served: c.served.clone(),
                served_backend: c.served_backend,
                link: c.link.as_ref().map(|l| {
                    let busy = l.counters(end).cost_ps;
                    (
                        c.link_bytes.0,
                        c.link_bytes.1,
                        busy - c.link_busy_at_window.min(busy),
                    )
                }),
            })
            .collect();
        LevelsOutput {
            levels,
            clients,
            backend_served: self.backend_served,
            window: (start, end),
        }
    }
}

impl Level<'_> {
    /// Books `bytes` on this level's link from `now` (no link: no cost): when they are across.
    /// Its bytes are counted when `counting`.
    pub(super) fn cross(&mut self, now: Nanos, bytes: u64, down: bool, counting: bool) -> Nanos {
        let Some(link) = self.link.as_mut() else {
            return now;
        };
        if counting {
            if down {
                self.c.link_bytes_down += bytes;
            } else {
                self.c.link_bytes_up += bytes;
            }
        }
        link.run_op(now, tiercache_core::IoKind::Write, 0, bytes)
    }
}

/// The model index of the device `op` addresses (volumes past `vol_dev`'s end use device 1).
#[inline]
pub(super) fn dev_index(vol_dev: &[u16], op: &DevOp) -> usize {
    match op.device {
        Device::Cache => 0,
        Device::Backend => vol_dev.get(op.volume.0 as usize).map_or(1, |&d| d as usize),
    }
}
