//! `sim` and `sweep` on the command line: what `--set` does against variants, axes and
//! workloads, duplicate output files, and fields that must not be silently ignored.

use std::process::Command;
use tiercache_run::experiment::{load_str, Workload};

fn tiercache(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .output()
        .expect("run tiercache")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const VARIANTS: &str = r#"
[cache]
line_size = "4KiB"
[[variant]]
name = "big-lines"
set = ["cache.line_size = '32KiB'"]
[[variant]]
name = "plain"
"#;

#[test]
fn command_line_set_wins_over_a_variants_own_set() {
    let runs = load_str(VARIANTS, "t.toml", &["cache.line_size=8KiB".to_string()]).unwrap();
    let sizes: Vec<(String, u64)> = runs
        .iter()
        .map(|e| (e.name.clone(), e.cache.line_size))
        .collect();
    assert_eq!(
        sizes,
        [("big-lines".to_string(), 8192), ("plain".to_string(), 8192)]
    );
    // Without --set the variant's own value holds.
    let runs = load_str(VARIANTS, "t.toml", &[]).unwrap();
    assert_eq!(runs[0].cache.line_size, 32 * 1024);
    assert!(matches!(runs[0].workload, Workload::Synthetic(_)));
}

#[test]
fn a_workload_seed_is_refused_naming_run_seed() {
    let text = "[workload]\nseed = 7\nrequests = 100\n";
    let e = format!("{:#}", load_str(text, "t.toml", &[]).unwrap_err());
    assert!(e.contains("workload.seed") && e.contains("run.seed"), "{e}");
    // On the command line too, with a non-zero exit.
    let o = tiercache(&[
        "sim",
        "--set",
        "run.requests=100",
        "--set",
        "workload.seed=8",
        "--only",
        "always-4k",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("workload.seed"), "{}", stderr(&o));
    // run.seed is the way, and it is honoured.
    let runs = load_str("[run]\nseed = 7\n[workload]\nrequests = 100\n", "t", &[]).unwrap();
    match &runs[0].workload {
        Workload::Synthetic(spec) => assert_eq!(spec.seed, 7),
        _ => panic!("synthetic workload expected"),
    }
}

#[test]
fn timeline_files_of_two_variants_must_differ() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        r#"
[run]
requests = 200
[[variant]]
name = "lru 4k"
[[variant]]
name = "lru/4k"
"#,
    )
    .unwrap();
    let tl = dir.path().join("tl.csv");
    let o = tiercache(&[
        "sim",
        config.to_str().unwrap(),
        "--timeline",
        tl.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("`lru 4k`") && err.contains("`lru/4k`") && err.contains("tl-lru_4k.csv"),
        "{err}"
    );
    assert!(!dir.path().join("tl-lru_4k.csv").exists(), "nothing ran");
    // A variant named like another's -volumes file collides with it too.
    std::fs::write(
        &config,
        "[run]\nrequests = 200\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a-volumes\"\n",
    )
    .unwrap();
    let o = tiercache(&[
        "sim",
        config.to_str().unwrap(),
        "--timeline",
        tl.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("-volumes file"), "{}", stderr(&o));
}

#[test]
fn keys_on_parameterless_variants_are_refused_by_path() {
    for (set, path) in [
        (
            "cache.promotion={ policy = 'always', bogus = 3 }",
            "cache.promotion.bogus",
        ),
        (
            "cache.promotion={ policy = 'never', n = 1 }",
            "cache.promotion.n",
        ),
        (
            "workload.distribution={ type = 'uniform', theta = 0.5 }",
            "workload.distribution.theta",
        ),
        (
            "workload.distribution={ type = 'sequential', x = 1 }",
            "workload.distribution.x",
        ),
        (
            "cache.balancing={ policy = 'none', bogus = 1 }",
            "cache.balancing.bogus",
        ),
        (
            "cache.cleaning={ policy = 'none', batch = 8 }",
            "cache.cleaning.batch",
        ),
    ] {
        let e = format!(
            "{:#}",
            load_str("", "t.toml", &[set.to_string()]).unwrap_err()
        );
        assert!(e.contains(path), "{set}: {e}");
    }
    // The parameterless forms still read, and print as before.
    let runs = load_str(
        "[cache]\npromotion = { policy = 'never' }\ncleaning = { policy = 'none' }\nbalancing = { policy = 'none' }\n[workload]\ndistribution = { type = 'sequential' }\nrequests = 10\n",
        "t.toml",
        &[],
    )
    .unwrap();
    let cache = serde_json::to_value(&runs[0].cache).unwrap();
    assert_eq!(cache["promotion"], serde_json::json!({ "policy": "never" }));
    assert_eq!(cache["cleaning"], serde_json::json!({ "policy": "none" }));
    assert_eq!(cache["balancing"], serde_json::json!({ "policy": "none" }));
    match &runs[0].workload {
        Workload::Synthetic(w) => assert_eq!(
            serde_json::to_value(&w.distribution).unwrap(),
            serde_json::json!({ "type": "sequential" })
        ),
        _ => panic!("synthetic expected"),
    }
    let runs = load_str(
        "[workload]\ndistribution = 'uniform'\nrequests = 10\n",
        "t",
        &[],
    )
    .unwrap();
    assert_eq!(runs.len(), 1);
}

#[test]
fn huge_jobs_and_iodepth_are_refused_naming_the_field() {
    for (set, field) in [
        ("workload.jobs=100000000", "jobs"),
        ("workload.iodepth=100000000", "iodepth"),
        ("workload.iodepth=4096", "iodepth"),
    ] {
        let sets = [
            set.to_string(),
            "workload.jobs=1024".to_string(),
            "workload.requests=10".to_string(),
        ];
        // Later --set wins: keep the tested one last.
        let sets = [sets[1].clone(), sets[2].clone(), sets[0].clone()];
        let e = format!("{:#}", load_str("", "t.toml", &sets).unwrap_err());
        assert!(
            e.contains(&format!("`{field}`")) && e.contains("allowed"),
            "{set}: {e}"
        );
    }
    let ok = [
        "workload.jobs=64".to_string(),
        "workload.iodepth=64".to_string(),
        "workload.requests=10".to_string(),
    ];
    assert!(load_str("", "t.toml", &ok).is_ok());
}

#[test]
fn report_names_each_skipped_line_on_stderr_and_on_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("records.jsonl");
    let good = r#"{"tool":"tiercache","kind":"sim","name":"lru","metrics":{"iops":1.0}}"#;
    let mut bytes = format!("{good}\n{{ cut\n").into_bytes();
    bytes.extend_from_slice(b"{\"name\": \"\xc3\n");
    std::fs::write(&file, bytes).unwrap();
    let page = dir.path().join("r.html");
    let o = tiercache(&[
        "report",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    for n in [2, 3] {
        let at = format!("{}:{n}", file.display());
        assert!(err.contains(&at), "{at} not in: {err}");
        assert!(
            std::fs::read_to_string(&page).unwrap().contains(&at),
            "{at}"
        );
    }
}

/// Hit-ratio mode runs a closed-loop synthetic workload without a clock: a setting acting at
/// a time is refused, naming it (a duration hung the run; a tenancy mode never repartitioned,
/// silently). Bounds by requests, open-loop workloads and timed runs are fine.
#[test]
fn clockless_hit_ratio_runs_refuse_settings_that_act_at_a_time() {
    let base = "[run]\nmode = \"hit-ratio\"\n[workload]\niodepth = 4\nfootprint = \"64MiB\"\n";
    for (set, path) in [
        ("run.duration_ns=1000000000", "run.duration_ns"),
        ("run.warmup_ns=1000000", "run.warmup_ns"),
        ("workload.duration_ns=1000000000", "workload.duration_ns"),
        ("workload.bursts={on='1ms', off='1ms'}", "workload.bursts"),
        (
            "cache.tenancy={mode='eci', interval_ns='20ms'}",
            "cache.tenancy.mode",
        ),
    ] {
        let e = format!(
            "{:#}",
            load_str(base, "t.toml", &[set.to_string()]).unwrap_err()
        );
        assert!(
            e.contains(path) && e.contains("without a clock"),
            "{set}: {e}"
        );
    }
    load_str(base, "t.toml", &["run.requests=1000".to_string()]).unwrap();
    load_str(
        base,
        "t.toml",
        &[
            "run.mode=timed".to_string(),
            "run.duration_ns=1000000".to_string(),
        ],
    )
    .unwrap();
    let open = "[run]\nmode = \"hit-ratio\"\nduration_ns = 1000000\n[workload]\nrate_iops = 1000\nfootprint = \"64MiB\"\n";
    load_str(open, "t.toml", &[]).unwrap();
}

/// A volume's workload is seeded by run.seed and its id: a seed of its own is refused,
/// naming the volume, as `workload.seed` is (it was replaced silently).
#[test]
fn a_volume_workload_seed_is_refused() {
    let text = "[run]\nrequests = 100\n[[volumes]]\nworkload = { footprint = \"64MiB\", seed = 3 }\n[[volumes]]\nworkload = { footprint = \"64MiB\" }\n";
    let e = format!("{:#}", load_str(text, "t.toml", &[]).unwrap_err());
    assert!(e.contains("volumes[0]") && e.contains("run.seed"), "{e}");
    load_str(&text.replace(", seed = 3", ""), "t.toml", &[]).unwrap();
}

/// A trace replay's speed must be a finite number > 0, refused when the config is read,
/// naming `workload.speed` (0, negative and NaN replayed at 1.0, silently).
#[test]
fn a_bad_replay_speed_is_refused() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/msr-hm0-sample.csv"
    );
    for speed in ["0", "-3.0", "nan"] {
        let text = format!("[workload]\ntrace = \"{trace}\"\nspeed = {speed}\n");
        let e = format!("{:#}", load_str(&text, "t.toml", &[]).unwrap_err());
        assert!(e.contains("workload.speed"), "{speed}: {e}");
    }
    load_str(
        &format!("[workload]\ntrace = \"{trace}\"\nspeed = 2.0\n"),
        "t.toml",
        &[],
    )
    .unwrap();
}

/// A sweep says of each point what `sim` says of its config (here: a cache larger than the
/// data it caches); its points ran silently.
#[test]
fn a_sweep_says_what_sim_says_of_each_point() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "name = \"notes\"\nset = [\"run.mode = 'hit-ratio'\", \"run.requests = 500\", \"workload.footprint = '1MiB'\", \"cache.capacity = '4MiB'\"]\n[[axis]]\nkey = \"cache.eviction\"\nvalues = [\"lru\", \"fifo\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = tiercache(&[
        "sweep",
        spec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--no-progress",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.matches("is larger than the data it caches").count(),
        2,
        "{err}"
    );
}
