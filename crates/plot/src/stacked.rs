//! Stacked step areas: how a whole is split among parts over time, each split holding until
//! the next (e.g. a cache's lines allocated to its volumes at each interval boundary).

use super::{clip, esc, fmt_num, linear_ticks, nice_range, open, PALETTE};
use std::fmt::Write;

/// A stacked step-area chart. `steps` are `(x, values)` in x order, one value per layer (in
/// `names` order, stacked from the bottom); each step holds from its x to the next one's, the
/// last to `x_end`. A dashed line marks `total` (e.g. the cache's size) when given.
#[allow(clippy::too_many_arguments)]
pub fn stacked_step_chart(
    id: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    names: &[String],
    steps: &[(f64, Vec<f64>)],
    x_end: f64,
    total: Option<f64>,
) -> String {
    let legend_chars = names
        .iter()
        .map(|n| clip(n, 40).chars().count())
        .max()
        .unwrap_or(0);
    let (left, top, plot_w, plot_h): (f64, f64, f64, f64) = (70.0, 34.0, 560.0, 300.0);
    let w = left + plot_w + 30.0 + legend_chars as f64 * 6.6 + 24.0;
    let h = (top + plot_h + 50.0).max(top + 16.0 * names.len() as f64 + 30.0);
    let x0 = steps.first().map_or(0.0, |s| s.0.min(x_end));
    let x1 = if x_end > x0 { x_end } else { x0 + 1.0 };
    let sum_max = steps
        .iter()
        .map(|(_, v)| v.iter().filter(|x| x.is_finite()).sum::<f64>())
        .fold(total.unwrap_or(0.0), f64::max);
    let (_, y1) = nice_range(0.0, sum_max.max(1e-9), true);
    let px = |v: f64| left + (v - x0) / (x1 - x0) * plot_w;
    let py = |v: f64| top + plot_h - v / y1 * plot_h;
    let mut s = String::new();
    open(&mut s, w, h, id, title);
    for t in linear_ticks(x0, x1, 6) {
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#e8e8e8\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\" fill=\"#555\">{3}</text>",
            px(t),
            top + plot_h,
            top + plot_h + 14.0,
            esc(&fmt_num(t))
        );
    }
    for t in linear_ticks(0.0, y1, 5) {
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#e8e8e8\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\" fill=\"#555\">{4}</text>",
            py(t),
            left + plot_w,
            left - 5.0,
            py(t) + 4.0,
            esc(&fmt_num(t))
        );
    }
    // Each layer: a polygon along its top edge (left to right), back along its bottom edge.
    let mut bottom = vec![0.0; steps.len()];
    for (i, name) in names.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let top_edge: Vec<f64> = steps
            .iter()
            .zip(&bottom)
            .map(|((_, v), b)| b + v.get(i).copied().filter(|x| x.is_finite()).unwrap_or(0.0))
            .collect();
        let edge = |heights: &[f64]| -> Vec<(f64, f64)> {
            let mut pts = Vec::new();
            for (k, (x, _)) in steps.iter().enumerate() {
                let next = steps.get(k + 1).map_or(x1, |n| n.0);
                pts.push((px(*x), py(heights[k])));
                pts.push((px(next), py(heights[k])));
            }
            pts
        };
        let mut pts = edge(&top_edge);
        let mut back = edge(&bottom);
        back.reverse();
        pts.extend(back);
        if !pts.is_empty() {
            let d: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                s,
                "<g><title>{}</title><polygon points=\"{}\" fill=\"{color}\" fill-opacity=\"0.85\" stroke=\"{color}\" stroke-width=\"0.5\"/></g>",
                esc(name),
                d.join(" ")
            );
        }
        let ly = top + 8.0 + 16.0 * i as f64;
        let lx = left + plot_w + 16.0;
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#222\">{}</text>",
            ly - 5.0,
            lx + 16.0,
            ly + 4.0,
            esc(&clip(name, 40))
        );
        bottom = top_edge;
    }
    if let Some(t) = total {
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#333\" stroke-dasharray=\"6 4\"><title>total {2}</title></line>",
            py(t),
            left + plot_w,
            esc(&fmt_num(t))
        );
    }
    let _ = write!(
        s,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#999\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>",
        left + plot_w / 2.0,
        top + plot_h + 34.0,
        esc(x_label),
        top + plot_h / 2.0,
        esc(y_label)
    );
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_stack_and_each_step_holds_until_the_next() {
        let names = vec!["a".to_string(), "b <x>".to_string()];
        let svg = stacked_step_chart(
            "id",
            "t",
            "time",
            "lines",
            &names,
            &[(0.0, vec![10.0, 20.0]), (5.0, vec![30.0, 0.0])],
            10.0,
            Some(40.0),
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polygon").count(), 2);
        assert!(svg.contains("b &lt;x&gt;"), "names are escaped");
        assert!(svg.contains("stroke-dasharray"), "the total is marked");
        // An empty chart still renders.
        let empty = stacked_step_chart("e", "t", "x", "y", &[], &[], 0.0, None);
        assert!(empty.ends_with("</svg>"));
    }
}
