//! `tiercache serve` end to end with real clients: fio verify through a write-back cache,
//! kill -9 during a write burst and a warm restart, detach with `tiercache flush`, bad configs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tiercache_testsupport::ServerProcess;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tiercache")
}

/// Whether `tool` runs; on CI a missing tool fails the test instead of skipping it.
fn have(tool: &str) -> bool {
    tiercache_testsupport::tool(tool)
}

fn config(dir: &Path, extra: &str) -> PathBuf {
    let p = dir.join("serve.toml");
    std::fs::write(
        &p,
        format!(
            r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
cleaning = {{ policy = "lazy", idle_ns = "50ms", batch = 64 }}
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
[serve]
socket = "nbd.sock"
stats_file = "stats.json"
stats_interval_ns = "100ms"
{extra}
"#
        ),
    )
    .unwrap();
    p
}

/// Starts `tiercache serve` and waits until its socket accepts; killed if a test fails before
/// stopping it.
fn start(dir: &Path, cfg: &Path) -> ServerProcess {
    let sock = dir.join("nbd.sock");
    let _ = std::fs::remove_file(&sock);
    ServerProcess::start(
        Command::new(bin())
            .args(["serve", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        &sock,
    )
}

fn uri(dir: &Path) -> String {
    format!("nbd+unix:///?socket={}", dir.join("nbd.sock").display())
}

/// Runs fio (nbd engine) over `target`; `args` add job options.
fn fio(target: &str, args: &[&str]) -> std::process::Output {
    let mut c = Command::new("fio");
    c.args([
        "--name=t",
        "--bs=4k",
        "--iodepth=16",
        "--randseed=42",
        "--verify_state_save=0",
        "--output-format=terse",
    ]);
    if target.starts_with("nbd") {
        c.args(["--ioengine=nbd", &format!("--uri={target}")]);
    } else {
        c.args(["--ioengine=psync", &format!("--filename={target}")]);
    }
    c.args(args).output().unwrap()
}

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn fio_verify_through_write_back_then_detach() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let server = start(dir.path(), &cfg);
    // 24 MiB of random writes through an 8 MiB write-back cache: evictions of dirty lines,
    // write-backs, slot reuse; then every block verified through the cache.
    let o = fio(
        &uri(dir.path()),
        &[
            "--rw=randwrite",
            "--size=24m",
            "--verify=crc32c",
            "--do_verify=1",
            "--end_fsync=1",
        ],
    );
    ok(&o, "fio randwrite+verify");
    let o = fio(
        &uri(dir.path()),
        &[
            "--rw=randrw",
            "--rwmixread=70",
            "--size=24m",
            "--offset=32m",
            "--verify=crc32c",
            "--do_verify=1",
        ],
    );
    ok(&o, "fio randrw+verify");
    let status = server.terminate();
    assert!(
        status.success(),
        "serve exits cleanly on SIGTERM: {status:?}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stats.json")).unwrap())
            .unwrap();
    let e = &stats["engine"];
    assert!(e["writes"].as_u64().unwrap() >= 6144, "{e}");
    assert!(
        e["cache"]["dirty_evictions"].as_u64().unwrap() + e["flushed_lines"].as_u64().unwrap() > 0,
        "{e}"
    );
    assert_eq!(e["errors"], 0);
    assert_eq!(stats["server"]["eio"], 0);
    // Detach: the backend file alone then holds every block fio wrote.
    let out = Command::new(bin())
        .args(["flush", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&out, "tiercache flush");
    let backend = dir.path().join("backend.img");
    let o = fio(
        backend.to_str().unwrap(),
        &[
            "--rw=randwrite",
            "--size=24m",
            "--verify=crc32c",
            "--verify_only=1",
        ],
    );
    ok(&o, "verify the backend file alone after detach");
}

