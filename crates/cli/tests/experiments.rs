//! Every experiment in `experiments/` is sweep specs (`sweep*.toml`, plus optional `table.py`),
//! run by `tiercache sweep` and rendered by `tiercache report` (docs/design.md §9): each spec's
//! `--ci` profile runs with every point ok and gives a report, so a broken spec fails here.
//! The specs that a test of their own already runs at `--ci` (and checks the finding of) are
//! not run twice; that the test still names each of them is checked instead.

use std::path::{Path, PathBuf};
mod common;

use common::tiercache_ok as tiercache;

/// Specs whose `--ci` run a dedicated test makes, by that test's file (under `tests/`).
const RUN_ELSEWHERE: [(&str, &str); 6] = [
    ("exclusive-caching/sweep.toml", "exclusive_caching.rs"),
    ("exclusive-caching/sweep-bw.toml", "exclusive_caching.rs"),
    (
        "exclusive-caching/sweep-clients.toml",
        "exclusive_caching.rs",
    ),
    ("file-level/sweep.toml", "file_level_sweep.rs"),
    ("file-level/sweep-variants.toml", "file_level_sweep.rs"),
    ("lookup-scalability/sweep.toml", "cli.rs"),
];

fn experiments() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

/// Every experiment's specs, as `DIR/FILE`, after checking each experiment is specs only.
fn specs() -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(experiments())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 9, "experiments found: {dirs:?}");
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert!(
            files.iter().any(|f| f == "sweep.toml") && files.iter().any(|f| f == "README.md"),
            "{name}: an experiment is a sweep.toml with a README.md: {files:?}"
        );
        for f in &files {
            // Runnable parts are sweep specs; a spec's base config, an example config, a
            // table.py and recorded results may sit beside them.
            let script = f.ends_with(".sh") || (f.ends_with(".py") && f != "table.py");
            assert!(
                !script,
                "{name}/{f}: experiments run as sweeps (benchmarks on real devices live in bench/)"
            );
            if f.starts_with("sweep") && f.ends_with(".toml") {
                out.push(format!("{name}/{f}"));
            }
        }
    }
    out
}

#[test]
fn every_experiment_is_sweeps_that_run_and_report_at_ci_size() {
    let specs = specs();
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    for (spec, test) in RUN_ELSEWHERE {
        assert!(
            specs.iter().any(|s| s == spec),
            "{spec} is gone: update this list"
        );
        let text = std::fs::read_to_string(tests.join(test)).unwrap();
        let file = spec.rsplit('/').next().unwrap();
        assert!(
            text.contains(file) && text.contains("--ci"),
            "{test} no longer runs {spec} at --ci"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for spec in specs
        .iter()
        .filter(|s| !RUN_ELSEWHERE.iter().any(|(r, _)| r == s))
    {
        let out = dir.path().join(spec.replace('/', "-"));
        let o = out.to_str().unwrap();
        let path = experiments().join(spec);
        tiercache(&["sweep", path.to_str().unwrap(), "--ci", "-o", o, "--quiet"]);
        let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
        let (mut points, mut runs) = (0, 0);
        for l in text.lines() {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(line["status"], "ok", "{spec}: {line}");
            // A sim record carries its metrics; a hierarchy record, each cache level's.
            let record = &line["record"];
            assert!(
                record["metrics"].is_object()
                    || record["result"]["levels"][0]["metrics"].is_object(),
                "{spec}: {line}"
            );
            points += 1;
            // The report draws a hierarchy record as one run per cache level (docs/design.md §9).
            runs += match record["result"]["levels"].as_array() {
                Some(levels) => levels.iter().filter(|l| l["metrics"].is_object()).count(),
                None => 1,
            };
        }
        assert!(points >= 2, "{spec}: {points} points");
        tiercache(&["report", o]);
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(
            html.contains(&format!("{runs} runs ({runs} ok, 0 failed)")),
            "{spec}: the report counts every point"
        );
        ran += 1;
    }
    assert!(ran >= 6, "specs run here: {ran}");
}
