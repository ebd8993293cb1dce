//! `tiercache report RESULTS`: the argument struct (clap derive) and the run, printing what
//! the report library made.

use anyhow::Context;
use std::path::PathBuf;
use tiercache_report::{
    build_report, page_place, MetricSpec, ReportError, ReportOptions, ResultSet,
};

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
    /// `--json`: where the page and plots went and the best design per workload and metric,
    /// as one JSON document on stdout (instead of the summary on stderr); `--quiet`: no notes.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
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
        if !args.output.quiet {
            eprintln!("report: note: {note}");
        }
    }
    let inputs = || {
        args.results
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if results.runs.is_empty() {
        return Err(ReportError::Empty(inputs()).into());
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
    let place = page_place(
        &args.results,
        args.out.clone(),
        args.svg_dir.clone(),
        args.title.clone(),
    );
    opts.title = place.title;
    opts.description = place.description;
    let (out, svg_dir) = (place.out, place.svg_dir);
    let report = build_report(&results, &opts);
    let svgs = report.write(&out, &svg_dir)?;
    if args.output.json {
        let best: Vec<_> = report
            .summary
            .iter()
            .map(|r| {
                serde_json::json!({
                    "workload": r.workload, "metric": r.metric.label,
                    "design": r.best.0, "value": r.best.1,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "report": out, "svg_dir": svg_dir, "runs": results.runs.len(),
                "plots": svgs, "best": best,
            })
        );
    } else {
        eprintln!(
            "report: {} runs, {} plots -> {} (SVG files in {})",
            results.runs.len(),
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
                tiercache_report::svg::fmt_num(r.best.1)
            );
        }
    }
    // The page lists the failures with their errors; the command still fails, saying why
    // there is nothing to plot.
    if !results.runs.is_empty() && results.runs.iter().all(|r| !r.ok) {
        return Err(ReportError::AllFailed {
            runs: results.runs.len(),
            inputs: inputs(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An input without results is refused, naming it, as bad input (exit code 2).
    #[test]
    fn an_empty_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        let args = ReportArgs {
            results: vec![empty],
            out: None,
            svg_dir: None,
            title: None,
            metrics: vec![],
            heat: None,
            max_bars: 40,
            max_series: 8,
            output: Default::default(),
        };
        let e = run(&args).unwrap_err();
        assert!(e.to_string().contains("no results"), "{e}");
        assert!(e.to_string().contains("empty.jsonl"), "{e}");
        assert_eq!(crate::errors::exit_code(&e), 2);
    }
}