#[test]
fn kill_minus_9_during_a_write_burst_loses_no_flushed_write() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let server = start(dir.path(), &cfg);
    // Phase A: written and flushed (fio ends with a FLUSH): must survive anything.
    let o = fio(
        &uri(dir.path()),
        &[
            "--rw=randwrite",
            "--size=16m",
            "--verify=crc32c",
            "--do_verify=0",
            "--end_fsync=1",
        ],
    );
    ok(&o, "phase A");
    // Phase B: a burst elsewhere, killed mid-way with SIGKILL.
    let mut burst = Command::new("fio")
        .args([
            "--name=b",
            "--ioengine=nbd",
            &format!("--uri={}", uri(dir.path())),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=16",
            "--size=32m",
            "--offset=24m",
            "--time_based",
            "--runtime=30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    server.kill9();
    let _ = burst.wait();
    // Warm restart: recovery finds the dirty lines; phase A reads back intact through it.
    let server = start(dir.path(), &cfg);
    let o = fio(
        &uri(dir.path()),
        &[
            "--rw=randwrite",
            "--size=16m",
            "--verify=crc32c",
            "--verify_only=1",
        ],
    );
    ok(&o, "phase A after kill -9 and restart");
    assert!(server.terminate().success());
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stats.json")).unwrap())
            .unwrap();
    let rec = &stats["engine"]["recovery"];
    assert!(
        rec["lines"].as_u64().unwrap() > 0,
        "a warm restart keeps lines: {rec}"
    );
    assert_eq!(rec["formatted"], false);
}

#[test]
fn bad_serve_configs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    for (set, needle) in [
        ("serve.workers=\"many\"", "serve.workers"),
        (
            "serve.busy_poll_ns=\"11ms\"",
            "serve.busy_poll_ns = 11000000: at most",
        ),
        ("engine.lookup=\"fast\"", "engine.lookup"),
        ("serve.colour=1", "serve.colour"),
        ("cache.line_size=3000", "line"),
    ] {
        let o = Command::new(bin())
            .args(["serve", cfg.to_str().unwrap(), "--set", set])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert!(err.contains(needle), "{set}: {err}");
    }
    // A cache device formatted for another geometry is refused, naming the field.
    let server = start(dir.path(), &cfg);
    assert!(server.terminate().success());
    let o = Command::new(bin())
        .args([
            "serve",
            cfg.to_str().unwrap(),
            "--set",
            "cache.capacity=\"4MiB\"",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("lines is 2048 on disk but 1024"), "{err}");
}

#[test]
fn bench_writes_the_same_record_as_sim() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bench.toml");
    std::fs::write(
        &cfg,
        r#"
name = "wb-zipf"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
[workload]
jobs = 1
iodepth = 8
read_fraction = 0.7
footprint = "32MiB"
distribution = { type = "zipf", theta = 1.1 }
[bench]
runtime_ns = "1s"
"#,
    )
    .unwrap();
    let o = Command::new(bin())
        .args(["bench", cfg.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    ok(&o, "tiercache bench");
    let bench: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(bench["kind"], "bench");
    let m = &bench["metrics"];
    let (req, rd, wr) = (
        m["requests"].as_u64().unwrap(),
        m["read_requests"].as_u64().unwrap(),
        m["write_requests"].as_u64().unwrap(),
    );
    assert!(req > 1000 && rd + wr == req, "{m}");
    let wf = wr as f64 / req as f64;
    assert!(
        (0.2..0.4).contains(&wf),
        "the 70/30 mix reached the engine: {wf}"
    );
    let hit = m["hit_ratio"].as_f64().unwrap();
    assert!(hit > 0.0 && hit < 1.0, "{m}");
    assert!(
        m["iops"].as_f64().unwrap() > 0.0 && m["latency_us"]["read"]["p99"].as_f64().unwrap() > 0.0
    );
    // The simulator's record of the same file has the same fields.
    let o = Command::new(bin())
        .args([
            "sim",
            cfg.to_str().unwrap(),
            "--json",
            "--set",
            "workload.requests=20000",
        ])
        .output()
        .unwrap();
    ok(&o, "tiercache sim on the bench config");
    let sim: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&sim["metrics"]), keys(&bench["metrics"]));
    assert_eq!(sim["kind"], "sim");
}

