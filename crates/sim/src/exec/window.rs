//! The measured window, the timeline rows and the final metrics.

use super::*;

/// State at the start of the measured window.
pub(super) struct Window {
    pub(super) at: Nanos,
    pub(super) stats: CacheStats,
    pub(super) devs: Vec<DeviceCounters>,
    pub(super) host_busy: u128,
    /// The level's link's busy time, ps.
    pub(super) link_busy: u128,
}

pub(super) struct TimelineState {
    pub(super) interval: Nanos,
    pub(super) next_tick: Nanos,
    pub(super) prev_stats: CacheStats,
    pub(super) prev_devs: Vec<DeviceCounters>,
    pub(super) done: u64,
    pub(super) bytes: u64,
    pub(super) latency_sum: u128,
    pub(super) rows: Vec<TimelineRow>,
}

impl<const MULTI: bool> Sim<'_, MULTI> {
    /// Opens the measured window: every level's state now.
    pub(super) fn take_window_snapshot(&mut self) {
        let now = self.now;
        self.window_at = Some(now);
        for lv in self.levels.iter_mut() {
            lv.m.window = Some(Window {
                at: now,
                stats: lv.cache.stats_snapshot(),
                devs: lv.devs.iter().map(|d| d.counters(now)).collect(),
                host_busy: lv.host.as_ref().map_or(0, |h| h.busy_ns()),
                link_busy: lv.link.as_ref().map_or(0, |k| k.counters(now).cost_ps),
            });
            lv.tenancy.window_start(&*lv.cache);
            // The hierarchy's counters cover the window.
            lv.c = LevelCounters::default();
        }
        for c in self.clients.iter_mut() {
            c.link_bytes = (0, 0);
            c.link_busy_at_window = c.link.as_ref().map_or(0, |k| k.counters(now).cost_ps);
        }
        self.stop_at = self.run_limits.duration_ns.map(|d| now.saturating_add(d));
        // The balancer's first interval starts with the measured window.
        for l in 0..self.levels.len() as u16 {
            self.poll_balancer(l);
        }
    }

    /// Closes the measured window, while it is open, once no request can arrive any more and
    /// none is in flight. Requests in flight are tested first: that test fails at nearly
    /// every event.
    #[inline(always)]
    pub(super) fn check_window_end(&mut self) {
        if self.inflight_requests == 0 && self.pending_arrivals == 0 && self.phase == Phase::Running
        {
            self.close_window();
        }
    }

    /// Closes the measured window: no request can arrive any more and none is in flight.
    #[cold]
    pub(super) fn close_window(&mut self) {
        for l in 0..self.levels.len() {
            if let Some(tl) = &self.levels[l].timeline {
                // Emit the partial last interval.
                if self.now > tl.next_tick - tl.interval {
                    let end = self.now;
                    self.emit_row(l, end);
                }
            }
        }
        self.phase = Phase::Draining;
        self.cleaning = false;
        if self.window_at.is_none() {
            self.take_window_snapshot();
        }
        self.window_end = Some(self.now.max(self.last_ack));
        let now = self.now;
        for lv in self.levels.iter_mut() {
            lv.m.end_stats = Some((
                lv.cache.stats_snapshot(),
                lv.devs.iter().map(|d| d.counters(now)).collect(),
            ));
            lv.m.dirty_max = lv.m.dirty_max.max(lv.cache.dirty_lines());
            lv.m.dirty_end = lv.cache.dirty_lines();
            lv.m.resident_end = lv.cache.resident_lines();
            lv.m.host_busy_end = lv.host.as_ref().map_or(0, |h| h.busy_ns());
            lv.m.link_busy_end = lv.link.as_ref().map_or(0, |k| k.counters(now).cost_ps);
            lv.tenancy.window_end(&*lv.cache);
        }
    }

    /// Emits the rows of the intervals that end at or before `time`, the time of the next
    /// event. The first holds what happened since the last row; no event happened in the ones
    /// after it (events are handled in time order, and this runs before the one at `time`), so
    /// they become one row spanning them all: rows grow with the activity, not with the clock
    /// (a trace idle for a year at a 1 ms interval makes one row, not 3e10).
    pub(super) fn ticks_until(&mut self, time: Nanos) {
        for l in 0..self.levels.len() {
            self.level_ticks_until(l, time);
        }
    }

    fn level_ticks_until(&mut self, l: usize, time: Nanos) {
        let mut idle = false;
        while let Some(tl) = &self.levels[l].timeline {
            if tl.next_tick > time {
                break;
            }
            let end = if idle {
                tl.next_tick + (time - tl.next_tick) / tl.interval * tl.interval
            } else {
                tl.next_tick
            };
            self.emit_row(l, end);
            idle = true;
        }
    }

    /// Emits the row of the interval ending at `end` (normally the next tick).
    pub(super) fn emit_row(&mut self, l: usize, end: Nanos) {
        // What the balancers see at this instant: the row's queue times and bottleneck flag
        // are theirs, so a row and a poll never disagree on the same state.
        let state = self.exec_state(l as u16);
        let lv = &mut self.levels[l];
        let stats = lv.cache.stats_snapshot();
        let devs: Vec<DeviceCounters> = lv.devs.iter().map(|d| d.counters(end)).collect();
        let dirty = lv.cache.dirty_lines();
        let resident = lv.cache.resident_lines();
        let warm_at = self.window_at;
        if warm_at.is_some() {
            lv.m.dirty_max = lv.m.dirty_max.max(dirty);
        }
        let report = lv.cache.balance_report();
        let policy_index = lv.cache.balanced_write_policy().map_or(0, |p| p as u8 + 1);
        let ldevs = &lv.devs;
        let Some(tl) = &mut lv.timeline else { return };
        let start = tl.next_tick - tl.interval;
        let secs = (end - start) as f64 / 1e9;
        let d = stats_diff(&tl.prev_stats, &stats);
        let loads: Vec<_> = devs
            .iter()
            .zip(&tl.prev_devs)
            .map(|(a, b)| a.load_since(b))
            .collect();
        let backends = &loads[1..];
        let cache_qtime_us = state.cache.queue_time_ns() as f64 / 1e3;
        let backend_qtime_us = state.backend.queue_time_ns() as f64 / 1e3;
        let by = |c: OpCause| {
            let i = crate::device::cause_index(c);
            devs[0].by_cause[i] - tl.prev_devs[0].by_cause[i]
        };
        let queued = ldevs[0].inflight_by_cause();
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
            mean_latency_us: tiercache_metrics::mean_us(tl.done, tl.latency_sum),
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
            cache_bottleneck: state.cache.queue_time_ns() > state.backend.wait_ns(),
            cache_ops_r: by(OpCause::ReadHit),
            cache_ops_w: by(OpCause::Write) + by(OpCause::Fill),
            cache_ops_p: by(OpCause::Promotion),
            cache_ops_e: by(OpCause::Clean) + by(OpCause::EvictFlush),
            cache_queued_r: q(OpCause::ReadHit),
            cache_queued_w: q(OpCause::Write) + q(OpCause::Fill),
            cache_queued_p: q(OpCause::Promotion),
            cache_queued_e: q(OpCause::Clean) + q(OpCause::EvictFlush) + q(OpCause::Demote),
            balancer_burst: report.is_some_and(|r| r.burst),
            balancer_group: report.map_or(0, |r| r.group),
            balancer_policy: policy_index,
            balancer_bypassed: d.balancer_bypassed,
        });

        tl.prev_stats = stats;
        tl.prev_devs = devs;
        tl.done = 0;
        tl.bytes = 0;
        tl.latency_sum = 0;
        tl.next_tick = end + tl.interval;
        let row = *tl.rows.last().expect("just pushed");
        if l == 0 {
            if let Some(obs) = self.observer.as_deref_mut() {
                obs.on_interval(&row, &mut *self.levels[0].cache);
            }
        }
    }

    /// Level `l`'s metrics of the measured window.
    pub(super) fn build_metrics(&mut self, l: usize) -> RunMetrics {
        let end = self.window_end.expect("window closed");
        let lv = &mut self.levels[l];
        let (end_stats, end_devs) = lv.m.end_stats.take().expect("window closed");
        let w =
            lv.m.window
                .as_ref()
                .expect("window opened before it closed");
        let m_ = &lv.m;
        let duration = end - w.at;
        let secs = duration as f64 / 1e9;
        let mut m = RunMetrics {
            requests: m_.measured_done,
            read_requests: m_.measured_reads,
            write_requests: m_.measured_writes,
            bytes: m_.measured_bytes,
            duration_ns: duration,
            iops: if duration == 0 {
                0.0
            } else {
                m_.measured_done as f64 / secs
            },
            bandwidth_bytes_per_s: if duration == 0 {
                0.0
            } else {
                m_.measured_bytes as f64 / secs
            },
            latency_us: LatencyBreakdown {
                all: m_.lat_all().summary(),
                read: m_.lat_read.to_recorder().summary(),
                write: m_.lat_write.to_recorder().summary(),
            },
            dirty_lines_end: m_.dirty_end,
            dirty_lines_max: m_.dirty_max,
            resident_lines_end: m_.resident_end,
            metadata_bytes: lv.cache.metadata_bytes() as u64,
            ..Default::default()
        };
        fill_policy_metrics(&mut m, &stats_diff(&w.stats, &end_stats));
        let mut devices = BTreeMap::new();
        for ((dev, a), b) in lv.devs.iter().zip(&w.devs).zip(&end_devs) {
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
                    mean_op_latency_us: tiercache_metrics::mean_us(
                        ops,
                        b.latency_ns - a.latency_ns,
                    ),
                    ops_by_cause: CAUSE_NAMES
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| b.by_cause[*i] > a.by_cause[*i])
                        .map(|(i, n)| (n.to_string(), b.by_cause[i] - a.by_cause[i]))
                        .collect(),
                },
            );
        }
        if let Some(h) = &lv.host {
            let busy = m_.host_busy_end - w.host_busy;
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
        lv.m.stats_end = Some(end_stats);
        // Validated when the run started.
        let cache_device = lv.cache_device.resolve("cache_device").ok();
        m.tenancy = lv.tenancy.metrics(
            &*lv.cache,
            &crate::tenancy::WindowFacts {
                start: w.at,
                end,
                timed: true,
                iops: m.iops,
                cache_bytes_written: m.cache_bytes_written,
                cache_device: cache_device.as_ref(),
            },
        );
        m
    }
}
