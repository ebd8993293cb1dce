//! The exclusive-caching experiment as sweeps (`experiments/exclusive-caching/sweep.toml`,
//! `sweep-bw.toml` and `sweep-clients.toml`, docs/design.md §4.7): their `--ci` profiles run
//! hierarchy points, the
//! records hold what `crates/sim/tests/hierarchy.rs` asserts of a hierarchy (every request
//! served once, the analytical mean of the constant model) and §8's finding (exclusive caching
//! multiplies the array's hits on RANDOM and ZIPF and cuts the mean latency; an MRU client wins
//! the sequential loop), and `tiercache report` renders each level of their records as a single
//! cache's run.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
mod common;

use common::tiercache_ok as tiercache;

fn spec(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/exclusive-caching")
        .join(name)
}

/// Runs a spec's `--ci` profile into `out` and returns its records by name.
fn sweep_ci(spec: &Path, out: &Path) -> BTreeMap<String, Value> {
    tiercache(&[
        "sweep",
        spec.to_str().unwrap(),
        "--ci",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    text.lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            assert_eq!(line["status"], "ok", "{line}");
            let rec = line["record"].clone();
            assert_eq!(rec["kind"], "hierarchy", "{rec}");
            (rec["name"].as_str().unwrap().to_string(), rec)
        })
        .collect()
}

fn hit(rec: &Value, level: &str) -> f64 {
    rec["result"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == level)
        .unwrap_or_else(|| panic!("no level {level}: {rec}"))["hit_fraction"]
        .as_f64()
        .unwrap()
}

fn mean_us(rec: &Value) -> f64 {
    rec["result"]["latency_us"]["mean"].as_f64().unwrap()
}

#[test]
fn the_designs_sweep_reproduces_the_exclusive_caching_finding() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("designs");
    let recs = sweep_ci(&spec("sweep.toml"), &out);
    assert_eq!(recs.len(), 4 * 8, "four workloads x eight designs");
    // base.toml's constant model (docs/design.md §4.7): Tc, Ta, Td in µs.
    let (tc, ta, td) = (2.0, 200.0, 5000.0);
    for (name, rec) in &recs {
        let (c, a, d) = (
            hit(rec, "host.client"),
            hit(rec, "array"),
            hit(rec, "backend"),
        );
        assert!(
            (c + a + d - 1.0).abs() < 1e-9,
            "{name}: every request served once"
        );
        // The analytical mean is that of whole-line reads: the archetypes', not the trace's.
        let formula = (c + a + d) * tc + (a + d) * ta + d * td;
        assert!(
            name.starts_with("trace/") || (mean_us(rec) - formula).abs() <= formula * 1e-9,
            "{name}: simulated {} µs, formula {formula} µs",
            mean_us(rec)
        );
        let sent = rec["result"]["levels"][0]["demotes_sent"].as_u64().unwrap();
        assert_eq!(
            sent > 0,
            name.ends_with("-demote"),
            "{name}: {sent} demotes sent"
        );
    }
    for w in ["random", "zipf"] {
        let none = &recs[&format!("{w}/LRU-LRU-none")];
        let demote = &recs[&format!("{w}/LRU-MRU-demote")];
        assert!(
            hit(demote, "array") > 2.0 * hit(none, "array"),
            "{w}: exclusive caching multiplies the array's hits ({} against {})",
            hit(demote, "array"),
            hit(none, "array")
        );
        assert!(
            mean_us(demote) < 0.8 * mean_us(none),
            "{w}: and cuts the mean latency"
        );
        // The client level is LRU in both: demoting changes only what the array holds.
        assert_eq!(hit(demote, "host.client"), hit(none, "host.client"), "{w}");
    }
    // On the sequential loop an MRU client wins.
    let best = recs
        .iter()
        .filter(|(n, _)| n.starts_with("sequential/"))
        .min_by(|a, b| mean_us(a.1).total_cmp(&mean_us(b.1)))
        .unwrap();
    assert!(best.0.starts_with("sequential/MRU-"), "best: {}", best.0);

    // The report draws each level of each record as a single cache's run: one workload section
    // per workload and level, its designs compared on a level's metrics.
    tiercache(&["report", out.to_str().unwrap()]);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for w in ["random", "sequential", "zipf", "trace"] {
        for level in ["host.client", "array"] {
            assert!(
                html.contains(&format!(">Workload {w} · {level}</h2>")),
                "no section for {w} at {level}"
            );
        }
    }
    assert_eq!(html.matches("<h2 id=\"w").count(), 8, "nothing else");
}

