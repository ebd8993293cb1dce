//! Multi-tenant results of a run (docs/design.md §4.10): the tenancy mode's decisions as they were
//! made, per-volume latencies, and from them the run's [`TenancyMetrics`] — per volume and
//! overall allocation, hit ratio, latency, cache writes, cost of the allocated cache, IOPS per
//! dollar and the cache device's projected lifetime.

use tiercache_core::{Nanos, VolumeId};
use tiercache_metrics::{
    time_weighted_mean, Settling, TenancyInterval, TenancyMetrics, VolumeMetrics,
};
use tiercache_policy::{PolicyCore, TenancyReport, VolumeStats, WritePolicy};

use crate::device::ResolvedDevice;

/// What a run records for its tenancy results.
#[derive(Debug, Default)]
pub(crate) struct TenancyRecorder {
    /// Every decision, in time order.
    reports: Vec<TenancyReport>,
    /// Measured requests per volume: count and latency sum, ns.
    latency: Vec<(u64, u128)>,
    /// The same since the last decision.
    interval_latency: Vec<(u64, u128)>,
    /// `interval_latency` as each decision in `reports` closed it (same index).
    report_latency: Vec<Vec<(u64, u128)>>,
    /// Per-volume counters at the start and the end of the measured window.
    start: Vec<VolumeStats>,
    end: Vec<VolumeStats>,
}

/// What the run's window was, for [`TenancyRecorder::metrics`].
pub(crate) struct WindowFacts<'a> {
    /// Start and end of the measured window, ns.
    pub(crate) start: Nanos,
    pub(crate) end: Nanos,
    /// Whether requests were timed (latencies and IOPS mean something).
    pub(crate) timed: bool,
    /// Requests per second of the whole run.
    pub(crate) iops: f64,
    /// Bytes written to the cache device in the window.
    pub(crate) cache_bytes_written: u64,
    /// The cache device, for its price and endurance.
    pub(crate) cache_device: Option<&'a ResolvedDevice>,
}

impl TenancyRecorder {
    /// Records the cache's latest decision if it made one since the last call.
    pub(crate) fn after_poll<C: PolicyCore + ?Sized>(&mut self, cache: &C) {
        if let Some(r) = cache.tenancy_report() {
            if self
                .reports
                .last()
                .is_none_or(|l| l.decisions < r.decisions)
            {
                self.reports.push(r);
                self.report_latency
                    .push(std::mem::take(&mut self.interval_latency));
            }
        }
    }

    /// Whether the tenancy mode made any decision.
    pub(crate) fn has_decisions(&self) -> bool {
        !self.reports.is_empty()
    }

    /// A measured request of `volume` took `latency_ns`.
    #[inline(always)]
    pub(crate) fn record_latency(&mut self, volume: VolumeId, latency_ns: Nanos) {
        let v = volume.0 as usize;
        if v >= self.latency.len() || v >= self.interval_latency.len() {
            self.grow_to(v);
        }
        let (n, sum) = &mut self.latency[v];
        *n += 1;
        *sum += u128::from(latency_ns);
        let (n, sum) = &mut self.interval_latency[v];
        *n += 1;
        *sum += u128::from(latency_ns);
    }

