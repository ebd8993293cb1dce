//! `tiercache report RESULTS`: argument struct (clap derive) and runner.

use crate::{build_report, MetricSpec, ReportOptions, ResultSet};
use anyhow::Context;
use std::path::PathBuf;

/// `tiercache report RESULTS...`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Result files (results.jsonl of a sweep, or JSON-lines run records) or sweep output
    /// directories.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// HTML file to write (default: report.html next to the first input).
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Directory for the SVG files (default: `<out stem>-plots` next to the HTML file).
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
    /// Page title.
    #[arg(long)]
    pub title: Option<String>,
    /// Metric to compare, `PATH:max|min[:LABEL]` (repeatable; replaces the defaults: IOPS, p99
    /// and p99.99 latency, hit ratio), e.g. `--metric metrics.cache_bytes_written:min:wear`.
    #[arg(long = "metric", value_name = "PATH:DIR[:LABEL]")]
    pub metrics: Vec<String>,
    /// Heat-map axes by name, `X,Y` (default: the first two axes with more than one value).
    #[arg(long, value_name = "X,Y")]
    pub heat: Option<String>,
    /// Most bars per bar chart.
    #[arg(long, default_value_t = 40)]
    pub max_bars: usize,
    /// Most lines per CDF or timeline chart.
    #[arg(long, default_value_t = 8)]
    pub max_series: usize,
}

/// Runs `tiercache report`: reads the results, writes the HTML page and the SVG files, and prints
/// where they are.
pub fn run(args: &ReportArgs) -> anyhow::Result<PathBuf> {
    let results = ResultSet::load(&args.results)?;
    // Skipped lines do not fail the report (an interrupted sweep leaves a partial line that
    // stays in its results), but each is named, here and on the page.
    for line in &results.malformed {
        eprintln!("report: skipped an unreadable line at {line}");
    }
    for note in &results.notes {
        eprintln!("report: note: {note}");
    }
    if results.runs.is_empty() && results.hierarchies.is_empty() {
        return Err(crate::ReportError::Empty(
            args.results
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )
        .into());
    }
    let mut opts = ReportOptions::default();
    if !args.metrics.is_empty() {
        opts.metrics = args
            .metrics
            .iter()
            .map(|m| m.parse::<MetricSpec>())
            .collect::<Result<_, _>>()?;
    }
    if let Some(h) = &args.heat {
        let (x, y) = h
            .split_once(',')
            .context("--heat expects X,Y (two axis names)")?;
        opts.heat_axes = Some((x.trim().to_string(), y.trim().to_string()));
    }
    opts.max_bars = args.max_bars.max(2);
    opts.max_series = args.max_series.max(1);
    let first = &args.results[0];
    // The first input's directory: a sweep's output directory names the sweep and says what
    // it is about, and the page goes there by default.
    let dir = if first.is_dir() {
        first.clone()
    } else {
        first.parent().map(PathBuf::from).unwrap_or_default()
    };
    let about: Option<serde_json::Value> =
        std::fs::read_to_string(dir.join(tiercache_sweep::SWEEP_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let sweep_name = about
        .as_ref()
        .and_then(|a| a["name"].as_str())
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    opts.description = about
        .as_ref()
        .and_then(|a| a["description"].as_str())
        .map(str::to_string);
    opts.title = args
        .title
        .clone()
        .or(sweep_name.map(|n| format!("tiercache report: {n}")))
        .unwrap_or_else(|| match dir.file_name() {
            Some(n) => format!("tiercache report: {}", n.to_string_lossy()),
            None => "tiercache report".into(),
        });
    let out = args.out.clone().unwrap_or_else(|| dir.join("report.html"));
    let svg_dir = args.svg_dir.clone().unwrap_or_else(|| {
        let stem = out
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        out.with_file_name(format!("{stem}-plots"))
    });
    let report = build_report(&results, &opts);
    let svgs = report.write(&out, &svg_dir)?;
    eprintln!(
        "report: {} runs, {} plots -> {} (SVG files in {})",
        results.runs.len() + results.hierarchies.len(),
        svgs.len(),
        out.display(),
        svg_dir.display()
    );
    for r in &report.summary {
        eprintln!(
            "  {:<16} {:<22} best {} ({})",
            r.workload,
            r.metric.label,
            r.best.0,
            crate::svg::fmt_num(r.best.1)
        );
    }
    // The page lists the failures with their errors; the command still fails, saying why
    // there is nothing to plot.
    if !results.runs.is_empty() && results.runs.iter().all(|r| !r.ok) {
        return Err(crate::ReportError::AllFailed {
            runs: results.runs.len(),
            inputs: args
                .results
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            page: out.display().to_string(),
            first: results.runs[0]
                .error
                .clone()
                .unwrap_or_else(|| "(no error recorded)".into()),
        }
        .into());
    }
    Ok(out)
}
