//! Library side of the `tiercache` command: the typed experiment (one config resolved into a
//! policy core, a workload and a simulator setup) and the subcommands, so that integration tests
//! and other front ends run exactly what the command runs.

#![warn(missing_docs)]

pub mod analyze_cmd;
pub mod bench_cmd;
pub mod bench_trace;
pub mod errors;
pub mod experiment;
pub mod hierarchy_cmd;
pub mod mount_cmd;
pub mod progress;
pub mod python;
pub mod report_cmd;
pub mod serve_cmd;
pub mod serve_exports;
pub mod serve_metrics;
pub mod sim_cmd;
pub mod sweep_args;
pub mod sweep_cmd;
pub mod trace_cmd;
pub mod tune_cmd;
pub mod volumes;
