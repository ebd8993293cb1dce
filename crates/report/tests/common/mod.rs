//! A small sweep run through a deterministic fake backend, shared by the report tests.

#![allow(dead_code)]

use serde_json::json;
use std::path::{Path, PathBuf};
use tiercache_sweep::{run_points, PointSpec, RunOptions, SweepSpec};

pub const SPEC: &str = r#"
name = "fake"
repetitions = 2
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB", "64KiB"]
[[axis]]
name = "promotion"
key = "cache.promotion"
values = [{ policy = "always" }, { policy = "nhit", n = 2 }, { policy = "nhit", n = 4 }]
[[axis]]
key = "host.lookup"
values = ["ht-fg", "lt"]
[[workload]]
name = "read-heavy"
set = ["workload.read_fraction=0.9"]
[[workload]]
name = "write-heavy"
set = ["workload.read_fraction=0.2"]
[base.run]
seed = 5
[base.cache]
line_size = "4KiB"
promotion = { policy = "always" }
[base.host]
lookup = "ht-fg"
[base.workload]
read_fraction = 0.8
"#;

/// Deterministic metrics from the point's configuration, with a timeline.
pub fn fake_record(p: &PointSpec) -> serde_json::Value {
    let v = &p.doc.value;
    let line: f64 = match v["cache"]["line_size"].as_str().unwrap() {
        "4KiB" => 4.0,
        "32KiB" => 32.0,
        _ => 64.0,
    };
    let n = v["cache"]["promotion"]
        .get("n")
        .and_then(|n| n.as_integer())
        .unwrap_or(1) as f64;
    let rf = v["workload"]["read_fraction"].as_float().unwrap();
    let lt = if v["host"]["lookup"].as_str() == Some("lt") {
        0.4
    } else {
        1.0
    };
    let jitter = (p.seed % 7) as f64;
    let iops = 100_000.0 * rf * lt / line.sqrt() * (1.0 + n / 10.0) + jitter * 100.0;
    let p50 = 20.0 * line.sqrt() / n;
    let timeline: Vec<_> = (0..12)
        .map(|i| {
            let t = i as f64;
            json!({ "start_ns": i * 100_000_000u64, "end_ns": (i + 1) * 100_000_000u64, "warmup": i < 2,
                    "iops": iops * (1.0 - (-t / 3.0).exp() * 0.5), "hit_ratio": 0.2 + 0.05 * t.min(8.0) / n,
                    "dirty_lines": (i * 100) as f64 * (1.0 - rf), "cache_queue_depth": 4.0 + t / n,
                    "backend_queue_depth": 8.0 * (1.0 - rf) + t / 10.0 })
        })
        .collect();
    json!({
        "tool": "tiercache", "kind": "sim", "name": p.name, "seed": p.seed, "config": {},
        "metrics": {
            "requests": 10000, "iops": iops, "hit_ratio": 0.5 + 0.1 * n.ln(),
            "latency_us": { "all": { "mean": p50 * 1.3, "p50": p50, "p90": p50 * 2.0, "p99": p50 * 5.0,
                                     "p999": p50 * 12.0, "p9999": p50 * 30.0 + jitter, "max": p50 * 60.0 } },
            "bypasses": { "nhit": n as u64 },
            "cache_bytes_written": (line * 1000.0 / n) as u64,
        },
        "timeline": timeline,
    })
}

/// Runs the spec into `dir` with a backend that fails two designs on purpose; returns the
/// results file.
pub fn run_fake_sweep(dir: &Path) -> PathBuf {
    let pts = SweepSpec::parse(SPEC, "fake.toml", Path::new("."), "fake")
        .unwrap()
        .expand()
        .unwrap();
    let backend = |p: &PointSpec| {
        if p.workload == "write-heavy" && p.name == "line_size=64KiB,promotion=nhit-4,lookup=lt" {
            return Err("device model: queue overflow (on purpose)".to_string());
        }
        Ok(fake_record(p))
    };
    let opts = RunOptions {
        progress: false,
        jobs: 2,
        sweep_name: "fake".into(),
        ..RunOptions::new(dir)
    };
    run_points(&pts, &backend, &opts).unwrap().results_jsonl
}

/// Writes hierarchy records (`"kind": "hierarchy"`, the shape `tiercache hierarchy --json`
/// prints) for two designs over a bandwidth sweep to `path`: each level with its own metrics
/// (a single cache's), the backend row without.
pub fn write_fake_hierarchies(path: &Path) -> PathBuf {
    let mut text = String::new();
    for (bw, slow) in [("1G", 1.0), ("100M", 1.3), ("10M", 2.5)] {
        for (design, client, array, mean) in [
            ("LRU-LRU-none", 0.5, 0.08, 2100.0),
            ("LRU-MRU-demote", 0.5, 0.5, 900.0 * slow),
        ] {
            let metrics = |hit: f64, mean: f64| {
                serde_json::json!({
                    "requests": 1000, "iops": 1e6 / mean, "hit_ratio": hit,
                    "latency_us": { "all": { "mean": mean, "p50": mean, "p90": mean,
                        "p99": mean * 2.5, "p999": mean * 3.0, "p9999": mean * 3.0, "max": mean * 4.0 } }
                })
            };
            let rec = serde_json::json!({
                "tool": "tiercache",
                "kind": "hierarchy",
                "name": format!("bw/zipf/{bw}/{design}"),
                "result": {
                    "requests": 1000,
                    "latency_us": { "mean": mean, "p99": mean * 2.5 },
                    "levels": [
                        { "name": "host.client", "shared": false, "hit_fraction": client,
                          "demotes_sent": 400, "link": { "utilisation": 0.4 * slow },
                          "metrics": metrics(client, mean) },
                        { "name": "array", "shared": true, "hit_fraction": array,
                          "demotes_accepted": 390, "demotes_already_held": 10,
                          "metrics": metrics(array / (1.0 - client), mean * 1.5) },
                        { "name": "backend", "shared": true,
                          "hit_fraction": 1.0 - client - array }
                    ],
                    "clients": [ { "name": "host", "link": null } ]
                }
            });
            text.push_str(&rec.to_string());
            text.push('\n');
        }
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}
