//! Building the report: summary rows, plots, and the HTML page around them.

use crate::data::{Design, ResultSet};
use crate::plots::{balancing_plots, bar_plot, cdf_plot, heat_plot, timeline_plot};
use crate::svg::{self, esc, fmt_num};
use crate::{Better, MetricSpec, Plot, Report, ReportOptions, SummaryRow};
use std::fmt::Write;

/// Timeline columns plotted when present, with their axis titles.
const TIMELINE: [(&str, &str); 5] = [
    ("iops", "IOPS"),
    ("hit_ratio", "hit ratio"),
    ("dirty_lines", "dirty lines"),
    ("cache_queue_depth", "cache queue depth"),
    ("backend_queue_depth", "backend queue depth"),
];

pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(60).collect()
}

pub(crate) fn better_of(b: Better, x: f64, y: f64) -> bool {
    match b {
        Better::Max => x > y,
        Better::Min => x < y,
    }
}

/// Metrics that some design of the workload has with a non-zero value.
fn present_metrics<'m>(designs: &[Design<'_>], metrics: &'m [MetricSpec]) -> Vec<&'m MetricSpec> {
    metrics
        .iter()
        .filter(|m| {
            designs
                .iter()
                .any(|d| d.stat(&m.path).is_some_and(|s| s.mean != 0.0))
        })
        .collect()
}

fn summarise(workload: &str, designs: &[Design<'_>], m: &MetricSpec) -> Option<SummaryRow> {
    let vals: Vec<(&Design<'_>, f64)> = designs
        .iter()
        .filter_map(|d| d.stat(&m.path).map(|s| (d, s.mean)))
        .collect();
    let mut best = *vals.first()?;
    let mut worst = best;
    for &(d, v) in &vals {
        if better_of(m.better, v, best.1) {
            best = (d, v);
        }
        if better_of(m.better, worst.1, v) {
            worst = (d, v);
        }
    }
    let default = vals
        .iter()
        .find(|(d, _)| d.default)
        .copied()
        .unwrap_or(vals[0]);
    let tol = best.1.abs() * 1e-3;
    let ties = vals
        .iter()
        .filter(|(d, v)| d.name != best.0.name && (v - best.1).abs() <= tol)
        .count();
    Some(SummaryRow {
        workload: workload.into(),
        metric: m.clone(),
        best: (best.0.name.clone(), best.1),
        default: (default.0.name.clone(), default.1),
        worst: (worst.0.name.clone(), worst.1),
        designs: vals.len(),
        ties,
    })
}

/// Default plus the best designs by `primary`, at most `n`, in design order.
fn pick<'d, 'a>(
    designs: &'d [Design<'a>],
    primary: Option<&MetricSpec>,
    n: usize,
) -> Vec<&'d Design<'a>> {
    if designs.len() <= n {
        return designs.iter().collect();
    }
    let mut ranked: Vec<(usize, f64)> = designs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let v = primary.and_then(|m| d.stat(&m.path)).map(|s| s.mean);
            let score = match (v, primary.map(|m| m.better)) {
                (Some(v), Some(Better::Max)) => -v,
                (Some(v), Some(Better::Min)) => v,
                _ => f64::INFINITY,
            };
            (i, score)
        })
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut keep: Vec<usize> = designs.iter().position(|d| d.default).into_iter().collect();
    for (i, _) in ranked {
        if keep.len() >= n {
            break;
        }
        if !keep.contains(&i) {
            keep.push(i);
        }
    }
    keep.sort_unstable();
    keep.into_iter().map(|i| &designs[i]).collect()
}

