//! `tiercache trace` subcommands: argument structs (clap derive) and their runner.

use crate::csv::CsvSpec;
use crate::format::Format;
use crate::reader::ReadOptions;
use crate::stats::{stats, StatsOptions};
use crate::text::BlkAction;
use crate::writer::{convert, OutputFormat};
use anyhow::Context;
use std::io::Write;

/// `tiercache trace ...`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// Trace subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// Summarise a trace: records, volumes, read/write mix, sizes, footprint, duration, IOPS.
    Stats(StatsArgs),
    /// Convert a trace to the native format, libCacheSim oracleGeneral or fio iolog v3.
    Convert(ConvertArgs),
}

/// How to read the input trace.
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Input format (detected from the name and content when omitted).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Count and skip malformed records instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Column mapping for `--format csv`, e.g.
    /// `time=0:us:unix,volume=4,op=3,offset=1:sector,len=2:sector,read=0,write=1,header`.
    #[arg(long, value_name = "MAP")]
    pub csv_map: Option<String>,
    /// blkparse: the action kept per I/O.
    #[arg(long, value_enum, default_value = "queue")]
    pub blkparse_action: BlkAction,
    /// oracleGeneral input: bytes per object id (object ids are read as line keys).
    #[arg(long, default_value_t = 4096)]
    pub oracle_line_size: u64,
}

impl InputArgs {
    /// The reader options these arguments describe.
    pub fn read_options(&self) -> anyhow::Result<ReadOptions> {
        let csv = match &self.csv_map {
            Some(m) => Some(m.parse::<CsvSpec>()?),
            None => None,
        };
        Ok(ReadOptions {
            skip_bad: self.skip_bad,
            blkparse_action: self.blkparse_action,
            oracle_line_size: self.oracle_line_size,
            csv,
        })
    }
}

/// `tiercache trace stats FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatsArgs {
    /// Trace file.
    pub file: String,
    /// Input options.
    #[command(flatten)]
    pub input: InputArgs,
    /// Line size for the footprint (bytes, power of two, 512 ..= 1048576).
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// Initial IOPS interval in seconds (doubles to keep at most 4096 points).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `tiercache trace convert IN OUT --to FORMAT`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConvertArgs {
    /// Input trace.
    pub input: String,
    /// Output file (overwritten).
    pub output: String,
    /// Output format.
    #[arg(long, value_enum)]
    pub to: OutputFormat,
    /// Input options.
    #[command(flatten)]
    pub in_opts: InputArgs,
    /// Line size for oracleGeneral output (one record per line touched).
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `tiercache trace` subcommand, printing to stdout.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Stats(a) => {
            let read = a.input.read_options()?;
            if !(a.interval > 0.0 && a.interval.is_finite()) {
                anyhow::bail!("--interval must be a positive number of seconds");
            }
            let opts = StatsOptions {
                line_size: a.line_size,
                iops_interval_ns: ((a.interval * 1e9) as u64).max(1),
                ..StatsOptions::default()
            };
            let s = stats(&a.file, a.input.format, &read, &opts)
                .with_context(|| format!("trace stats {}", a.file))?;
            // Written, not printed: a closed stdout is an error for `main` (where a closed
            // pipe ends the command quietly), not a panic.
            let mut out = std::io::stdout().lock();
            if a.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{s}")?;
            }
        }
        TraceCommand::Convert(a) => {
            let read = a.in_opts.read_options()?;
            let s = convert(
                &a.input,
                a.in_opts.format,
                &a.output,
                a.to,
                a.line_size,
                &read,
            )
            .with_context(|| format!("trace convert {} -> {}", a.input, a.output))?;
            // Written, not printed: a closed stdout is an error for `main` (where a closed
            // pipe ends the command quietly), not a panic.
            let mut out = std::io::stdout().lock();
            if a.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{s}")?;
            }
        }
    }
    Ok(())
}
