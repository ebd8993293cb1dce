//! `tiercache report` before the binary wires it: `cargo run -p tiercache-report --example report -- RESULTS... [-o FILE]`.

use clap::Parser;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    report: tiercache_report::cli::ReportArgs,
}

fn main() -> anyhow::Result<()> {
    tiercache_report::cli::run(&Args::parse().report)?;
    Ok(())
}
