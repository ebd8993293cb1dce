//! `tiercache sim` on a config with a `[hierarchy]` section (`tiercache hierarchy` is an alias
//! of `sim`): run the cache hierarchy (docs/design.md §4.7), each `[[variant]]` in turn, and
//! print the per-level table or one JSON record per run. The runs are
//! `tiercache_run::hierarchy`'s.

use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use tiercache_run::hierarchy::hierarchy_runs;

/// What `tiercache sim` passes on for a hierarchy config.
#[derive(Debug, Args)]
pub struct HierarchyArgs {
    /// Config (TOML) with a `[hierarchy]` section.
    pub config: PathBuf,
    /// Override a config key: `--set hierarchy.exclusive=true` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Print one JSON record per run (JSON lines) instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Run only the variants whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
}

/// Runs a hierarchy config (from `tiercache sim`).
pub fn run(args: HierarchyArgs) -> Result<()> {
    let runs = hierarchy_runs(&args.config, &args.overrides, args.only.as_deref())?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // Each run printed as it ends: a long config shows its first results early.
    for run in runs {
        let record = run.run()?;
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&record)?)?;
        } else {
            writeln!(
                out,
                "== {}: {} requests",
                record.name, record.result.requests
            )?;
            writeln!(out, "{}", record.result.table())?;
        }
        out.flush()?;
    }
    Ok(())
}