    /// Makes room for volume `v` in both latency tallies (once per volume and interval: out
    /// of the per-request path).
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, v: usize) {
        for tally in [&mut self.latency, &mut self.interval_latency] {
            if tally.len() <= v {
                tally.resize(v + 1, (0, 0));
            }
        }
    }

    /// The measured window opens.
    pub(crate) fn window_start<C: PolicyCore + ?Sized>(&mut self, cache: &C) {
        self.start = cache.volume_stats();
    }

    /// The measured window closes.
    pub(crate) fn window_end<C: PolicyCore + ?Sized>(&mut self, cache: &C) {
        self.end = cache.volume_stats();
    }

    /// The run's tenancy results; `None` for a run of one volume with no tenancy mode.
    pub(crate) fn metrics<C: PolicyCore + ?Sized>(
        &self,
        cache: &C,
        w: &WindowFacts,
    ) -> Option<TenancyMetrics> {
        let seen = self.end.iter().filter(|s| s.line_accesses() > 0).count();
        if self.reports.is_empty() && seen < 2 {
            return None;
        }
        let line = cache.geometry().line_size();
        let capacity_bytes = cache.capacity_lines() * line;
        let price_per_byte = w.cache_device.map_or(0.0, |d| d.price_per_tb()) / 1e12;
        let secs = (w.end - w.start) as f64 / 1e9;
        let in_window = |r: &&TenancyReport| r.at_ns <= w.end;
        let reports: Vec<&TenancyReport> = self.reports.iter().filter(in_window).collect();
        let allocated: Vec<(u64, f64)> = reports
            .iter()
            .map(|r| (r.at_ns, (r.allocated_lines * line) as f64))
            .collect();
        // Before the first decision every volume shares the whole cache.
        let allocated_bytes_mean =
            time_weighted_mean(capacity_bytes as f64, &allocated, w.start, w.end);
        let cost_usd = allocated_bytes_mean * price_per_byte;
        let per_day = if secs > 0.0 {
            w.cache_bytes_written as f64 / secs * 86_400.0
        } else {
            0.0
        };
        let mut volumes = std::collections::BTreeMap::new();
        for (v, end) in self.end.iter().enumerate() {
            let d = end.since(self.start.get(v));
            if d.line_accesses() == 0 {
                continue;
            }
            let step = |f: &dyn Fn(&tiercache_policy::VolumeTenancy) -> f64| -> Vec<(u64, f64)> {
                reports
                    .iter()
                    .map(|r| {
                        let x = r.volumes.iter().find(|x| x.volume == v as u32);
                        (r.at_ns, x.map_or(0.0, f))
                    })
                    .collect()
            };
            let alloc = time_weighted_mean(
                0.0,
                &step(&|x| (x.allocation_lines * line) as f64),
                w.start,
                w.end,
            );
            let read_only = time_weighted_mean(
                0.0,
                &step(&|x| f64::from(u8::from(x.write_policy == WritePolicy::ReadOnly))),
                w.start,
                w.end,
            );
            let (n, lat) = self.latency.get(v).copied().unwrap_or((0, 0));
            let requests = if w.timed {
                n
            } else {
                d.read_requests + d.write_requests
            };
            let iops = if w.timed && secs > 0.0 {
                n as f64 / secs
            } else {
                0.0
            };
            let cost = alloc * price_per_byte;
            // Over every decision of the run, warm-up included: settling counts from the start.
            let allocations: Vec<(u64, u64)> = self
                .reports
                .iter()
                .filter_map(|r| {
                    let x = r.volumes.iter().find(|x| x.volume == v as u32)?;
                    Some((r.at_ns, x.allocation_lines))
                })
                .collect();
            volumes.insert(
                v.to_string(),
                VolumeMetrics {
                    requests,
                    read_requests: d.read_requests,
                    write_requests: d.write_requests,
                    hit_ratio: d.hit_ratio(),
                    mean_latency_us: tiercache_metrics::mean_us(n, lat),
                    iops,
                    cache_bytes_written: d.cache_bytes_written,
                    allocated_bytes_mean: alloc,
                    cost_usd: cost,
                    iops_per_dollar: if cost > 0.0 { iops / cost } else { 0.0 },
                    read_only_share: read_only,
                    settling: Settling::of(&allocations, cache.capacity_lines()),
                },
            );
        }
        let intervals = self
            .reports
            .iter()
            .zip(&self.report_latency)
            .flat_map(|(r, lat)| {
                r.volumes.iter().map(|x| {
                    let (n, sum) = lat.get(x.volume as usize).copied().unwrap_or((0, 0));
                    TenancyInterval {
                        at_ns: r.at_ns,
                        volume: x.volume,
                        demand_lines: x.demand_lines,
                        allocation_lines: x.allocation_lines,
                        used_lines: x.used_lines,
                        write_policy: policy_name(x.write_policy).to_string(),
                        hits: x.interval_hits,
                        misses: x.interval_misses,
                        cache_bytes_written: x.interval_cache_bytes_written,
                        requests: n,
                        mean_latency_us: tiercache_metrics::mean_us(n, sum),
                    }
                })
            })
            .collect();
        let settlings: Vec<&Settling> = volumes
            .values()
            .filter_map(|m: &VolumeMetrics| m.settling.as_ref())
            .collect();
        let intervals_to_settle = settlings.iter().map(|s| s.intervals_to_settle).max();
        let settled = (!settlings.is_empty()).then(|| settlings.iter().all(|s| s.settled));
        Some(TenancyMetrics {
            mode: self.reports.last().map_or("shared", |r| r.mode).to_string(),
            decisions: reports.iter().filter(|r| r.at_ns >= w.start).count() as u64,
            capacity_bytes,
            capacity_lines: cache.capacity_lines(),
            allocated_bytes_mean,
            cost_usd,
            iops_per_dollar: if cost_usd > 0.0 && w.timed {
                w.iops / cost_usd
            } else {
                0.0
            },
            cache_bytes_written: w.cache_bytes_written,
            projected_lifetime_days: w
                .cache_device
                .and_then(|d| d.projected_lifetime_days(capacity_bytes, per_day)),
            volumes,
            intervals,
            intervals_to_settle,
            settled,
        })
    }
}

/// A write policy as written in configs.
pub(crate) fn policy_name(p: WritePolicy) -> &'static str {
    match p {
        WritePolicy::WriteBack => "write-back",
        WritePolicy::WriteThrough => "write-through",
        WritePolicy::WriteAround => "write-around",
        WritePolicy::WriteOnly => "write-only",
        WritePolicy::ReadOnly => "read-only",
        WritePolicy::PassThrough => "pass-through",
        WritePolicy::WriteBackAround => "write-back-around",
    }
}
