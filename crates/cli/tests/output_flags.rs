//! `--quiet` and `--json` on every command that takes them, with the same meaning: `--quiet`
//! prints no notes or progress on stderr (errors still are), `--json` prints the result as JSON
//! on stdout and nothing else there. Each command is run both ways where its output would
//! differ; every command's help is checked to offer both.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tiercache")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn ok(o: &Output, what: &str) -> (String, String) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    );
    assert!(o.status.success(), "{what}: {out}\n{err}");
    (out, err)
}

/// The whole of stdout is one JSON document.
fn one_json(stdout: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: not one JSON document ({e}): {stdout}"))
}

/// Every command but `tune` (its arguments are Python's), `completions` and `man` offers both
/// flags, in the same spelling.
#[test]
fn every_command_offers_quiet_and_json() {
    for cmd in [
        &["sim"][..],
        &["sweep"],
        &["report"],
        &["trace", "stats"],
        &["trace", "convert"],
        &["analyze"],
        &["serve"],
        &["flush"],
        &["status"],
        &["stats"],
        &["set"],
        &["detach"],
        &["mount"],
        &["bench"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let (help, _) = ok(&run(&args), &format!("{cmd:?} --help"));
        for flag in ["-q, --quiet", "--json"] {
            assert!(
                help.contains(flag),
                "{cmd:?} does not offer {flag}:\n{help}"
            );
        }
    }
}

/// A config whose cache is larger than its data: `sim` notes it on every run.
const NOTED: &str = r#"
[run]
requests = 2000
warmup_requests = 500
[workload]
footprint = "1MiB"
[cache]
capacity = "4MiB"
"#;

#[test]
fn sim_notes_unless_quiet_and_json_is_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("noted.toml");
    std::fs::write(&cfg, NOTED).unwrap();
    let c = cfg.to_str().unwrap();
    let (table, err) = ok(&run(&["sim", c]), "sim");
    assert!(err.contains("tiercache: note:"), "{err}");
    assert!(table.contains("hit%"), "{table}");
    let (table_q, err) = ok(&run(&["sim", c, "--quiet"]), "sim --quiet");
    assert_eq!(err, "", "--quiet printed on stderr");
    assert_eq!(table_q, table, "--quiet changed the result");
    let (json, err) = ok(&run(&["sim", c, "-q", "--json"]), "sim -q --json");
    assert_eq!(err, "");
    let rec = one_json(&json, "sim --json");
    assert_eq!(rec["metrics"]["requests"], 2000);
}

