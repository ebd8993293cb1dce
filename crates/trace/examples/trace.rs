//! Stand-alone `trace` command (the `tiercache trace` subcommands without the rest of the CLI):
//! `cargo run -p tiercache-trace --example trace -- stats FILE` or `... convert IN OUT --to native`.

use clap::Parser;
use tiercache_trace::cli::{run, TraceArgs};

/// Trace statistics and conversion.
#[derive(Parser)]
#[command(name = "trace")]
struct Cli {
    #[command(flatten)]
    args: TraceArgs,
}

fn main() -> anyhow::Result<()> {
    run(Cli::parse().args)
}
