//! Hand-written SVG charts: horizontal bars, line charts (linear, log and "nines" axes) and heat
//! maps. Each chart is one standalone `<svg>` element (it carries its own `xmlns`), so the same
//! text is inlined into the HTML page and written as an `.svg` file.

#![warn(missing_docs)]
use std::fmt::Write;

mod stacked;
mod ticks;
pub use stacked::stacked_step_chart;
pub use ticks::linear_ticks;
use ticks::nice_range;

/// Categorical palette (Tableau 10): distinguishable, print-safe.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

const FONT: &str =
    "font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif\"";
const CHAR_W: f64 = 6.6; // approximate width of an 11px sans-serif character

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Formats a number compactly: `1.23M`, `45.6k`, `0.873`, `12.3`.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    let (x, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let s = if ax == 0.0 {
        "0".to_string()
    } else if ax >= 100.0 {
        format!("{x:.0}")
    } else if ax >= 10.0 {
        format!("{x:.1}")
    } else if ax >= 1.0 {
        format!("{x:.2}")
    } else if ax >= 0.001 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    };
    let s = if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// Shortens a label to at most `max` characters with an ellipsis.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// A bar of a bar chart.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Design name.
    pub label: String,
    /// Mean over repetitions.
    pub value: f64,
    /// Smallest repetition (the whisker's low end).
    pub lo: f64,
    /// Largest repetition.
    pub hi: f64,
    /// Role of the design, coloured and marked.
    pub role: Role,
}

/// How a bar is highlighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An ordinary design.
    Plain,
    /// The best design for the metric.
    Best,
    /// The default design.
    Default,
    /// Both best and default.
    BestDefault,
    /// The worst design.
    Worst,
}

fn open(out: &mut String, w: f64, h: f64, id: &str, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"{}\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" {FONT} font-size=\"11\"><title>{}</title><rect x=\"0\" y=\"0\" width=\"{w:.0}\" height=\"{h:.0}\" fill=\"#ffffff\"/>",
        esc(id),
        esc(title)
    );
    // The visible title fits the plot (about 8.4 px per 14 px character); the whole title is
    // the tooltip above.
    let fits = ((w - 24.0) / 8.4).max(8.0) as usize;
    let _ = write!(
        out,
        "<text x=\"12\" y=\"20\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">{}</text>",
        esc(&clip(title, fits))
    );
}

/// A horizontal bar chart: one bar per design with min–max whiskers over repetitions, the best
/// green, the default outlined, the worst red.
pub fn bar_chart(id: &str, title: &str, value_label: &str, bars: &[Bar]) -> String {
    let label_chars = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 56);
    let left = 16.0 + label_chars as f64 * CHAR_W;
    let plot_w = 520.0;
    let w = left + plot_w + 90.0;
    let row = 18.0;
    let top = 34.0;
    let h = top + row * bars.len().max(1) as f64 + 44.0;
    let max = bars
        .iter()
        .map(|b| b.hi.max(b.value))
        .fold(0.0f64, f64::max);
    let min = bars
        .iter()
        .map(|b| b.lo.min(b.value))
        .fold(0.0f64, f64::min);
    let (lo, hi) = nice_range(min, max, true);
    let x = |v: f64| left + (v - lo) / (hi - lo) * plot_w;
    let mut s = String::new();
    open(&mut s, w, h, id, title);
    let bottom = top + row * bars.len().max(1) as f64;
    for t in linear_ticks(lo, hi, 5) {
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{bottom}\" stroke=\"#e3e3e3\"/><text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" fill=\"#555\">{2}</text>",
            x(t),
            bottom + 14.0,
            fmt_num(t)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text>",
        left + plot_w / 2.0,
        bottom + 32.0,
        esc(value_label)
    );
    for (i, b) in bars.iter().enumerate() {
        let y = top + row * i as f64;
        let (fill, stroke) = match b.role {
            Role::Best => ("#59a14f", "none"),
            Role::BestDefault => ("#59a14f", "#222"),
            Role::Default => ("#4e79a7", "#222"),
            Role::Worst => ("#e15759", "none"),
            Role::Plain => ("#9bb4d0", "none"),
        };
        let x0 = x(0.0f64.max(lo));
        let x1 = x(b.value);
        let tag = match b.role {
            Role::Best => " (best)",
            Role::BestDefault => " (best, default)",
            Role::Default => " (default)",
            Role::Worst => " (worst)",
            Role::Plain => "",
        };
        let _ = write!(
            s,
            "<g><title>{}{}: {}</title><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#222\">{}</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\" stroke=\"{stroke}\"/>",
            esc(&b.label),
            tag,
            fmt_num(b.value),
            left - 6.0,
            y + row * 0.68,
            esc(&clip(&b.label, label_chars)),
            x0.min(x1),
            y + 3.0,
            (x1 - x0).abs().max(0.5),
            row - 6.0
        );
        if b.hi > b.lo {
            let _ = write!(
                s,
                "<line x1=\"{:.1}\" y1=\"{2:.1}\" x2=\"{:.1}\" y2=\"{2:.1}\" stroke=\"#333\"/>",
                x(b.lo),
                x(b.hi),
                y + row / 2.0
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">{}{}</text></g>",
            x(b.value.max(b.hi)) + 4.0,
            y + row * 0.68,
            fmt_num(b.value),
            match b.role {
                Role::Best | Role::BestDefault => " ★",
                _ => "",
            }
        );
    }
    s.push_str("</svg>");
    s
}

