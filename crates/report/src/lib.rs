//! Reports for tiercache results (`tiercache report RESULTS`): one self-contained HTML page
//! (inline CSS and SVG, no network needed to view it) plus an SVG file per plot.
//!
//! Plots: per-workload bars of each metric by design (IOPS, tail latency, hit ratio, or any
//! metric named by its dotted path in the record), latency CDFs drawn from the recorded
//! percentiles, timelines (IOPS, hit ratio, dirty lines, queue depths) when records carry a
//! `timeline`, heat maps over two axes, and a summary naming the best design per workload and
//! metric with its margin over the default and the worst design. A cache hierarchy's record is
//! drawn as one run per level (its `metrics` are a single cache's), in a workload per level. Metrics are looked up by path
//! (`metrics.latency_us.all.p9999`), so new metrics need no code.

#![warn(missing_docs)]

mod data;
mod html;
mod opt;
mod place;
mod plots;
mod tenancy;
/// The SVG charts, from their own crate (the workload analysis draws with them too).
pub mod svg {
    pub use tiercache_plot::*;
}

pub use data::{lookup, lookup_f64, Design, ResultSet, Run, Stat};
pub use html::build_report;
pub use place::{page_place, PagePlace};

use std::path::{Path, PathBuf};

/// Errors of reports.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A `--metric` argument is malformed.
    #[error("--metric `{text}`: {reason}")]
    Metric {
        /// As given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// No runs were found in the inputs.
    #[error("no results in {0}")]
    Empty(String),
    /// Every run in the inputs failed: there is nothing to plot.
    #[error(
        "all {runs} runs in {inputs} failed, so there is nothing to plot (the failures are listed in {page}); the first error: {first}"
    )]
    AllFailed {
        /// Runs found.
        runs: usize,
        /// The inputs.
        inputs: String,
        /// The page written, listing the failures.
        page: String,
        /// The first failed run's error.
        first: String,
    },
}

/// Whether larger or smaller values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Larger is better (IOPS, hit ratio).
    Max,
    /// Smaller is better (latency, bytes written).
    Min,
}

/// A metric to compare designs on.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Dotted path into the record, e.g. `metrics.latency_us.all.p99`.
    pub path: String,
    /// Human name.
    pub label: String,
    /// Direction.
    pub better: Better,
}

impl MetricSpec {
    /// A metric.
    pub fn new(path: &str, label: &str, better: Better) -> Self {
        Self {
            path: path.into(),
            label: label.into(),
            better,
        }
    }

    /// The default comparison: IOPS, p99 and p99.99 latency, hit ratio.
    pub fn defaults() -> Vec<Self> {
        vec![
            Self::new("metrics.iops", "IOPS", Better::Max),
            Self::new(
                "metrics.latency_us.all.p99",
                "p99 latency (µs)",
                Better::Min,
            ),
            Self::new(
                "metrics.latency_us.all.p9999",
                "p99.99 latency (µs)",
                Better::Min,
            ),
            Self::new("metrics.hit_ratio", "hit ratio", Better::Max),
        ]
    }
}

impl std::str::FromStr for MetricSpec {
    type Err = ReportError;

    /// `PATH:max|min[:LABEL]`, e.g. `metrics.cache_bytes_written:min:cache writes (bytes)`.
    fn from_str(text: &str) -> Result<Self, ReportError> {
        let err = |reason: &str| ReportError::Metric {
            text: text.into(),
            reason: reason.into(),
        };
        let mut parts = text.splitn(3, ':');
        let path = parts.next().unwrap_or_default().trim();
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(err("expected a dotted path such as metrics.iops"));
        }
        let better = match parts.next().map(str::trim) {
            Some("max") => Better::Max,
            Some("min") => Better::Min,
            _ => return Err(err("expected PATH:max or PATH:min (optionally :LABEL)")),
        };
        let label = parts
            .next()
            .map(str::to_string)
            .unwrap_or_else(|| path.trim_start_matches("metrics.").to_string());
        Ok(Self {
            path: path.into(),
            label,
            better,
        })
    }
}

/// What to put in a report.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Page title.
    pub title: String,
    /// A paragraph under the title (the sweep's description).
    pub description: Option<String>,
    /// Metrics compared (bars, heat maps, summary); those no run has (or that are all zero)
    /// are left out.
    pub metrics: Vec<MetricSpec>,
    /// Heat-map axes `(x, y)` by axis name; default: the first two axes with more than one value.
    pub heat_axes: Option<(String, String)>,
    /// At most this many bars per bar chart (the rest are summarised), and lines per CDF or
    /// timeline chart.
    pub max_bars: usize,
    /// At most this many lines per CDF or timeline chart.
    pub max_series: usize,
    /// Latency summary drawn as CDFs (a path to an object with p50, p90, p99, p999, p9999, max).
    pub cdf_path: String,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            title: "tiercache report".into(),
            description: None,
            metrics: MetricSpec::defaults(),
            heat_axes: None,
            max_bars: 40,
            max_series: 8,
            cdf_path: "metrics.latency_us.all".into(),
        }
    }
}

/// One plot of a report.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Element id (also the SVG file stem).
    pub id: String,
    /// Title.
    pub title: String,
    /// The standalone SVG.
    pub svg: String,
}

/// The best design of a workload for one metric, and its margins.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    /// Workload.
    pub workload: String,
    /// Metric.
    pub metric: MetricSpec,
    /// Best design and its mean.
    pub best: (String, f64),
    /// Default design and its mean.
    pub default: (String, f64),
    /// Worst design and its mean.
    pub worst: (String, f64),
    /// Designs compared.
    pub designs: usize,
    /// Other designs within 0.1% of the best (the best is then a near-tie, not a winner).
    pub ties: usize,
}

impl SummaryRow {
    /// Relative change from `reference` to the best, in percent (`(best − ref) / |ref|`);
    /// `None` when the reference is zero.
    pub fn change_pct(&self, reference: f64) -> Option<f64> {
        (reference != 0.0).then(|| (self.best.1 - reference) / reference.abs() * 100.0)
    }

    /// How many times better the best is than `reference` (≥ 1): best/ref for maximised
    /// metrics, ref/best for minimised ones; `None` when undefined.
    pub fn factor(&self, reference: f64) -> Option<f64> {
        let (b, r) = (self.best.1, reference);
        let f = match self.metric.better {
            Better::Max => b / r,
            Better::Min => r / b,
        };
        (f.is_finite() && f > 0.0).then_some(f)
    }
}

/// A built report.
#[derive(Debug, Clone)]
pub struct Report {
    /// The HTML page.
    pub html: String,
    /// Every plot (also inlined in the page).
    pub plots: Vec<Plot>,
    /// Best design per workload and metric.
    pub summary: Vec<SummaryRow>,
}

impl Report {
    /// Writes the page to `html_path` and each plot to `svg_dir/<id>.svg`; returns the SVG paths.
    pub fn write(&self, html_path: &Path, svg_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ReportError::Io { path, source }
        };
        if let Some(parent) = html_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(html_path, &self.html).map_err(io(html_path))?;
        std::fs::create_dir_all(svg_dir).map_err(io(svg_dir))?;
        let mut out = Vec::new();
        for p in &self.plots {
            let path = svg_dir.join(format!("{}.svg", p.id));
            std::fs::write(
                &path,
                format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n", p.svg),
            )
            .map_err(io(&path))?;
            out.push(path);
        }
        Ok(out)
    }
}
