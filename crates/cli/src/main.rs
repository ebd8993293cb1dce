//! `tiercache`: the command-line front of the toolkit. Each subcommand lives in its own module
//! and calls into the library crates; this file only parses arguments and maps errors to exit
//! codes (2 for bad input: configs, arguments, traces; 1 for anything else).

use tiercache::{
    analyze_cmd, bench_cmd, control_cmd, install_cmd, mount_cmd, report_cmd, serve_cmd, sim_cmd,
    sweep_cmd, trace_cmd, tune_cmd,
};

use clap::{CommandFactory, Parser, Subcommand};
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
    /// Write every dirty line of a stopped cache back (afterwards the backend alone is
    /// complete), or with --live of a running server's cache while it serves.
    Flush(mount_cmd::FlushAnyArgs),
    /// A running server's state: exports, occupancy, dirty lines, hit ratios, queue depths,
    /// the policies in force, partitions (over its control socket).
    Status(control_cmd::StatusArgs),
    /// A running server's counters: the cache's, per export, per partition.
    Stats(control_cmd::StatsArgs),
    /// Change a running server's policies live: write policy (cache-wide or per export),
    /// cleaning, promotion, balancing, partition sizes.
    Set(control_cmd::SetArgs),
    /// Detach a running server's cache: turn write-through, write every dirty line back while
    /// serving, then stop the server with the backends alone complete.
    Detach(control_cmd::DetachArgs),
    /// Mount a slow store directory through a file-level cache on fast storage (FUSE).
    Mount(mount_cmd::MountArgs),
    /// Run the engine for real under fio (nbd engine) from the config's workload; print the
    /// same result record as `sim`.
    Bench(bench_cmd::BenchArgs),
    /// Search a sweep spec's axes for the design that maximises an objective under constraints
    /// (Optuna TPE; needs the tiercache Python package). `tiercache tune --help` for options.
    #[command(disable_help_flag = true)]
    Tune(tune_cmd::TuneArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(install_cmd::CompletionsArgs),
    /// Write the man pages (tiercache.1 and one per command) into a directory, or print
    /// tiercache.1.
    Man(install_cmd::ManArgs),
}

impl Command {
    /// The command's `--quiet`/`--json` (`tune`, `completions` and `man` take neither: `tune`
    /// hands its arguments to Python, the others print what they are asked for).
    fn output(&self) -> Option<tiercache::output::OutputArgs> {
        Some(match self {
            Command::Sim(a) => a.output,
            Command::Sweep(a) => a.output,
            Command::Report(a) => a.output,
            Command::Trace(a) => a.output(),
            Command::Analyze(a) => a.output,
            Command::Serve(a) => a.output,
            Command::Flush(a) => a.block.output,
            Command::Status(a) => a.output,
            Command::Stats(a) => a.output,
            Command::Set(a) => a.output,
            Command::Detach(a) => a.output,
            Command::Mount(a) => a.output,
            Command::Bench(a) => a.output,
            Command::Tune(_) | Command::Completions(_) | Command::Man(_) => return None,
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(output) = cli.command.output() {
        output.apply();
    }
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Report(args) => report_cmd::run(&args).map(|path| {
            if !args.output.json {
                eprintln!("report: {}", path.display());
            }
        }),
        Command::Trace(args) => trace_cmd::run(args),
        Command::Analyze(args) => analyze_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Flush(args) => mount_cmd::flush(args),
        Command::Mount(args) => mount_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Tune(args) => tune_cmd::run(args),
        Command::Status(args) => control_cmd::status(args),
        Command::Stats(args) => control_cmd::stats(args),
        Command::Set(args) => control_cmd::set(args),
        Command::Detach(args) => control_cmd::detach(args),
        Command::Completions(args) => install_cmd::completions(args, Cli::command()),
        Command::Man(args) => install_cmd::man(args, Cli::command()),
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