/// How a line chart maps values to an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear from zero (or the data's minimum when negative).
    Linear,
    /// Base-10 logarithm (positive values only).
    Log,
    /// Percentile axis stretched at the tail: position `-log10(1 - p)` for a fraction `p`.
    Nines,
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn fit(scale: Scale, values: impl Iterator<Item = f64>) -> Self {
        let vals: Vec<f64> = values
            .filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0))
            .collect();
        let (mn, mx) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        match scale {
            Scale::Linear => {
                let (lo, hi) = if vals.is_empty() {
                    (0.0, 1.0)
                } else {
                    nice_range(mn, mx, true)
                };
                Self { scale, lo, hi }
            }
            Scale::Log => {
                let (lo, hi) = if vals.is_empty() {
                    (0.0, 1.0)
                } else {
                    let lo = mn.log10().floor();
                    let hi = mx.log10().ceil();
                    (lo, if hi > lo { hi } else { lo + 1.0 })
                };
                Self { scale, lo, hi }
            }
            Scale::Nines => {
                let hi = (vals.iter().map(|p| nines(*p)).fold(1.0f64, f64::max) - 1e-6).ceil();
                Self { scale, lo: 0.0, hi }
            }
        }
    }

    /// Position of `v` as a fraction 0..=1 of the axis.
    fn frac(&self, v: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => v,
            Scale::Log => v.max(1e-300).log10(),
            Scale::Nines => nines(v),
        };
        (t - self.lo) / (self.hi - self.lo)
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        match self.scale {
            Scale::Linear => linear_ticks(self.lo, self.hi, 5)
                .into_iter()
                .map(|t| (t, fmt_num(t)))
                .collect(),
            Scale::Log => {
                let mut out = Vec::new();
                let mut e = self.lo;
                let decades = self.hi - self.lo;
                while e <= self.hi + 1e-9 {
                    let base = 10f64.powf(e);
                    out.push((base, fmt_num(base)));
                    if decades <= 2.0 && e < self.hi - 1e-9 {
                        out.push((2.0 * base, fmt_num(2.0 * base)));
                        out.push((5.0 * base, fmt_num(5.0 * base)));
                    }
                    e += 1.0;
                }
                out
            }
            Scale::Nines => {
                let mut out = vec![(0.0, "0%".to_string())];
                let mut k = 1.0;
                while k <= self.hi + 1e-9 {
                    let p = 1.0 - 10f64.powf(-k);
                    let label = format!("{}%", fmt_percent(p));
                    out.push((p, label));
                    k += 1.0;
                }
                out
            }
        }
    }
}

