//! `tiercache serve` with several exports on one cache: fio verify on three exports at once
//! while their partitions are resized, kill -9 and a warm restart (each volume's lines back
//! in its partition, nothing lost), and the Prometheus endpoint's counters moving as requests
//! are served. Partitions are resized over the control socket (`tiercache set`); the metrics
//! listener refuses every action.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tiercache")
}

/// Whether `tool` runs; on CI a missing tool fails the test instead of skipping it.
fn have(tool: &str) -> bool {
    tiercache_testsupport::tool(tool)
}

const EXPORTS: [&str; 3] = ["vm1", "vm2", "vm3"];

fn config(dir: &Path) -> PathBuf {
    config_with(dir, "shards = 4")
}

/// The test config with `cache` lines added.
fn config_with(dir: &Path, cache: &str) -> PathBuf {
    let p = dir.join("serve.toml");
    let mut text = r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
cleaning = { policy = "lazy", idle_ns = "50ms", batch = 64 }
CACHE
[engine]
cache_path = "cache.img"
backend_path = "unused.img"
[serve]
socket = "nbd.sock"
stats_file = "stats.json"
stats_interval_ns = "100ms"
metrics_listen = "127.0.0.1:0"
"#
    .replace("CACHE", cache);
    for (i, name) in EXPORTS.iter().enumerate() {
        text += &format!(
            "[[serve.exports]]\nname = \"{name}\"\nvolume = {}\nbackend_path = \"{name}.img\"\nbackend_size = \"32MiB\"\n",
            i + 1
        );
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// A server process, killed if a test fails before stopping it.
struct Server {
    child: Child,
    /// Where its metrics are served.
    metrics: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tiercache serve` and waits for its socket and its metrics address.
fn start(dir: &Path, cfg: &Path) -> Server {
    let _ = std::fs::remove_file(dir.join("nbd.sock"));
    let log = dir.join("serve.log");
    let child = Command::new(bin())
        .args(["serve", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        metrics: String::new(),
    };
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(at) = text.find("metrics on http://") {
            let rest = &text[at + "metrics on http://".len()..];
            server.metrics = rest[..rest.find('/').unwrap()].to_string();
        }
        if !server.metrics.is_empty()
            && dir.join("nbd.sock").exists()
            && dir.join("nbd.sock.ctl").exists()
        {
            return server;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve did not start: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn uri(dir: &Path, export: &str) -> String {
    format!(
        "nbd+unix:///{export}?socket={}",
        dir.join("nbd.sock").display()
    )
}

/// One HTTP/1.0 request over plain TCP: (status, body).
fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// The value of the sample named exactly `series` (name and labels).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

fn fio(target: &str, args: &[&str]) -> Command {
    let mut c = Command::new("fio");
    c.args([
        "--name=t",
        "--bs=4k",
        "--iodepth=8",
        "--randseed=42",
        "--verify_state_save=0",
        "--output-format=terse",
        "--ioengine=nbd",
        &format!("--uri={target}"),
    ]);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `tiercache set SETTINGS` against the server of the config in `dir`: (success, stderr).
fn set(dir: &Path, settings: &[String]) -> (bool, String) {
    let o = Command::new(bin())
        .arg("set")
        .args(settings)
        .arg("--config")
        .arg(dir.join("serve.toml"))
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// Resizes the partitions (lines of 4 KiB) over the control socket.
fn resize(dir: &Path, kib: [u64; 3]) {
    let settings: Vec<String> = EXPORTS
        .iter()
        .zip(kib)
        .map(|(n, k)| format!("exports.{n}.partition={k}KiB"))
        .collect();
    let (done, err) = set(dir, &settings);
    assert!(done, "resize {kib:?}: {err}");
}

#[test]
fn three_exports_verified_while_resized_then_killed_and_restarted() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut server = start(dir.path(), &cfg);
    let before = http(&server.metrics, "GET", "/metrics").1;
    // Phase A: 12 MiB of random writes on each export at once through an 8 MiB cache, each
    // verified by fio, while the partitions shrink and grow under them.
    let phase_a = [
        "--rw=randwrite",
        "--size=12m",
        "--verify=crc32c",
        "--end_fsync=1",
    ];
    let runs: Vec<Child> = EXPORTS
        .iter()
        .map(|e| {
            fio(
                &uri(dir.path(), e),
                &[&phase_a[..], &["--do_verify=1"]].concat(),
            )
            .spawn()
            .unwrap()
        })
        .collect();
    let layouts = [
        [4096, 2048, 1024],
        [1024, 4096, 2048],
        [2048, 1024, 4096],
        [2560, 2560, 2560],
    ];
    let mut i = 0;
    let t = Instant::now();
    let mut runs: Vec<Option<Child>> = runs.into_iter().map(Some).collect();
    while runs.iter().any(|r| r.is_some()) {
        resize(dir.path(), layouts[i % layouts.len()]);
        i += 1;
        for r in &mut runs {
            if r.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some()) {
                ok(
                    &r.take().unwrap().wait_with_output().unwrap(),
                    "fio phase A",
                );
            }
        }
        assert!(t.elapsed() < Duration::from_secs(120), "phase A hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        i >= 2,
        "the partitions were resized while fio ran ({i} times)"
    );
    // The last layout is the one in force, journaled.
    let last = [1536u64, 3072, 2048];
    resize(dir.path(), last);
    let after = http(&server.metrics, "GET", "/metrics").1;
    for (e, kib) in EXPORTS.iter().zip(last) {
        let l = format!(
            "{{export=\"{e}\",volume=\"{}\"}}",
            e[2..].parse::<u32>().unwrap()
        );
        let series = |n: &str| format!("tiercache_export_{n}{l}");
        assert_eq!(metric(&before, &series("writes_total")), 0.0);
        assert!(metric(&after, &series("writes_total")) >= 3072.0, "{e}");
        assert!(metric(&after, &series("reads_total")) >= 3072.0, "{e}");
        assert_eq!(metric(&after, &series("partition_lines")), (kib / 4) as f64);
        assert!(metric(&after, &series("resident_lines")) <= (kib / 4) as f64);
        let hist = format!("tiercache_export_write_latency_seconds_count{l}");
        assert_eq!(
            metric(&after, &hist),
            metric(&after, &series("writes_total"))
        );
    }
    assert_eq!(metric(&after, "tiercache_errors_total"), 0.0);
    // Phase B: a burst on vm2 beyond phase A's range, killed mid-way with SIGKILL.
    let mut burst = fio(
        &uri(dir.path(), "vm2"),
        &[
            "--rw=randwrite",
            "--size=8m",
            "--offset=16m",
            "--time_based",
            "--runtime=30",
        ],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let _ = burst.kill();
    let _ = burst.wait();
    // Warm restart: each export's phase A data reads back intact, all three at once, and the
    // partitions are the journaled ones.
    let server = start(dir.path(), &cfg);
    let m = http(&server.metrics, "GET", "/metrics").1;
    for (e, kib) in EXPORTS.iter().zip(last) {
        let l = format!(
            "{{export=\"{e}\",volume=\"{}\"}}",
            e[2..].parse::<u32>().unwrap()
        );
        assert_eq!(
            metric(&m, &format!("tiercache_export_partition_lines{l}")),
            (kib / 4) as f64,
            "{e} after restart"
        );
    }
    assert!(
        metric(&m, "tiercache_resident_lines") > 0.0,
        "a warm restart keeps lines"
    );
    let verify: Vec<Child> = EXPORTS
        .iter()
        .map(|e| {
            fio(
                &uri(dir.path(), e),
                &[&phase_a[..], &["--verify_only=1"]].concat(),
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for v in verify {
        ok(
            &v.wait_with_output().unwrap(),
            "phase A after kill -9 and restart",
        );
    }
    // Bad resizes are refused with the reason.
    let (done, err) = set(dir.path(), &["exports.vm9.partition=4KiB".into()]);
    assert!(!done && err.contains("vm9"), "{err}");
    let (done, err) = set(dir.path(), &["exports.vm1.partition=64MiB".into()]);
    assert!(!done && err.contains("the cache has"), "{err}");
    // The metrics listener changes nothing: a resize there is refused and points to the
    // control socket.
    let (status, body) = http(&server.metrics, "POST", "/partitions?vm1=4KiB");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("tiercache set"), "{body}");
    let (status, _) = http(&server.metrics, "POST", "/metrics");
    assert_eq!(status, 405);
    // Detach: stop, write every dirty line back, and each backend file alone holds its
    // export's phase A data.
    let o = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut server = server;
    assert!(server.child.wait().unwrap().success());
    let o = Command::new(bin())
        .args(["flush", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&o, "tiercache flush");
    for e in EXPORTS {
        let o = Command::new("fio")
            .args([
                "--name=t",
                "--bs=4k",
                "--randseed=42",
                "--verify_state_save=0",
            ])
            .args(["--ioengine=psync", "--output-format=terse"])
            .arg(format!(
                "--filename={}",
                dir.path().join(format!("{e}.img")).display()
            ))
            .args(phase_a)
            .arg("--verify_only=1")
            .output()
            .unwrap();
        ok(&o, &format!("{e}'s backend alone after detach"));
    }
}

#[test]
fn bad_export_configs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let good = std::fs::read_to_string(&cfg).unwrap();
    for (from, to, needle) in [
        ("volume = 2", "volume = 1", "serve.exports[1].volume"),
        ("name = \"vm3\"", "name = \"vm1\"", "serve.exports[2].name"),
        (
            "volume = 1\n",
            "volume = 1\npartition = \"1GiB\"\n",
            "partition",
        ),
        ("volume = 1\n", "volume = 1\nbogus = 1\n", "bogus"),
        ("name = \"vm2\"", "name = \"\"", "serve.exports[1].name"),
    ] {
        assert!(good.contains(from), "{from}");
        std::fs::write(&cfg, good.replacen(from, to, 1)).unwrap();
        let o = Command::new(bin())
            .args(["serve", cfg.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{to} was accepted");
        assert!(err.contains(needle), "{to}: {err}");
        assert!(!err.contains("panicked"), "{to}: {err}");
    }
}

/// ECI-Cache sizing the exports' partitions live on a sharded cache (16 policy shards, as the
/// issue asks of a real deployment; shard 0 leads, docs/design.md §4.10): decisions are made
/// while fio verifies all three exports, each partition follows the mode, operators cannot
/// resize by hand, and a kill -9 and warm restart lose nothing and bring back every export's
/// partition and write policy as the last journaled decision left them (`TCPARTS2`).
#[test]
fn eci_sizes_the_exports_live_and_a_restart_loses_nothing() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with(
        dir.path(),
        "shards = 16\ntenancy = { mode = \"eci\", interval_ns = \"200ms\" }",
    );
    let mut server = start(dir.path(), &cfg);
    // vm1 writes a small set and then re-reads it (useful reuse, below), vm2 overwrites its
    // set (reuse by writes only), vm3 writes a range larger than the cache; each verified.
    // (fio's verify cannot follow random mixed reads and writes over several loops, even on
    // a plain file: the phases are kept apart.)
    let jobs: [(&str, Vec<&str>); 3] = [
        ("vm1", vec!["--rw=randwrite", "--size=2m"]),
        ("vm2", vec!["--rw=randwrite", "--size=2m", "--loops=6"]),
        ("vm3", vec!["--rw=randwrite", "--size=12m"]),
    ];
    let runs: Vec<Child> = jobs
        .iter()
        .map(|(e, args)| {
            let mut a = args.clone();
            a.extend(["--verify=crc32c", "--do_verify=1", "--end_fsync=1"]);
            fio(&uri(dir.path(), e), &a).spawn().unwrap()
        })
        .collect();
    for r in runs {
        ok(&r.wait_with_output().unwrap(), "fio under eci");
    }
    let o = fio(
        &uri(dir.path(), "vm1"),
        &[
            "--rw=randwrite",
            "--size=2m",
            "--loops=4",
            "--verify=crc32c",
            "--verify_only=1",
        ],
    )
    .output()
    .unwrap();
    ok(&o, "vm1 re-read under eci");
    // Let at least one interval end after the load.
    std::thread::sleep(Duration::from_millis(500));
    let m = http(&server.metrics, "GET", "/metrics").1;
    assert!(
        metric(&m, "tiercache_tenancy_decisions_total") >= 2.0,
        "{m}"
    );
    let mut allocated = 0.0;
    for e in EXPORTS {
        let l = format!(
            "{{export=\"{e}\",volume=\"{}\"}}",
            e[2..].parse::<u32>().unwrap()
        );
        let lines = metric(&m, &format!("tiercache_export_partition_lines{l}"));
        assert!(lines <= metric(&m, &format!("tiercache_export_demand_lines{l}")).max(lines));
        allocated += lines;
    }
    assert!(
        allocated > 0.0 && allocated <= 2048.0,
        "partitions of {allocated} lines in a 2048-line cache (the shards applied none?)"
    );
    let (done, err) = set(dir.path(), &["exports.vm1.partition=4KiB".into()]);
    assert!(!done && err.contains("sizes the partitions"), "{err}");
    // The layouts the kill may leave. A decision shows in the metrics as the leader makes
    // it, the shards apply their splits (shrinks write back first) and the whole layout is
    // journaled last, as one record (docs/design.md §4.10): a kill before that journal write
    // loses the decision whole. So the restart must bring back a layout the server had
    // settled in — the one at the kill or the one before it — never a mix of shards, never
    // none. A layout counts as settled when two readings 20 ms apart agree on it and on
    // the number of decisions; the kill follows the first settled reading after a decision.
    let layout = |m: &str| -> Vec<(f64, f64)> {
        EXPORTS
            .iter()
            .map(|e| {
                let l = format!(
                    "{{export=\"{e}\",volume=\"{}\"}}",
                    e[2..].parse::<u32>().unwrap()
                );
                (
                    metric(m, &format!("tiercache_export_partition_lines{l}")),
                    metric(m, &format!("tiercache_export_write_back{l}")),
                )
            })
            .collect()
    };
    let reading = |metrics: &str| {
        let m = http(metrics, "GET", "/metrics").1;
        (layout(&m), metric(&m, "tiercache_tenancy_decisions_total"))
    };
    let first = reading(&server.metrics);
    let mut settled: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut last = first.clone();
    let t = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = reading(&server.metrics);
        if now == last {
            if !settled.contains(&now.0) {
                settled.push(now.0.clone());
            }
            if now.1 > first.1 {
                break;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no settled decision: {settled:?}"
        );
        last = now;
    }
    // Kill -9 and restart: every export's data reads back. The restart's interval is long, so
    // what it reports is the journal's layout, not a new decision.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let cfg = config_with(
        dir.path(),
        "shards = 16\ntenancy = { mode = \"eci\", interval_ns = \"600s\" }",
    );
    let _server = start(dir.path(), &cfg);
    // Before its first decision the mode has no report (no metrics of write policies): the
    // status says what is in force.
    let o = Command::new(bin())
        .args(["status", "--json"])
        .arg(&cfg)
        .output()
        .unwrap();
    ok(&o, "status after the restart");
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let after: Vec<(f64, f64)> = EXPORTS
        .iter()
        .map(|e| {
            let x = status["exports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *e)
                .unwrap_or_else(|| panic!("no {e} in {status}"));
            let lines = x["partition_lines"].as_u64().unwrap_or(0) as f64;
            let wb = x["write_policy"] == "write-back";
            (lines, f64::from(u8::from(wb)))
        })
        .collect();
    assert!(
        settled.contains(&after) && after.iter().any(|p| p.0 > 0.0),
        "partitions and write policies after the restart {after:?}, settled before the kill \
         {settled:?}"
    );
    let verify: Vec<Child> = jobs
        .iter()
        .map(|(e, args)| {
            let mut a = args.clone();
            a.extend(["--verify=crc32c", "--verify_only=1"]);
            fio(&uri(dir.path(), e), &a).spawn().unwrap()
        })
        .collect();
    for v in verify {
        ok(
            &v.wait_with_output().unwrap(),
            "verify after kill -9 under eci",
        );
    }
}
