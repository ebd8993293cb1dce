//! Library side of the `tiercache` command: the subcommands' arguments, printing and exit
//! codes, around the runners of `tiercache_run` (config resolution, sim, hierarchy, sweep,
//! bench) and the serve lifecycle of `tiercache_server`, so that integration tests run
//! exactly what the command runs.

#![warn(missing_docs)]

pub mod analyze_cmd;
pub mod bench_cmd;
pub mod control_cmd;
pub mod errors;
pub mod hierarchy_cmd;
pub mod install_cmd;
pub mod mount_cmd;
pub mod output;
pub mod report_cmd;
pub mod serve_cmd;
pub mod sim_cmd;
pub mod sweep_cmd;
pub mod trace_cmd;
pub mod tune_cmd;
