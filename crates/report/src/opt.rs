//! The "gap to OPT" table of a workload (docs/design.md §9, §12): per design, its miss ratio
//! beside Belady's on the same trace, capacity and line size, how many more misses it has,
//! and for write-back designs its backend cost against the write-back lower bound. The
//! numbers are the sweep runner's (`metrics.opt` of each record); runs without them (timed
//! runs, synthetic workloads) are said to have none.

use crate::data::Design;
use crate::svg::{esc, fmt_num};
use std::fmt::Write;

/// The bound and, in small type, which of the bounds binds (`joint-flow`, ...).
fn bound_cell(d: &Design<'_>) -> String {
    let Some(bound) = d.stat("metrics.opt.writeback.bound").map(|s| s.mean) else {
        return "—".into();
    };
    let binds = d
        .first_ok()
        .and_then(|r| crate::data::lookup(&r.record, "metrics.opt.writeback.binds"))
        .and_then(|v| v.as_str());
    match binds {
        Some(b) => format!(
            "{} <small class=\"muted\">{}</small>",
            fmt_num(bound),
            esc(b)
        ),
        None => fmt_num(bound),
    }
}

/// The section for `designs` (`shown` renders a design's name), or a note that no run has
/// an optimum.
pub(crate) fn gap_section(designs: &[Design<'_>], shown: &dyn Fn(&str) -> String) -> String {
    let has = |d: &Design<'_>| d.stat("metrics.opt.miss_ratio").is_some();
    if !designs.iter().any(has) {
        return "<h3>Gap to OPT</h3><p class=\"muted\">No run of this workload has an optimum to compare with: the gap to OPT is computed for hit-ratio runs of a trace (run.mode = \"hit-ratio\", workload.trace).</p>".into();
    }
    let wb = designs
        .iter()
        .any(|d| d.stat("metrics.opt.writeback.bound").is_some());
    let mut out = String::from("<h3>Gap to OPT</h3><p>Belady's MIN on the same requests, capacity and line size: the fewest misses any cache can have.");
    if wb {
        let (r, w) = designs
            .iter()
            .find_map(|d| {
                Some((
                    d.stat("metrics.opt.writeback.read_cost")?.mean,
                    d.stat("metrics.opt.writeback.write_cost")?.mean,
                ))
            })
            .unwrap_or((1.0, 1.0));
        let _ = write!(
            out,
             " Write-back designs: backend cost (line reads × {} + line writes × {}) against the write-back lower bound (the largest of the sum of minima, the joint flow and its aggregated form; the one that binds named).",
            fmt_num(r),
            fmt_num(w)
        );
    }
    out.push_str("</p><table><tr><th>design</th><th>miss ratio</th><th>OPT miss ratio</th><th>gap</th><th>misses over OPT</th>");
    if wb {
        out.push_str("<th>write-back cost</th><th>bound</th><th>cost over bound</th>");
    }
    out.push_str("</tr>");
    let num = |d: &Design<'_>, path: &str| d.stat(path).map(|s| s.mean);
    let cell = |x: Option<f64>| x.map_or_else(|| "—".to_string(), fmt_num);
    let percent =
        |x: Option<f64>| x.map_or_else(|| "—".to_string(), |x| format!("{:+.1}%", x * 100.0));
    for d in designs {
        let Some(opt) = num(d, "metrics.opt.miss_ratio") else {
            let _ = write!(
                out,
                "<tr><td>{}</td><td colspan=\"4\" class=\"muted\">no optimum (not a hit-ratio run of a trace)</td></tr>",
                shown(&d.name)
            );
            continue;
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            shown(&d.name),
            cell(num(d, "metrics.hit_ratio").map(|h| 1.0 - h)),
            fmt_num(opt),
            cell(num(d, "metrics.opt.gap_miss_ratio")),
            percent(num(d, "metrics.opt.excess_misses")),
        );
        if wb {
            match num(d, "metrics.opt.writeback.cost") {
                Some(cost) => {
                    let _ = write!(
                        out,
                        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                        fmt_num(cost),
                        bound_cell(d),
                        percent(num(d, "metrics.opt.writeback.excess")),
                    );
                }
                None => {
                    let why = d
                        .first_ok()
                        .and_then(|r| crate::data::lookup(&r.record, "metrics.opt.writeback_note"))
                        .and_then(|v| v.as_str())
                        .unwrap_or("not a write-back design");
                    let _ = write!(out, "<td colspan=\"3\" class=\"muted\">{}</td>", esc(why));
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}
