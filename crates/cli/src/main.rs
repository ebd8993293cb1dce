//! `tiercache`: the command-line front of the toolkit. Each subcommand lives in its own module
//! and calls into the library crates; this file only parses arguments and maps errors to exit
//! codes (2 for bad input: configs, arguments, traces; 1 for anything else).

use tiercache::{
    analyze_cmd, bench_cmd, mount_cmd, report_cmd, serve_cmd, sim_cmd, sweep_cmd, trace_cmd,
    tune_cmd,
};

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tiercache",
    version,
    about = "Simulate, analyse and run I/O caches in tiered storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a cache architecture on a workload or trace (virtual time or hit-ratio only);
    /// a config with a `[hierarchy]` section runs its levels (clients over shared levels over
    /// a backend, docs/design.md §4.7) in the same event loop: per-level hits, demotes, links
    /// and latency. `hierarchy` is an alias.
    #[command(visible_alias = "hierarchy")]
    Sim(sim_cmd::SimArgs),
    /// Run a design-space sweep (axes × workloads × repetitions) in parallel, resumably.
    Sweep(sweep_cmd::SweepArgs),
    /// Turn sweep results into one self-contained HTML report with SVG plots.
    Report(report_cmd::ReportArgs),
    /// Read, summarise and convert block I/O traces.
    Trace(trace_cmd::TraceArgs),
    /// Analyse a trace: exact and SHARDS miss-ratio curves, reuse distances, sizing advice.
    Analyze(analyze_cmd::AnalyzeArgs),
    /// Run the cache for real and serve it over NBD (Unix socket or TCP).
    Serve(serve_cmd::ServeArgs),
    /// Write every dirty line of a (stopped) cache back: afterwards the backend alone is complete.
    Flush(mount_cmd::FlushAnyArgs),
    /// Mount a slow store directory through a file-level cache on fast storage (FUSE).
    Mount(mount_cmd::MountArgs),
    /// Run the engine for real under fio (nbd engine) from the config's workload; print the
    /// same result record as `sim`.
    Bench(bench_cmd::BenchArgs),
    /// Search a sweep spec's axes for the design that maximises an objective under constraints
    /// (Optuna TPE; needs the tiercache Python package). `tiercache tune --help` for options.
    #[command(disable_help_flag = true)]
    Tune(tune_cmd::TuneArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Report(args) => report_cmd::run(&args).map(|path| {
            eprintln!("report: {}", path.display());
        }),
        Command::Trace(args) => trace_cmd::run(args),
        Command::Analyze(args) => analyze_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Flush(args) => mount_cmd::flush(args),
        Command::Mount(args) => mount_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Tune(args) => tune_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`tiercache sim --json | head`): not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tiercache: error: {}", tiercache::errors::render(&e));
            ExitCode::from(tiercache::errors::exit_code(&e))
        }
    }
}