#[test]
fn the_link_sweep_loses_the_benefit_on_a_slow_link() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bw");
    let recs = sweep_ci(&spec("sweep-bw.toml"), &out);
    assert_eq!(
        recs.len(),
        2 * 5 * 2,
        "two workloads x five links x two designs"
    );
    for w in ["random", "zipf"] {
        let ratio = |link: &str| {
            mean_us(&recs[&format!("{w}/{link}/LRU-MRU-demote")])
                / mean_us(&recs[&format!("{w}/{link}/LRU-LRU-none")])
        };
        assert!(
            ratio("1G") < 0.8,
            "{w}: demotion pays on a fast link ({})",
            ratio("1G")
        );
        assert!(
            ratio("10M") > ratio("1G"),
            "{w}: less so on a slow one ({} against {})",
            ratio("10M"),
            ratio("1G")
        );
    }
    // Per workload and level, the designs over the link and design axes: a heat map each.
    tiercache(&["report", out.to_str().unwrap()]);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(
        html.matches("<h2 id=\"w").count(),
        4,
        "two workloads x two levels"
    );
    assert_eq!(html.matches("<h3>Design space</h3>").count(), 4);
}

#[test]
fn the_clients_sweep_shares_the_array_only_when_ranges_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("clients");
    let recs = sweep_ci(&spec("sweep-clients.toml"), &out);
    assert_eq!(
        recs.len(),
        2 * 4 * 2,
        "two sharings x four counts x two designs"
    );
    for (name, rec) in &recs {
        // `clients/SHARING/COUNT/DESIGN`: `hierarchy.client_count` made COUNT clients.
        let count: usize = name.split('/').nth(2).unwrap().parse().unwrap();
        assert_eq!(rec["config"]["hierarchy"]["client_count"], count, "{name}");
        let levels = rec["result"]["levels"].as_array().unwrap();
        let client_levels: Vec<&Value> = levels
            .iter()
            .filter(|l| l["name"].as_str().unwrap().ends_with(".client"))
            .collect();
        let names: Vec<String> = (0..count).map(|i| format!("c{i}.client")).collect();
        assert_eq!(
            client_levels
                .iter()
                .map(|l| l["name"].as_str().unwrap())
                .collect::<Vec<_>>(),
            names,
            "{name}: one client cache per replica"
        );
        // Every measured request entered one client's cache: 8 000 minus 2 000 warming up.
        let entered: u64 = client_levels
            .iter()
            .map(|l| l["requests_in"].as_u64().unwrap())
            .sum();
        assert_eq!(entered, 6_000, "{name}");
        // Every request is served once, at one client cache, the array or the backend.
        let served: f64 = (0..count)
            .map(|i| hit(rec, &format!("c{i}.client")))
            .sum::<f64>()
            + hit(rec, "array")
            + hit(rec, "backend");
        assert!((served - 1.0).abs() < 1e-9, "{name}: {served}");
    }
    for design in ["LRU-LRU-none", "LRU-MRU-demote"] {
        let array =
            |sharing: &str, n: u32| hit(&recs[&format!("clients/{sharing}/{n}/{design}")], "array");
        // One client: its range is the same however it is placed.
        assert_eq!(array("disjoint", 1), array("shared", 1), "{design}");
        for n in [2, 4, 8] {
            assert!(
                array("shared", n) > array("disjoint", n),
                "{design}, {n} clients: a block one client fetched is an array hit for another \
                 only when their ranges overlap ({} against {})",
                array("shared", n),
                array("disjoint", n)
            );
        }
    }
    // Demotion keeps the array useful as the clients multiply (disjoint ranges: under LRU the
    // array holds little beyond the client caches).
    for n in [1, 2, 4, 8] {
        let at = |d: &str| hit(&recs[&format!("clients/disjoint/{n}/{d}")], "array");
        assert!(at("LRU-MRU-demote") > at("LRU-LRU-none"), "{n} clients");
    }
}
