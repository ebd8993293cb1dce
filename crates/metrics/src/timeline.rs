//! Per-interval timeline of a run, written as CSV.

use crate::MetricsError;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// One interval of a run. Rates and ratios cover the interval `[start_ns, end_ns)`; `dirty_lines`
/// is sampled at its end; queue depths and utilisations are time-averaged over it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimelineRow {
    /// Interval start, ns since the run started.
    pub start_ns: u64,
    /// Interval end, ns.
    pub end_ns: u64,
    /// Whether the interval lies (partly) in the warm-up.
    pub warmup: bool,
    /// Requests completed in the interval.
    pub requests: u64,
    /// Completed requests per second.
    pub iops: f64,
    /// Application bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// Line hit ratio of the accesses made in the interval.
    pub hit_ratio: f64,
    /// Read line hit ratio.
    pub read_hit_ratio: f64,
    /// Mean latency of the requests completed in the interval, µs.
    pub mean_latency_us: f64,
    /// Dirty lines at the end of the interval.
    pub dirty_lines: u64,
    /// Resident lines at the end of the interval.
    pub resident_lines: u64,
    /// Mean ops queued or in service at the cache device.
    pub cache_queue_depth: f64,
    /// Mean ops queued or in service at the backend (all backend devices).
    pub backend_queue_depth: f64,
    /// Cache device utilisation, 0..=1.
    pub cache_utilisation: f64,
    /// Backend utilisation (mean over backend devices), 0..=1.
    pub backend_utilisation: f64,
    /// Lines promoted in the interval.
    pub promotions: u64,
    /// Lines evicted.
    pub evictions: u64,
    /// Lines written back by the cleaner.
    pub flushes: u64,
    /// Line-level bypasses (all reasons).
    pub bypasses: u64,
    /// Estimated time to drain the cache device's queue at the interval's end, µs: ops in
    /// flight × the device's service time (device time per op), as the balancers estimate it
    /// (docs/design.md §4.8).
    pub cache_qtime_us: f64,
    /// The same for the backend (all backend devices).
    pub backend_qtime_us: f64,
    /// Whether the cache device was the bottleneck at the interval's end, by the balancers'
    /// test: its queue takes longer to drain than a request sent to the backend would wait
    /// (`backend_qtime_us` plus one backend op's latency).
    pub cache_bottleneck: bool,
    /// Cache-device ops completed in the interval by LBICA class: application read hits (R).
    pub cache_ops_r: u64,
    /// Application writes and fills (W).
    pub cache_ops_w: u64,
    /// Promotions: writes caused by read misses (P).
    pub cache_ops_p: u64,
    /// Write-back reads of dirty data, by the cleaner or evictions (E).
    pub cache_ops_e: u64,
    /// Cache-device ops queued or in service at the interval's end, class R.
    pub cache_queued_r: u64,
    /// Queued at the interval's end, class W.
    pub cache_queued_w: u64,
    /// Queued at the interval's end, class P.
    pub cache_queued_p: u64,
    /// Queued at the interval's end, class E.
    pub cache_queued_e: u64,
    /// The load balancer saw a burst at the end of this interval (its last poll in it).
    pub balancer_burst: bool,
    /// LBICA's group at that poll (1 to 4), 0 outside a burst or for other balancers.
    pub balancer_group: u8,
    /// Write policy in force at the end of the interval, as its short name index
    /// (0 the configured one, else 1 WB, 2 WT, 3 WA, 4 WO, 5 RO, 6 PT).
    pub balancer_policy: u8,
    /// Requests the balancer sent past the cache in the interval.
    pub balancer_bypassed: u64,
}

/// CSV header of [`write_timeline_csv`], in column order.
pub const TIMELINE_COLUMNS: [&str; 34] = [
    "start_ns",
    "end_ns",
    "warmup",
    "requests",
    "iops",
    "bandwidth_bytes_per_s",
    "hit_ratio",
    "read_hit_ratio",
    "mean_latency_us",
    "dirty_lines",
    "resident_lines",
    "cache_queue_depth",
    "backend_queue_depth",
    "cache_utilisation",
    "backend_utilisation",
    "promotions",
    "evictions",
    "flushes",
    "bypasses",
    "cache_qtime_us",
    "backend_qtime_us",
    "cache_bottleneck",
    "cache_ops_r",
    "cache_ops_w",
    "cache_ops_p",
    "cache_ops_e",
    "cache_queued_r",
    "cache_queued_w",
    "cache_queued_p",
    "cache_queued_e",
    "balancer_burst",
    "balancer_group",
    "balancer_policy",
    "balancer_bypassed",
];

/// Writes rows as CSV with a header line ([`TIMELINE_COLUMNS`]).
pub fn write_timeline_csv(rows: &[TimelineRow], out: &mut dyn Write) -> Result<(), MetricsError> {
    let io = |source| MetricsError::Io {
        what: "timeline CSV",
        source,
    };
    writeln!(out, "{}", TIMELINE_COLUMNS.join(",")).map_err(io)?;
    for r in rows {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.start_ns,
            r.end_ns,
            r.warmup as u8,
            r.requests,
            r.iops,
            r.bandwidth_bytes_per_s,
            r.hit_ratio,
            r.read_hit_ratio,
            r.mean_latency_us,
            r.dirty_lines,
            r.resident_lines,
            r.cache_queue_depth,
            r.backend_queue_depth,
            r.cache_utilisation,
            r.backend_utilisation,
            r.promotions,
            r.evictions,
            r.flushes,
            r.bypasses,
            r.cache_qtime_us,
            r.backend_qtime_us,
            r.cache_bottleneck as u8,
            r.cache_ops_r,
            r.cache_ops_w,
            r.cache_ops_p,
            r.cache_ops_e,
            r.cache_queued_r,
            r.cache_queued_w,
            r.cache_queued_p,
            r.cache_queued_e,
            r.balancer_burst as u8,
            r.balancer_group,
            r.balancer_policy,
            r.balancer_bypassed
        )
        .map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_field_per_column() {
        let rows = [
            TimelineRow {
                end_ns: 1000,
                requests: 3,
                iops: 3e6,
                ..Default::default()
            },
            TimelineRow {
                start_ns: 1000,
                end_ns: 2000,
                warmup: true,
                ..Default::default()
            },
        ];
        let mut buf = Vec::new();
        write_timeline_csv(&rows, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        for l in &lines {
            assert_eq!(l.split(',').count(), TIMELINE_COLUMNS.len(), "{l}");
        }
        assert!(lines[1].starts_with("0,1000,0,3,3000000,"));
        assert!(lines[2].starts_with("1000,2000,1,"));
    }
}
