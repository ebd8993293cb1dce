//! Multi-tenant plots (docs/design.md §4.10): how a design's tenancy mode split the cache among the
//! volumes over time, stacked, from the per-decision records of `metrics.tenancy.intervals`.

use crate::data::{lookup, lookup_f64, Design};
use crate::svg;
use crate::Plot;
use std::collections::BTreeMap;

/// The allocation of every volume over time, stacked (with the cache's size dashed), for a
/// design whose record carries tenancy decisions; nothing otherwise.
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
    let configured = lookup(rec, "config.volumes").and_then(|v| v.as_array());
    let names: Vec<String> = volumes
        .iter()
        .map(|&v| {
            configured
                .and_then(|c| {
                    c.iter().enumerate().find_map(|(k, e)| {
                        let id = lookup_f64(e, "id").map_or(k as u64, |x| x as u64);
                        (id == v).then(|| lookup(e, "name")?.as_str().map(str::to_owned))?
                    })
                })
                .unwrap_or_else(|| format!("volume {v}"))
        })
        .collect();
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
    vec![Plot {
        id: pid,
        title,
        svg,
    }]
}
