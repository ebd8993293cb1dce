//! `tiercache tune SPEC`: black-box search of a sweep spec's design space (Optuna's TPE),
//! implemented by the tiercache Python package (`python -m tiercache.tune`), which runs every
//! trial through this crate's simulator as `sweep` does. Its arguments pass through unchanged.

use anyhow::{Context, Result};
use clap::Args;

/// Arguments of `tiercache tune`: passed to `python -m tiercache.tune` as they are (its
/// `--help` lists them).
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// SPEC.toml and the options of `python -m tiercache.tune`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// Entry point of `tiercache tune`: runs the search and exits with its exit code.
pub fn run(args: TuneArgs) -> Result<()> {
    let status = tiercache_run::python::module("tiercache.tune", &args.args)
        .status()
        .with_context(|| {
            format!(
                "tune: starting {}: {}",
                tiercache_run::python::interpreter(),
                tiercache_run::python::INSTALL_HINT
            )
        })?;
    match status.code() {
        Some(0) => Ok(()),
        // The search printed its own error; keep its exit code (2: bad input).
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("tune: the search was killed by a signal"),
    }
}
