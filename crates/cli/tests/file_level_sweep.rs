//! The file-level experiment's simulator tables as sweeps of `[file_level]` points
//! (`experiments/file-level/sweep.toml`, `sweep-variants.toml`; docs/design.md §4.9, §9): their
//! `--ci` profiles give, point for point, the counts `tiercache_run::file_level` gives the
//! quick experiment (the `file_level` example's `--quick`), and `tiercache report` renders them.

use std::path::Path;
use tiercache_run::file_level::run_file_level;

mod common;

use common::tiercache_ok as tiercache;

/// Runs a spec's `--ci` profile into `out`; its records' metrics, keyed by (workload, level,
/// variant, capacity).
fn sweep_ci(spec: &str, out: &Path) -> Vec<((String, String, String, u64), serde_json::Value)> {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/file-level")
        .join(spec);
    tiercache(&[
        "sweep",
        spec.to_str().unwrap(),
        "--ci",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
    ]);
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(line["status"], "ok", "{line}");
            assert_eq!(line["record"]["kind"], "file_level");
            let m = line["record"]["metrics"].clone();
            let key = (
                line["workload"].as_str().unwrap().to_string(),
                m["level"].as_str().unwrap().to_string(),
                m["variant"].as_str().unwrap().to_string(),
                m["capacity_blocks"].as_u64().unwrap(),
            );
            (key, m)
        })
        .collect()
}

#[test]
fn the_file_level_sweeps_give_the_experiments_counts() {
    let expected = run_file_level(true);
    let dir = tempfile::tempdir().unwrap();
    for (spec, runs) in [
        ("sweep.toml", &expected.levels),
        ("sweep-variants.toml", &expected.variants),
    ] {
        let out = dir.path().join(spec);
        let got = sweep_ci(spec, &out);
        assert_eq!(got.len(), runs.len(), "{spec}");
        for run in runs {
            let r = &run.result;
            let key = (
                run.workload.name().to_string(),
                r.level.clone(),
                r.variant.clone(),
                u64::from(r.capacity_blocks),
            );
            let (_, m) = got
                .iter()
                .find(|(k, _)| *k == key)
                .unwrap_or_else(|| panic!("{spec}: no point {key:?}"));
            for (field, want) in serde_json::to_value(r).unwrap().as_object().unwrap() {
                assert_eq!(&m[field], want, "{spec} {key:?}: {field}");
            }
            assert_eq!(m["hit_ratio"].as_f64().unwrap(), r.hit_ratio(), "{key:?}");
        }
        tiercache(&["report", out.to_str().unwrap()]);
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(
            html.contains("hit ratio"),
            "{spec}: the report plots the hit ratio"
        );
    }
}
