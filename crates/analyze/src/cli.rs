//! `tiercache analyze FILE`: analyse a trace in any format tiercache reads.

use crate::{Analyzer, Options};
use anyhow::{Context, Result};
use clap::Args;

/// Arguments of `tiercache analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Trace file (format detected unless given; compressed files are detected too).
    pub file: String,
    /// Trace format.
    #[arg(long)]
    pub format: Option<tiercache_trace::Format>,
    /// Skip and count malformed records instead of failing.
    #[arg(long)]
    pub skip_bad: bool,
    /// Line size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// Cache sizes (lines) for the curves, comma separated; default: powers of two.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u64>,
    /// Also estimate the curve with fixed-rate SHARDS at this sampling rate (e.g. 0.01).
    #[arg(long)]
    pub shards_rate: Option<f64>,
    /// Also estimate the curve with fixed-size SHARDS tracking at most this many lines.
    #[arg(long)]
    pub shards_max_entries: Option<usize>,
    /// WAR+WAW share of reuses above which the advice disables cache writes.
    #[arg(long, default_value_t = 0.5)]
    pub write_reuse_threshold: f64,
    /// Print the analysis as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A bad command-line value (exit code 2 at the edge).
#[derive(Debug)]
pub struct BadArgument(pub String);

impl std::fmt::Display for BadArgument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgument {}

/// Entry point of `tiercache analyze`.
pub fn run(args: AnalyzeArgs) -> Result<()> {
    if let Some(r) = args.shards_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(BadArgument(format!("--shards-rate {r}: must be in (0, 1]")).into());
        }
    }
    let opts = tiercache_trace::ReadOptions {
        skip_bad: args.skip_bad,
        ..Default::default()
    };
    let mut reader = tiercache_trace::open(&args.file, args.format, &opts)?;
    let mut analyzer = Analyzer::new(Options {
        line_size: args.line_size,
        sizes: args.sizes,
        shards_rate: args.shards_rate,
        shards_max_entries: args.shards_max_entries,
        write_reuse_threshold: args.write_reuse_threshold,
    })
    .map_err(|e| BadArgument(format!("--line-size: {e}")))?;
    for r in reader.by_ref() {
        analyzer.add(&r?);
    }
    let volumes = reader.volumes();
    let analysis = analyzer.finish(&|v| volumes.name(v).unwrap_or("?").to_string());
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&analysis).context("serialising the analysis")?
        );
    } else {
        print!("{analysis}");
    }
    Ok(())
}
