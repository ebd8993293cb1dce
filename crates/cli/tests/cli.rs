//! The `tiercache` binary end to end: determinism, output formats, and bad input named with a
//! non-zero exit.

use std::process::Command;

fn tiercache(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .output()
        .expect("run tiercache")
}

const SMALL: &[&str] = &[
    "--set",
    "run.requests=20000",
    "--set",
    "run.warmup_requests=5000",
    "--only",
    "always-4k",
];

#[test]
fn same_seed_gives_byte_identical_json() {
    let mut a = vec!["sim", "--json"];
    a.extend_from_slice(SMALL);
    let first = tiercache(&a);
    let second = tiercache(&a);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(first.stdout, second.stdout);
    let rec: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    for key in [
        "requests",
        "hit_ratio",
        "read_hit_ratio",
        "write_hit_ratio",
        "iops",
        "bandwidth_bytes_per_s",
        "latency_us",
        "promotions",
        "evictions",
        "flushes",
        "bypasses",
        "cache_bytes_written",
        "backend_bytes_read",
        "backend_bytes_written",
    ] {
        assert!(rec["metrics"].get(key).is_some(), "metrics.{key} missing");
    }
    for p in ["mean", "p50", "p90", "p99", "p999", "p9999"] {
        assert!(
            rec["metrics"]["latency_us"]["all"][p].as_f64().is_some(),
            "latency_us.all.{p}"
        );
    }
    assert_eq!(rec["seed"], 42);
    assert_eq!(
        rec["config"]["cache"]["capacity"], "256MiB",
        "the whole configuration is recorded"
    );
    // Another seed changes the result.
    a.extend_from_slice(&["--set", "run.seed=43"]);
    let third = tiercache(&a);
    assert_ne!(first.stdout, third.stdout);
}

