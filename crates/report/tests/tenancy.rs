//! Multi-tenancy in the report: a design whose record carries tenancy decisions gets the
//! allocation per volume over time, each volume's hit ratio per interval, and a table of how
//! long each allocation took to settle; a design without decisions gets none of them.

use serde_json::json;
use tiercache_report::{build_report, ReportOptions, ResultSet};

fn line(mode: &str, default: bool) -> serde_json::Value {
    let decided = mode != "shared";
    // Volume 0 grows to 200 lines and stays; volume 1 keeps moving.
    let intervals: Vec<_> = (1..=8u64)
        .filter(|_| decided)
        .flat_map(|i| {
            [
                json!({ "at_ns": i * 1_000_000_000, "volume": 0,
                        "allocation_lines": (i * 50).min(200), "hits": 10 * i, "misses": 10 }),
                json!({ "at_ns": i * 1_000_000_000, "volume": 1,
                        "allocation_lines": 40 * (i % 3), "hits": 0, "misses": 5 }),
            ]
        })
        .collect();
    let settling = |intervals: u64, held: u64, settled: bool| {
        json!({ "decisions": 8, "final_lines": 200, "band_lines": 10,
                "intervals_to_settle": intervals, "settled_at_ns": intervals * 1_000_000_000,
                "held_decisions": held, "settled": settled })
    };
    let volumes = if decided {
        json!({
            "0": { "allocated_bytes_mean": 600_000.0, "hit_ratio": 0.8, "mean_latency_us": 120.0,
                   "settling": settling(4, 5, true) },
            "1": { "allocated_bytes_mean": 100_000.0, "hit_ratio": 0.0, "mean_latency_us": 9000.0,
                   "settling": settling(8, 1, false) },
        })
    } else {
        json!({ "0": { "hit_ratio": 0.5 }, "1": { "hit_ratio": 0.1 } })
    };
    json!({
        "point": format!("{mode:0>16}"), "sweep": "mt", "name": mode, "workload": "mix", "rep": 0,
        "seed": 1, "index": 0, "default": default, "axes": { "cache.tenancy.mode": mode },
        "labels": [["mode", mode]], "status": "ok", "elapsed_s": 0.1,
        "record": {
            "tool": "tiercache", "kind": "sim", "name": mode, "seed": 1,
            "config": { "volumes": [ { "id": 0, "name": "hot" }, { "id": 1, "name": "wide" } ] },
            "metrics": { "requests": 1000, "iops": 1000.0, "hit_ratio": 0.5, "duration_ns": 8_000_000_000u64,
                         "latency_us": { "all": { "mean": 10.0, "p50": 9.0, "p90": 12.0, "p99": 20.0,
                                                  "p999": 30.0, "p9999": 40.0, "max": 50.0 } },
                         "tenancy": { "mode": mode, "capacity_bytes": 1_048_576, "capacity_lines": 256,
                                      "volumes": volumes, "intervals": intervals } },
        },
    })
}

#[test]
fn a_tenancy_design_shows_allocations_hit_ratios_and_settling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.jsonl");
    let text: String = [line("shared", true), line("eci", false)]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    let set = ResultSet::load(&[&path]).unwrap();
    let report = build_report(&set, &ReportOptions::default());
    let tenancy: Vec<_> = report
        .plots
        .iter()
        .filter(|p| p.id.contains("tenancy"))
        .collect();
    let ids: Vec<&str> = tenancy.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        tenancy.len(),
        2,
        "allocation and hit ratio of eci only: {ids:?}"
    );
    assert!(ids.iter().all(|id| id.contains("eci")), "{ids:?}");
    let hit = tenancy
        .iter()
        .find(|p| p.id.ends_with("-hit-ratio"))
        .expect("a hit-ratio plot");
    roxmltree::Document::parse(&hit.svg).unwrap();
    assert!(hit.svg.contains("hot") && hit.svg.contains("wide"));
    // The settling table: one row per volume, by name; 200 lines of 4 KiB = 0.8 MiB.
    let html = &report.html;
    let table = &html[html
        .find("settled after (intervals)")
        .expect("settling table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), 2, "{table}");
    assert!(
        table.contains("<td>hot</td><td>0.6</td><td>0.8</td><td>0.800</td><td>120</td><td>4</td>"),
        "{table}"
    );
    assert!(table.contains("<td>8 (still moving)</td>"), "{table}");
    assert_eq!(
        html.matches("settled after (intervals)").count(),
        1,
        "not for shared"
    );
}
