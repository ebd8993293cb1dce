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
pub mod progress;
pub mod python;
pub mod sim;
pub mod sweep;
pub mod volumes;

pub use errors::{Result, RunError};

/// Prints a note on stderr as every command does (`tiercache: note: …`): something the user
/// should know about what ran, that is not an error.
pub fn print_note(note: &str) {
    eprintln!("tiercache: note: {note}");
}
