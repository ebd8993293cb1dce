//! Entry point for coverage-guided fuzzing of every trace reader (the cargo-fuzz target
//! `trace_readers` in `fuzz/`, replayed under stable by `tests/fuzz_regression.rs`): the
//! input's first byte picks a format (or detection by content), its second whether bad
//! records are skipped, the rest is the file. Contract: the reader opens or refuses, then
//! yields requests and ends, or ends on an error; never a panic, a hang, or memory beyond
//! the file's.

use crate::{open, CsvSpec, Format, ReadOptions, TraceError};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Reads `data` as the trace it says (see the module doc); the records read, or the error the
/// reader stopped on.
pub fn read_input(data: &[u8]) -> Result<usize, TraceError> {
    let (Some(&pick), Some(&skip)) = (data.first(), data.get(1)) else {
        return Ok(0);
    };
    let body = &data[2..];
    // Formats in order; one past them: detected from the content (and a neutral name).
    let format = Format::ALL
        .get(pick as usize % (Format::ALL.len() + 1))
        .copied();
    let opts = ReadOptions {
        skip_bad: skip % 2 == 1,
        // The generic reader needs a mapping: MSR's columns.
        csv: Some(CsvSpec::msr()),
        ..ReadOptions::default()
    };
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "tiercache-fuzz-trace-{}-{}",
        std::process::id(),
        N.fetch_add(1, Relaxed)
    ));
    std::fs::write(&path, body).map_err(|e| TraceError::io(&path.to_string_lossy(), e))?;
    let out = (|| {
        let reader = open(&path.to_string_lossy(), format, &opts)?;
        let mut n = 0;
        for r in reader {
            r?;
            n += 1;
        }
        Ok(n)
    })();
    let _ = std::fs::remove_file(&path);
    out
}