#[test]
fn table_lists_every_variant() {
    let out = tiercache(&[
        "sim",
        "--set",
        "run.requests=5000",
        "--set",
        "run.warmup_requests=1000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // Above the table, what was simulated: the cache, its devices, the workload, as configs
    // spell them.
    let said: String = text.lines().take(2).collect::<Vec<_>>().join("\n");
    for needle in [
        "7 designs",
        "256 MiB cache",
        "write-back",
        "ram-disk",
        "raid5 of 6 × sata-ssd-5100",
        "8 jobs × QD 16",
        "80% reads",
        "zipf",
        "5000 requests measured",
    ] {
        assert!(said.contains(needle), "{needle} missing from\n{said}");
    }
    for v in [
        "always-4k",
        "nhit2-4k",
        "always-32k",
        "nhit2-32k",
        "smq-4k",
        "write-through",
        "ht-cg",
    ] {
        assert!(text.contains(v), "{v} missing from\n{text}");
    }
}

#[test]
fn hit_ratio_mode_and_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let tl = dir.path().join("tl.csv");
    let out = tiercache(&[
        "sim",
        "--only",
        "always-4k",
        "--set",
        "run.requests=20000",
        "--set",
        "run.timeline_interval_ns=1ms",
        "--timeline",
        tl.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(&tl).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(
        header.contains("iops") && header.contains("hit_ratio"),
        "{header}"
    );
    assert!(lines.count() >= 2, "several intervals");

    let out = tiercache(&[
        "sim",
        "--json",
        "--only",
        "always-4k",
        "--set",
        "run.mode=hit-ratio",
        "--set",
        "run.requests=20000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hr = rec["metrics"]["hit_ratio"].as_f64().unwrap();
    assert!(hr > 0.1 && hr < 1.0, "{hr}");
}

fn fails_naming(args: &[&str], needle: &str) {
    let out = tiercache(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code for {args:?}: {err}");
    assert!(
        err.contains(needle),
        "error for {args:?} should name `{needle}`: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_configs_are_named_with_exit_2() {
    fails_naming(&["sim", "--set", "cache.bogus=1"], "bogus");
    fails_naming(&["sim", "--set", "cache.line_size=3000"], "line_size");
    fails_naming(&["sim", "--set", "cache.eviction=lfu-x"], "cache.eviction");
    fails_naming(
        &["sim", "--set", "workload.read_fraction=1.5"],
        "read_fraction",
    );
    fails_naming(&["sim", "--set", "host.lookup=fast"], "host.lookup");
    fails_naming(&["sim", "--set", "devices.cache=floppy"], "floppy");
    fails_naming(&["sim", "--set", "nonsense"], "nonsense");
    fails_naming(&["sim", "--set", "cache.shards=0"], "cache.shards");
    fails_naming(&["sim", "--set", "cache.victim='demote'"], "cache.victim");
    fails_naming(
        &["sim", "--set", "cache.balancing={policy='magic'}"],
        "balancing",
    );
    fails_naming(
        &["sim", "--set", "cache.promotion={policy='nhit', n=0}"],
        "promotion.n",
    );
    fails_naming(
        &[
            "sim",
            "--set",
            "cache.admission={policy='probabilistic', probability=2}",
        ],
        "admission.probability",
    );
    fails_naming(
        &[
            "sim",
            "--set",
            "cache.admission={policy='tinylfu', bogus=1}",
        ],
        "cache.admission.bogus",
    );
    fails_naming(
        &["sim", "--set", "cache.admission={policy='lfu'}"],
        "cache.admission",
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[cache]\ncapacity = = 3\n").unwrap();
    fails_naming(&["sim", bad.to_str().unwrap()], "line 2");
    fails_naming(
        &["sim", "/nonexistent/config.toml"],
        "/nonexistent/config.toml",
    );
}

#[test]
fn trace_workload_replays_a_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("trace.toml");
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/msr-hm0-sample.csv"
    );
    std::fs::write(
        &cfg,
        format!("[run]\nmode = 'hit-ratio'\n[workload]\ntrace = '{trace}'\n[cache]\ncapacity = '4MiB'\n"),
    )
    .unwrap();
    let out = tiercache(&["sim", "--json", cfg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rec["metrics"]["requests"], 1000,
        "every record of the fixture replayed"
    );
    let out = tiercache(&[
        "sim",
        "--json",
        cfg.to_str().unwrap(),
        "--set",
        "run.mode=timed",
        "--set",
        "workload.replay=fast",
        "--set",
        "workload.jobs=4",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every shipped example config runs (at a reduced size).
#[test]
fn every_example_config_runs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        n += 1;
        let p = path.to_str().unwrap();
        let out = tiercache(&[
            "sim",
            p,
            "--set",
            "run.requests=3000",
            "--set",
            "run.warmup_requests=500",
        ]);
        assert!(
            out.status.success(),
            "{p}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).lines().count() >= 2,
            "{p} printed a table"
        );
    }
    assert!(n >= 4, "examples found: {n}");
}

/// A shipped experiment runs end to end at its reduced (CI) size through the simulator, resumes
/// without rerunning finished points, and turns into a report with every plot present.
#[test]
fn shipped_experiment_sweeps_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/lookup-scalability/sweep.toml"
    );
    let o = out.to_str().unwrap();
    let first = tiercache(&["sweep", spec, "--ci", "-o", o, "--no-progress"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let lines = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.len() >= 4);
    for r in &records {
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["record"]["metrics"]["iops"].as_f64().unwrap() > 0.0);
    }
    let parquet = std::fs::read(out.join("results.parquet")).unwrap();
    assert_eq!(&parquet[..4], b"PAR1", "a Parquet file");
    assert!(
        std::fs::read_to_string(out.join("results.csv"))
            .unwrap()
            .lines()
            .count()
            == records.len() + 1
    );
    let again = tiercache(&["sweep", spec, "--ci", "-o", o, "--no-progress"]);
    assert!(again.status.success());
    let after = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert_eq!(
        after.lines().count(),
        records.len(),
        "a rerun skips finished points"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains(&format!("{} already done", records.len()))
    );

    let html = dir.path().join("report.html");
    let rep = tiercache(&["report", o, "-o", html.to_str().unwrap()]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.matches("<svg").count() >= 8, "plots inline");
    // Self-contained: no resource is fetched (the SVG namespace URI is an identifier, not a fetch).
    for attr in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(
            !page.contains(attr),
            "external resource `{attr}` in the report"
        );
    }
}

/// `workload.volumes` replays only the chosen volumes of a multi-volume trace.
#[test]
fn trace_replay_filters_volumes() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/tencent-cbs-sample.csv.bz2"
    );
    let stats = tiercache(&["trace", "stats", trace, "--json"]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    let run = |volumes: &str| {
        std::fs::write(
            &cfg,
            format!("[run]\nmode = 'hit-ratio'\n[workload]\ntrace = '{trace}'\nvolumes = {volumes}\n[cache]\ncapacity = '4MiB'\n"),
        )
        .unwrap();
        let out = tiercache(&["sim", "--json", cfg.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        rec["metrics"]["requests"].as_u64().unwrap()
    };
    assert_eq!(run("[]"), 50_000, "no filter: every record");
    let vols = stats["volumes"].as_array().expect("per-volume stats");
    let (a, b) = (&vols[0], &vols[1]);
    let name = |v: &serde_json::Value| v["name"].as_str().unwrap().to_string();
    let count = |v: &serde_json::Value| v["records"].as_u64().unwrap();
    assert_eq!(run(&format!("['{}']", name(a))), count(a));
    assert_eq!(
        run(&format!("['{}', '{}']", name(a), name(b))),
        count(a) + count(b)
    );
}

/// `tiercache analyze` on a real trace: a curve that only falls, advice per volume, JSON.
#[test]
fn analyze_a_fixture() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/msr-hm0-sample.csv"
    );
    let out = tiercache(&[
        "analyze",
        trace,
        "--json",
        "--shards-rate",
        "0.5",
        "--exact",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["requests"], 1000);
    let curve: Vec<f64> = a["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["miss_ratio"].as_f64().unwrap())
        .collect();
    assert!(
        curve.len() >= 5 && curve.windows(2).all(|w| w[1] <= w[0]),
        "{curve:?}"
    );
    let v = &a["volumes"][0]["advice"];
    assert!(v["urd_demand_lines"].as_u64().unwrap() <= v["trd_demand_lines"].as_u64().unwrap());
    let text = tiercache(&["analyze", trace]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("URD-dem"));
    // Its first line says what was analysed and how.
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("analysed ")
            && first.contains("4 KiB lines")
            && first.contains("exact LRU"),
        "{first}"
    );
    fails_naming(&["analyze", trace, "--line-size", "1000"], "line-size");
    // Sizes as shares of the footprint (1,917 lines of 4 KiB): 10% is 192 lines, beside 50.
    let out = tiercache(&["analyze", trace, "--json", "--sizes", "10%,50"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines: Vec<u64> = a["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["lines"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [50, 192]);
    fails_naming(&["analyze", trace, "--sizes", "0%"], "--sizes");
    fails_naming(&["analyze", trace, "--sizes", "150%"], "--sizes");
    fails_naming(
        &["analyze", "/nonexistent/trace.csv"],
        "/nonexistent/trace.csv",
    );
}

/// `sim`'s text output of a multi-tenant run: under the runs' table, one row per volume by its
/// name, with its allocation and the intervals it took to settle.
#[test]
fn text_output_of_a_tenancy_run_has_a_row_per_volume_with_its_settling() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mt.toml");
    std::fs::write(
        &cfg,
        r#"
[run]
seed = 3
requests = 20_000
[cache]
capacity = "4MiB"
tenancy = { mode = "eci", interval_ns = "20ms" }
[devices]
cache = "nvme-ssd"
backend = "sata-ssd-5100"
[[volumes]]
name = "reads"
workload = { iodepth = 4, footprint = "1MiB", distribution = { type = "zipf", theta = 0.9 } }
[[volumes]]
name = "scan"
workload = { iodepth = 4, footprint = "1GiB", distribution = { type = "sequential" } }
"#,
    )
    .unwrap();
    let out = tiercache(&["sim", cfg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let table = &text[text.find("tenancy eci: ").expect(&text)..];
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[1].starts_with("volume") && lines[1].ends_with("settled after"),
        "{table}"
    );
    assert!(lines[2].starts_with("reads "), "{table}");
    assert!(lines[3].starts_with("scan "), "{table}");
    // "k of n": the scan settles on no lines at the first decision it is planned in.
    let settle = |l: &str| -> (u64, u64) {
        let t: Vec<&str> = l.split_whitespace().collect();
        let n = t.len();
        (
            t[n - 3].parse().unwrap(),
            t[n - 1].trim_end_matches('*').parse().unwrap(),
        )
    };
    let (k, n) = settle(lines[3]);
    assert!(k <= 2 && n >= 5, "{table}");
    let (k, n2) = settle(lines[2]);
    assert!(k >= 1 && k <= n2, "{table}");
}

/// A multi-tenant run's `--timeline` also writes the per-volume, per-interval records: one row
/// per decision and volume, the same records as the JSON, with each interval's latency.
#[test]
fn timeline_of_a_tenancy_run_gets_its_per_volume_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mt.toml");
    std::fs::write(
        &cfg,
        r#"
[run]
mode = "timed"
seed = 3
requests = 20_000
warmup_requests = 2_000
[cache]
capacity = "4MiB"
line_size = "4KiB"
write_policy = "write-back"
tenancy = { mode = "eci", interval_ns = "20ms" }
[devices]
cache = "nvme-ssd"
backend = "sata-ssd-5100"
[[volumes]]
name = "reads"
workload = { iodepth = 4, read_fraction = 0.95, footprint = "4MiB", distribution = { type = "zipf", theta = 0.9 } }
[[volumes]]
name = "rewrites"
workload = { iodepth = 4, read_fraction = 0.05, footprint = "4MiB", distribution = { type = "zipf", theta = 0.9 } }
"#,
    )
    .unwrap();
    let timeline = dir.path().join("tl.csv");
    let out = tiercache(&[
        "sim",
        cfg.to_str().unwrap(),
        "--json",
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let intervals = rec["metrics"]["tenancy"]["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 4, "{} interval records", intervals.len());
    let csv = std::fs::read_to_string(dir.path().join("tl-volumes.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header, tiercache_metrics::TENANCY_COLUMNS);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), intervals.len());
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut timed = 0u64;
    for (row, j) in rows.iter().zip(intervals) {
        for key in [
            "at_ns",
            "volume",
            "allocation_lines",
            "hits",
            "misses",
            "requests",
        ] {
            assert_eq!(row[col(key)], j[key].to_string(), "{key}");
        }
        assert_eq!(
            row[col("write_policy")],
            j["write_policy"].as_str().unwrap()
        );
        let n: u64 = row[col("requests")].parse().unwrap();
        let lat: f64 = row[col("mean_latency_us")].parse().unwrap();
        assert_eq!(
            n == 0,
            lat == 0.0,
            "latency without requests or the reverse"
        );
        timed += n;
    }
    // Measured requests are counted in the interval they completed in; those after the last
    // decision are in none.
    let measured = rec["metrics"]["requests"].as_u64().unwrap();
    assert!(timed > 0 && timed <= measured, "{timed} of {measured}");
    // The rewriting volume's reuses are rewrites: ECI turns its cache writes off.
    assert!(rows
        .iter()
        .any(|r| r[col("volume")] == "1" && r[col("write_policy")] == "read-only"));
}
