//! The runner: results lines and CSV, resumption after completion and after an interruption,
//! failure isolation (errors and panics), and independence from the number of threads.

use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tiercache_sweep::{
    latest_per_point, read_results, run_points, PointSpec, RunOptions, Status, SweepError,
    SweepSpec,
};

const SPEC: &str = r#"
name = "fake"
repetitions = 2
[base.run]
seed = 5
[base.cache]
line_size = "4KiB"
[base.workload]
read_fraction = 0.8
[[axis]]
key = "cache.line_size"
values = ["4KiB", "32KiB", "64KiB"]
[[axis]]
name = "promotion"
key = "cache.promotion"
values = [{ policy = "always" }, { policy = "nhit", n = 2 }, { policy = "nhit", n = 4 }]
[[workload]]
name = "read-heavy"
set = ["workload.read_fraction=0.9"]
[[workload]]
name = "write-heavy"
set = ["workload.read_fraction=0.2"]
"#;

fn points() -> Vec<PointSpec> {
    SweepSpec::parse(SPEC, "fake.toml", Path::new("."), "fake")
        .unwrap()
        .expand()
        .unwrap()
}

/// A deterministic stand-in for the simulator: metrics computed from the point's config.
fn fake_record(p: &PointSpec) -> serde_json::Value {
    let v = &p.doc.value;
    let line: f64 = match v["cache"]["line_size"].as_str().unwrap() {
        "4KiB" => 4.0,
        "32KiB" => 32.0,
        _ => 64.0,
    };
    let n = v["cache"]
        .get("promotion")
        .and_then(|p| p.get("n"))
        .and_then(|n| n.as_integer())
        .unwrap_or(1) as f64;
    let rf = v["workload"]["read_fraction"].as_float().unwrap();
    let seed = v["run"]["seed"].as_integer().unwrap() as f64;
    json!({
        "tool": "tiercache", "kind": "sim", "name": p.name, "seed": p.seed,
        "metrics": {
            "iops": 100_000.0 * rf / line.sqrt() * (1.0 + n / 10.0) + seed,
            "hit_ratio": 0.5 + 0.1 * n.ln(),
            "latency_us": { "all": { "p99": 100.0 * line.sqrt() / n, "p9999": 1000.0 / n } },
            "bypasses": { "nhit": n as u64 },
        }
    })
}

fn opts(dir: &Path) -> RunOptions {
    RunOptions {
        progress: false,
        jobs: 2,
        sweep_name: "fake".into(),
        ..RunOptions::new(dir)
    }
}

#[test]
fn runs_every_point_and_writes_jsonl_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let pts = points();
    assert_eq!(pts.len(), 9 * 2 * 2);
    let s = run_points(&pts, &|p: &PointSpec| Ok(fake_record(p)), &opts(dir.path())).unwrap();
    assert_eq!((s.total, s.skipped, s.ok, s.failed), (36, 0, 36, 0));
    let res = read_results(&s.results_jsonl).unwrap();
    assert_eq!(res.lines.len(), 36);
    assert!(res.malformed.is_empty());
    for l in &res.lines {
        let p = pts.iter().find(|p| p.id == l.point).unwrap();
        assert_eq!(
            l.record,
            fake_record(p),
            "the backend's record is stored untouched"
        );
        assert_eq!(
            (l.name.as_str(), l.workload.as_str(), l.rep, l.seed),
            (p.name.as_str(), p.workload.as_str(), p.rep, p.seed)
        );
        assert_eq!(l.labels.len(), 2);
        assert_eq!(
            l.axes["cache.line_size"],
            json!(p.doc.value["cache"]["line_size"].as_str().unwrap())
        );
        assert_eq!(l.sweep, "fake");
    }
    assert!(res
        .lines
        .iter()
        .any(|l| l.axes["cache.promotion"] == json!({"policy": "nhit", "n": 2})));
    assert_eq!(
        res.lines.iter().filter(|l| l.default).count(),
        2 * 2,
        "one default design per workload, 2 reps"
    );

    let csv = std::fs::read_to_string(&s.results_csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 37);
    let header: Vec<&str> = rows[0].split(',').collect();
    for col in [
        "point",
        "workload",
        "name",
        "line_size",
        "promotion",
        "metrics.iops",
        "metrics.latency_us.all.p99",
        "metrics.bypasses.nhit",
        "error",
    ] {
        assert!(header.contains(&col), "missing column {col}: {header:?}");
    }
    // Names contain commas, so they are quoted; every row has the header's width.
    assert!(
        rows[1].contains("\"line_size=4KiB,promotion=always\""),
        "{}",
        rows[1]
    );
    let iops_col = header.iter().position(|h| *h == "metrics.iops").unwrap();
    let first = latest_per_point(&res.lines)[0];
    let cells = split_csv(rows[1]);
    assert_eq!(cells.len(), header.len());
    assert_eq!(
        cells[iops_col].parse::<f64>().unwrap(),
        first.record["metrics"]["iops"].as_f64().unwrap()
    );
}

