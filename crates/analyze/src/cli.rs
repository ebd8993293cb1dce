//! `tiercache analyze FILE`: analyse a trace in any format tiercache reads.

use crate::{Analyzer, Options};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;

/// Arguments of `tiercache analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Trace file (format detected unless given; compressed files are detected too).
    pub file: String,
    /// How to read the trace (format, skipping bad records, a CSV mapping, blkparse's action,
    /// oracleGeneral's bytes per object), as for `tiercache trace`.
    #[command(flatten)]
    pub input: tiercache_trace::cli::InputArgs,
    /// Line size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// Cache sizes (lines) for the curves, comma separated; default: powers of two.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u64>,
    /// Estimate the curve with fixed-rate SHARDS at this sampling rate (e.g. 0.01) instead of
    /// the exact stacks (see --exact).
    #[arg(long)]
    pub shards_rate: Option<f64>,
    /// Estimate the curve with fixed-size SHARDS tracking at most this many lines instead of
    /// the exact stacks (see --exact).
    #[arg(long)]
    pub shards_max_entries: Option<usize>,
    /// With SHARDS, keep the exact analysis too (exact curves, footprint, per-volume advice,
    /// reuse distributions, working sets): as slow as without sampling. Without it a sampled
    /// analysis reports those as not computed.
    #[arg(long)]
    pub exact: bool,
    /// Also estimate the curves of these replacement policies by sampled mini-simulation,
    /// comma separated (lru, mru, fifo, clock, arc, s3fifo, sieve).
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<crate::EvictionKind>,
    /// Sampling rate of the mini-simulations.
    #[arg(long, default_value_t = 0.01)]
    pub minisim_rate: f64,
    /// WAR+WAW share of reuses above which the advice disables cache writes.
    #[arg(long, default_value_t = 0.5)]
    pub write_reuse_threshold: f64,
    /// Print the analysis as JSON.
    #[arg(long)]
    pub json: bool,
    /// Interval of trace time for the IOPS and working-set timelines (e.g. `1s`, `100ms`).
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// An interval is in a burst when its IOPS exceed this factor × the median interval's.
    #[arg(long, default_value_t = 2.0)]
    pub burst_factor: f64,
    /// Write SVG plots (mrc.svg, reuse_cdf.svg, iops.svg, working_set.svg) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<std::path::PathBuf>,
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

/// Requests read per reader call: large batches cross between the reading and the analysing
/// thread less often (2 MiB each, at most six in memory). On a sampled analysis 16,384 took
/// 15 % more CPU than this, and 2,048 another 11 % more.
const READ_BATCH: usize = 65536;
/// Requests ahead of the one being added whose sampler entries are hinted.
const PREFETCH_AHEAD: usize = 8;

/// Entry point of `tiercache analyze`.
pub fn run(args: AnalyzeArgs) -> Result<()> {
    let analysis = analyze(&args)?;
    if let Some(dir) = &args.plots {
        for p in crate::plots::write(&analysis, dir)
            .with_context(|| format!("--plots {}", dir.display()))?
        {
            eprintln!("plot: {}", p.display());
        }
    }
    // Written, not printed: a closed stdout is an error for `main` (where a closed pipe ends
    // the command quietly), not a panic.
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&analysis).context("serialising the analysis")?
        )?;
    } else {
        write!(out, "{analysis}")?;
    }
    Ok(())
}

