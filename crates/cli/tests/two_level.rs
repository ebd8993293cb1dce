//! Cache hierarchies for real (docs/design.md §4.7): `tiercache serve` with a RAM level above the
//! cache device under fio verify, kill -9 and a warm restart; and a tiercache in front of another
//! tiercache over NBD, demoting clean evictions through the DEMOTE extension, counted on both
//! sides.

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

/// Writes `name` in `dir` and starts `tiercache serve` on it, its log in `NAME.log`; waits
/// until `sock` accepts. Killed if a test fails before stopping it.
fn start(dir: &Path, name: &str, toml: &str, sock: &str) -> ServerProcess {
    let cfg = dir.join(name);
    std::fs::write(&cfg, toml).unwrap();
    let _ = std::fs::remove_file(dir.join(sock));
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    ServerProcess::start_logged(
        Command::new(bin())
            .args(["serve", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(log),
        &dir.join(sock),
        Some(&log_path),
    )
}

fn uri(dir: &Path, sock: &str) -> String {
    format!("nbd+unix:///?socket={}", dir.join(sock).display())
}

fn fio(target: &str, args: &[&str]) -> std::process::Output {
    Command::new("fio")
        .args([
            "--name=t",
            "--bs=4k",
            "--iodepth=16",
            "--randseed=42",
            "--verify_state_save=0",
            "--output-format=terse",
            "--ioengine=nbd",
            &format!("--uri={target}"),
        ])
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn sigterm(server: ServerProcess) {
    let st = server.terminate();
    assert!(st.success(), "serve exits cleanly on SIGTERM: {st:?}");
}

fn stats(path: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A write-back cache (8 MiB) over a 64 MiB backend, with a 4 MiB RAM level above it.
fn two_level_config(exclusive: bool) -> String {
    format!(
        r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
eviction = "mru"
shards = 4
cleaning = {{ policy = "lazy", idle_ns = "50ms", batch = 64 }}
[ram_level]
capacity = "4MiB"
exclusive = {exclusive}
shards = 4
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
[serve]
socket = "nbd.sock"
stats_file = "stats.json"
stats_interval_ns = "100ms"
"#
    )
}

#[test]
fn fio_verify_through_a_two_level_serve_survives_kill_minus_9() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = two_level_config(true);
    let server = start(d, "serve.toml", &cfg, "nbd.sock");
    // 20 MiB written and verified through 4 MiB of RAM over 8 MiB of cache: both levels
    // evict; reads of the verify pass demote the RAM level's clean victims below.
    let o = fio(
        &uri(d, "nbd.sock"),
        &[
            "--rw=randwrite",
            "--size=20m",
            "--verify=crc32c",
            "--do_verify=1",
            "--end_fsync=1",
        ],
    );
    ok(&o, "fio randwrite+verify through two levels");
    // A burst elsewhere, killed mid-way.
    let mut burst = Command::new("fio")
        .args([
            "--name=b",
            "--ioengine=nbd",
            &format!("--uri={}", uri(d, "nbd.sock")),
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=16",
            "--size=16m",
            "--offset=32m",
            "--time_based",
            "--runtime=30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let before = stats(d.join("stats.json"));
    server.kill9();
    let _ = burst.wait();
    let ram = &before["ram_level"];
    assert!(ram.is_object(), "the stats show the RAM level: {before}");
    // Warm restart: the flushed data reads back intact through both levels (the RAM level
    // starts empty: it never held anything the cache device did not).
    let server = start(d, "serve.toml", &cfg, "nbd.sock");
    let o = fio(
        &uri(d, "nbd.sock"),
        &[
            "--rw=randwrite",
            "--size=20m",
            "--verify=crc32c",
            "--verify_only=1",
        ],
    );
    ok(&o, "verify after kill -9 and warm restart");
    sigterm(server);
    let after = stats(d.join("stats.json"));
    // A warm restart: the cache device's format was found, not made anew. How many lines it
    // recovered is not checked: demoted lines carry no record until a clean shutdown (a crash
    // forgets them), and the burst's demotes can replace every line that had one.
    let recovery = &after["engine"]["recovery"];
    assert_eq!(recovery["formatted"], false, "{recovery}");
    let up = &after["ram_level"]["demotes"];
    let down = &after["engine"]["demotes"];
    assert!(up["sent"].as_u64().unwrap() > 0, "{up}");
    assert_eq!(up["sent"], down["received"], "{up} {down}");
    assert_eq!(up["sent_accepted"], down["received_accepted"]);
    assert_eq!(after["engine"]["errors"], 0);
    assert_eq!(after["ram_level"]["errors"], 0);
}

#[test]
fn a_tiercache_in_front_of_a_tiercache_demotes_over_nbd() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The lower cache: an "array" cache (MRU, docs/design.md §4.7) over a backend file.
    let lower = r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
eviction = "mru"
shards = 4
[engine]
cache_path = "lower-cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
[serve]
socket = "lower.sock"
stats_file = "lower.json"
stats_interval_ns = "100ms"
"#;
    let lower_srv = start(d, "lower.toml", lower, "lower.sock");
    // The upper cache: a write-through "client" cache over the lower one, demoting.
    let upper = format!(
        r#"
[cache]
capacity = "4MiB"
line_size = "4KiB"
write_policy = "write-through"
victim = "demote"
shards = 4
[engine]
cache_path = "upper-cache.img"
backend_path = "{}"
[serve]
socket = "upper.sock"
stats_file = "upper.json"
stats_interval_ns = "100ms"
"#,
        uri(d, "lower.sock")
    );
    let upper_srv = start(d, "upper.toml", &upper, "upper.sock");
    let o = fio(
        &uri(d, "upper.sock"),
        &[
            "--rw=randwrite",
            "--size=16m",
            "--verify=crc32c",
            "--do_verify=1",
            "--end_fsync=1",
        ],
    );
    ok(&o, "fio verify through the chain");
    let o = fio(
        &uri(d, "upper.sock"),
        &[
            "--rw=randread",
            "--size=16m",
            "--verify=crc32c",
            "--verify_only=1",
        ],
    );
    ok(&o, "verify again through the chain");
    sigterm(upper_srv);
    sigterm(lower_srv);
    let up = stats(d.join("upper.json"));
    let low = stats(d.join("lower.json"));
    let sent = &up["engine"]["demotes"];
    let link = &up["engine"]["backend_link"];
    assert_eq!(link["demote_negotiated"], true, "{link}");
    assert!(sent["sent"].as_u64().unwrap() > 0, "{sent}");
    assert!(sent["sent_accepted"].as_u64().unwrap() > 0, "{sent}");
    assert_eq!(sent["sent_failed"], 0, "{sent}");
    let received = &low["demote_server"];
    assert_eq!(sent["sent"], received["received"], "{sent} {received}");
    assert_eq!(sent["sent_accepted"], received["accepted"]);
    assert_eq!(
        low["engine"]["demotes"]["received_accepted"],
        received["accepted"]
    );
    // The lower engine is also verified alone: detach the chain into the backend file.
    assert_eq!(low["engine"]["errors"], 0);
    assert_eq!(up["engine"]["errors"], 0);
}

#[test]
fn demoting_to_a_server_without_the_extension_falls_back_to_dropping() {
    if !have("fio") || !have("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kit_sock = d.join("kit.sock");
    let _kit = ServerProcess::start(
        Command::new("nbdkit")
            .args(["-f", "-U", kit_sock.to_str().unwrap(), "memory", "64M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        &kit_sock,
    );
    let upper = format!(
        r#"
[cache]
capacity = "4MiB"
line_size = "4KiB"
write_policy = "write-through"
victim = "demote"
[engine]
cache_path = "upper-cache.img"
backend_path = "nbd+unix:///?socket={}"
[serve]
socket = "upper.sock"
stats_file = "upper.json"
"#,
        kit_sock.display()
    );
    let srv = start(d, "upper.toml", &upper, "upper.sock");
    let o = fio(
        &uri(d, "upper.sock"),
        &[
            "--rw=randwrite",
            "--size=12m",
            "--verify=crc32c",
            "--do_verify=1",
        ],
    );
    ok(&o, "fio verify over nbdkit");
    sigterm(srv);
    let log = std::fs::read_to_string(d.join("upper.toml.log")).unwrap();
    assert!(
        log.contains("did not take tiercache's DEMOTE extension"),
        "{log}"
    );
    let up = stats(d.join("upper.json"));
    assert_eq!(up["engine"]["demotes"]["sent"], 0);
    assert_eq!(up["engine"]["backend_link"]["demote_negotiated"], false);
}
