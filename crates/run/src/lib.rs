//! The runnable layer of tiercache: one config document resolved into a typed experiment (a
//! policy core, a workload and a simulator setup, see [`experiment`]), and the runners that
//! take plain typed inputs and return result records:
//!
//! - [`sim`]: one experiment in the simulator ([`sim::run_experiment`]), and the runs a
//!   config's variants make ([`sim::select_runs`]);
//! - [`hierarchy`]: a `[hierarchy]` config's runs;
//! - [`sweep`]: one sweep point ([`sweep::simulate_point`]) and a whole sweep
//!   ([`sweep::run_sweep`]; on the engine, `sweep::run_bench_sweep`);
//! - [`file_level`]: the file-level against block-level experiment;
//! - `bench` (feature `engine`): the real engine served over NBD and driven by fio.
//!
//! The `tiercache` command parses arguments, prints and maps errors to exit codes around
//! these; the Python package calls them without linking the command's FUSE, NBD or HTTP code.

#![warn(missing_docs)]

#[cfg(feature = "engine")]
pub mod bench;
#[cfg(feature = "engine")]
pub mod bench_trace;
pub mod errors;
pub mod experiment;
pub mod file_level;
pub mod hierarchy;
pub mod opt_gap;
pub mod progress;
pub mod python;
pub mod sim;
pub mod sweep;
pub mod volumes;

pub use errors::{Result, RunError};

/// Whether a runner that reads `read` (top-level sections such as `cache`, or whole dotted keys
/// such as `run.seed`) reads the config key `key` (dotted, as `--set` takes it). A runner never
/// takes a key it would ignore (docs/design.md §9): every sweep backend checks with this.
pub fn reads(read: &[&str], key: &str) -> bool {
    let key = key.trim();
    let section = key.split(['.', '[']).next().unwrap_or_default();
    read.iter().any(|r| *r == section || *r == key)
}

/// Fails naming the first key of `doc` (a top-level key, or a key of a top-level table read in
/// part) that a runner reading `read` (as for [`reads`]) does not read, and what it reads.
pub(crate) fn refuse_unread(doc: &tiercache_config::Document, read: &[&str]) -> anyhow::Result<()> {
    // A table read only in part (`run`, of which `run.seed`) is checked key by key.
    let partly = |k: &str| read.iter().any(|r| r.starts_with(&format!("{k}.")));
    let top = doc.value.as_table().into_iter().flatten();
    let keys = top.flat_map(|(k, v)| match v.as_table() {
        Some(t) if partly(k) => t.keys().map(|s| format!("{k}.{s}")).collect(),
        _ => vec![k.clone()],
    });
    for key in keys {
        if !reads(read, &key) {
            anyhow::bail!(
                "{}: `{key}` is not read by this run (it reads {})",
                doc.context(),
                read.iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}

/// Whether notes and progress are silenced (`--quiet`), process-wide: notes are printed from
/// deep inside runs (sweeps' worker threads included), where passing a flag down every call
/// would thread the command line through the library.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Silences (or restores) notes and progress bars on stderr for the rest of the process, as
/// every command's `--quiet` does. Errors are still printed.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_quiet`] silenced notes and progress.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether a progress bar should be drawn: stderr is a terminal and nothing silenced it.
pub fn show_progress() -> bool {
    use std::io::IsTerminal;
    !quiet() && std::io::stderr().is_terminal()
}

/// Prints a note on stderr as every command does (`tiercache: note: …`): something the user
/// should know about what ran, that is not an error. Nothing under `--quiet`.
pub fn print_note(note: &str) {
    if !quiet() {
        eprintln!("tiercache: note: {note}");
    }
}