/// Checks the arguments, reads the trace and analyses it (the notes on what was left out are
/// printed on stderr); `run` and the Python package's `analyze` share it.
pub fn analyze(args: &AnalyzeArgs) -> Result<crate::Analysis> {
    if let Some(r) = args.shards_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(BadArgument(format!("--shards-rate {r}: must be in (0, 1]")).into());
        }
    }
    if !(args.minisim_rate > 0.0 && args.minisim_rate <= 1.0) {
        return Err(BadArgument(format!(
            "--minisim-rate {}: must be in (0, 1]",
            args.minisim_rate
        ))
        .into());
    }
    if !(0.0..=1.0).contains(&args.write_reuse_threshold) {
        return Err(BadArgument(format!(
            "--write-reuse-threshold {}: a share of reuses, in [0, 1]",
            args.write_reuse_threshold
        ))
        .into());
    }
    if args.shards_max_entries == Some(0) {
        return Err(BadArgument("--shards-max-entries 0: must be at least 1".into()).into());
    }
    let opts = args.input.read_options()?;
    let interval_ns = tiercache_core::units::parse_nanos(&args.interval)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            BadArgument(format!(
                "--interval {}: a positive duration such as 1s or 100ms",
                args.interval
            ))
        })?;
    if !(args.burst_factor > 0.0 && args.burst_factor.is_finite()) {
        return Err(BadArgument(format!(
            "--burst-factor {}: must be positive",
            args.burst_factor
        ))
        .into());
    }
    let mut reader = tiercache_trace::open(&args.file, args.input.format, &opts)?;
    let mut analyzer = Analyzer::new(Options {
        line_size: args.line_size,
        sizes: args.sizes.clone(),
        shards_rate: args.shards_rate,
        shards_max_entries: args.shards_max_entries,
        write_reuse_threshold: args.write_reuse_threshold,
        interval_ns,
        burst_factor: args.burst_factor,
        policies: args.policies.clone(),
        minisim_rate: args.minisim_rate,
        exact: args.exact || (args.shards_rate.is_none() && args.shards_max_entries.is_none()),
    })
    .map_err(|e| BadArgument(format!("--line-size: {e}")))?;
    // Batches: one reader call per few thousand requests, not one dynamic call per request,
    // decoded on a second thread while this one analyses the previous ones.
    let mut index = 0u64;
    let read = tiercache_trace::read_ahead::for_each_batch(&mut *reader, READ_BATCH, |batch| {
        for (i, r) in batch.iter().enumerate() {
            if let Some(ahead) = batch.get(i + PREFETCH_AHEAD) {
                analyzer.prefetch(ahead);
            }
            analyzer.add(r).map_err(|e| {
                anyhow::anyhow!(
                    "{}: request {index} ({:?} of {} bytes at offset {}) cannot be addressed: {e}",
                    args.file,
                    r.op,
                    r.len,
                    r.offset
                )
            })?;
            index += 1;
        }
        Ok::<(), anyhow::Error>(())
    });
    read.map_err(|e| match e {
        tiercache_trace::read_ahead::BatchError::Read(e) => e.into(),
        tiercache_trace::read_ahead::BatchError::Consume(e) => e,
    })?;
    // What was left out of the analysis is said, as every command says it.
    for note in tiercache_trace::CounterNotes(reader.counters())
        .to_string()
        .lines()
    {
        eprintln!("tiercache: note: {note}");
    }
    let volumes = reader.volumes();
    let analysis = analyzer.finish(&|v| volumes.name(v).unwrap_or("?").to_string());
    for note in &analysis.notes {
        eprintln!("tiercache: note: {note}");
    }
    if analysis.read_requests + analysis.write_requests == 0 {
        // Every miss ratio would be undefined: a run that measured nothing says so.
        anyhow::bail!(
            "{}: no read or write was analysed ({} requests read): there is nothing to compute a miss ratio over",
            args.file,
            analysis.requests
        );
    }
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: AnalyzeArgs,
    }

    #[test]
    fn policies_and_minisim_rate_parse() {
        let cli = Cli::try_parse_from([
            "analyze",
            "trace.csv",
            "--policies",
            "fifo,clock,arc,s3fifo,sieve",
            "--minisim-rate",
            "0.05",
        ])
        .unwrap();
        use crate::EvictionKind::*;
        assert_eq!(cli.args.policies, [Fifo, Clock, Arc, S3Fifo, Sieve]);
        assert_eq!(cli.args.minisim_rate, 0.05);
        let default = Cli::try_parse_from(["analyze", "trace.csv"]).unwrap();
        assert!(default.args.policies.is_empty());
        assert_eq!(default.args.minisim_rate, 0.01);
        let err = Cli::try_parse_from(["analyze", "t.csv", "--policies", "lfu"]).unwrap_err();
        assert!(err.to_string().contains("lfu"), "{err}");
    }

    #[test]
    fn a_bad_minisim_rate_is_a_bad_argument() {
        let mut cli = Cli::try_parse_from(["analyze", "trace.csv"]).unwrap();
        cli.args.minisim_rate = 1.5;
        let err = run(cli.args).unwrap_err();
        assert!(err.is::<BadArgument>(), "{err}");
    }

    /// A threshold that is not a share (NaN made every volume write-back) and a SHARDS table
    /// of no entries (made one) are refused, naming the option.
    #[test]
    fn a_bad_threshold_or_entry_count_is_a_bad_argument() {
        for (flag, value) in [
            ("--write-reuse-threshold", "nan"),
            ("--write-reuse-threshold", "-0.5"),
            ("--write-reuse-threshold", "5"),
            ("--shards-max-entries", "0"),
        ] {
            let arg = format!("{flag}={value}");
            let cli = Cli::try_parse_from(["analyze", "trace.csv", arg.as_str()]).unwrap();
            let err = analyze(&cli.args).unwrap_err();
            assert!(err.is::<BadArgument>(), "{flag} {value}: {err}");
            assert!(err.to_string().contains(flag), "{err}");
        }
    }

    /// A trace with no read or write (every record skipped, here) has no miss ratio: an
    /// error, not a table of zeros.
    #[test]
    fn a_trace_with_no_read_or_write_is_an_error() {
        let path =
            std::env::temp_dir().join(format!("tc-analyze-empty-{}.csv", std::process::id()));
        std::fs::write(&path, "0,hm,0,Read,not-an-offset,4096,0\n").unwrap();
        let cli = Cli::try_parse_from([
            "analyze",
            path.to_str().unwrap(),
            "--format",
            "msr",
            "--skip-bad",
        ])
        .unwrap();
        let err = analyze(&cli.args).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            err.to_string().contains("no read or write was analysed"),
            "{err}"
        );
    }
}
