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
    /// How long its allocation took to settle over the whole run (`None`: no decision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settling: Option<Settling>,
}

/// Share of its final value an allocation may differ by and count as settled.
pub const SETTLE_TOLERANCE: f64 = 0.05;
/// Least band, as a share of the cache's lines: a final value near 0 does not ask for an exact
/// match.
pub const SETTLE_FLOOR: f64 = 0.01;
/// Decisions an allocation must stay in its band, at the end of the run, to count as settled
/// (fewer: it was still moving when the run ended).
pub const SETTLE_MIN_HELD: u64 = 5;

/// How long one volume's allocation took to settle (docs/design.md §4.10). An allocation is
/// settled from the first decision after which every allocation of the run stays within
/// `band_lines` of the final one: `max(SETTLE_TOLERANCE × final, SETTLE_FLOOR × cache lines)`,
/// rounded up. Decision `i` (1-based) ends interval `i`, so settling at decision `i` took `i`
/// intervals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settling {
    /// Decisions that planned the volume.
    pub decisions: u64,
    /// Lines of its partition after the last one.
    pub final_lines: u64,
    /// Lines either side of `final_lines` that count as settled.
    pub band_lines: u64,
    /// Intervals it took to settle: the 1-based index of the first decision from which every
    /// allocation stayed in the band.
    pub intervals_to_settle: u64,
    /// Time of that decision, ns.
    pub settled_at_ns: u64,
    /// Decisions from that one to the last, both included.
    pub held_decisions: u64,
    /// Whether it held at least [`SETTLE_MIN_HELD`] decisions (else it was still moving
    /// when the run ended, and `intervals_to_settle` only bounds the time from below).
    pub settled: bool,
}