fn split_csv(row: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in row.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[test]
fn a_rerun_skips_finished_points_and_resumes_an_interrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let pts = points();
    let calls = AtomicUsize::new(0);
    let backend = |p: &PointSpec| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(fake_record(p))
    };
    let s = run_points(&pts, &backend, &opts(dir.path())).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 36);
    let s2 = run_points(&pts, &backend, &opts(dir.path())).unwrap();
    assert_eq!((s2.skipped, s2.ok, s2.failed), (36, 0, 0));
    assert_eq!(calls.load(Ordering::SeqCst), 36, "nothing reran");

    // Simulate a crash: keep 10 complete lines and half of the 11th.
    let text = std::fs::read_to_string(&s.results_jsonl).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = format!(
        "{}\n{}",
        lines[..10].join("\n"),
        &lines[10][..lines[10].len() / 2]
    );
    std::fs::write(&s.results_jsonl, cut).unwrap();
    calls.store(0, Ordering::SeqCst);
    let s3 = run_points(&pts, &backend, &opts(dir.path())).unwrap();
    assert_eq!((s3.skipped, s3.ok, s3.malformed_lines), (10, 26, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 26);
    let res = read_results(&s.results_jsonl).unwrap();
    assert_eq!(res.malformed.len(), 1, "only the cut line is unreadable");
    let latest = latest_per_point(&res.lines);
    assert_eq!(latest.len(), 36);
    assert!(latest.iter().all(|l| l.status == Status::Ok));
    // A grown sweep runs only its new points.
    let grown = SweepSpec::parse(
        &SPEC.replace("repetitions = 2", "repetitions = 3"),
        "f",
        Path::new("."),
        "f",
    )
    .unwrap()
    .expand()
    .unwrap();
    calls.store(0, Ordering::SeqCst);
    let s4 = run_points(&grown, &backend, &opts(dir.path())).unwrap();
    assert_eq!((s4.total, s4.skipped, s4.ok), (54, 36, 18));
    assert_eq!(calls.load(Ordering::SeqCst), 18);
}

#[test]
fn a_failing_point_is_recorded_and_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let pts = points();
    let flaky = |p: &PointSpec| {
        if p.name.contains("64KiB") && p.workload == "write-heavy" {
            return Err(format!(
                "cache.line_size: 64KiB unsupported (point {})",
                p.id
            ));
        }
        if p.name == "line_size=32KiB,promotion=nhit-4" && p.rep == 1 {
            panic!("backend bug on purpose");
        }
        Ok(fake_record(p))
    };
    let s = run_points(&pts, &flaky, &opts(dir.path())).unwrap();
    // 3 promotion values x 2 reps failing by error, plus 2 panicking (one per workload).
    assert_eq!((s.ok, s.failed), (36 - 6 - 2, 8));
    let res = read_results(&s.results_jsonl).unwrap();
    let failed: Vec<_> = res
        .lines
        .iter()
        .filter(|l| l.status == Status::Failed)
        .collect();
    assert_eq!(failed.len(), 8);
    assert!(failed.iter().all(|l| l.record.is_null()));
    assert_eq!(
        failed
            .iter()
            .filter(|l| l.error.as_deref().unwrap().contains("64KiB unsupported"))
            .count(),
        6
    );
    assert_eq!(
        failed
            .iter()
            .filter(|l| l.error.as_deref() == Some("panicked: backend bug on purpose"))
            .count(),
        2
    );
    let csv = std::fs::read_to_string(&s.results_csv).unwrap();
    assert!(csv.contains("64KiB unsupported"));

    // --no-retry-failed skips them; the default retries exactly the failed ones.
    let calls = Mutex::new(BTreeMap::<String, usize>::new());
    let fixed = |p: &PointSpec| {
        *calls.lock().unwrap().entry(p.id.clone()).or_default() += 1;
        Ok(fake_record(p))
    };
    let s2 = run_points(
        &pts,
        &fixed,
        &RunOptions {
            retry_failed: false,
            ..opts(dir.path())
        },
    )
    .unwrap();
    assert_eq!((s2.skipped, s2.not_retried, s2.ok), (28, 8, 0));
    let s3 = run_points(&pts, &fixed, &opts(dir.path())).unwrap();
    assert_eq!((s3.skipped, s3.ok, s3.failed), (28, 8, 0));
    let rerun: Vec<String> = calls.lock().unwrap().keys().cloned().collect();
    let mut failed_ids: Vec<String> = failed.iter().map(|l| l.point.clone()).collect();
    failed_ids.sort();
    assert_eq!(rerun, failed_ids);
    let latest = latest_per_point(&read_results(&s.results_jsonl).unwrap().lines).len();
    assert_eq!(latest, 36);
    let csv = std::fs::read_to_string(&s.results_csv).unwrap();
    assert!(
        !csv.contains("64KiB unsupported"),
        "the CSV shows each point's latest outcome"
    );
}

