//! Design-space sweeps for tiercache (`tiercache sweep SPEC`).
//!
//! A sweep spec (TOML) names a base configuration, axes over any configuration key (crossed as a
//! cartesian product; zipped axes advance several keys together), workloads (override lists) and
//! repetitions (seeds `seed + rep`). [`SweepSpec::expand`] turns it into [`PointSpec`]s with
//! stable ids; [`run_points`] runs the pending ones in parallel through a [`Backend`] (the
//! simulator, the real engine, or a test double), appending [`ResultLine`]s to `results.jsonl`
//! and rewriting `results.csv`. Reruns skip finished points; a failing point is recorded and
//! does not stop the others.
//!
//! ```toml
//! name = "promotion"
//! base = "../examples/default.toml"      # or a [base] table
//! repetitions = 2
//! [[axis]]
//! key = "cache.line_size"
//! values = ["4KiB", "32KiB"]
//! [[axis]]
//! name = "promotion"
//! key = "cache.promotion"
//! values = [{ policy = "always" }, { policy = "nhit", n = 2 }]
//! labels = ["always", "nhit-2"]
//! [[axis]]                                 # zipped: advanced together
//! name = "flushing"
//! zip = [{ key = "cache.cleaning.policy", values = ["lazy", "aggressive"] },
//!        { key = "cache.cleaning.batch", values = [32, 1024] }]
//! [[workload]]
//! name = "zipf-0.9"
//! set = ["workload.distribution = { type = 'zipf', theta = 0.9 }"]
//! [ci]                                     # `--ci`: a reduced run
//! set = ["run.requests = 20000"]
//! repetitions = 1
//! points = 8
//! ```

//!
//! Running a sweep with a backend (the binary plugs in the simulator):
//!
//! ```
//! use tiercache_sweep::{run_points, PointSpec, RunOptions, SweepSpec};
//! let spec = SweepSpec::parse(
//!     "[base.cache]\nline_size = '4KiB'\n[[axis]]\nkey = 'cache.line_size'\nvalues = ['4KiB', '32KiB']\n",
//!     "inline.toml",
//!     std::path::Path::new("."),
//!     "demo",
//! )?;
//! let points = spec.expand()?;
//! assert_eq!(points[1].name, "line_size=32KiB");
//! let backend = |p: &PointSpec| -> Result<serde_json::Value, String> {
//!     Ok(serde_json::json!({ "metrics": { "iops": p.rep as f64 } }))
//! };
//! let dir = std::env::temp_dir().join(format!("tiercache-sweep-doc-{}", std::process::id()));
//! let summary = run_points(&points, &backend, &RunOptions { progress: false, ..RunOptions::new(&dir) })?;
//! assert_eq!((summary.ok, summary.failed), (2, 0));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), tiercache_sweep::SweepError>(())
//! ```

#![warn(missing_docs)]

mod canonical;
mod command;
mod parquet_out;
pub mod ray;
mod results;
mod runner;
mod spec;
mod spec_set;

pub use canonical::{fnv1a64, value_label};
pub use command::{load_points, run_sweep, SweepOptions};
pub use results::{
    flatten_scalars, json_lines, latest_per_point, read_results, tidy_table, write_csv,
    write_csv_file, write_csv_lines, ExistingResults, ResultLine, Status,
};
pub use runner::{
    default_out_dir, run_points, Backend, RunOptions, RunSummary, RESULTS_CSV, RESULTS_JSONL,
    SWEEP_JSON,
};
pub use spec::{
    Axis, AxisKey, AxisSetting, CiProfile, PointSpec, SweepSpec, WorkloadSpec, MAX_POINTS,
};

use std::path::PathBuf;

/// Errors of sweeps. Spec errors name the key, axis or workload at fault.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The spec is not valid TOML.
    #[error(transparent)]
    Config(#[from] tiercache_config::ConfigError),
    /// The spec is invalid.
    #[error("sweep spec: {at}: {message}")]
    Spec {
        /// Key, axis (`axis[1] \`line_size\``) or workload at fault.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// Some points failed (each is recorded in the results with its error).
    #[error("{failed} of {total} points failed{} (errors recorded in {results})", if *not_retried > 0 { format!(", {not_retried} of them in an earlier run, not retried") } else { String::new() })]
    PointsFailed {
        /// Failed points: run now, or failed earlier and not retried.
        failed: usize,
        /// Of those, the points that failed in an earlier run and were not retried.
        not_retried: usize,
        /// Points in the sweep.
        total: usize,
        /// The results file.
        results: PathBuf,
    },
}
