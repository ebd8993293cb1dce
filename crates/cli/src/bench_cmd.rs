//! `tiercache bench`: runs the engine for real, drives it with fio (nbd engine) from the
//! config's `[workload]`, and prints the same result record as `tiercache sim`, so a
//! simulated and a measured run of one design compare field by field. The runs are
//! `tiercache_run::bench`'s.

use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use tiercache_run::bench::{bench_runs, check_fio};
use tiercache_run::sim::with_suffix;

/// Arguments of `tiercache bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Config with `[cache]`, `[engine]`, `[workload]` (synthetic) and optionally `[bench]`.
    pub config: PathBuf,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// `--json`: one JSON result record per run (JSON lines, as `sim`) instead of the table;
    /// `--quiet`: no notes, no progress bar while fio fills the cache (`bench.prewarm`).
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
    /// Keep fio's own JSON output in this file (the variant's name is added to the file name
    /// when the config has several).
    #[arg(long, value_name = "FILE")]
    pub fio_output: Option<PathBuf>,
    /// Run only the variants whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
}

/// Entry point of `tiercache bench`: every variant of the config (as `sim` runs them), one
/// after another, each on a fresh engine.
pub fn run(args: BenchArgs) -> Result<()> {
    let runs = bench_runs(&args.config, &args.overrides, args.only.as_deref())?;
    check_fio()?;
    let several = runs.len() > 1;
    let mut rows = Vec::new();
    let stdout = std::io::stdout();
    for run in &runs {
        let fio_output = args.fio_output.as_ref().map(|p| {
            if several {
                with_suffix(p, &run.name)
            } else {
                p.clone()
            }
        });
        let record = run.run(fio_output)?;
        if args.output.json {
            writeln!(stdout.lock(), "{}", record.to_json_line()?)?;
        } else {
            rows.push((record.name.clone(), record.metrics));
        }
    }
    if !args.output.json {
        write!(stdout.lock(), "{}", tiercache_metrics::render_table(&rows))?;
    }
    Ok(())
}
