//! The run record: one per run, shared by the simulator and the real engine.

use crate::{LatencySummary, MetricsError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;

/// Value of [`RunRecord::tool`].
pub const TOOL_NAME: &str = "tiercache";

/// Which executor produced a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// The discrete-event simulator (virtual time).
    Sim,
    /// The real engine measured with a benchmark (real time).
    Bench,
}

/// Latency summaries of all requests and of reads and writes apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyBreakdown {
    /// Every measured request (reads, writes, trims, flushes).
    pub all: LatencySummary,
    /// Read requests.
    pub read: LatencySummary,
    /// Write requests.
    pub write: LatencySummary,
}

/// Load of one device over the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceMetrics {
    /// Fraction of the device's capacity in use, 0..=1 (for the simulator: the time-averaged
    /// share of its service capacity — channels, IOPS and bandwidth ceilings — that ops consumed;
    /// for the engine: busy time as the OS reports it).
    pub utilisation: f64,
    /// Time-weighted mean number of ops queued or in service.
    pub mean_queue_depth: f64,
    /// Most ops queued or in service at once.
    pub max_queue_depth: u64,
    /// Ops completed.
    pub ops: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Mean time from submission to completion of an op, µs (queueing included).
    pub mean_op_latency_us: f64,
    /// Ops by cause (`read-hit`, `read-miss`, `write`, `promotion`, `fill`, `clean`,
    /// `evict-flush`, `trim`, `flush`).
    pub ops_by_cause: BTreeMap<String, u64>,
}

/// Every metric of one run (docs/design.md §7). Counts and bytes cover the measured window (after
/// warm-up); `_end` fields describe the state when the run stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunMetrics {
    /// Requests completed in the measured window.
    pub requests: u64,
    /// Read requests among them.
    pub read_requests: u64,
    /// Write requests among them.
    pub write_requests: u64,
    /// Application bytes read and written.
    pub bytes: u64,
    /// Full line hits / line accesses.
    pub hit_ratio: f64,
    /// Read line hit ratio.
    pub read_hit_ratio: f64,
    /// Write line hit ratio (lines found resident).
    pub write_hit_ratio: f64,
    /// Requests entirely served by resident data / read and write requests.
    pub full_hit_ratio: f64,
    /// Partial line hits (line resident, some sub-blocks missing) / line accesses.
    pub partial_hit_ratio: f64,
    /// Requests completed per second of the measured window (0 in hit-ratio-only runs).
    pub iops: f64,
    /// Application bytes per second (0 in hit-ratio-only runs).
    pub bandwidth_bytes_per_s: f64,
    /// Request latencies (empty in hit-ratio-only runs).
    pub latency_us: LatencyBreakdown,
    /// Lines inserted into the cache (read promotions and write allocations).
    pub promotions: u64,
    /// Lines evicted.
    pub evictions: u64,
    /// Evicted lines that were dirty (written back on the request's path).
    pub dirty_evictions: u64,
    /// Lines written back by the cleaner in the window (a final flush after the window is not
    /// counted; see `final_flush_ns`).
    pub flushes: u64,
    /// Flush jobs (batches) of the cleaner.
    pub flush_jobs: u64,
    /// Line-level bypasses by reason name.
    pub bypasses: BTreeMap<String, u64>,
    /// Bytes written to the cache device (wear).
    pub cache_bytes_written: u64,
    /// Bytes read from the cache device.
    pub cache_bytes_read: u64,
    /// Bytes read from the backend.
    pub backend_bytes_read: u64,
    /// Bytes written to the backend.
    pub backend_bytes_written: u64,
    /// Bytes written back (cleaning and dirty evictions), a subset of `backend_bytes_written`.
    pub written_back_bytes: u64,
    /// Dirty lines when the run stopped (before any final flush).
    pub dirty_lines_end: u64,
    /// Most dirty lines seen in the measured window (sampled at each measured request's
    /// arrival, at interval boundaries inside the window and at its end).
    pub dirty_lines_max: u64,
    /// Resident lines when the run stopped.
    pub resident_lines_end: u64,
    /// Load per device, by device name (`cache`, `backend`, `backend-vol<N>`).
    pub devices: BTreeMap<String, DeviceMetrics>,
    /// Length of the measured window in ns (virtual or real).
    pub duration_ns: u64,
    /// Time the final flush took after the window, ns (0 when none ran).
    pub final_flush_ns: u64,
    /// Bytes of cache metadata.
    pub metadata_bytes: u64,
    /// Multi-tenant results: per volume and overall allocation, cost, wear and the
    /// per-interval decisions (runs with several volumes or a tenancy mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenancy: Option<crate::TenancyMetrics>,
    /// What a power cut took (simulator runs with `run.power_cut_ns`, docs/design.md §5.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_cut: Option<PowerCutMetrics>,
}

