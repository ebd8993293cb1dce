//! Multi-tenant plots and tables (docs/design.md §4.10): how a design's tenancy mode split the cache
//! among the volumes over time, stacked, each volume's hit ratio per interval, from the
//! per-decision records of `metrics.tenancy.intervals`; and how long each volume's allocation
//! took to settle (`metrics.tenancy.volumes.*.settling`).

use crate::data::{lookup, lookup_f64, Design};
use crate::svg::{self, esc, Scale, Series};
use crate::Plot;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Volume `v`'s name in the record's `config.volumes` (`volume v` when not listed).
fn volume_name(rec: &serde_json::Value, v: u64) -> String {
    lookup(rec, "config.volumes")
        .and_then(|v| v.as_array())
        .and_then(|c| {
            c.iter().enumerate().find_map(|(k, e)| {
                let id = lookup_f64(e, "id").map_or(k as u64, |x| x as u64);
                (id == v).then(|| lookup(e, "name")?.as_str().map(str::to_owned))?
            })
        })
        .unwrap_or_else(|| format!("volume {v}"))
}

/// How long each volume's allocation took to settle, with its mean and final allocation and
/// hit ratio, as an HTML table for a design whose record carries settling figures; `None`
/// otherwise.
pub(crate) fn settling_table(d: &Design<'_>) -> Option<String> {
    let rec = &d.first_ok()?.record;
    let volumes = lookup(rec, "metrics.tenancy.volumes")?.as_object()?;
    let line = lookup_f64(rec, "metrics.tenancy.capacity_bytes")?
        / lookup_f64(rec, "metrics.tenancy.capacity_lines")?.max(1.0);
    let mut rows: Vec<(u64, &serde_json::Value)> = volumes
        .iter()
        .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
        .filter(|(_, v)| lookup(v, "settling").is_some())
        .collect();
    if rows.is_empty() {
        return None;
    }
    rows.sort_by_key(|r| r.0);
    let mib = |b: f64| format!("{:.1}", b / (1u64 << 20) as f64);
    let mut t = String::from(
        "<table><tr><th>volume</th><th>mean allocation (MiB)</th><th>final (MiB)</th>\
         <th>hit ratio</th><th>mean latency (µs)</th><th>settled after (intervals)</th>\
         <th>at (s)</th><th>held (decisions)</th></tr>",
    );
    for (v, m) in rows {
        let f = |k: &str| lookup_f64(m, k).unwrap_or(0.0);
        let settled = lookup(m, "settling.settled").and_then(|s| s.as_bool()) == Some(true);
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.0}</td>\
             <td>{}{}</td><td>{:.1}</td><td>{} of {}</td></tr>",
            esc(&volume_name(rec, v)),
            mib(f("allocated_bytes_mean")),
            mib(f("settling.final_lines") * line),
            f("hit_ratio"),
            f("mean_latency_us"),
            f("settling.intervals_to_settle"),
            if settled { "" } else { " (still moving)" },
            f("settling.settled_at_ns") / 1e9,
            f("settling.held_decisions"),
            f("settling.decisions"),
        );
    }
    t.push_str("</table>");
    Some(t)
}

/// The allocation of every volume over time, stacked (with the cache's size dashed), and each
/// volume's hit ratio per interval, for a design whose record carries tenancy decisions;
/// nothing otherwise.
pub(crate) fn tenancy_plots(id: &str, workload: &str, d: &Design<'_>) -> Vec<Plot> {
    let Some(run) = d.first_ok() else {
        return Vec::new();
    };
    let rec = &run.record;
    let Some(intervals) = lookup(rec, "metrics.tenancy.intervals").and_then(|v| v.as_array())
    else {
        return Vec::new();
    };
    if intervals.is_empty() {
        return Vec::new();
    }
    // Decision time (s) → volume → lines.
    let mut steps: BTreeMap<u64, BTreeMap<u64, f64>> = BTreeMap::new();
    let mut volumes = std::collections::BTreeSet::new();
    for i in intervals {
        let (Some(at), Some(v), Some(lines)) = (
            lookup_f64(i, "at_ns"),
            lookup_f64(i, "volume"),
            lookup_f64(i, "allocation_lines"),
        ) else {
            continue;
        };
        volumes.insert(v as u64);
        steps.entry(at as u64).or_default().insert(v as u64, lines);
    }
    let names: Vec<String> = volumes.iter().map(|&v| volume_name(rec, v)).collect();
    // Per volume: (decision time s, hit ratio of the interval it ended), intervals with accesses.
    let mut hit: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for i in intervals {
        let (Some(at), Some(v), Some(h), Some(m)) = (
            lookup_f64(i, "at_ns"),
            lookup_f64(i, "volume"),
            lookup_f64(i, "hits"),
            lookup_f64(i, "misses"),
        ) else {
            continue;
        };
        if h + m > 0.0 {
            hit.entry(v as u64)
                .or_default()
                .push((at / 1e9, h / (h + m)));
        }
    }
    let rows: Vec<(f64, Vec<f64>)> = steps
        .iter()
        .map(|(&at, by)| {
            (
                at as f64 / 1e9,
                volumes
                    .iter()
                    .map(|v| by.get(v).copied().unwrap_or(0.0))
                    .collect(),
            )
        })
        .collect();
    let total = lookup_f64(rec, "metrics.tenancy.capacity_lines");
    let end = lookup_f64(rec, "metrics.duration_ns")
        .map(|d| d / 1e9)
        .unwrap_or(0.0)
        .max(rows.last().map_or(0.0, |r| r.0));
    let mode = lookup(rec, "metrics.tenancy.mode")
        .and_then(|m| m.as_str())
        .unwrap_or("?");
    let title = format!("{workload}, {}: cache lines per volume ({mode})", d.short);
    let pid = format!("{id}-allocation");
    let svg = svg::stacked_step_chart(
        &pid,
        &title,
        "time (s)",
        "lines allocated",
        &names,
        &rows,
        end,
        total,
    );
    let hid = format!("{id}-hit-ratio");
    let htitle = format!(
        "{workload}, {}: hit ratio per volume and interval ({mode})",
        d.short
    );
    let series: Vec<Series> = hit
        .into_iter()
        .map(|(v, points)| Series {
            name: volume_name(rec, v),
            points,
        })
        .collect();
    let hsvg = svg::line_chart(
        &hid,
        &htitle,
        "time (s)",
        "line hit ratio of the interval",
        &series,
        Scale::Linear,
        Scale::Linear,
    );
    vec![
        Plot {
            id: pid,
            title,
            svg,
        },
        Plot {
            id: hid,
            title: htitle,
            svg: hsvg,
        },
    ]
}
