//! The commands that run on the tiercache Python package (`sweep --ray`, `tune`) start its
//! modules with one interpreter: `$TIERCACHE_PYTHON`, or `python3`.

use std::process::Command;

/// The interpreter the Python-side commands use: `$TIERCACHE_PYTHON` or `python3`.
pub fn interpreter() -> String {
    std::env::var("TIERCACHE_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// `python -m MODULE ARGS…` with the interpreter of [`interpreter`].
pub fn module(module: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(interpreter());
    cmd.arg("-m").arg(module).args(args);
    cmd
}

/// What to say when the package is missing.
pub const INSTALL_HINT: &str = "it needs the tiercache Python package in the interpreter $TIERCACHE_PYTHON (default python3): `maturin build --release -m crates/python/Cargo.toml` and `pip install` the wheel, or `bash scripts/test.sh`";