/// What a simulated power cut (`run.power_cut_ns`) took from the backend disks' volatile
/// write caches (docs/design.md §5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PowerCutMetrics {
    /// When the power failed, ns of virtual time.
    pub at_ns: u64,
    /// Writes the backend disks had acknowledged and lost (any cause: a client's
    /// write-through, a write-back, a flush job's write whose job had not finished).
    pub lost_acknowledged_writes: u64,
    /// Bytes of the ranges the backend disks lost.
    pub lost_bytes: u64,
    /// Write-backs done before the cut: backend writes of finished flush jobs (their lines
    /// counted as clean) and eviction write-backs whose stage (or its FLUSH) completed.
    pub write_backs_done: u64,
    /// Lines written back so (and neither dirty nor under write-back since: counted clean,
    /// or evicted) whose written-back data a backend disk lost: data lost for good, as
    /// nothing will write them back again.
    pub lost_clean_lines: u64,
}

/// One run's complete record: configuration, seed and metrics. Serialised as one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`TOOL_NAME`].
    pub tool: String,
    /// Version of the tool that produced the record.
    pub version: String,
    /// Simulator or engine benchmark.
    pub kind: RunKind,
    /// Run name (architecture × workload label).
    pub name: String,
    /// Seed of the workload and of any randomised policy.
    pub seed: u64,
    /// The run's whole configuration, as given.
    pub config: serde_json::Value,
    /// The measurements.
    pub metrics: RunMetrics,
}

impl RunRecord {
    /// A record stamped with this tool's name and version.
    pub fn new(
        kind: RunKind,
        name: impl Into<String>,
        seed: u64,
        config: serde_json::Value,
        metrics: RunMetrics,
    ) -> Self {
        Self {
            tool: TOOL_NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            kind,
            name: name.into(),
            seed,
            config,
            metrics,
        }
    }

    /// The record as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> Result<String, MetricsError> {
        serde_json::to_string(self).map_err(|source| MetricsError::Json {
            what: "run record",
            source,
        })
    }

    /// Appends the record to a JSON-lines output.
    pub fn write_jsonl(&self, out: &mut dyn Write) -> Result<(), MetricsError> {
        let line = self.to_json_line()?;
        writeln!(out, "{line}").map_err(|source| MetricsError::Io {
            what: "run record",
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_tolerates_missing_metrics() {
        let mut m = RunMetrics {
            requests: 10,
            hit_ratio: 0.5,
            ..Default::default()
        };
        m.bypasses.insert("mode".into(), 3);
        m.devices.insert(
            "cache".into(),
            DeviceMetrics {
                utilisation: 0.25,
                ..Default::default()
            },
        );
        let r = RunRecord::new(
            RunKind::Sim,
            "wb-lru",
            42,
            serde_json::json!({"cache": {"line_size": 4096}}),
            m,
        );
        let line = r.to_json_line().unwrap();
        assert!(line.contains("\"tool\":\"tiercache\"") && line.contains("\"kind\":\"sim\""));
        let back: RunRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
        // An engine that measures fewer things still produces a readable record.
        let partial = r#"{"tool":"tiercache","version":"0","kind":"bench","name":"x","seed":1,"config":{},"metrics":{"iops":5.0}}"#;
        let p: RunRecord = serde_json::from_str(partial).unwrap();
        assert_eq!(p.kind, RunKind::Bench);
        assert_eq!(p.metrics.iops, 5.0);
        let mut buf = Vec::new();
        r.write_jsonl(&mut buf).unwrap();
        assert_eq!(buf.last(), Some(&b'\n'));
    }
}