/// A backend NBD server process (nbdkit or qemu-nbd) serving `file` on `sock`, killed when
/// dropped.
fn start_backend(kind: &str, sock: &Path, file: &Path) -> ServerProcess {
    let _ = std::fs::remove_file(sock);
    let mut c = match kind {
        "nbdkit" => {
            let mut c = Command::new("nbdkit");
            c.args(["-f", "--exit-with-parent", "-U"])
                .arg(sock)
                .arg("file")
                .arg(format!("file={}", file.display()));
            c
        }
        _ => {
            let mut c = Command::new("qemu-nbd");
            c.args(["-f", "raw", "-t", "-e", "4", "-k"])
                .arg(sock)
                .arg(file);
            c
        }
    };
    ServerProcess::start(c.stdout(Stdio::null()).stderr(Stdio::null()), sock)
}

/// fio verify through tiercache in front of a remote export served by nbdkit and by
/// qemu-nbd; after `tiercache flush` the remote export alone verifies.
#[test]
fn fio_verify_through_tiercache_in_front_of_nbdkit_and_qemu_nbd() {
    if !have("fio") || !have("nbdkit") || !have("qemu-nbd") {
        return;
    }
    for kind in ["nbdkit", "qemu-nbd"] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("remote.img");
        std::fs::File::create(&file)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let bsock = dir.path().join("remote.sock");
        let _backend = start_backend(kind, &bsock, &file);
        let remote_uri = format!("nbd+unix:///?socket={}", bsock.display());
        let cfg = dir.path().join("serve.toml");
        std::fs::write(
            &cfg,
            format!(
                r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
cleaning = {{ policy = "lazy", idle_ns = "20ms", batch = 64 }}
[engine]
cache_path = "cache.img"
backend_path = "{remote_uri}"
[engine.remote]
connections = 2
timeout_ns = "10s"
[serve]
socket = "nbd.sock"
stats_file = "stats.json"
"#
            ),
        )
        .unwrap();
        let server = start(dir.path(), &cfg);
        let o = fio(
            &uri(dir.path()),
            &[
                "--rw=randwrite",
                "--size=24m",
                "--verify=crc32c",
                "--do_verify=1",
                "--end_fsync=1",
            ],
        );
        ok(&o, &format!("{kind}: fio randwrite+verify"));
        let o = fio(
            &uri(dir.path()),
            &[
                "--rw=randrw",
                "--rwmixread=70",
                "--size=16m",
                "--offset=32m",
                "--verify=crc32c",
                "--do_verify=1",
            ],
        );
        ok(&o, &format!("{kind}: fio randrw+verify"));
        assert!(server.terminate().success(), "{kind}: serve exits cleanly");
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("stats.json")).unwrap())
                .unwrap();
        let link = &stats["engine"]["backend_link"];
        assert!(link["requests"].as_u64().unwrap() > 0, "{kind}: {link}");
        assert_eq!(link["failed_requests"], 0, "{kind}: {link}");
        assert_eq!(stats["engine"]["errors"], 0, "{kind}");
        let out = Command::new(bin())
            .args(["flush", cfg.to_str().unwrap()])
            .output()
            .unwrap();
        ok(&out, &format!("{kind}: tiercache flush"));
        // The remote export alone now holds every block fio wrote.
        for (rw, size, offset) in [("randwrite", "24m", "0"), ("randrw", "16m", "32m")] {
            let o = fio(
                &remote_uri,
                &[
                    &format!("--rw={rw}"),
                    "--rwmixread=70",
                    &format!("--size={size}"),
                    &format!("--offset={offset}"),
                    "--verify=crc32c",
                    "--verify_only=1",
                ],
            );
            ok(
                &o,
                &format!("{kind}: verify the remote alone after detach ({rw})"),
            );
        }
    }
}

