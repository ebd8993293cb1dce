//! Helpers shared by the command's integration tests.

use std::process::{Command, Output};

/// Runs `tiercache ARGS` and returns its output, failing the test (with its stderr) unless it
/// succeeded.
pub fn tiercache_ok(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .output()
        .expect("run tiercache");
    assert!(
        o.status.success(),
        "tiercache {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}