impl Settling {
    /// The settling of one volume's allocations `(time ns, lines)` in decision order, in a
    /// cache of `capacity_lines`; `None` without any.
    pub fn of(allocations: &[(u64, u64)], capacity_lines: u64) -> Option<Settling> {
        let &(_, final_lines) = allocations.last()?;
        let band = (final_lines as f64 * SETTLE_TOLERANCE)
            .max(capacity_lines as f64 * SETTLE_FLOOR)
            .ceil() as u64;
        let outside = allocations
            .iter()
            .rposition(|&(_, a)| a.abs_diff(final_lines) > band);
        let first = outside.map_or(0, |i| i + 1);
        let n = allocations.len() as u64;
        let held = n - first as u64;
        Some(Settling {
            decisions: n,
            final_lines,
            band_lines: band,
            intervals_to_settle: first as u64 + 1,
            settled_at_ns: allocations[first].0,
            held_decisions: held,
            settled: held >= SETTLE_MIN_HELD,
        })
    }
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
    /// Intervals the last volume's allocation took to settle ([`Settling`]): the partition
    /// layout's settling time (`None`: no decision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals_to_settle: Option<u64>,
    /// Whether every volume's allocation settled ([`Settling::settled`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled: Option<bool>,
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

/// The per-volume part of a multi-tenant run as a text table, one row per volume: mean
/// allocation, hit ratio, mean latency, cache writes, IOPS per dollar, share of time read-only,
/// final allocation and the intervals it took to settle (`*` after it: still moving at the end,
/// see [`Settling::settled`]). `name` labels a volume id (its configured name, or the id).
pub fn render_tenancy_table(t: &TenancyMetrics, name: &dyn Fn(u32) -> String) -> String {
    let mib = |b: f64| format!("{:.1}", b / (1u64 << 20) as f64);
    let line = t.capacity_bytes.checked_div(t.capacity_lines).unwrap_or(0) as f64;
    let mut rows = vec![[
        "volume",
        "alloc MiB",
        "hit",
        "lat µs",
        "cache wr MiB",
        "IOPS/$",
        "RO",
        "final MiB",
        "settled after",
    ]
    .map(String::from)
    .to_vec()];
    let mut ids: Vec<(u32, &VolumeMetrics)> = t
        .volumes
        .iter()
        .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
        .collect();
    ids.sort_by_key(|x| x.0);
    for (id, v) in ids {
        let (fin, settle) = match &v.settling {
            Some(s) => (
                mib(s.final_lines as f64 * line),
                format!(
                    "{} of {}{}",
                    s.intervals_to_settle,
                    s.decisions,
                    if s.settled { "" } else { "*" }
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        rows.push(vec![
            name(id),
            mib(v.allocated_bytes_mean),
            format!("{:.3}", v.hit_ratio),
            format!("{:.0}", v.mean_latency_us),
            mib(v.cache_bytes_written as f64),
            format!("{:.0}", v.iops_per_dollar),
            format!("{:.2}", v.read_only_share),
            fin,
            settle,
        ]);
    }
    let mut widths = vec![0usize; rows[0].len()];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = format!(
        "tenancy {}: {} decisions in the window, layout settled after {} intervals{}\n",
        t.mode,
        t.decisions,
        t.intervals_to_settle
            .map_or_else(|| "-".to_string(), |n| n.to_string()),
        match t.settled {
            Some(false) => " (* still moving at the end)",
            _ => "",
        }
    );
    for r in &rows {
        let mut l = String::new();
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            let pad = w - c.chars().count();
            if i == 0 {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str("  ");
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    }
    out
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
    fn settling_starts_where_the_allocation_last_entered_its_band_for_good() {
        let at = |v: &[u64]| -> Vec<(u64, u64)> {
            v.iter()
                .enumerate()
                .map(|(i, &a)| ((i as u64 + 1) * 10, a))
                .collect()
        };
        // Cache of 1000 lines: band max(5% of 400, 1% of 1000) = 20.
        let s = Settling::of(&at(&[0, 100, 300, 390, 430, 410, 400, 405, 398, 400]), 1000).unwrap();
        assert_eq!(s.band_lines, 20);
        assert_eq!(s.final_lines, 400);
        assert_eq!(
            (s.intervals_to_settle, s.settled_at_ns, s.held_decisions),
            (6, 60, 5),
            "430 is the last value outside 380..=420"
        );
        assert!(s.settled);
        // Still moving: only the last decisions are in the band.
        let s = Settling::of(&at(&[0, 100, 200, 300, 400]), 1000).unwrap();
        assert_eq!((s.intervals_to_settle, s.held_decisions), (5, 1));
        assert!(!s.settled);
        // A final 0 gets the floor (10 lines): 8 counts as settled.
        let s = Settling::of(&at(&[50, 8, 0, 3, 0, 0]), 1000).unwrap();
        assert_eq!(
            (s.band_lines, s.intervals_to_settle, s.held_decisions),
            (10, 2, 5)
        );
        // Settled from the start; nothing to settle without decisions.
        let s = Settling::of(&at(&[7; 6]), 100).unwrap();
        assert_eq!((s.intervals_to_settle, s.settled_at_ns), (1, 10));
        assert!(Settling::of(&[], 100).is_none());
    }

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
    fn tenancy_table_has_a_row_per_volume_and_marks_unsettled_ones() {
        let settled = Settling::of(
            &[(1, 5), (2, 256), (3, 256), (4, 256), (5, 256), (6, 256)],
            1024,
        );
        let moving = Settling::of(&[(1, 5), (2, 100)], 1024);
        let t = TenancyMetrics {
            mode: "eci".into(),
            capacity_bytes: 4 << 20,
            capacity_lines: 1024,
            volumes: [
                (
                    "10".to_string(),
                    VolumeMetrics {
                        settling: moving,
                        ..Default::default()
                    },
                ),
                (
                    "2".to_string(),
                    VolumeMetrics {
                        allocated_bytes_mean: (1 << 20) as f64,
                        hit_ratio: 0.5,
                        settling: settled,
                        ..Default::default()
                    },
                ),
            ]
            .into(),
            intervals_to_settle: Some(2),
            settled: Some(false),
            ..Default::default()
        };
        let text = render_tenancy_table(&t, &|v| format!("v{v}"));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("settled after 2 intervals (*"), "{text}");
        // Volume order by id, not by the map's string order.
        assert!(lines[2].starts_with("v2 "), "{text}");
        assert!(
            lines[2].contains("1.0") && lines[2].ends_with("2 of 6"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("v10") && lines[3].ends_with("2 of 2*"),
            "{text}"
        );
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