#[test]
fn sweep_report_trace_and_analyze_take_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = d.join("spec.toml");
    std::fs::write(
        &spec,
        r#"
name = "flags"
[base.run]
requests = 2000
warmup_requests = 500
[base.workload]
footprint = "1MiB"
[base.cache]
capacity = "4MiB"
[[axis]]
key = "cache.line_size"
values = ["4KiB", "8KiB"]
"#,
    )
    .unwrap();
    let out = d.join("results");
    let (s, o) = (spec.to_str().unwrap(), out.to_str().unwrap());
    // The points' notes (cache larger than its data) on stderr, unless --quiet.
    let (_, err) = ok(&run(&["sweep", s, "-o", o]), "sweep");
    assert!(err.contains("tiercache: note: point"), "{err}");
    std::fs::remove_dir_all(&out).unwrap();
    let (json, err) = ok(
        &run(&["sweep", s, "-o", o, "--quiet", "--json"]),
        "sweep -q --json",
    );
    assert!(!err.contains("note:"), "{err}");
    let summary = one_json(&json, "sweep --json");
    assert_eq!(summary["points"], 2);
    assert_eq!(summary["ok"], 2);
    assert_eq!(summary["failed"], 0);
    assert!(Path::new(summary["results_jsonl"].as_str().unwrap()).exists());
    let (json, _) = ok(
        &run(&["sweep", s, "-o", o, "--list", "--json"]),
        "sweep --list --json",
    );
    assert_eq!(
        one_json(&json, "--list --json")["points"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // report: where it went, as JSON; nothing on stderr with --quiet.
    let html = d.join("r.html");
    let (json, err) = ok(
        &run(&["report", o, "-o", html.to_str().unwrap(), "-q", "--json"]),
        "report -q --json",
    );
    assert_eq!(err, "");
    let r = one_json(&json, "report --json");
    assert_eq!(r["report"], html.to_str().unwrap());
    assert_eq!(r["runs"], 2);
    assert!(html.exists());
    let (_, err) = ok(&run(&["report", o, "-o", html.to_str().unwrap()]), "report");
    assert!(err.contains("report: 2 runs"), "{err}");
    // trace stats / convert / analyze on a fixture trace.
    let trace = repo().join("fixtures/traces/msr-hm0-sample.csv");
    let t = trace.to_str().unwrap();
    let (json, err) = ok(&run(&["trace", "stats", t, "-q", "--json"]), "trace stats");
    assert_eq!(err, "");
    assert!(
        one_json(&json, "trace stats --json")["records"]
            .as_u64()
            .unwrap()
            > 0
    );
    let converted = d.join("t.csv");
    let (json, err) = ok(
        &run(&[
            "trace",
            "convert",
            t,
            converted.to_str().unwrap(),
            "--to",
            "native",
            "-q",
            "--json",
        ]),
        "trace convert",
    );
    assert_eq!(err, "");
    one_json(&json, "trace convert --json");
    let (json, err) = ok(&run(&["analyze", t, "--quiet", "--json"]), "analyze");
    assert_eq!(err, "");
    assert!(
        one_json(&json, "analyze --json")["requests"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// A server process, killed if a test fails before it stops.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SERVE: &str = r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "16MiB"
[serve]
socket = "nbd.sock"
"#;

fn serve(dir: &Path, cfg: &Path, flags: &[&str]) -> Server {
    let child = Command::new(bin())
        .arg("serve")
        .arg(cfg)
        .args(flags)
        .stdout(std::fs::File::create(dir.join("serve.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let t = Instant::now();
    while !dir.join("nbd.sock.ctl").exists() {
        assert!(
            server.0.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30),
            "serve did not start: {}",
            std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

#[test]
fn serve_and_the_operator_commands_take_both() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("serve.toml");
    std::fs::write(&cfg, SERVE).unwrap();
    let c = cfg.to_str().unwrap();
    // Without --quiet the server notes its single shard; with it, not.
    let mut server = serve(dir.path(), &cfg, &[]);
    ok(&run(&["detach", c, "-q"]), "detach");
    server.0.wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("note:"), "{log}");
    let mut server = serve(dir.path(), &cfg, &["--quiet", "--json"]);
    for (args, key) in [
        (&["status", c, "-q", "--json"][..], "policy"),
        (&["stats", c, "-q", "--json"], "engine"),
        (
            &[
                "set",
                "--config",
                c,
                "-q",
                "--json",
                "cache.write_policy=write-through",
            ],
            "policy",
        ),
        (&["flush", c, "--live", "-q", "--json"], "flushed_lines"),
    ] {
        let (json, err) = ok(&run(args), &format!("{args:?}"));
        assert_eq!(err, "", "{args:?}");
        assert!(
            one_json(&json, &format!("{args:?}")).get(key).is_some(),
            "{args:?}: {json}"
        );
    }
    let (json, err) = ok(&run(&["detach", c, "--quiet", "--json"]), "detach --json");
    assert_eq!(err, "", "detach --quiet printed progress");
    assert!(
        one_json(&json, "detach --json")["stopped"].is_string(),
        "{json}"
    );
    assert!(server.0.wait().unwrap().success());
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(!log.contains("note:"), "serve --quiet noted: {log}");
    assert!(
        log.contains("listening on"),
        "serve --quiet dropped its log: {log}"
    );
    // serve --json: the engine's final counters, one document on stdout.
    let out = std::fs::read_to_string(dir.path().join("serve.out")).unwrap();
    assert!(
        one_json(&out, "serve --json")["engine"]["dirty_lines"] == 0,
        "{out}"
    );
    // flush of a stopped cache.
    let (json, _) = ok(&run(&["flush", c, "-q", "--json"]), "flush --json");
    assert_eq!(one_json(&json, "flush --json")["dirty_lines"], 0);
}

#[test]
fn mount_takes_both() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for sub in ["store", "cache", "mnt"] {
        std::fs::create_dir(d.join(sub)).unwrap();
    }
    std::fs::write(d.join("store/a"), b"hello").unwrap();
    let o = Command::new(bin())
        .arg("mount")
        .arg(d.join("store"))
        .arg(d.join("mnt"))
        .arg("--cache-dir")
        .arg(d.join("cache"))
        .args([
            "--cache-size",
            "4MiB",
            "--duration",
            "1s",
            "--quiet",
            "--json",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (json, err) = ok(&o, "mount -q --json");
    assert_eq!(err, "", "mount --quiet printed on stderr");
    let stats = one_json(&json, "mount --json");
    assert!(
        stats["core"].is_object() && stats["dirty_blocks"] == 0,
        "{json}"
    );
}

/// `tiercache ARGS` with stderr on a terminal: `script` gives the command a pseudo-terminal and
/// copies what it draws (stdout goes to /dev/null inside). Returns the terminal's text.
fn on_a_terminal(dir: &Path, args: &str) -> String {
    let o = Command::new("script")
        .args([
            "-qec",
            &format!("{} {args} > /dev/null", bin()),
            "/dev/null",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{args}: {text}");
    text
}

/// Progress is drawn for a long analysis and for the cache fill before a bench run, on a
/// terminal only, and not under --quiet.
#[test]
fn progress_is_drawn_on_a_terminal_unless_quiet() {
    if !tiercache_testsupport::tool("script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = repo().join("fixtures/traces/msr-hm0-sample.csv");
    let t = trace.to_str().unwrap();
    let drawn = on_a_terminal(dir.path(), &format!("analyze {t}"));
    assert!(drawn.contains("requests analysed"), "{drawn}");
    let quiet = on_a_terminal(dir.path(), &format!("analyze -q {t}"));
    assert!(!quiet.contains("requests analysed"), "{quiet}");
    // Off a terminal: nothing but the result.
    let (_, err) = ok(&run(&["analyze", t]), "analyze");
    assert!(!err.contains("requests analysed"), "{err}");
    if !tiercache_testsupport::tool("fio") {
        return;
    }
    std::fs::write(
        dir.path().join("bench.toml"),
        r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "64MiB"
[workload]
jobs = 1
iodepth = 4
footprint = "16MiB"
[bench]
runtime_ns = "1s"
prewarm = true
"#,
    )
    .unwrap();
    let drawn = on_a_terminal(dir.path(), "bench bench.toml");
    assert!(drawn.contains("filling the cache"), "{drawn}");
    let quiet = on_a_terminal(dir.path(), "bench -q bench.toml");
    assert!(!quiet.contains("filling the cache"), "{quiet}");
}
