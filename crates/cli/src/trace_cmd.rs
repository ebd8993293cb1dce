//! `tiercache trace` subcommands: argument structs (clap derive) and their runner, printing
//! what the trace library computes.

use anyhow::Context;
use std::io::Write;
use tiercache_trace::{convert, stats, Format, InputOptions, OutputFormat, StatsOptions};

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

/// [`tiercache_trace::Format`] on the command line (the library has no clap; names and help
/// are the same, a test checks the names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// MSR Cambridge CSV (SNIA IOTTA 388).
    Msr,
    /// CloudPhysics vSCSI binary, version 1 or 2.
    Vscsi,
    /// SPC / UMass (Financial, WebSearch) CSV.
    Spc,
    /// FIU (homes, mail, web-vm) whitespace text.
    Fiu,
    /// Tencent CBS CSV.
    Tencent,
    /// Alibaba cloud block trace (2020) CSV.
    Alibaba,
    /// SYSTOR'17 VDI CSV with header.
    Systor,
    /// blkparse default text output.
    Blkparse,
    /// fio iolog version 2 or 3.
    FioIolog,
    /// libCacheSim oracleGeneral binary (24-byte records).
    OracleGeneral,
    /// tiercache's native binary format (memory mapped).
    Native,
    /// Generic CSV with a column and unit mapping (`--csv-map`, or `csv` in a config).
    Csv,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Msr => Format::Msr,
            FormatArg::Vscsi => Format::Vscsi,
            FormatArg::Spc => Format::Spc,
            FormatArg::Fiu => Format::Fiu,
            FormatArg::Tencent => Format::Tencent,
            FormatArg::Alibaba => Format::Alibaba,
            FormatArg::Systor => Format::Systor,
            FormatArg::Blkparse => Format::Blkparse,
            FormatArg::FioIolog => Format::FioIolog,
            FormatArg::OracleGeneral => Format::OracleGeneral,
            FormatArg::Native => Format::Native,
            FormatArg::Csv => Format::Csv,
        }
    }
}

/// [`tiercache_trace::BlkAction`] on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BlkActionArg {
    /// `Q`: the I/O arrives at the block layer (the application's view).
    Queue,
    /// `D`: issued to the driver (after merging and scheduling).
    Issue,
    /// `C`: completed.
    Complete,
}

impl From<BlkActionArg> for tiercache_trace::BlkAction {
    fn from(a: BlkActionArg) -> Self {
        match a {
            BlkActionArg::Queue => Self::Queue,
            BlkActionArg::Issue => Self::Issue,
            BlkActionArg::Complete => Self::Complete,
        }
    }
}

/// [`tiercache_trace::OutputFormat`] on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormatArg {
    /// The native binary format ([`tiercache_trace::native`]): lossless.
    Native,
    /// libCacheSim oracleGeneral: one record per line-sized block touched by a read or write.
    OracleGeneral,
    /// fio iolog version 3 (fio 3.31+), replayable with `read_iolog=`.
    FioIolog,
}

impl From<OutputFormatArg> for OutputFormat {
    fn from(f: OutputFormatArg) -> Self {
        match f {
            OutputFormatArg::Native => Self::Native,
            OutputFormatArg::OracleGeneral => Self::OracleGeneral,
            OutputFormatArg::FioIolog => Self::FioIolog,
        }
    }
}

/// How to read the input trace.
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Input format (detected from the name and content when omitted).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Count and skip malformed records instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Column mapping for `--format csv`, e.g.
    /// `time=0:us:unix,volume=4,op=3,offset=1:sector,len=2:sector,read=0,write=1,header`.
    #[arg(long, value_name = "MAP")]
    pub csv_map: Option<String>,
    /// blkparse: the action kept per I/O.
    #[arg(long, value_enum, default_value = "queue")]
    pub blkparse_action: BlkActionArg,
    /// oracleGeneral input: bytes per object id (object ids are read as line keys).
    #[arg(long, default_value_t = 4096)]
    pub oracle_line_size: u64,
}

