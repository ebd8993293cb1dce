//! Multi-tenant results (docs/design.md §4.10): per volume and overall, what each got of the cache,
//! what it did with it, what it cost and how it wore the device; plus the per-interval decisions.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One volume over a run's measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VolumeMetrics {
    /// Read and write requests completed.
    pub requests: u64,
    /// Read requests among them.
    pub read_requests: u64,
    /// Write requests among them.
    pub write_requests: u64,
    /// Full line hits / line accesses.
    pub hit_ratio: f64,
    /// Mean request latency, µs (0 in hit-ratio-only runs).
    pub mean_latency_us: f64,
    /// Requests per second of the window (0 in hit-ratio-only runs).
    pub iops: f64,
    /// Bytes written to the cache device for it (its share of the wear).
    pub cache_bytes_written: u64,
    /// Cache bytes allocated to it, averaged over the window's time (its partition; under
    /// `shared`, 0: it has none of its own).
    pub allocated_bytes_mean: f64,
    /// What its allocation costs: mean allocated bytes × the cache device's price.
    pub cost_usd: f64,
    /// `iops / cost_usd` (0 without an allocation).
    pub iops_per_dollar: f64,
    /// Share of the window it ran read-only (cache writes off).
    pub read_only_share: f64,
}

/// The whole cache over a run's measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TenancyMetrics {
    /// Tenancy mode (`shared`, `static`, `eci`, `trd`).
    pub mode: String,
    /// Decisions made in the window.
    pub decisions: u64,
    /// Bytes of the cache device.
    pub capacity_bytes: u64,
    /// Lines of the cache.
    pub capacity_lines: u64,
    /// Bytes allocated to volumes, averaged over the window's time (`shared`: the capacity).
    pub allocated_bytes_mean: f64,
    /// Mean allocated bytes × the cache device's price per byte.
    pub cost_usd: f64,
    /// Run IOPS per dollar of allocated cache (0 without a cost).
    pub iops_per_dollar: f64,
    /// Bytes written to the cache device in the window.
    pub cache_bytes_written: u64,
    /// Projected days until the cache device wears out at the window's write rate (`None`:
    /// no endurance rating, or no writes).
    pub projected_lifetime_days: Option<f64>,
    /// Per volume, by volume id.
    pub volumes: BTreeMap<String, VolumeMetrics>,
    /// Per decision and volume, in time order.
    pub intervals: Vec<TenancyInterval>,
}

/// One volume at one decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TenancyInterval {
    /// Time of the decision, ns.
    pub at_ns: u64,
    /// Volume id.
    pub volume: u32,
    /// Lines the volume's sizing asked for (from the interval that ended).
    pub demand_lines: u64,
    /// Lines of its partition from then on.
    pub allocation_lines: u64,
    /// Lines it held then.
    pub used_lines: u64,
    /// Write policy from then on.
    pub write_policy: String,
    /// Line hits in the interval that ended.
    pub hits: u64,
    /// Line misses in the interval that ended.
    pub misses: u64,
    /// Bytes written to the cache for it in the interval that ended.
    pub cache_bytes_written: u64,
    /// Its measured requests that completed in the interval that ended (timed runs; warm-up
    /// requests are not measured).
    pub requests: u64,
    /// Their mean latency, µs (0 without any).
    pub mean_latency_us: f64,
}

/// Columns of [`write_tenancy_csv`], in order.
pub const TENANCY_COLUMNS: [&str; 12] = [
    "at_ns",
    "volume",
    "demand_lines",
    "allocation_lines",
    "used_lines",
    "write_policy",
    "hits",
    "misses",
    "hit_ratio",
    "cache_bytes_written",
    "requests",
    "mean_latency_us",
];

/// Writes the per-volume, per-interval tenancy records as CSV: a header of
/// [`TENANCY_COLUMNS`], then one row per decision and volume, in time order. `hit_ratio` is
/// hits / (hits + misses) of the interval that ended (empty without accesses).
pub fn write_tenancy_csv(
    intervals: &[TenancyInterval],
    out: &mut dyn std::io::Write,
) -> Result<(), crate::MetricsError> {
    let io = |source| crate::MetricsError::Io {
        what: "tenancy CSV",
        source,
    };
    writeln!(out, "{}", TENANCY_COLUMNS.join(",")).map_err(io)?;
    for r in intervals {
        let accesses = r.hits + r.misses;
        let hit_ratio = if accesses == 0 {
            String::new()
        } else {
            (r.hits as f64 / accesses as f64).to_string()
        };
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            r.at_ns,
            r.volume,
            r.demand_lines,
            r.allocation_lines,
            r.used_lines,
            r.write_policy,
            r.hits,
            r.misses,
            hit_ratio,
            r.cache_bytes_written,
            r.requests,
            r.mean_latency_us
        )
        .map_err(io)?;
    }
    Ok(())
}

/// Time-weighted mean of a step function given as `(time, value)` changes over
/// `[start, end]`: `initial` until the first change.
pub fn time_weighted_mean(initial: f64, changes: &[(u64, f64)], start: u64, end: u64) -> f64 {
    if end <= start {
        return changes
            .iter()
            .take_while(|c| c.0 <= start)
            .last()
            .map_or(initial, |c| c.1);
    }
    let mut value = initial;
    let mut at = start;
    let mut sum = 0.0;
    for &(t, v) in changes {
        if t <= start {
            value = v;
            continue;
        }
        if t >= end {
            break;
        }
        sum += value * (t - at) as f64;
        at = t;
        value = v;
    }
    sum += value * (end - at) as f64;
    sum / (end - start) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_weighted_mean_weighs_each_value_by_how_long_it_held() {
        // 10 until t=50, then 30 until t=100, then 0 (after the window).
        let changes = [(50, 30.0), (150, 0.0)];
        assert_eq!(time_weighted_mean(10.0, &changes, 0, 100), 20.0);
        assert_eq!(time_weighted_mean(10.0, &changes, 50, 100), 30.0);
        assert_eq!(time_weighted_mean(10.0, &changes, 60, 160), 27.0);
        assert_eq!(time_weighted_mean(10.0, &[], 0, 0), 10.0);
        assert_eq!(time_weighted_mean(10.0, &changes, 70, 70), 30.0);
    }

    #[test]
    fn tenancy_csv_has_a_row_per_record_with_every_column() {
        let rows = [
            TenancyInterval {
                at_ns: 5,
                volume: 1,
                demand_lines: 10,
                allocation_lines: 8,
                used_lines: 7,
                write_policy: "read-only".into(),
                hits: 3,
                misses: 1,
                cache_bytes_written: 4096,
                requests: 2,
                mean_latency_us: 12.5,
            },
            TenancyInterval {
                at_ns: 9,
                volume: 0,
                ..Default::default()
            },
        ];
        let mut out = Vec::new();
        write_tenancy_csv(&rows, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].split(',').count(), TENANCY_COLUMNS.len());
        assert_eq!(lines[1], "5,1,10,8,7,read-only,3,1,0.75,4096,2,12.5");
        // No accesses: the hit ratio is left empty, not 0 or NaN.
        assert_eq!(lines[2], "9,0,0,0,0,,0,0,,0,0,0");
    }
}