/// An unreachable remote backend and bad remote settings are named.
#[test]
fn bad_remote_backends_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("remote.toml");
    let gone = format!(
        "nbd+unix:///?socket={}",
        dir.path().join("none.sock").display()
    );
    std::fs::write(
        &cfg,
        format!("[cache]\ncapacity = \"4MiB\"\n[engine]\ncache_path = \"c.img\"\nbackend_path = \"{gone}\"\n[serve]\nsocket = \"s.sock\"\n"),
    )
    .unwrap();
    for (set, needle) in [
        (None, "none.sock"),
        (Some("engine.backend_size=\"1GiB\""), "engine.backend_size"),
        (
            Some("engine.backend_path=\"nbd+unix:///x\""),
            "needs ?socket=PATH",
        ),
        (Some("engine.backend_path=\"nbd://h:http/x\""), "bad port"),
        (
            Some("engine.remote.retries=\"often\""),
            "engine.remote.retries",
        ),
        (Some("engine.remote.speed=1"), "speed"),
    ] {
        let mut c = Command::new(bin());
        c.args(["serve", cfg.to_str().unwrap()]);
        if let Some(s) = set {
            c.args(["--set", s]);
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{set:?}: {err}");
        assert!(err.contains(needle), "{set:?}: {err}");
    }
}

/// LBICA under load in the real engine: the cache file made as slow as a SATA SSD (the
/// backend file is not), so the cache device is the bottleneck under fio; the balancer
/// switches policies while fio writes and verifies through the cache, and nothing read back
/// differs from what was written.
#[test]
fn fio_verify_passes_while_lbica_switches_policies() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
cleaning = { policy = "lazy", idle_ns = "20ms", batch = 64 }
shards = 4
balancing = { policy = "lbica", interval_ns = "5ms" }
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
cache_device = { preset = "sata-ssd-863a" }
[serve]
socket = "nbd.sock"
stats_file = "stats.json"
stats_interval_ns = "50ms"
"#,
    )
    .unwrap();
    let server = start(dir.path(), &cfg);
    for (rw, offset) in [("randwrite", "0"), ("randrw", "24m")] {
        let o = fio(
            &uri(dir.path()),
            &[
                &format!("--rw={rw}"),
                "--rwmixread=70",
                "--size=16m",
                &format!("--offset={offset}"),
                "--verify=crc32c",
                "--do_verify=1",
            ],
        );
        ok(&o, &format!("fio {rw}+verify under lbica"));
    }
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stats.json")).unwrap())
            .unwrap();
    let e = &stats["engine"];
    assert_eq!(e["errors"], 0, "{e}");
    let c = &e["cache"];
    assert!(c["balancer_polls"].as_u64().unwrap() > 10, "{c}");
    // The slow cache device was the bottleneck at times: LBICA changed its decision.
    assert!(c["balancer_changes"].as_u64().unwrap() > 0, "{c}");
    assert!(e["balancer"]["cache_qtime_ns"].is_u64(), "{e}");
}

/// `serve.busy_poll_ns` reaches the server, which says how long its connections poll.
#[test]
fn busy_polling_is_configured_and_said() {
    let dir = tempfile::tempdir().unwrap();
    for (set, said) in [
        ("serve.busy_poll_ns=\"200us\"", Some("polls 200 µs")),
        ("serve.busy_poll_ns=0", None),
    ] {
        let cfg = config(dir.path(), "duration_ns = \"200ms\"");
        let o = Command::new(bin())
            .args(["serve", cfg.to_str().unwrap(), "--set", set])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{set}: {err}");
        match said {
            Some(s) => assert!(err.contains(s), "{set}: {err}"),
            None => assert!(!err.contains("polls"), "{set}: {err}"),
        }
    }
}