/// Axis names of a workload's designs with more than one label, in axis order.
fn varying_axes(designs: &[Design<'_>]) -> Vec<(String, Vec<String>)> {
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for d in designs {
        for (a, l) in &d.labels {
            match axes.iter_mut().find(|(n, _)| n == a) {
                Some((_, ls)) => {
                    if !ls.contains(l) {
                        ls.push(l.clone());
                    }
                }
                None => axes.push((a.clone(), vec![l.clone()])),
            }
        }
    }
    axes.into_iter().filter(|(_, ls)| ls.len() > 1).collect()
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{}{:.1}%", if v > 0.0 { "+" } else { "" }, v))
        .unwrap_or_else(|| "n/a".into())
}

fn factor(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}×"))
        .unwrap_or_else(|| "n/a".into())
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1280px;padding:0 16px;color:#222;background:#fafafa}\
h1{font-size:24px}h2{font-size:20px;margin-top:40px;border-bottom:2px solid #4e79a7;padding-bottom:4px}h3{font-size:16px;margin-top:24px}\
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;background:#fff}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f0f3f7}\
td.num{text-align:right;font-variant-numeric:tabular-nums}.good{color:#2e7d32;font-weight:600}.muted{color:#777}\
figure{margin:12px 0 20px;background:#fff;border:1px solid #e2e2e2;padding:8px;overflow-x:auto}svg.plot{width:100%;height:auto;max-height:80vh}figcaption{font-size:12px;color:#555;margin-top:4px}\
nav ul{columns:3;font-size:13px}code{background:#eef;padding:0 3px}#plot-check{display:none;color:#b00020;font-weight:600}";

/// Flags every plot that a browser renders empty (no size, or almost no marks), and every text
/// of a plot that reaches outside its plot's box (a cut-off title, label or legend entry): a
/// console error and a banner, and counts on `<body>` that headless tests read from the DOM.
const CHECK_JS: &str = "(function(){var n=0,bad=[],over=[];document.querySelectorAll('svg.plot').forEach(function(s){n++;var b=s.getBBox();var marks=s.querySelectorAll('rect,path,circle,line,polyline').length;if(!(b.width>0&&b.height>0)||marks<3){bad.push(s.id);}var box=s.getBoundingClientRect();s.querySelectorAll('text').forEach(function(t){var r=t.getBoundingClientRect();if(r.width>0&&(r.left<box.left-1||r.right>box.right+1||r.top<box.top-1||r.bottom>box.bottom+1)){over.push(s.id+': '+t.textContent);}});});document.body.setAttribute('data-plots',String(n));document.body.setAttribute('data-empty-plots',String(bad.length));document.body.setAttribute('data-overflowing-text',String(over.length));var msg=[];if(bad.length){msg.push('Empty plots: '+bad.join(', '));}if(over.length){msg.push('Text outside its plot: '+over.join(' | '));}if(msg.length){console.error(msg.join('; '));var e=document.getElementById('plot-check');e.textContent=msg.join('; ');e.style.display='block';}})();";

/// The setup every design starts from: the default design's (else the first successful run's)
/// cache, devices, host, workload and run settings, as the record's configuration gives them.
fn base_setup(results: &ResultSet) -> String {
    let Some(run) = results
        .runs
        .iter()
        .filter(|r| r.ok)
        .find(|r| r.default)
        .or_else(|| results.runs.iter().find(|r| r.ok))
    else {
        return String::new();
    };
    let config = &run.record["config"];
    let mut rows = String::new();
    for section in ["cache", "devices", "host", "engine", "workload", "run"] {
        let mut flat = Vec::new();
        flatten(config.get(section), section, &mut flat);
        for (k, v) in flat {
            let _ = write!(
                rows,
                "<tr><td><code>{}</code></td><td>{}</td></tr>",
                esc(&k),
                esc(&v)
            );
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h2 id=\"base-setup\">Base setup</h2><p>The configuration of <b>{}</b>{}; every other design changes only its axes.</p><table>{rows}</table>",
        esc(&run.name),
        if run.default { " (the default design)" } else { "" }
    )
}

/// `key.sub = value` pairs of a JSON value.
fn flatten(v: Option<&serde_json::Value>, prefix: &str, out: &mut Vec<(String, String)>) {
    match v {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(m)) => {
            for (k, v) in m {
                flatten(Some(v), &format!("{prefix}.{k}"), out);
            }
        }
        Some(serde_json::Value::String(s)) => out.push((prefix.to_string(), s.clone())),
        Some(other) => out.push((prefix.to_string(), other.to_string())),
    }
}

/// Appends plot `p` to `body` as a figure with `caption` (HTML, already escaped) and keeps it
/// in `plots` (written out as an SVG file too).
pub(crate) fn figure(body: &mut String, plots: &mut Vec<Plot>, p: Plot, caption: &str) {
    let _ = write!(
        body,
        "<figure id=\"fig-{}\">{}<figcaption>{}</figcaption></figure>",
        p.id, p.svg, caption
    );
    plots.push(p);
}

/// Builds the report: summary tables, bars, CDFs, heat maps and timelines per workload.
pub fn build_report(results: &ResultSet, opts: &ReportOptions) -> Report {
    let mut plots: Vec<Plot> = Vec::new();
    let mut summary: Vec<SummaryRow> = Vec::new();
    let mut body = String::new();
    let mut toc = String::new();
    let mut seq = 0usize;
    let mut next_id = |what: &str| {
        seq += 1;
        format!("p{seq:02}-{}", slug(what))
    };
    let workloads = results.workloads();

    for (wi, w) in workloads.iter().enumerate() {
        let designs = results.designs(w);
        let metrics = present_metrics(&designs, &opts.metrics);
        // Numbered: names without ASCII letters (or alike to 60 characters) share a slug.
        let anchor = format!("w{wi}-{}", slug(w));
        let ok = designs
            .iter()
            .flat_map(|d| &d.runs)
            .filter(|r| r.ok)
            .count();
        let failed = designs
            .iter()
            .flat_map(|d| &d.runs)
            .filter(|r| !r.ok)
            .count();
        let _ = write!(toc, "<li><a href=\"#{anchor}\">{}</a></li>", esc(w));
        let _ = write!(
            body,
            "<h2 id=\"{anchor}\">Workload {}</h2><p>{} designs, {ok} runs ok{}.</p>",
            esc(w),
            designs.len(),
            if failed > 0 {
                format!(", <b>{failed} failed</b>")
            } else {
                String::new()
            }
        );

        // Designs are shown by the labels of the varying axes; the full name is in a tooltip.
        let shown = |name: &str| {
            let short = designs
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.short.as_str())
                .unwrap_or(name);
            format!("<span title=\"{}\">{}</span>", esc(name), esc(short))
        };
        let naming: Vec<String> = varying_axes(&designs).into_iter().map(|(a, _)| a).collect();
        if !naming.is_empty() {
            let _ = write!(
                body,
                "<p>Designs are named by their <b>{}</b>.</p>",
                esc(&naming.join(" · "))
            );
        }

        // Summary table.
        let rows: Vec<SummaryRow> = metrics
            .iter()
            .filter_map(|m| summarise(w, &designs, m))
            .collect();
        if !rows.is_empty() {
            body.push_str("<h3>Best designs</h3><table><tr><th>metric</th><th>best design</th><th>value</th><th>default</th><th>best vs default</th><th>worst design</th><th>best vs worst</th></tr>");
            for r in &rows {
                let _ = write!(
                    body,
                    "<tr><td>{} <span class=\"muted\">({})</span></td><td><span class=\"good\">{}</span>{}</td><td class=\"num\">{}</td><td>{} <span class=\"muted\">{}</span></td><td class=\"num\">{} ({})</td><td>{} <span class=\"muted\">{}</span></td><td class=\"num\">{} ({})</td></tr>",
                    esc(&r.metric.label),
                    if r.metric.better == Better::Max { "max" } else { "min" },
                    shown(&r.best.0),
                    if r.ties > 0 {
                        format!(" <span class=\"muted\">(+{} within 0.1%)</span>", r.ties)
                    } else {
                        String::new()
                    },
                    fmt_num(r.best.1),
                    shown(&r.default.0),
                    fmt_num(r.default.1),
                    pct(r.change_pct(r.default.1)),
                    factor(r.factor(r.default.1)),
                    shown(&r.worst.0),
                    fmt_num(r.worst.1),
                    pct(r.change_pct(r.worst.1)),
                    factor(r.factor(r.worst.1)),
                );
            }
            body.push_str("</table>");
        } else {
            body.push_str("<p class=\"muted\">No successful run of this workload carries the compared metrics.</p>");
        }

        body.push_str(&crate::opt::gap_section(&designs, &shown));

        // Bars.
        if !rows.is_empty() {
            body.push_str("<h3>By design</h3>");
        }
        for r in &rows {
            let (p, caption) = bar_plot(
                next_id(&format!("{w} {} bars", r.metric.label)),
                w,
                &designs,
                &r.metric,
                r,
                opts.max_bars,
            );
            figure(&mut body, &mut plots, p, &caption);
        }

        let primary = metrics.first().copied();
        let chosen = pick(&designs, primary, opts.max_series);
        let chosen_note = if chosen.len() < designs.len() {
            format!(
                " Showing {} of {} designs: the default and the best by {}.",
                chosen.len(),
                designs.len(),
                primary.map(|m| esc(&m.label)).unwrap_or_default()
            )
        } else {
            String::new()
        };

        // Latency CDF.
        if let Some(p) = cdf_plot(
            next_id(&format!("{w} latency cdf")),
            w,
            &chosen,
            &opts.cdf_path,
        ) {
            body.push_str("<h3>Latency distribution</h3>");
            let caption = format!(
                "Drawn through the recorded percentiles (p50 … p99.99, max plotted at 99.999%) of <code>{}</code>; the y axis stretches the tail.{chosen_note}",
                esc(&opts.cdf_path)
            );
            figure(&mut body, &mut plots, p, &caption);
        }

        // Heat maps.
        let varying = varying_axes(&designs);
        let axes = match &opts.heat_axes {
            Some((x, y)) => {
                let find = |n: &str| varying.iter().find(|(a, _)| a == n).cloned();
                find(x).zip(find(y))
            }
            None => (varying.len() >= 2).then(|| (varying[0].clone(), varying[1].clone())),
        };
        if let Some((x, y)) = axes {
            body.push_str("<h3>Design space</h3>");
            let others = varying.len() > 2;
            for m in &metrics {
                if let Some((p, caption)) = heat_plot(
                    next_id(&format!("{w} {} heat", m.label)),
                    w,
                    &designs,
                    m,
                    &x,
                    &y,
                    others,
                ) {
                    figure(&mut body, &mut plots, p, &caption);
                }
            }
        } else if opts.heat_axes.is_some() {
            body.push_str("<p class=\"muted\">The requested heat-map axes do not both vary in this workload.</p>");
        }

        // Timelines.
        let mut first_timeline = true;
        for (key, label) in TIMELINE {
            if let Some(p) = timeline_plot(
                next_id(&format!("{w} {key} timeline")),
                w,
                &chosen,
                key,
                label,
            ) {
                if first_timeline {
                    body.push_str("<h3>Over time</h3>");
                    first_timeline = false;
                }
                let caption = format!(
                    "Per-interval {} of the first repetition.{chosen_note}",
                    esc(label)
                );
                figure(&mut body, &mut plots, p, &caption);
            }
        }
        // Load balancing, per design that ran a balancer.
        let mut first_balancing = true;
        for d in &chosen {
            for p in balancing_plots(&next_id(&format!("{w} {} balancing", d.short)), w, d) {
                if first_balancing {
                    body.push_str("<h3>Load balancing</h3>");
                    first_balancing = false;
                }
                let caption = format!(
                    "{}, first repetition, per interval; shaded: intervals run under a burst decision (at the poll that began them, the cache device's queue time was above the backend's).",
                    esc(&p.title)
                );
                figure(&mut body, &mut plots, p, &caption);
            }
        }
        // Multi-tenancy: each design's split of the cache among its volumes over time.
        let mut first_tenancy = true;
        for d in &chosen {
            let id = next_id(&format!("{w} {} tenancy", d.short));
            for p in crate::tenancy::tenancy_plots(&id, w, d) {
                if first_tenancy {
                    body.push_str("<h3>Cache allocation per volume</h3>");
                    first_tenancy = false;
                }
                let caption = if p.id.ends_with("-hit-ratio") {
                    format!(
                        "{}, first repetition: each volume's line hit ratio over the interval each decision ended.",
                        svg::esc(&p.title)
                    )
                } else {
                    format!(
                        "{}, first repetition: lines each volume's partition was given at each decision, stacked (dashed: the cache's lines; the space above the stack is unallocated).",
                        svg::esc(&p.title)
                    )
                };
                figure(&mut body, &mut plots, p, &caption);
            }
            if let Some(table) = crate::tenancy::settling_table(d) {
                let _ = write!(
                    body,
                    "<p>{}, first repetition: how long each volume's allocation took to settle \
                     (from the first decision after which it stayed within 5% of its final \
                     value, or 1% of the cache, to the end of the run; \"still moving\": \
                     it held too few decisions to call it settled, see the record's \
                     settling.settled).</p>{table}",
                    svg::esc(&d.short),
                );
            }
        }
        summary.extend(rows);
    }

    // Failures.
    let failed: Vec<_> = results.runs.iter().filter(|r| !r.ok).collect();
    if !failed.is_empty() {
        toc.push_str("<li><a href=\"#failures\">Failed runs</a></li>");
        let _ = write!(
            body,
            "<h2 id=\"failures\">Failed runs ({})</h2><table><tr><th>workload</th><th>design</th><th>rep</th><th>point</th><th>error</th></tr>",
            failed.len()
        );
        for r in failed {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                esc(&r.workload),
                esc(&r.name),
                r.rep,
                esc(&r.point),
                esc(r.error.as_deref().unwrap_or(""))
            );
        }
        body.push_str("</table>");
    }

    let ok = results.runs.iter().filter(|r| r.ok).count();
    let counts = format!(
        "{} runs ({ok} ok, {} failed) over {} workload(s)",
        results.runs.len(),
        results.runs.len() - ok,
        workloads.len()
    );
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body><h1>{}</h1>{}<p id=\"plot-check\"></p><p>{}, {} plots. Sources: {}.{}</p><nav><ul>{toc}</ul></nav>{}{body}<p class=\"muted\">Generated by tiercache report. Every plot is also written as an SVG file.</p><script>{CHECK_JS}</script></body></html>",
        esc(&opts.title),
        esc(&opts.title),
        opts.description
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(|d| format!("<p>{}</p>", esc(d)))
            .unwrap_or_default(),
        counts,
        plots.len(),
        results.sources.iter().map(|s| format!("<code>{}</code>", esc(s))).collect::<Vec<_>>().join(", "),
        results
            .input_notes()
            .iter()
            .map(|n| format!(" {}.", esc(n)))
            .collect::<String>(),
        base_setup(results)
    );
    html.push('\n');
    Report {
        html,
        plots,
        summary,
    }
}