#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    let pts = points();
    let collect = |jobs: usize| {
        let dir = tempfile::tempdir().unwrap();
        let s = run_points(
            &pts,
            &|p: &PointSpec| Ok(fake_record(p)),
            &RunOptions {
                jobs,
                ..opts(dir.path())
            },
        )
        .unwrap();
        let res = read_results(&s.results_jsonl).unwrap();
        latest_per_point(&res.lines)
            .iter()
            .map(|l| (l.point.clone(), l.record.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(collect(1), collect(3));
}

/// What `tiercache sweep` does with the library: load, run, and fail when any point failed.
fn sweep(
    opts: &tiercache_sweep::SweepOptions,
    backend: &dyn tiercache_sweep::Backend,
) -> Result<tiercache_sweep::RunSummary, SweepError> {
    let (spec, points) = tiercache_sweep::load_points(opts)?;
    let summary = tiercache_sweep::run_sweep(opts, &spec, &points, backend)?;
    match summary.failure() {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

#[test]
fn a_sweep_reports_failures_after_running_everything() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("s.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let args = tiercache_sweep::SweepOptions {
        out: Some(dir.path().join("out")),
        jobs: Some(2),
        set: vec!["run.requests=7".into()],
        progress: false,
        ..tiercache_sweep::SweepOptions::new(&spec)
    };
    let failing = |p: &PointSpec| {
        assert_eq!(
            p.doc.value["run"]["requests"].as_integer(),
            Some(7),
            "--set reaches the points"
        );
        if p.rep == 0 {
            Err("nope".to_string())
        } else {
            Ok(fake_record(p))
        }
    };
    let e = sweep(&args, &failing).unwrap_err();
    match e {
        SweepError::PointsFailed { failed, total, .. } => assert_eq!((failed, total), (18, 36)),
        other => panic!("unexpected error {other:?}"),
    }
    let res = read_results(&dir.path().join("out/results.jsonl")).unwrap();
    assert_eq!(res.lines.len(), 36);
    // Not retrying them does not make them done: the rerun fails too, counting them.
    let no_retry = tiercache_sweep::SweepOptions {
        retry_failed: false,
        ..args.clone()
    };
    let e = sweep(&no_retry, &|p: &PointSpec| Ok(fake_record(p))).unwrap_err();
    match &e {
        SweepError::PointsFailed {
            failed,
            not_retried,
            total,
            ..
        } => assert_eq!((*failed, *not_retried, *total), (18, 18, 36)),
        other => panic!("unexpected error {other:?}"),
    }
    assert!(
        e.to_string()
            .contains("18 of them in an earlier run, not retried"),
        "{e}"
    );
    let ok = sweep(&args, &|p: &PointSpec| Ok(fake_record(p))).unwrap();
    assert_eq!((ok.skipped, ok.ok), (18, 18));
}

#[test]
fn a_changed_base_supersedes_older_results_of_the_same_design() {
    let dir = tempfile::tempdir().unwrap();
    let pts = points();
    run_points(&pts, &|p: &PointSpec| Ok(fake_record(p)), &opts(dir.path())).unwrap();
    // Same designs, another base (a different --set): new ids, run again, and they win.
    let mut spec = SweepSpec::parse(SPEC, "fake.toml", Path::new("."), "fake").unwrap();
    spec.apply_overrides(&["run.requests=5".to_string()])
        .unwrap();
    let changed = spec.expand().unwrap();
    let tagged = |p: &PointSpec| {
        let mut r = fake_record(p);
        r["metrics"]["iops"] = json!(-1.0);
        Ok(r)
    };
    let s = run_points(&changed, &tagged, &opts(dir.path())).unwrap();
    assert_eq!(
        (s.skipped, s.ok),
        (0, 36),
        "a different base is a different set of points"
    );
    let res = read_results(&s.results_jsonl).unwrap();
    assert_eq!(res.lines.len(), 72);
    let latest = latest_per_point(&res.lines);
    assert_eq!(latest.len(), 36);
    assert!(latest
        .iter()
        .all(|l| l.record["metrics"]["iops"] == json!(-1.0)));
    let csv = std::fs::read_to_string(&s.results_csv).unwrap();
    assert_eq!(csv.lines().count(), 37);
}

#[test]
fn a_reused_directory_tables_only_the_current_specs_points() {
    let dir = tempfile::tempdir().unwrap();
    run_points(
        &points(),
        &|p: &PointSpec| Ok(fake_record(p)),
        &opts(dir.path()),
    )
    .unwrap();
    // Another spec into the same directory: 4KiB is shared, 32KiB and 64KiB are not in it.
    let other = SPEC.replace(r#"["4KiB", "32KiB", "64KiB"]"#, r#"["4KiB", "8KiB"]"#);
    let pts = SweepSpec::parse(&other, "fake.toml", Path::new("."), "fake")
        .unwrap()
        .expand()
        .unwrap();
    assert_eq!(pts.len(), 24);
    let s = run_points(&pts, &|p: &PointSpec| Ok(fake_record(p)), &opts(dir.path())).unwrap();
    assert_eq!((s.skipped, s.ok), (12, 12));
    assert_eq!(
        s.other_lines, 24,
        "the 32KiB and 64KiB lines of the first spec"
    );
    let csv = std::fs::read_to_string(&s.results_csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 24, "{csv}");
    assert!(!csv.contains("32KiB") && !csv.contains("64KiB"), "{csv}");
    // Nothing is deleted: every line ever written stays in results.jsonl.
    assert_eq!(read_results(&s.results_jsonl).unwrap().lines.len(), 36 + 12);
    // sweep.json lists this spec's points, so a report of the directory can keep to them.
    let about: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("sweep.json")).unwrap()).unwrap();
    let listed: Vec<&str> = about["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let ids: Vec<&str> = pts.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(listed, ids);
}

#[test]
fn a_last_line_cut_inside_a_utf8_character_is_one_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let pts = points();
    let s = run_points(&pts, &|p: &PointSpec| Ok(fake_record(p)), &opts(dir.path())).unwrap();
    // Keep 10 lines, then a line cut in the middle of a two-byte character.
    let text = std::fs::read_to_string(&s.results_jsonl).unwrap();
    let mut bytes: Vec<u8> = text
        .lines()
        .take(10)
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    bytes.extend_from_slice(b"{\"point\": \"\xc3");
    std::fs::write(&s.results_jsonl, &bytes).unwrap();
    let res = read_results(&s.results_jsonl).unwrap();
    assert_eq!((res.lines.len(), res.malformed.clone()), (10, vec![11]));
    assert!(res.missing_final_newline);
    let s2 = run_points(&pts, &|p: &PointSpec| Ok(fake_record(p)), &opts(dir.path())).unwrap();
    assert_eq!((s2.skipped, s2.ok, s2.malformed_lines), (10, 26, 1));
}

/// A hierarchy record (docs/design.md §9) is tabled from its `result`, its levels and clients
/// by name (`result.levels.array.hit_fraction`); the name itself is no column, and arrays of
/// anything else stay in the JSON.
#[test]
fn hierarchy_records_are_tabled_by_level_name() {
    let pts = points();
    let backend = |p: &PointSpec| -> Result<serde_json::Value, String> {
        Ok(json!({ "kind": "hierarchy", "name": p.name, "result": {
            "requests": 10,
            "latency_us": { "mean": 2.5 },
            "levels": [{ "name": "array", "hit_fraction": 0.25 },
                       { "name": "host.client", "hit_fraction": 0.5 }],
            "clients": [{ "name": "host", "served_by": [["array", 0.25]] }],
        }}))
    };
    let dir = tempfile::tempdir().unwrap();
    let s = run_points(&pts[..1], &backend, &opts(dir.path())).unwrap();
    let (header, rows) =
        tiercache_sweep::tidy_table(&read_results(&s.results_jsonl).unwrap().lines);
    let cell = |col: &str| {
        let i = header
            .iter()
            .position(|h| h == col)
            .unwrap_or_else(|| panic!("{col}: {header:?}"));
        rows[0][i].clone()
    };
    assert_eq!(cell("result.requests").as_deref(), Some("10"));
    assert_eq!(cell("result.latency_us.mean").as_deref(), Some("2.5"));
    assert_eq!(
        cell("result.levels.array.hit_fraction").as_deref(),
        Some("0.25")
    );
    assert_eq!(
        cell("result.levels.host.client.hit_fraction").as_deref(),
        Some("0.5")
    );
    assert!(
        !header
            .iter()
            .any(|h| h.ends_with(".name") || h.contains("served_by")),
        "{header:?}"
    );
}
