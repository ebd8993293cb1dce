//! `tiercache sweep --backend bench`: each point runs on the real engine under fio, one at a
//! time, into records of the simulator's shape (docs/design.md §9); a point that varies a key
//! bench does not read, or a directory of another backend's results, is refused by name. fio is
//! required through `tiercache-testsupport`: missing on CI, these tests fail.

use std::path::Path;
use std::process::{Command, Output};

const SPEC: &str = r#"
name = "bench-mini"
[base]
name = "b"
[base.run]
seed = 3
[base.cache]
capacity = "8MiB"
line_size = "4KiB"
[base.workload]
jobs = 1
iodepth = 4
read_fraction = 0.8
footprint = "32MiB"
distribution = { type = "zipf", theta = 1.1 }
[base.bench]
runtime_ns = "1s"
[[axis]]
key = "cache.line_size"
values = ["4KiB", "16KiB"]
"#;

fn fio() -> bool {
    let missing = Command::new("fio").arg("--version").output().is_err();
    tiercache_testsupport::require("fio", "fio", missing.then(|| "not on PATH".to_string()))
}

fn sweep(spec: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .arg("sweep")
        .arg(spec)
        .args(["--no-progress", "--backend", "bench"])
        .args(args)
        .output()
        .expect("run tiercache")
}

/// The spec with `head` before it (top-level keys) and `tail` after it (more axes).
fn write_spec(dir: &Path, head: &str, tail: &str) -> std::path::PathBuf {
    let path = dir.join("spec.toml");
    std::fs::write(&path, format!("{head}\n{SPEC}{tail}")).unwrap();
    path
}

#[test]
fn a_bench_sweep_runs_each_point_on_the_engine_one_at_a_time() {
    if !fio() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = sweep(
        &write_spec(dir.path(), "", ""),
        &["-j", "2", "--out", out.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("one point at a time (jobs = 1, not --jobs 2)"),
        "{err}"
    );
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["status"], "ok", "{l}");
        assert_eq!(l["record"]["kind"], "bench");
        assert!(
            l["record"]["metrics"]["requests"].as_u64().unwrap() > 0,
            "{l}"
        );
        assert_eq!(
            l["record"]["config"]["cache"]["line_size"],
            l["axes"]["cache.line_size"]
        );
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains("metrics.iops"),
        "{csv}"
    );
    // The report reads them as it reads the simulator's.
    let r = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("IOPS"));
}

#[test]
fn a_bench_sweep_refuses_keys_bench_does_not_read_and_other_backends_results() {
    if !fio() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // An axis over the simulator's run length: every value would measure alike.
    let spec = write_spec(
        dir.path(),
        "",
        "[[axis]]\nkey = 'run.requests'\nvalues = [1000, 2000]\n",
    );
    let out = dir.path().join("unread");
    let o = sweep(&spec, &["--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("`run.requests` is not read by --backend bench") && err.contains("point "),
        "{err}"
    );

    // So is one given on the command line.
    let spec = write_spec(dir.path(), "", "");
    let o = sweep(
        &spec,
        &[
            "--set",
            "devices.cache.model=ram",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--set devices.cache.model: not read"),
        "{err}"
    );

    // A directory of the simulator's results of the same points is not taken as done.
    let spec = write_spec(dir.path(), "set = ['run.requests = 2000']", "");
    let out = dir.path().join("sim");
    let sim = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .arg("sweep")
        .arg(&spec)
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let o = sweep(&spec, &["--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("holds `sim` results"),
        "{err}"
    );
}