fn fmt_percent(p: f64) -> String {
    let s = format!("{:.6}", p * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `-log10(1 - p)`: 0.9 → 1, 0.99 → 2, 0.9999 → 4.
pub fn nines(p: f64) -> f64 {
    -(1.0 - p.clamp(0.0, 1.0 - 1e-12)).log10()
}

/// A line chart with markers, axis ticks and a legend on the right.
pub fn line_chart(
    id: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_scale: Scale,
    y_scale: Scale,
) -> String {
    line_chart_with_bands(
        id,
        title,
        x_label,
        y_label,
        series,
        x_scale,
        y_scale,
        &[],
        "",
    )
}

/// As [`line_chart`], with spans of x shaded behind the lines (`bands`: `(from, to)` in data
/// units, e.g. the intervals of a burst) and named `band_label` in the legend.
#[allow(clippy::too_many_arguments)]
pub fn line_chart_with_bands(
    id: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_scale: Scale,
    y_scale: Scale,
    bands: &[(f64, f64)],
    band_label: &str,
) -> String {
    // A series drawn exactly over an earlier one would hide it: it is dashed, and its legend
    // entry names the one it coincides with.
    let same_as: Vec<Option<usize>> = series
        .iter()
        .enumerate()
        .map(|(i, a)| series[..i].iter().position(|b| b.points == a.points))
        .collect();
    let legend: Vec<String> = series
        .iter()
        .zip(&same_as)
        .map(|(ser, same)| match same {
            Some(j) => clip(&format!("{} (= {})", ser.name, series[*j].name), 48),
            None => clip(&ser.name, 48),
        })
        .collect();
    let legend_chars = legend
        .iter()
        .map(|l| l.chars().count())
        .chain((!bands.is_empty()).then(|| band_label.chars().count().min(48)))
        .max()
        .unwrap_or(0);
    let (left, top, plot_w, plot_h) = (70.0, 34.0, 560.0, 300.0);
    let w = left + plot_w + 30.0 + legend_chars as f64 * CHAR_W + 24.0;
    let h = top + plot_h + 50.0;
    let xa = Axis::fit(
        x_scale,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
    );
    let ya = Axis::fit(
        y_scale,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
    );
    let px = |v: f64| left + xa.frac(v) * plot_w;
    let py = |v: f64| top + plot_h - ya.frac(v) * plot_h;
    let mut s = String::new();
    open(
        &mut s,
        w,
        h.max(top + 20.0 * (series.len() + usize::from(!bands.is_empty())) as f64 + 20.0),
        id,
        title,
    );
    for (t, label) in xa.ticks() {
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#e8e8e8\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\" fill=\"#555\">{3}</text>",
            px(t),
            top + plot_h,
            top + plot_h + 14.0,
            esc(&label)
        );
    }
    for (t, label) in ya.ticks() {
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#e8e8e8\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\" fill=\"#555\">{4}</text>",
            py(t),
            left + plot_w,
            left - 5.0,
            py(t) + 4.0,
            esc(&label)
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
    if !bands.is_empty() {
        let _ = write!(s, "<g class=\"bands\"><title>{}</title>", esc(band_label));
        for &(a, b) in bands {
            let (x0, x1) = (px(a).max(left), px(b).min(left + plot_w));
            if x1 > x0 {
                let _ = write!(
                    s,
                    "<rect x=\"{x0:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{plot_h}\" fill=\"#f4d3a4\" fill-opacity=\"0.55\"/>",
                    x1 - x0
                );
            }
        }
        let ly = top + 8.0 + 16.0 * series.len() as f64;
        let lx = left + plot_w + 16.0;
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"#f4d3a4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#222\">{}</text></g>",
            ly - 5.0,
            lx + 16.0,
            ly + 4.0,
            esc(&clip(band_label, 48))
        );
    }
    for (i, ser) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = ser
            .points
            .iter()
            .filter(|(x, y)| {
                x.is_finite()
                    && y.is_finite()
                    && (x_scale == Scale::Linear || *x > 0.0)
                    && (y_scale != Scale::Log || *y > 0.0)
            })
            .map(|(x, y)| (px(*x), py(*y)))
            .collect();
        let _ = write!(s, "<g><title>{}</title>", esc(&ser.name));
        if pts.len() > 1 {
            let d: Vec<String> = pts
                .iter()
                .enumerate()
                .map(|(k, (x, y))| format!("{}{x:.1},{y:.1}", if k == 0 { "M" } else { "L" }))
                .collect();
            let dash = if same_as[i].is_some() {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = write!(
                s,
                "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.8\"{dash}/>",
                d.join(" ")
            );
        }
        if pts.len() <= 40 {
            for (x, y) in &pts {
                let _ = write!(
                    s,
                    "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.6\" fill=\"{color}\"/>"
                );
            }
        }
        let ly = top + 8.0 + 16.0 * i as f64;
        let lx = left + plot_w + 16.0;
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#222\">{}</text></g>",
            ly - 1.5,
            lx + 16.0,
            ly + 4.0,
            esc(&legend[i])
        );
    }
    s.push_str("</svg>");
    s
}

/// Viridis colour for `t` in 0..=1 (five stops, linear in between).
pub fn viridis(t: f64) -> (u8, u8, u8) {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let f = t * 4.0;
    let i = (f.floor() as usize).min(3);
    let u = f - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * u).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// A heat map over two axes: one cell per (x, y) label pair with its value printed; colour runs
