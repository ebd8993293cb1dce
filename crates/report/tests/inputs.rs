//! What a report makes of several inputs and of bad lines: inputs are never merged nor
//! averaged together, a reused sweep directory keeps to its latest spec, and unreadable lines
//! (including bytes that are not UTF-8) are named by file and line.

mod common;

use tiercache_report::ResultSet;

fn record(name: &str, iops: f64) -> String {
    serde_json::json!({ "tool": "tiercache", "kind": "sim", "name": name,
        "metrics": { "iops": iops } })
    .to_string()
}

#[test]
fn sweeps_with_the_same_designs_in_two_directories_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    common::run_fake_sweep(&a);
    common::run_fake_sweep(&b);
    let one = ResultSet::load(&[&a]).unwrap().runs.len();
    assert_eq!(one, 72);
    let set = ResultSet::load(&[&a, &b]).unwrap();
    assert_eq!(
        set.runs.len(),
        2 * one,
        "no run of one input replaces another's"
    );
    assert_eq!(
        set.workloads(),
        [
            "read-heavy",
            "write-heavy",
            "read-heavy (b)",
            "write-heavy (b)"
        ]
    );
    assert!(
        set.notes
            .iter()
            .any(|n| n.contains("`read-heavy (b)`") && n.contains("b/results.jsonl")),
        "{:?}",
        set.notes
    );
    // Each design keeps its two repetitions, not four.
    for w in set.workloads() {
        assert!(set.designs(&w).iter().all(|d| d.runs.len() == 2), "{w}");
    }
}

#[test]
fn bare_records_of_one_name_in_two_files_are_not_averaged() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("small.jsonl"),
        dir.path().join("large.jsonl"),
    );
    std::fs::write(&a, record("lru", 100.0) + "\n").unwrap();
    std::fs::write(&b, record("lru", 300.0) + "\n").unwrap();
    let set = ResultSet::load(&[&a, &b]).unwrap();
    assert_eq!(set.workloads(), ["all", "all (large)"]);
    let means: Vec<f64> = set
        .workloads()
        .iter()
        .map(|w| set.designs(w)[0].stat("metrics.iops").unwrap().mean)
        .collect();
    assert_eq!(means, [100.0, 300.0]);
    // Within one file, records of a name are still repetitions of one design.
    std::fs::write(
        &a,
        record("lru", 100.0) + "\n" + &record("lru", 200.0) + "\n",
    )
    .unwrap();
    let set = ResultSet::load(&[&a]).unwrap();
    assert_eq!(set.designs("all")[0].stat("metrics.iops").unwrap().n, 2);
}

#[test]
fn a_reused_sweep_directory_reports_only_its_latest_specs_points() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = common::run_fake_sweep(dir.path());
    // A line of a point another spec ran into the same directory.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let mut stale: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    stale["point"] = "00000000deadbeef".into();
    stale["name"] = "line_size=16KiB".into();
    std::fs::write(&jsonl, format!("{text}{stale}\n")).unwrap();
    let set = ResultSet::load(&[dir.path()]).unwrap();
    assert_eq!(set.runs.len(), 72);
    assert!(set.runs.iter().all(|r| r.name != "line_size=16KiB"));
    assert!(
        set.notes.iter().any(|n| n.contains("1 line(s)")),
        "{:?}",
        set.notes
    );
}

#[test]
fn a_line_that_is_not_utf8_is_one_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.jsonl");
    let mut bytes = format!("{}\n{}\n", record("a", 1.0), record("b", 2.0)).into_bytes();
    bytes.extend_from_slice(b"{\"name\": \"c\xc3");
    std::fs::write(&path, bytes).unwrap();
    let set = ResultSet::load(&[&path]).unwrap();
    assert_eq!(set.runs.len(), 2);
    assert_eq!(set.malformed, [format!("{}:3", path.display())]);
    let notes = set.input_notes();
    assert!(
        notes[0].contains("1 unreadable line(s) skipped") && notes[0].contains(":3"),
        "{notes:?}"
    );
}

#[test]
fn workloads_whose_names_share_a_slug_get_distinct_anchors() {
    let run = |workload: &str| tiercache_report::Run {
        point: format!("p-{workload}"),
        name: "lru".into(),
        workload: workload.into(),
        rep: 0,
        index: 0,
        default: true,
        labels: Vec::new(),
        ok: true,
        error: None,
        record: serde_json::json!({ "metrics": { "iops": 1.0 } }),
    };
    let set = ResultSet {
        runs: vec![run("日本"), run("中文"), run("a b"), run("a-b")],
        ..Default::default()
    };
    let report = tiercache_report::build_report(&set, &tiercache_report::ReportOptions::default());
    let ids: Vec<&str> = report
        .html
        .split("<h2 id=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .filter(|id| id.starts_with('w'))
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), 4, "{ids:?}");
    for id in &ids {
        assert!(report.html.contains(&format!("href=\"#{id}\"")), "{id}");
    }
}
