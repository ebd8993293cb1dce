//! Multi-tenant results (SPEC §4.10): per volume and overall, what each got of the cache, what
//! it did with it, what it cost and how it wore the device; plus the per-interval decisions.

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
}
