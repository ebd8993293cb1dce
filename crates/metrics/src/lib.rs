//! Run metrics of tiercache (docs/design.md §7).
//!
//! Every run — a simulation or a benchmark of the real engine — produces one [`RunRecord`]: its
//! tool version, kind, name, seed, whole configuration and a [`RunMetrics`]. Tables, plots and
//! reports are derived from those records. Over time a run also yields [`TimelineRow`]s, one per
//! interval, written as CSV by [`write_timeline_csv`].
//!
//! Latencies are recorded in nanoseconds with [`LatencyRecorder`] (an HDR histogram at 3
//! significant digits) and summarised in microseconds ([`LatencySummary`]).

#![warn(missing_docs)]

mod latency;
mod record;
mod table;
mod tally;
mod tenancy;
mod timeline;

pub use latency::{LatencyRecorder, LatencySummary};
pub use record::{
    DeviceMetrics, LatencyBreakdown, PowerCutMetrics, RunKind, RunMetrics, RunRecord, TOOL_NAME,
};
pub use table::render_table;
pub use tally::LatencyTally;
pub use tenancy::{
    render_tenancy_table, time_weighted_mean, write_tenancy_csv, Settling, TenancyInterval,
    TenancyMetrics, VolumeMetrics, SETTLE_FLOOR, SETTLE_MIN_HELD, SETTLE_TOLERANCE,
    TENANCY_COLUMNS,
};
pub use timeline::{write_timeline_csv, TimelineRow, TIMELINE_COLUMNS};

/// Errors of the metrics crate.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Writing an output failed.
    #[error("writing {what}: {source}")]
    Io {
        /// What was being written.
        what: &'static str,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Serialising a record failed.
    #[error("serialising {what}: {source}")]
    Json {
        /// What was being serialised.
        what: &'static str,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
}

/// The mean in µs of `n` latencies summing to `sum_ns`, or 0 with none (as [`ratio`]).
pub fn mean_us(n: u64, sum_ns: u128) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum_ns as f64 / n as f64 / 1e3
    }
}

/// `a / b`, or 0 when `b` is 0 (empty runs report zero ratios rather than NaN, which JSON lacks).
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