/// from dark (worst) to yellow (best) whichever direction is better. Missing cells are hatched grey.
#[allow(clippy::too_many_arguments)]
pub fn heat_map(
    id: &str,
    title: &str,
    x_name: &str,
    x_labels: &[String],
    y_name: &str,
    y_labels: &[String],
    cells: &[Vec<Option<f64>>],
    higher_is_better: bool,
) -> String {
    let ylab_chars = y_labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 30);
    let xlab_chars = x_labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 30);
    let cell_w = (xlab_chars as f64 * CHAR_W + 12.0).max(64.0);
    let cell_h = 28.0;
    let left = 30.0 + ylab_chars as f64 * CHAR_W;
    let top = 56.0;
    let w = (left + cell_w * x_labels.len() as f64 + 130.0).max(360.0);
    // Tall enough for the colour key (100 px) and the "no result" swatch below it.
    let h = (top + cell_h * y_labels.len() as f64 + 44.0).max(top + 150.0);
    let vals: Vec<f64> = cells
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let (mn, mx) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let goodness = |v: f64| {
        let t = if mx > mn { (v - mn) / (mx - mn) } else { 1.0 };
        if higher_is_better {
            t
        } else {
            1.0 - t
        }
    };
    let mut s = String::new();
    open(&mut s, w, h, id, title);
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"38\" text-anchor=\"middle\" fill=\"#333\">{}</text><text x=\"12\" y=\"{:.1}\" fill=\"#333\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        left + cell_w * x_labels.len() as f64 / 2.0,
        esc(x_name),
        top + cell_h * y_labels.len() as f64 / 2.0,
        top + cell_h * y_labels.len() as f64 / 2.0,
        esc(y_name)
    );
    for (i, l) in x_labels.iter().enumerate() {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
            left + cell_w * (i as f64 + 0.5),
            top - 6.0,
            esc(&clip(l, 30))
        );
    }
    for (j, l) in y_labels.iter().enumerate() {
        let y = top + cell_h * j as f64;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#222\">{}</text>",
            left - 6.0,
            y + cell_h * 0.62,
            esc(&clip(l, 30))
        );
        for (i, xl) in x_labels.iter().enumerate() {
            let x = left + cell_w * i as f64;
            match cells.get(j).and_then(|r| r.get(i)).copied().flatten() {
                Some(v) => {
                    let (r, g, b) = viridis(goodness(v));
                    let light =
                        0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b) > 140.0;
                    let _ = write!(
                        s,
                        "<g><title>{}={}, {}={}: {}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell_w:.1}\" height=\"{cell_h}\" fill=\"rgb({r},{g},{b})\" stroke=\"#fff\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{}</text></g>",
                        esc(x_name),
                        esc(xl),
                        esc(y_name),
                        esc(l),
                        fmt_num(v),
                        x + cell_w / 2.0,
                        y + cell_h * 0.62,
                        if light { "#111" } else { "#fff" },
                        fmt_num(v)
                    );
                }
                None => {
                    let _ = write!(
                        s,
                        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cell_w:.1}\" height=\"{cell_h}\" fill=\"#eee\" stroke=\"#fff\"><title>no result</title></rect>"
                    );
                }
            }
        }
    }
    // Colour key: worst to best.
    let kx = left + cell_w * x_labels.len() as f64 + 24.0;
    for k in 0..10 {
        let (r, g, b) = viridis(k as f64 / 9.0);
        let _ = write!(
            s,
            "<rect x=\"{kx:.1}\" y=\"{:.1}\" width=\"14\" height=\"10\" fill=\"rgb({r},{g},{b})\"/>",
            top + 100.0 - 10.0 * k as f64
        );
    }
    let (best, worst) = if higher_is_better { (mx, mn) } else { (mn, mx) };
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">best {}</text><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">worst {}</text>",
        kx + 18.0,
        top + 18.0 - 8.0,
        fmt_num(best),
        kx + 18.0,
        top + 110.0 - 2.0,
        fmt_num(worst)
    );
    let missing = y_labels.iter().enumerate().any(|(j, _)| {
        (0..x_labels.len()).any(|i| {
            cells
                .get(j)
                .and_then(|r| r.get(i))
                .copied()
                .flatten()
                .is_none()
        })
    });
    if missing {
        let _ = write!(
            s,
            "<rect x=\"{kx:.1}\" y=\"{:.1}\" width=\"14\" height=\"10\" fill=\"#eee\" stroke=\"#bbb\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">no result</text>",
            top + 124.0,
            kx + 18.0,
            top + 133.0
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compact() {
        assert_eq!(fmt_num(1_234_567.0), "1.23M");
        assert_eq!(fmt_num(45_600.0), "45.6k");
        assert_eq!(fmt_num(0.8731), "0.873");
        assert_eq!(fmt_num(12.0), "12");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(f64::NAN), "n/a");
    }

    #[test]
    fn escaping_closes_every_markup_hole() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
    }

    #[test]
    fn nines_axis_positions() {
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.9999) - 4.0).abs() < 1e-9);
        assert!(nines(1.0).is_finite());
    }

    #[test]
    fn viridis_ends() {
        assert_eq!(viridis(0.0), (68, 1, 84));
        assert_eq!(viridis(1.0), (253, 231, 37));
        assert_eq!(viridis(f64::NAN), (68, 1, 84));
    }
}
