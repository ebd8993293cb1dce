//! Load balancing in the report: a design whose timeline carries a balancer's records gets its
//! queue times with the intervals of a burst shaded, and the write policy in force; a design
//! without a balancer gets neither.

use serde_json::json;
use tiercache_report::{build_report, ReportOptions, ResultSet};

fn line(name: &str, default: bool, balanced: bool) -> serde_json::Value {
    let rows: Vec<_> = (0..10u64)
        .map(|i| {
            let burst = balanced && (2..5).contains(&i);
            json!({
                "start_ns": i * 10_000_000, "end_ns": (i + 1) * 10_000_000, "iops": 1000.0 + i as f64,
                "cache_qtime_us": if burst { 900.0 } else { 50.0 }, "backend_qtime_us": 100.0,
                "balancer_burst": burst, "balancer_group": if burst { 1 } else { 0 },
                "balancer_policy": if burst { 4 } else { 0 },
            })
        })
        .collect();
    json!({
        "point": format!("{name:0>16}"), "sweep": "lb", "name": name, "workload": "oltp", "rep": 0,
        "seed": 1, "index": 0, "default": default, "axes": { "cache.balancing": name },
        "labels": [["balancer", name]], "status": "ok", "elapsed_s": 0.1,
        "record": {
            "tool": "tiercache", "kind": "sim", "name": name, "seed": 1, "config": {},
            "metrics": { "requests": 1000, "iops": 1000.0, "hit_ratio": 0.5,
                         "latency_us": { "all": { "mean": 10.0, "p50": 9.0, "p90": 12.0, "p99": 20.0,
                                                  "p999": 30.0, "p9999": 40.0, "max": 50.0 } } },
            "timeline": rows,
        },
    })
}

#[test]
fn a_balancing_design_shows_its_queues_with_bursts_shaded_and_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.jsonl");
    let text: String = [line("wb", true, false), line("lbica", false, true)]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    let set = ResultSet::load(&[&path]).unwrap();
    let report = build_report(&set, &ReportOptions::default());
    assert!(report.html.contains("<h3>Load balancing</h3>"));
    let balancing: Vec<_> = report
        .plots
        .iter()
        .filter(|p| p.id.contains("balancing"))
        .collect();
    assert_eq!(
        balancing.len(),
        2,
        "queues and policy of the one balancing design"
    );
    assert!(balancing.iter().all(|p| p.id.contains("lbica")));
    for p in &balancing {
        let doc = roxmltree::Document::parse(&p.svg).unwrap();
        let bands = doc
            .descendants()
            .find(|n| n.attribute("class") == Some("bands"))
            .expect("burst bands");
        // Three burst intervals, three shaded spans (plus the legend's swatch).
        let spans = bands
            .children()
            .filter(|n| n.tag_name().name() == "rect")
            .count();
        assert_eq!(spans, 3 + 1, "{}", p.id);
    }
}