impl InputArgs {
    /// The library's input options these arguments describe.
    pub fn options(&self) -> InputOptions {
        InputOptions {
            format: self.format.map(Format::from),
            skip_bad: self.skip_bad,
            csv_map: self.csv_map.clone(),
            blkparse_action: self.blkparse_action.into(),
            oracle_line_size: self.oracle_line_size,
        }
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
    /// `--json`: the summary as one JSON document; `--quiet`: no notes.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
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
    pub to: OutputFormatArg,
    /// Input options.
    #[command(flatten)]
    pub in_opts: InputArgs,
    /// Line size for oracleGeneral output (one record per line touched).
    #[arg(long, default_value_t = 4096)]
    pub line_size: u64,
    /// `--json`: the conversion's summary as one JSON document; `--quiet`: no notes.
    #[command(flatten)]
    pub flags: crate::output::OutputArgs,
}

impl TraceArgs {
    /// The subcommand's `--quiet`/`--json`.
    pub fn output(&self) -> crate::output::OutputArgs {
        match &self.command {
            TraceCommand::Stats(a) => a.output,
            TraceCommand::Convert(a) => a.flags,
        }
    }
}

/// Runs a `tiercache trace` subcommand, printing to stdout.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Stats(a) => {
            let input = a.input.options();
            let read = input.read_options()?;
            if !(a.interval > 0.0 && a.interval.is_finite()) {
                anyhow::bail!("--interval must be a positive number of seconds");
            }
            let opts = StatsOptions {
                line_size: a.line_size,
                iops_interval_ns: ((a.interval * 1e9) as u64).max(1),
                ..StatsOptions::default()
            };
            let s = stats(&a.file, input.format, &read, &opts)
                .with_context(|| format!("trace stats {}", a.file))?;
            // Written, not printed: a closed stdout is an error for `main` (where a closed
            // pipe ends the command quietly), not a panic.
            let mut out = std::io::stdout().lock();
            if a.output.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{s}")?;
            }
        }
        TraceCommand::Convert(a) => {
            let input = a.in_opts.options();
            let read = input.read_options()?;
            let s = convert(
                &a.input,
                input.format,
                &a.output,
                a.to.into(),
                a.line_size,
                &read,
            )
            .with_context(|| format!("trace convert {} -> {}", a.input, a.output))?;
            // Written, not printed: a closed stdout is an error for `main` (where a closed
            // pipe ends the command quietly), not a panic.
            let mut out = std::io::stdout().lock();
            if a.flags.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                write!(out, "{s}")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, ValueEnum};
    use tiercache_trace::{read_all, ReadOptions};

    const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");

    /// The command-line names are the library's names, for every value.
    #[test]
    fn value_names_are_the_librarys() {
        assert_eq!(FormatArg::value_variants().len(), Format::ALL.len());
        for &f in FormatArg::value_variants() {
            let name = f.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name, Format::from(f).name());
            assert_eq!(name.parse::<Format>().unwrap(), Format::from(f));
        }
        for &f in OutputFormatArg::value_variants() {
            let name = f.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name, Format::from(OutputFormat::from(f)).name());
        }
        for &a in BlkActionArg::value_variants() {
            let name = a.to_possible_value().unwrap().get_name().to_string();
            let lib = tiercache_trace::BlkAction::from(a);
            assert_eq!(serde_json::to_value(lib).unwrap(), name.as_str());
        }
    }

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: Top,
    }

    #[derive(clap::Subcommand)]
    enum Top {
        Trace(TraceArgs),
    }

    fn cli(args: &[&str]) -> anyhow::Result<()> {
        let Top::Trace(t) =
            Cli::try_parse_from(std::iter::once("tiercache").chain(args.iter().copied()))?.cmd;
        run(t)
    }

    #[test]
    fn cli_stats_and_convert() {
        let dir = tempfile::tempdir().unwrap();
        let input = format!("{TRACES}/systor17-sample.csv.gz");
        cli(&["trace", "stats", &input, "--line-size", "8192", "--json"]).unwrap();
        cli(&["trace", "stats", &input, "--format", "systor"]).unwrap();
        let out = dir.path().join("s.tctrace");
        let out = out.to_str().unwrap();
        cli(&["trace", "convert", &input, out, "--to", "native"]).unwrap();
        assert_eq!(
            read_all(out, None, &ReadOptions::default())
                .unwrap()
                .0
                .len(),
            999
        );
        let og = dir.path().join("s.og");
        cli(&[
            "trace",
            "convert",
            out,
            og.to_str().unwrap(),
            "--to",
            "oracle-general",
            "--line-size",
            "65536",
        ])
        .unwrap();
        assert!(std::fs::metadata(&og).unwrap().len() > 999 * 24);
        let fio = dir.path().join("s.iolog");
        cli(&[
            "trace",
            "convert",
            out,
            fio.to_str().unwrap(),
            "--to",
            "fio-iolog",
        ])
        .unwrap();
        let (_, _, _, m) = read_all(fio.to_str().unwrap(), None, &ReadOptions::default()).unwrap();
        assert_eq!(m.format, Format::FioIolog);

        // Errors surface with context; bad arguments are refused.
        let e = cli(&["trace", "stats", "/nonexistent/trace.csv"]).unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/trace.csv"), "{e:#}");
        assert!(cli(&["trace", "stats", &input, "--line-size", "1000"]).is_err());
        assert!(cli(&["trace", "stats", &input, "--format", "csv"]).is_err());
        assert!(cli(&["trace", "convert", &input, out, "--to", "msr"]).is_err());
        cli(&[
            "trace",
            "stats",
            &input,
            "--format",
            "csv",
            "--csv-map",
            "time=0:s:unix,op=2,volume=3,offset=4,len=5,header",
        ])
        .unwrap();
    }
}
