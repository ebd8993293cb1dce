//! `tiercache analyze FILE`: analyse a trace in any format tiercache reads. The arguments
//! (clap derive) and the printing; the analysis is [`tiercache_analyze::analyze_file`].

use crate::trace_cmd::InputArgs;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use tiercache_analyze::{EvictionKind, FileOptions};

/// Arguments of `tiercache analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Trace file (format detected unless given; compressed files are detected too).
    pub file: String,
    /// How to read the trace (format, skipping bad records, a CSV mapping, blkparse's action,
    /// oracleGeneral's bytes per object), as for `tiercache trace`.
    #[command(flatten)]
    pub input: InputArgs,
    /// Line size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// Cache sizes for the curves, comma separated: lines, or a share of the trace's footprint
    /// (`1%,5%,10%,30%`: a first pass over the trace counts the lines its reads and writes
    /// touch); default: powers of two.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Vec<SizeArg>,
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
    /// comma separated (lru, mru, fifo, clock, arc, s3fifo, sieve, slru, 2q, lfu, lfuda,
    /// lru-k, lirs, lhd); `belady` asks for the
    /// exact OPT curve (as --opt does).
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<EvictionKind>,
    /// Sampling rate of the mini-simulations.
    #[arg(long, default_value_t = 0.01)]
    pub minisim_rate: f64,
    /// WAR+WAW share of reuses above which the advice disables cache writes.
    #[arg(long, default_value_t = 0.5)]
    pub write_reuse_threshold: f64,
    /// Also compute Belady's exact OPT miss ratio at every size, in one pass of the OPT stack
    /// (the line accesses are spilled to temporary files: memory follows the footprint).
    #[arg(long)]
    pub opt: bool,
    /// With OPT, the write-back cost of LRU, Belady and --policies against a lower bound no
    /// policy can beat, at these weights: the cost of a backend read and of a backend write
    /// of one line, e.g. `1,1` or `80,120` (microseconds of an HDD).
    #[arg(long, value_name = "READ,WRITE", value_parser = parse_weights)]
    pub writeback_cost: Option<tiercache_analyze::CostWeights>,
    /// `--json`: the analysis as one JSON document; `--quiet`: no notes, no progress bar.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
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

impl AnalyzeArgs {
    /// The analysis library's options these arguments describe.
    pub fn options(&self) -> FileOptions {
        FileOptions {
            file: self.file.clone(),
            input: self.input.options(),
            line_size: self.line_size,
            sizes: self
                .sizes
                .iter()
                .filter_map(|s| match s {
                    SizeArg::Lines(n) => Some(*n),
                    SizeArg::Footprint(_) => None,
                })
                .collect(),
            footprint_fractions: self
                .sizes
                .iter()
                .filter_map(|s| match s {
                    SizeArg::Footprint(f) => Some(*f),
                    SizeArg::Lines(_) => None,
                })
                .collect(),
            shards_rate: self.shards_rate,
            shards_max_entries: self.shards_max_entries,
            exact: self.exact,
            policies: self.policies.clone(),
            minisim_rate: self.minisim_rate,
            write_reuse_threshold: self.write_reuse_threshold,
            interval: self.interval.clone(),
            burst_factor: self.burst_factor,
            opt: self.opt || self.writeback_cost.is_some(),
            writeback: self.writeback_cost,
        }
    }
}

/// One `--sizes` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeArg {
    /// A number of lines.
    Lines(u64),
    /// A fraction of the footprint (`5%` is 0.05).
    Footprint(f64),
}

/// `N` lines or `P%` of the footprint (0 < P ≤ 100).
fn parse_size(s: &str) -> Result<SizeArg, String> {
    let s = s.trim();
    match s.strip_suffix('%') {
        Some(p) => p
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| *p > 0.0 && *p <= 100.0)
            .map(|p| SizeArg::Footprint(p / 100.0))
            .ok_or_else(|| format!("{s:?}: a share of the footprint in (0, 100] %, e.g. 5%")),
        None => s
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(SizeArg::Lines)
            .ok_or_else(|| format!("{s:?}: a number of lines (at least 1) or a share such as 5%")),
    }
}

