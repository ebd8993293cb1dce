//! What `tiercache status` and `stats` answer: the server's state (exports, occupancy, dirty
//! lines, hit ratios, queue depths, the policies in force, partitions) and every counter.

use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering::Relaxed;

use super::listener::ControlSource;

/// A value's name as configs spell it (`write-back`, `lru`, `eci`): the serde name of a
/// config enum, never its Rust name.
pub fn config_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// The answer to [`super::Request::Status`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The serving process.
    pub pid: u32,
    /// Seconds since it started serving.
    pub uptime_s: f64,
    /// The NBD address clients connect to.
    pub address: String,
    /// The Prometheus listener's address, if any.
    pub metrics_address: Option<String>,
    /// The cache device and what it holds.
    pub cache: CacheStatus,
    /// The policies in force.
    pub policy: PolicyStatus,
    /// One entry per export.
    pub exports: Vec<ExportStatus>,
    /// Why the engine halted (fail-stop), if it did.
    pub halted: Option<String>,
}

/// The cache device and its occupancy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheStatus {
    /// The cache device (file or block device).
    pub path: String,
    /// Line size in bytes.
    pub line_size: u64,
    /// Lines the cache holds.
    pub capacity_lines: u64,
    /// Lines holding data.
    pub resident_lines: u64,
    /// Lines holding data not yet on the backend.
    pub dirty_lines: u64,
    /// Line hits over line accesses so far (`None` before the first access).
    pub hit_ratio: Option<f64>,
    /// Requests in flight.
    pub in_flight: u64,
    /// Operations queued at the cache device.
    pub cache_queue_depth: u64,
    /// Operations queued at the backend.
    pub backend_queue_depth: u64,
    /// Dirty lines written back so far.
    pub flushed_lines: u64,
    /// NBD connections accepted so far.
    pub connections: u64,
}

/// The policies in force, spelled as in configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyStatus {
    /// `cache.write_policy` in force (exports may have their own, see [`ExportStatus`]).
    pub write_policy: String,
    /// The write policy the load balancer has put in force, if any.
    pub balanced_write_policy: Option<String>,
    /// `cache.eviction`.
    pub eviction: String,
    /// `cache.cleaning` in force.
    pub cleaning: serde_json::Value,
    /// `cache.promotion` in force.
    pub promotion: serde_json::Value,
    /// `cache.admission` in force.
    pub admission: serde_json::Value,
    /// `cache.balancing` in force.
    pub balancing: serde_json::Value,
    /// `cache.tenancy.mode`.
    pub tenancy: String,
    /// `cache.shards`.
    pub shards: u32,
    /// `engine.lookup`.
    pub lookup: String,
}

/// One export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportStatus {
    /// The name clients ask for.
    pub name: String,
    /// The volume its lines are filed under.
    pub volume: u32,
    /// Its backend.
    pub backend: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Read line hits over read line accesses (`None` before the first read).
    pub read_hit_ratio: Option<f64>,
    /// The write policy in force for it.
    pub write_policy: String,
    /// Lines of its own partition (`None`: it shares the cache).
    pub partition_lines: Option<u64>,
    /// Lines its partition holds.
    pub resident_lines: Option<u64>,
    /// Dirty lines its partition holds.
    pub dirty_lines: Option<u64>,
    /// Requests in flight.
    pub in_flight: u64,
}

fn ratio(hits: u64, all: u64) -> Option<f64> {
    (all > 0).then(|| hits as f64 / all as f64)
}

/// The server's status now.
pub(super) fn status(src: &ControlSource) -> Status {
    let e = src.engine.stats();
    let policies = src.engine.policies();
    let vols = src.engine.volume_stats();
    Status {
        pid: std::process::id(),
        uptime_s: src.started.elapsed().as_secs_f64(),
        address: src.address.clone(),
        metrics_address: src.metrics_address.clone(),
        cache: CacheStatus {
            path: src.cache_path.display().to_string(),
            line_size: policies.line_size,
            capacity_lines: e.capacity_lines,
            resident_lines: e.resident_lines,
            dirty_lines: e.dirty_lines,
            hit_ratio: ratio(e.cache.line_hits, e.cache.line_accesses),
            in_flight: e.in_flight,
            cache_queue_depth: u64::from(e.executor.cache.queued),
            backend_queue_depth: u64::from(e.executor.backend.queued),
            flushed_lines: e.flushed_lines,
            connections: src.server.connections.load(Relaxed),
        },
        policy: PolicyStatus {
            write_policy: config_name(&policies.write_policy),
            balanced_write_policy: e.balanced_write_policy.as_ref().map(config_name),
            eviction: config_name(&policies.eviction),
            cleaning: json(&policies.cleaning),
            promotion: json(&policies.promotion),
            admission: json(&policies.admission),
            balancing: json(&policies.balancing),
            tenancy: config_name(&policies.tenancy.mode),
            shards: policies.shards,
            lookup: src.lookup.clone(),
        },
        exports: src
            .exports
            .iter()
            .map(|x| {
                let v = vols.iter().find(|v| v.volume == x.volume);
                let get = |f: fn(&tiercache_engine::VolumeStats) -> u64| v.map_or(0, f);
                ExportStatus {
                    name: x.name.clone(),
                    volume: x.volume,
                    backend: x.backend.clone(),
                    size_bytes: get(|v| v.size_bytes),
                    reads: get(|v| v.reads),
                    writes: get(|v| v.writes),
                    read_hit_ratio: v.and_then(|v| {
                        ratio(v.read_line_hits, v.read_line_hits + v.read_line_misses)
                    }),
                    write_policy: config_name(&src.engine.write_policy_in_force(x.volume)),
                    partition_lines: v.and_then(|v| v.partition_lines),
                    resident_lines: v.and_then(|v| v.resident_lines),
                    dirty_lines: v.and_then(|v| v.dirty_lines),
                    in_flight: get(|v| v.in_flight),
                }
            })
            .collect(),
        halted: src.engine.halted().map(str::to_string),
    }
}

/// The answer to [`super::Request::Stats`]: the engine's counters (as the stats file has
/// them), each export's, and the partitions of every shard.
pub(super) fn stats(src: &ControlSource) -> serde_json::Value {
    let vols = src.engine.volume_stats();
    let exports: Vec<serde_json::Value> = src
        .exports
        .iter()
        .filter_map(|x| {
            let v = vols.iter().find(|v| v.volume == x.volume)?;
            let mut j = serde_json::to_value(v).ok()?;
            j["name"] = x.name.clone().into();
            j["read_hit_ratio"] = v.read_hit_ratio().into();
            Some(j)
        })
        .collect();
    let partitions: Vec<serde_json::Value> = src
        .engine
        .partition_layout()
        .iter()
        .map(|p| {
            serde_json::json!({
                "shard": p.shard,
                "volume": p.volume,
                "export": src.exports.iter().find(|x| x.volume == p.volume).map(|x| x.name.clone()),
                "lines": p.lines,
            })
        })
        .collect();
    serde_json::json!({
        "uptime_s": src.started.elapsed().as_secs_f64(),
        "engine": serde_json::to_value(src.engine.stats()).unwrap_or_default(),
        "server": serde_json::to_value(&*src.server).unwrap_or_default(),
        "exports": exports,
        "partitions": partitions,
        "tenancy": serde_json::to_value(src.engine.tenancy_report()).unwrap_or_default(),
    })
}

/// A config value as JSON (its config spelling).
fn json<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}
