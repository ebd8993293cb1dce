//! The report's plots: bars per metric, latency CDFs, timelines, the balancer's plots and
//! heat maps, each an SVG built from the designs' records.

use crate::data::{lookup, lookup_f64, Design};
use crate::html::better_of;
use crate::svg::{self, esc, Bar, Role, Scale, Series};
use crate::{Better, MetricSpec, Plot, SummaryRow};

/// Percentile keys of a latency summary and the fraction each stands for (max drawn at 99.999%).
const PERCENTILES: [(&str, f64); 6] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p999", 0.999),
    ("p9999", 0.9999),
    ("max", 0.99999),
];

pub(crate) fn bar_plot(
    id: String,
    workload: &str,
    designs: &[Design<'_>],
    m: &MetricSpec,
    row: &SummaryRow,
    max_bars: usize,
) -> (Plot, String) {
    let mut bars: Vec<Bar> = designs
        .iter()
        .filter_map(|d| {
            let s = d.stat(&m.path)?;
            let role = match (d.name == row.best.0, d.default) {
                (true, true) => Role::BestDefault,
                (true, false) => Role::Best,
                (false, true) => Role::Default,
                (false, false) if d.name == row.worst.0 => Role::Worst,
                _ => Role::Plain,
            };
            Some(Bar {
                label: d.short.clone(),
                value: s.mean,
                lo: s.min,
                hi: s.max,
                role,
            })
        })
        .collect();
    let total = bars.len();
    let mut note = String::new();
    if total > max_bars {
        // Too many to read: the best ones by this metric, plus the default and the worst.
        bars.sort_by(|a, b| match m.better {
            Better::Max => b.value.total_cmp(&a.value),
            Better::Min => a.value.total_cmp(&b.value),
        });
        let keep_extra: Vec<Bar> = bars
            .iter()
            .filter(|b| matches!(b.role, Role::Default | Role::Worst))
            .cloned()
            .collect();
        bars.truncate(max_bars.saturating_sub(keep_extra.len()).max(1));
        for b in keep_extra {
            if !bars.iter().any(|x| x.label == b.label) {
                bars.push(b);
            }
        }
        note = format!(" Showing the best {} of {total} designs by this metric, plus the default and the worst.", bars.len());
    }
    let title = format!("{workload}: {}", m.label);
    let svg = svg::bar_chart(&id, &title, &m.label, &bars);
    let caption = format!(
        "{} by design ({}). Bars are means over repetitions, whiskers their range; green = best, outlined = default, red = worst.{note}",
        esc(&m.label),
        if m.better == Better::Max { "higher is better" } else { "lower is better" }
    );
    (Plot { id, title, svg }, caption)
}

pub(crate) fn cdf_plot(
    id: String,
    workload: &str,
    designs: &[&Design<'_>],
    path: &str,
) -> Option<Plot> {
    let series: Vec<Series> = designs
        .iter()
        .filter_map(|d| {
            let rec = &d.first_ok()?.record;
            let pts: Vec<(f64, f64)> = PERCENTILES
                .iter()
                .filter_map(|(k, p)| {
                    lookup_f64(rec, &format!("{path}.{k}"))
                        .filter(|v| *v > 0.0)
                        .map(|v| (v, *p))
                })
                .collect();
            (pts.len() >= 2).then(|| Series {
                name: d.short.clone(),
                points: pts,
            })
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let title = format!("{workload}: latency CDF");
    let svg = svg::line_chart(
        &id,
        &title,
        "latency (µs, log scale)",
        "fraction of requests",
        &series,
        Scale::Log,
        Scale::Nines,
    );
    Some(Plot { id, title, svg })
}

pub(crate) fn timeline_rows(rec: &serde_json::Value) -> Option<&Vec<serde_json::Value>> {
    lookup(rec, "timeline")
        .or_else(|| lookup(rec, "metrics.timeline"))
        .and_then(|t| t.as_array())
        .filter(|a| !a.is_empty())
}

pub(crate) fn timeline_plot(
    id: String,
    workload: &str,
    designs: &[&Design<'_>],
    key: &str,
    label: &str,
) -> Option<Plot> {
    let series: Vec<Series> = designs
        .iter()
        .filter_map(|d| {
            let rows = timeline_rows(&d.first_ok()?.record)?;
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let t = ["t_ns", "end_ns", "start_ns"]
                        .iter()
                        .find_map(|k| lookup_f64(r, k))
                        .map(|ns| ns / 1e9)
                        .unwrap_or(i as f64);
                    lookup_f64(r, key).map(|v| (t, v))
                })
                .collect();
            (!pts.is_empty()).then(|| Series {
                name: d.short.clone(),
                points: pts,
            })
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let title = format!("{workload}: {label} over time");
    let svg = svg::line_chart(
        &id,
        &title,
        "time (s)",
        label,
        &series,
        Scale::Linear,
        Scale::Linear,
    );
    Some(Plot { id, title, svg })
}

/// Load balancing over time for one design whose timeline carries a balancer's records: the
/// cache and backend queue times with the intervals of a burst shaded, and the write policy
/// in force (docs/design.md §4.8). `None` when the design ran no balancer.
pub(crate) fn balancing_plots(id: &str, workload: &str, d: &Design<'_>) -> Vec<Plot> {
    let Some(rows) = d.first_ok().and_then(|r| timeline_rows(&r.record)) else {
        return Vec::new();
    };
    let t = |r: &serde_json::Value| lookup_f64(r, "end_ns").map(|ns| ns / 1e9);
    let balanced = rows.iter().any(|r| {
        lookup_f64(r, "balancer_policy").is_some_and(|p| p > 0.0)
            || lookup_f64(r, "balancer_burst").is_some_and(|b| b > 0.0)
    });
    if !balanced {
        return Vec::new();
    }
    let series = |key: &str, name: &str| Series {
        name: name.to_string(),
        points: rows
            .iter()
            .filter_map(|r| Some((t(r)?, lookup_f64(r, key)?)))
            .collect(),
    };
    let bands: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| lookup_f64(r, "balancer_burst").is_some_and(|b| b > 0.0))
        .filter_map(|r| Some((lookup_f64(r, "start_ns")? / 1e9, t(r)?)))
        .collect();
    let qid = format!("{id}-queues");
    let qtitle = format!("{workload}, {}: queue times, bursts shaded", d.short);
    let queues = svg::line_chart_with_bands(
        &qid,
        &qtitle,
        "time (s)",
        "queue time (µs)",
        &[
            series("cache_qtime_us", "cache device"),
            series("backend_qtime_us", "backend"),
        ],
        Scale::Linear,
        Scale::Linear,
        &bands,
        "burst decision in force",
    );
    let pid = format!("{id}-policy");
    let ptitle = format!("{workload}, {}: write policy in force", d.short);
    let policy = svg::line_chart_with_bands(
        &pid,
        &ptitle,
        "time (s)",
        "0 configured, 1 WB, 2 WT, 3 WA, 4 WO, 5 RO, 6 PT",
        &[
            series("balancer_policy", "policy in force"),
            series("balancer_group", "LBICA group (0: none)"),
        ],
        Scale::Linear,
        Scale::Linear,
        &bands,
        "burst",
    );
    vec![
        Plot {
            id: qid,
            title: qtitle,
            svg: queues,
        },
        Plot {
            id: pid,
            title: ptitle,
            svg: policy,
        },
    ]
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn heat_plot(
    id: String,
    workload: &str,
    designs: &[Design<'_>],
    m: &MetricSpec,
    x: &(String, Vec<String>),
    y: &(String, Vec<String>),
    others: bool,
) -> Option<(Plot, String)> {
    let mut cells = vec![vec![None; x.1.len()]; y.1.len()];
    for d in designs {
        let (Some(xl), Some(yl), Some(s)) = (d.label(&x.0), d.label(&y.0), d.stat(&m.path)) else {
            continue;
        };
        let (Some(i), Some(j)) = (
            x.1.iter().position(|l| l == xl),
            y.1.iter().position(|l| l == yl),
        ) else {
            continue;
        };
        let cell: &mut Option<f64> = &mut cells[j][i];
        let replace = match *cell {
            None => true,
            Some(c) => better_of(m.better, s.mean, c),
        };
        if replace {
            *cell = Some(s.mean);
        }
    }
    if cells.iter().flatten().all(Option::is_none) {
        return None;
    }
    let title = format!("{workload}: {} by {} × {}", m.label, x.0, y.0);
    let svg = svg::heat_map(
        &id,
        &title,
        &x.0,
        &x.1,
        &y.0,
        &y.1,
        &cells,
        m.better == Better::Max,
    );
    let caption = if others {
        format!(
            "Each cell is the best {} over the other axes' values. Yellow = better.",
            esc(&m.label)
        )
    } else {
        "Yellow = better.".to_string()
    };
    Some((Plot { id, title, svg }, caption))
}
