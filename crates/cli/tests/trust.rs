//! Results that are never silently wrong: each test here failed on the code before its fix
//! (a run over part of a trace reported as whole, fast replay following the trace's clock,
//! analysis memory growing with the clock, commands touching files the user did not name,
//! failures summarised without their cause, errors said twice).

use std::path::Path;
use std::process::{Command, Output};

fn tiercache(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .output()
        .expect("run tiercache")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An MSR trace of `n` 4 KiB reads, `gap_ms` apart, with line `bad` (1-based) malformed.
fn msr_trace(path: &Path, n: usize, gap_ms: u64, bad: Option<usize>) {
    let mut text = String::new();
    for i in 0..n {
        let off = if Some(i + 1) == bad {
            "zz".to_string()
        } else {
            ((i as u64 * 7919) % 4096 * 4096).to_string()
        };
        // MSR times are Windows file times (100 ns units).
        let t = 128_166_372_000_000_000u64 + i as u64 * gap_ms * 10_000;
        text.push_str(&format!("{t},hm,0,Read,{off},4096,100\n"));
    }
    std::fs::write(path, text).unwrap();
}

fn trace_config(dir: &Path, trace: &Path, format: &str, extra: &str) -> std::path::PathBuf {
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!(
            "[run]\nmode = \"hit-ratio\"\n[cache]\ncapacity = \"4MiB\"\n[workload]\ntrace = \"{}\"\nformat = \"{format}\"\nreplay = \"fast\"\n{extra}",
            trace.display()
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn sim_stops_on_a_malformed_trace_line_or_skips_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("malformed.csv");
    msr_trace(&trace, 600, 10, Some(501));
    let cfg = trace_config(dir.path(), &trace, "msr", "");
    let cfg = cfg.to_str().unwrap();
    let o = tiercache(&["sim", cfg]);
    assert!(
        !o.status.success(),
        "simulated 500 of 600 requests silently"
    );
    let err = stderr(&o);
    assert!(err.contains("malformed.csv:501: field `offset`"), "{err}");
    // `trace stats` names the same record the same way.
    let stats = tiercache(&["trace", "stats", trace.to_str().unwrap()]);
    assert!(stderr(&stats).contains("malformed.csv:501: field `offset`"));

    let o = tiercache(&["sim", cfg, "--skip-bad", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["metrics"]["requests"], 599);
    assert!(stderr(&o).contains("skipped 1 malformed"), "{}", stderr(&o));
    // analyze says it too.
    let o = tiercache(&["analyze", trace.to_str().unwrap(), "--skip-bad"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped 1 malformed"), "{}", stderr(&o));
    assert!(stderr(&o).contains("malformed.csv:501"), "{}", stderr(&o));
}

#[test]
fn sim_refuses_random_bytes_named_as_a_binary_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("x.oracleGeneral");
    // Deterministic noise whose first record has a negative next-access time.
    let bytes: Vec<u8> = (0..1000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80)
        .collect();
    std::fs::write(&trace, bytes).unwrap();
    let cfg = trace_config(dir.path(), &trace, "oracle-general", "");
    let o = tiercache(&["sim", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("byte offset"), "{}", stderr(&o));
}

#[test]
fn fast_replay_ignores_the_traces_clock() {
    // 400 requests one second apart: by timestamps they take 399 s of virtual time; fast
    // replay with one request in flight takes as long as the devices need.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("slow.csv");
    msr_trace(&trace, 400, 1000, None);
    let run = |replay: &str| {
        let cfg = dir.path().join(format!("{replay}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "[cache]\ncapacity = \"4MiB\"\n[workload]\ntrace = \"{}\"\nreplay = \"{replay}\"\n",
                trace.display()
            ),
        )
        .unwrap();
        let o = tiercache(&["sim", cfg.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        rec["metrics"]["duration_ns"].as_u64().unwrap()
    };
    let timed = run("timestamps");
    let fast = run("fast");
    assert!(
        timed >= 399_000_000_000,
        "timestamps replay took {timed} ns"
    );
    // Each request costs at most a backend read (≈150 µs on the default SSD).
    assert!(
        fast < 1_000_000_000,
        "fast replay took {fast} ns of virtual time"
    );
}

#[test]
fn analyze_of_a_century_long_trace_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("century.csv");
    let year = 365 * 24 * 3600 * 10_000_000u64; // in 100 ns units
    let t0 = 128_166_372_000_000_000u64;
    std::fs::write(
        &trace,
        format!(
            "{t0},hm,0,Read,0,4096,1\n{},hm,0,Read,4096,4096,1\n{},hm,0,Read,0,4096,1\n",
            t0 + 40 * year,
            t0 + 95 * year
        ),
    )
    .unwrap();
    // Before: one row per second of the span (3e9 rows, an abort allocating 7 GB).
    let o = tiercache(&["analyze", trace.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = a["characterisation"]["intervals"].as_array().unwrap();
    assert!(rows.len() <= 4096, "{} rows", rows.len());
    let total: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
    assert_eq!(total, 3);
    assert_eq!(a["characterisation"]["intervals_widened"], true);
}

#[test]
fn flush_refuses_paths_that_do_not_exist_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let backend = dir.path().join("backend.img");
    let o = tiercache(&[
        "flush",
        "--set",
        &format!("engine.cache_path='{}'", cache.display()),
        "--set",
        &format!("engine.backend_path='{}'", backend.display()),
    ]);
    assert!(!o.status.success(), "flush of nothing reported success");
    assert!(stderr(&o).contains("engine.cache_path"), "{}", stderr(&o));
    assert!(!cache.exists() && !backend.exists(), "flush created files");
}

#[test]
fn a_cache_device_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let backend = dir.path().join("backend.img");
    std::fs::write(&backend, vec![0u8; 1 << 20]).unwrap();
    std::fs::write(&cache, b"").unwrap();
    // This process holds the cache device, as a running `serve` would.
    let held = std::fs::File::open(&cache).unwrap();
    held.try_lock().unwrap();
    let o = tiercache(&[
        "flush",
        "--set",
        "cache.capacity=512KiB",
        "--set",
        &format!("engine.cache_path='{}'", cache.display()),
        "--set",
        &format!("engine.backend_path='{}'", backend.display()),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("in use by another tiercache"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::metadata(&cache).unwrap().len(),
        0,
        "the held device was changed"
    );
}

#[test]
fn serve_refuses_a_cache_larger_than_its_backend_and_sim_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let backend = dir.path().join("backend.img");
    let o = tiercache(&[
        "serve",
        "--set",
        "cache.capacity=8MiB",
        "--set",
        "engine.backend_size=4MiB",
        "--set",
        &format!("engine.cache_path='{}'", cache.display()),
        "--set",
        &format!("engine.backend_path='{}'", backend.display()),
        "--set",
        &format!("serve.socket='{}'", dir.path().join("s.sock").display()),
        "--set",
        "serve.duration_ns=1ms",
    ]);
    assert!(
        !o.status.success(),
        "served a cache larger than its backend"
    );
    assert!(stderr(&o).contains("cache.capacity"), "{}", stderr(&o));

    let o = tiercache(&[
        "sim",
        "--only",
        "always-4k",
        "--set",
        "run.requests=1000",
        "--set",
        "workload.footprint=1MiB",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("larger than the data it caches"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn only_matching_nothing_is_an_error() {
    let o = tiercache(&["sim", "--only", "no-such-variant"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--only no-such-variant"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_missing_config_is_reported_once() {
    let o = tiercache(&["sim", "/nonexistent-dir/x.toml"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn a_bad_timeline_path_fails_before_the_run() {
    let o = tiercache(&[
        "sim",
        "--only",
        "always-4k",
        "--timeline",
        "/nonexistent-dir/t.csv",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--timeline"), "{}", stderr(&o));
    assert!(
        o.stdout.is_empty(),
        "the run went ahead before the path was checked"
    );
}

#[test]
fn a_sweep_whose_points_all_fail_says_why_and_report_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("sweep.toml");
    // Both points name a trace that does not exist.
    std::fs::write(
        dir.path().join("base.toml"),
        "[workload]\ntrace = \"/nonexistent/trace.csv\"\n",
    )
    .unwrap();
    std::fs::write(
        &spec,
        "name = \"broken\"\nbase = \"base.toml\"\n[[axis]]\nkey = \"cache.capacity\"\nvalues = [\"1MiB\", \"2MiB\"]\n",
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
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("2 of 2 points failed"), "{err}");
    assert!(
        err.contains("/nonexistent/trace.csv"),
        "the cause is not shown: {err}"
    );
    let r = tiercache(&["report", out.to_str().unwrap()]);
    assert!(!r.status.success(), "report on all-failed results exited 0");
    assert!(stderr(&r).contains("nothing to plot"), "{}", stderr(&r));
    // The page still lists the failures, under the sweep's name (not the folder's).
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<title>tiercache report: broken</title>"),
        "{}",
        &page[..400]
    );
    assert!(page.contains("/nonexistent/trace.csv"));
}

#[test]
fn choosing_a_trace_on_the_command_line_replaces_the_synthetic_workload() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    msr_trace(&trace, 300, 10, None);
    // The embedded default has a synthetic workload (block_sizes, distribution, …): before, its
    // keys made the trace workload fail with `unknown field block_sizes`.
    let o = tiercache(&[
        "sim",
        "--only",
        "always-4k",
        "--json",
        "--set",
        &format!("workload.trace='{}'", trace.display()),
        "--set",
        "run.warmup_requests=0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["metrics"]["requests"], 300);
}

#[test]
fn a_run_whose_warm_up_eats_the_whole_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    msr_trace(&trace, 300, 10, None);
    let cfg = trace_config(dir.path(), &trace, "msr", "");
    let o = tiercache(&[
        "sim",
        cfg.to_str().unwrap(),
        "--set",
        "run.warmup_requests=1000",
    ]);
    assert!(!o.status.success(), "a run that measured nothing exited 0");
    assert!(stderr(&o).contains("measured no request"), "{}", stderr(&o));
}

/// Output to a reader that went away (`tiercache trace stats --json t | head -c 1`) ends the
/// command quietly with success, as for every command: `trace stats`, `trace convert` and
/// `analyze` printed with `print!`, which panics on a closed pipe.
#[test]
fn trace_and_analyze_end_quietly_when_their_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    msr_trace(&trace, 2000, 1, None);
    let t = trace.to_str().unwrap();
    let out = dir.path().join("t.iolog");
    for args in [
        vec!["trace", "stats", "--json", t],
        vec!["trace", "stats", t],
        vec![
            "trace",
            "convert",
            t,
            out.to_str().unwrap(),
            "--to",
            "fio-iolog",
        ],
        vec!["analyze", t],
        vec!["analyze", "--json", t],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run tiercache");
        // The reader goes away before anything is written.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {:?} {}",
            o.status,
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

/// `analyze` reads a trace as `trace stats` does: an oracleGeneral file written with 64 KiB
/// objects, read back with `--oracle-line-size 65536`, has the reads and footprint of its
/// source, where at the 4 KiB default its object ids land on the wrong bytes; a CSV trace
/// needs and takes `--csv-map`.
#[test]
fn analyze_takes_the_reader_options_of_trace_stats() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces/msr-hm0-sample.csv");
    let src = src.to_str().unwrap();
    let og = dir.path().join("t.oracleGeneral.bin");
    let og = og.to_str().unwrap();
    let o = tiercache(&[
        "trace",
        "convert",
        src,
        og,
        "--to",
        "oracle-general",
        "--line-size",
        "65536",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let figures = |args: &[&str]| {
        let o = tiercache(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            v["line_accesses"].as_u64().unwrap(),
            v["footprint_lines"].as_u64().unwrap(),
        )
    };
    // oracleGeneral holds every access as a whole object: the source's footprint.
    let source = figures(&["analyze", "--json", "--line-size", "65536", src]);
    let right = figures(&[
        "analyze",
        "--json",
        "--line-size",
        "65536",
        "--oracle-line-size",
        "65536",
        og,
    ]);
    let wrong = figures(&["analyze", "--json", "--line-size", "65536", og]);
    assert_eq!(right.1, source.1, "footprint");
    assert_ne!(wrong, right);
    let csv = ["analyze", "--json", "--format", "csv", src];
    assert!(
        !tiercache(&csv).status.success(),
        "a CSV trace needs its mapping"
    );
    let mapped = figures(&[
        "analyze",
        "--json",
        "--format",
        "csv",
        "--csv-map",
        "offset=4,len=5,op=3,volume=1+2,time=0:filetime",
        src,
    ]);
    assert_eq!(mapped, figures(&["analyze", "--json", src]));
}

/// A config's trace workload takes the reader options too: a CSV trace with its mapping
/// (`workload.csv`) replays the requests its MSR reading does, and without a mapping it is an
/// error naming the key; an oracleGeneral trace takes its object size.
#[test]
fn trace_workloads_take_the_reader_options() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    msr_trace(&trace, 600, 10, None);
    let requests = |cfg: &std::path::Path| {
        let o = tiercache(&["sim", cfg.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            rec["metrics"]["requests"].clone(),
            rec["metrics"]["hit_ratio"].clone(),
        )
    };
    let msr = requests(&trace_config(dir.path(), &trace, "msr", ""));
    let map = "csv = \"offset=4,len=5,op=3,volume=1+2,time=0:filetime\"";
    assert_eq!(requests(&trace_config(dir.path(), &trace, "csv", map)), msr);
    let o = tiercache(&[
        "sim",
        trace_config(dir.path(), &trace, "csv", "")
            .to_str()
            .unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("workload.csv"), "{}", stderr(&o));
    // oracleGeneral written with 64 KiB lines from 64 KiB reads: read at the default 4 KiB
    // its objects overlap, which the run says; with `oracle_line_size` it is read as written.
    let big = dir.path().join("big.csv");
    let text: String = (0..200u64)
        .map(|i| {
            let t = 128_166_372_000_000_000u64 + i * 100_000;
            format!("{t},hm,0,Read,{},65536,100\n", (i * 7919 % 512) * 65536)
        })
        .collect();
    std::fs::write(&big, text).unwrap();
    let og = dir.path().join("t.oracleGeneral.bin");
    let c = tiercache(&[
        "trace",
        "convert",
        big.to_str().unwrap(),
        og.to_str().unwrap(),
        "--to",
        "oracle-general",
        "--line-size",
        "65536",
    ]);
    assert!(c.status.success(), "{}", stderr(&c));
    let sim = |extra: &str| {
        let cfg = trace_config(dir.path(), &og, "oracle-general", extra);
        let o = tiercache(&["sim", cfg.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    assert!(sim("").contains("--oracle-line-size"), "{}", sim(""));
    let right = sim("oracle_line_size = 65536");
    assert!(!right.contains("oracle-line-size"), "{right}");
}