/// `READ,WRITE`: two non-negative weights.
fn parse_weights(s: &str) -> Result<tiercache_analyze::CostWeights, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let weight = |t: &str| {
        t.parse::<f64>()
            .ok()
            .filter(|w| *w >= 0.0 && w.is_finite())
            .ok_or_else(|| format!("{t:?} is not a non-negative number"))
    };
    match parts.as_slice() {
        [r, w] => Ok(tiercache_analyze::CostWeights {
            read: weight(r)?,
            write: weight(w)?,
        }),
        _ => Err(format!(
            "{s:?}: expected READ,WRITE (two weights, e.g. 1,1)"
        )),
    }
}

/// Entry point of `tiercache analyze`.
pub fn run(args: AnalyzeArgs) -> Result<()> {
    let bar = args.output.progress().then(|| {
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} {spinner} {human_pos} requests analysed ({per_sec}) {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    });
    let analysis = tiercache_analyze::analyze_file_with_progress(
        &args.options(),
        &mut tiercache_run::print_note,
        &mut |p| {
            let Some(bar) = &bar else { return };
            match p {
                tiercache_analyze::Progress::Reading { requests } => bar.set_position(requests),
                tiercache_analyze::Progress::Finishing => {
                    bar.set_message("computing the curves and distances")
                }
            }
        },
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let analysis = analysis?;
    if let Some(dir) = &args.plots {
        for p in tiercache_analyze::plots::write(&analysis, dir)
            .with_context(|| format!("--plots {}", dir.display()))?
        {
            eprintln!("plot: {}", p.display());
        }
    }
    // Written, not printed: a closed stdout is an error for `main` (where a closed pipe ends
    // the command quietly), not a panic.
    let mut out = std::io::stdout().lock();
    if args.output.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&analysis).context("serialising the analysis")?
        )?;
    } else {
        writeln!(out, "{}", describe(&args))?;
        write!(out, "{analysis}")?;
    }
    Ok(())
}

/// What was analysed and how, in one line above the analysis: the trace, the line size, how
/// the miss-ratio curve was computed.
fn describe(args: &AnalyzeArgs) -> String {
    let line = if args.line_size.is_multiple_of(1024) {
        format!("{} KiB", args.line_size / 1024)
    } else {
        format!("{} B", args.line_size)
    };
    let exact = if args.exact { " and exactly" } else { "" };
    let curve = match (args.shards_rate, args.shards_max_entries) {
        (Some(r), _) => format!("estimated by SHARDS sampling at rate {r}{exact}"),
        (None, Some(n)) => format!("estimated by SHARDS with at most {n} sampled lines{exact}"),
        (None, None) => "from exact LRU stack distances".to_string(),
    };
    format!(
        "analysed {} in {line} lines; miss-ratio curve {curve}; intervals of {}\n",
        args.file, args.interval
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use tiercache_analyze::AnalyzeError;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: AnalyzeArgs,
    }

    fn is_bad_argument(err: &anyhow::Error) -> bool {
        matches!(
            err.downcast_ref::<AnalyzeError>(),
            Some(AnalyzeError::BadArgument(_))
        ) && crate::errors::exit_code(err) == 2
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
        use EvictionKind::*;
        assert_eq!(cli.args.policies, [Fifo, Clock, Arc, S3Fifo, Sieve]);
        assert_eq!(cli.args.minisim_rate, 0.05);
        let default = Cli::try_parse_from(["analyze", "trace.csv"]).unwrap();
        assert!(default.args.policies.is_empty());
        assert_eq!(default.args.minisim_rate, 0.01);
        // The library's defaults are the command's.
        assert_eq!(
            default.args.options(),
            tiercache_analyze::FileOptions::new("trace.csv")
        );
        let err = Cli::try_parse_from(["analyze", "t.csv", "--policies", "lfux"]).unwrap_err();
        assert!(err.to_string().contains("lfux"), "{err}");
    }

    #[test]
    fn a_bad_minisim_rate_is_a_bad_argument() {
        let mut cli = Cli::try_parse_from(["analyze", "trace.csv"]).unwrap();
        cli.args.minisim_rate = 1.5;
        let err = run(cli.args).unwrap_err();
        assert!(is_bad_argument(&err), "{err}");
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
            let err = run(cli.args).unwrap_err();
            assert!(is_bad_argument(&err), "{flag} {value}: {err}");
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
        let err = run(cli.args).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            err.to_string().contains("no read or write was analysed"),
            "{err}"
        );
        assert_eq!(crate::errors::exit_code(&err), 1);
    }
}
