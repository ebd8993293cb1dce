//! The operator's command line against a real running `tiercache serve`: `status`, `stats`,
//! `set` (the write policy and cleaning changed live while fio writes and verifies),
//! `flush --live`, `detach` (the backend alone then verifies), the control socket's
//! permissions and refusals, and the completions and man pages generated from the CLI.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tiercache")
}

const CONFIG: &str = r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
shards = 4
write_policy = "write-back"
cleaning = { policy = "lazy", idle_ns = "60s", batch = 64 }
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "32MiB"
[serve]
socket = "nbd.sock"
"#;

/// A server process, killed if a test fails before it stops.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_config(dir: &Path) -> PathBuf {
    let p = dir.join("serve.toml");
    std::fs::write(&p, CONFIG).unwrap();
    p
}

/// Starts `tiercache serve CONFIG ARGS` and waits for its control socket.
fn start(dir: &Path, cfg: &Path, args: &[&str]) -> Server {
    let child = Command::new(bin())
        .arg("serve")
        .arg(cfg)
        .args(args)
        .stdout(Stdio::null())
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

/// `tiercache ARGS` (the config passed where the command takes it).
fn tiercache(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into()
}

fn status(cfg: &Path) -> serde_json::Value {
    let out = ok(
        &tiercache(&["status", cfg.to_str().unwrap(), "--json"]),
        "status",
    );
    serde_json::from_str(&out).unwrap()
}

fn fio(dir: &Path, target: Option<&Path>, args: &[&str]) -> Command {
    let mut c = Command::new("fio");
    c.args([
        "--name=t",
        "--bs=4k",
        "--randseed=7",
        "--verify_state_save=0",
        "--output-format=terse",
    ]);
    match target {
        None => c.args([
            "--ioengine=nbd",
            "--iodepth=8",
            &format!(
                "--uri=nbd+unix:///?socket={}",
                dir.join("nbd.sock").display()
            ),
        ]),
        Some(f) => c.args([
            "--ioengine=psync".to_string(),
            format!("--filename={}", f.display()),
        ]),
    };
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

const PHASE_A: [&str; 5] = [
    "--rw=randwrite",
    "--size=6m",
    "--verify=crc32c",
    "--end_fsync=1",
    "--offset=0",
];
const PHASE_B: [&str; 5] = [
    "--rw=randwrite",
    "--size=4m",
    "--verify=crc32c",
    "--end_fsync=1",
    "--offset=16m",
];

#[test]
fn status_set_flush_and_detach_drive_a_running_server_and_lose_nothing() {
    if !tiercache_testsupport::tool("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let c = cfg.to_str().unwrap();
    let server = start(dir.path(), &cfg, &[]);
    // Only the server's user can open the control socket.
    let mode = std::fs::metadata(dir.path().join("nbd.sock.ctl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
    let s = status(&cfg);
    assert_eq!(s["policy"]["write_policy"], "write-back");
    assert_eq!(s["cache"]["capacity_lines"], 2048);
    assert_eq!(s["policy"]["shards"], 4);
    // Phase A: fio writes (and verifies) while the write policy and cleaning change under it.
    let mut a = fio(
        dir.path(),
        None,
        &[&PHASE_A[..], &["--do_verify=1"]].concat(),
    )
    .spawn()
    .unwrap();
    // Every live-settable policy changes, several times, while fio's writes are in flight.
    let rounds = [
        [
            "cache.write_policy=write-around",
            r#"cache.promotion={policy="nhit",n=2}"#,
        ],
        [
            "cache.write_policy=write-back",
            r#"cache.cleaning={policy="aggressive",period_ns="1ms",batch=16}"#,
        ],
        [
            "cache.write_policy=read-only",
            r#"cache.balancing={policy="lbica"}"#,
        ],
        [
            "cache.write_policy=write-back",
            r#"cache.promotion={policy="always"}"#,
        ],
        [
            "cache.write_policy=write-around",
            r#"cache.admission={policy="tinylfu"}"#,
        ],
        [
            "cache.write_policy=write-back",
            r#"cache.admission={policy="all"}"#,
        ],
    ];
    let mut changed = 0;
    for round in rounds.iter().cycle().take(12) {
        if a.try_wait().unwrap().is_some() {
            break;
        }
        ok(
            &tiercache(&[&["set", "--config", c][..], &round[..]].concat()),
            "set under fio",
        );
        changed += 1;
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(
        changed >= 2,
        "the policies changed while fio ran ({changed} times)"
    );
    let out = ok(
        &tiercache(&[
            "set",
            "--config",
            c,
            "cache.write_policy=write-through",
            r#"cache.cleaning={policy="threshold",high=0.9,low=0.5}"#,
            r#"cache.balancing={policy="none"}"#,
            r#"cache.admission={policy="bloom",window_ratio=0.5}"#,
        ]),
        "set",
    );
    assert!(
        out.contains("set cache.write_policy=write-through"),
        "{out}"
    );
    assert!(out.contains("policy   write-through"), "{out}");
    let fio_a = a.wait().unwrap();
    assert!(
        fio_a.success(),
        "fio phase A failed under a live policy change"
    );
    let s = status(&cfg);
    assert_eq!(s["policy"]["write_policy"], "write-through");
    assert_eq!(s["policy"]["cleaning"]["policy"], "threshold");
    assert_eq!(s["policy"]["admission"]["policy"], "bloom");
    assert_eq!(s["policy"]["admission"]["window_ratio"], 0.5);
    assert_eq!(s["exports"][0]["write_policy"], "write-through");
    // Under write-through new writes make no line dirty.
    let dirty = s["cache"]["dirty_lines"].as_u64().unwrap();
    let o = fio(
        dir.path(),
        None,
        &["--rw=randwrite", "--size=2m", "--offset=24m"],
    )
    .output()
    .unwrap();
    ok(&o, "fio under write-through");
    let after = status(&cfg)["cache"]["dirty_lines"].as_u64().unwrap();
    assert!(
        after <= dirty,
        "dirty lines grew from {dirty} to {after} under write-through"
    );
    // Back to write-back and to admitting every line (the Bloom filter would turn phase B's
    // first writes of a line away): phase B makes lines dirty; flush --live drains them while
    // serving.
    ok(
        &tiercache(&[
            "set",
            "--config",
            c,
            "cache.write_policy=write-back",
            r#"cache.admission={policy="all"}"#,
        ]),
        "set write-back",
    );
    assert_eq!(status(&cfg)["policy"]["admission"]["policy"], "all");
    let o = fio(
        dir.path(),
        None,
        &[&PHASE_B[..], &["--do_verify=1"]].concat(),
    )
    .output()
    .unwrap();
    ok(&o, "fio phase B");
    assert!(status(&cfg)["cache"]["dirty_lines"].as_u64().unwrap() > 0);
    let out = ok(&tiercache(&["flush", "--live", c]), "flush --live");
    assert!(out.contains("0 dirty now"), "{out}");
    assert_eq!(status(&cfg)["cache"]["dirty_lines"], 0);
    // The human forms name things as configs do.
    let human = ok(&tiercache(&["status", c]), "status");
    assert!(human.contains("policy   write-back"), "{human}");
    assert!(human.contains("cleaning threshold"), "{human}");
    assert!(!human.contains("WriteBack"), "{human}");
    let stats = ok(&tiercache(&["stats", c]), "stats");
    assert!(stats.contains("lines written back"), "{stats}");
    let stats: serde_json::Value =
        serde_json::from_str(&ok(&tiercache(&["stats", c, "--json"]), "stats --json")).unwrap();
    assert!(stats["engine"]["writes"].as_u64().unwrap() >= 2560);
    assert!(stats["engine"]["flushed_lines"].as_u64().unwrap() > 0);
    // More dirty data, then detach: the server drains, stops, and the backend alone holds
    // phases A and B.
    ok(
        &fio(
            dir.path(),
            None,
            &[&PHASE_B[..], &["--do_verify=0"]].concat(),
        )
        .output()
        .unwrap(),
        "fio phase B again",
    );
    let o = tiercache(&["detach", c]);
    let out = ok(&o, "detach");
    assert!(out.contains("the backends alone are complete"), "{out}");
    let mut server = server;
    let t = Instant::now();
    let code = loop {
        if let Some(code) = server.0.try_wait().unwrap() {
            break code;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "serve after detach: {code}");
    assert!(!dir.path().join("nbd.sock.ctl").exists());
    let backend = dir.path().join("backend.img");
    for phase in [PHASE_A, PHASE_B] {
        let o = fio(
            dir.path(),
            Some(&backend),
            &[&phase[..], &["--verify_only=1"]].concat(),
        )
        .output()
        .unwrap();
        ok(&o, "the backend alone after detach");
    }
}

#[test]
fn refusals_name_the_setting_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let c = cfg.to_str().unwrap();
    // No server: a clear error, not a hang.
    let o = tiercache(&["status", c]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no server answers"), "{err}");
    let _server = start(dir.path(), &cfg, &[]);
    for (setting, needle) in [
        ("cache.line_size=8KiB", "cache.line_size: cannot change"),
        ("cache.capacity=4MiB", "cache.capacity: cannot change"),
        ("cache.write_policy=sometimes", "write_policy"),
        (
            r#"cache.cleaning={policy="threshold",high=0.2,low=0.5}"#,
            "cache.cleaning",
        ),
        (
            "exports.nope.write_policy=write-through",
            "no export \"nope\"",
        ),
        ("engine.io=sync", "a running server takes"),
        ("cache.write_policy", "expected KEY=VALUE"),
    ] {
        let o = tiercache(&[
            "set",
            "--config",
            c,
            "cache.promotion.policy=always",
            setting,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{setting} was accepted");
        assert!(err.contains(needle), "{setting}: {err}");
        assert!(!err.contains("panicked"), "{setting}: {err}");
    }
    // Nothing changed, not even the valid setting given beside a refused one.
    let s = status(&cfg);
    assert_eq!(s["policy"]["write_policy"], "write-back");
    assert_eq!(s["policy"]["cleaning"]["policy"], "lazy");
    // A second server on the same control socket is refused, naming the setting.
    let o = tiercache(&[
        "serve",
        c,
        "--set",
        "engine.cache_path=other-cache.img",
        "--set",
        "engine.backend_path=other-backend.img",
        "--set",
        "serve.socket=other.sock",
        "--set",
        &format!(
            "serve.control_socket={}",
            dir.path().join("nbd.sock.ctl").display()
        ),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("serve.control_socket") && err.contains("another server answers"),
        "{err}"
    );
    // The first server still answers.
    assert_eq!(status(&cfg)["policy"]["write_policy"], "write-back");
}

#[test]
fn completions_and_man_pages_come_from_the_command_definition() {
    let o = tiercache(&["completions", "bash"]);
    let script = ok(&o, "completions bash");
    for sub in ["status", "detach", "sim", "serve"] {
        assert!(script.contains(sub), "bash completion lacks {sub}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tiercache.bash");
    std::fs::write(&f, &script).unwrap();
    let o = Command::new("bash").arg("-n").arg(&f).output().unwrap();
    ok(&o, "bash -n on the completion script");
    for shell in ["zsh", "fish"] {
        let s = ok(&tiercache(&["completions", shell]), shell);
        assert!(s.contains("detach"), "{shell}");
    }
    let o = tiercache(&["completions", "tcsh"]);
    assert!(!o.status.success());
    let pages = dir.path().join("man1");
    ok(&tiercache(&["man", pages.to_str().unwrap()]), "man DIR");
    let main = std::fs::read_to_string(pages.join("tiercache.1")).unwrap();
    assert!(main.contains(".TH tiercache"), "{main}");
    assert!(main.contains("detach"), "{main}");
    let set = std::fs::read_to_string(pages.join("tiercache-set.1")).unwrap();
    assert!(set.contains("write_policy"), "{set}");
    assert!(pages.join("tiercache-trace-convert.1").exists());
    let out = ok(&tiercache(&["man"]), "man");
    assert!(out.starts_with(".ie") || out.contains(".TH"), "{out}");
}

/// Metric names (`tiercache_…`) in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("tiercache_") {
        rest = &rest[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_grafana_dashboard_queries_what_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let _server = start(
        dir.path(),
        &cfg,
        &["--set", "serve.metrics_listen=127.0.0.1:0"],
    );
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    let at = log
        .find("metrics on http://")
        .expect("metrics address logged")
        + 18;
    let addr = &log[at..at + log[at..].find('/').unwrap()];
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(s, "GET /metrics HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let mut metrics = String::new();
    s.read_to_string(&mut metrics).unwrap();
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/grafana/tiercache.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    assert_eq!(dash["uid"], "tiercache");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8);
    let mut ids = std::collections::BTreeSet::new();
    let mut queried = 0;
    for p in panels {
        let title = p["title"].as_str().expect("a title");
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "{title}: id twice"
        );
        for k in ["h", "w", "x", "y"] {
            assert!(p["gridPos"][k].is_u64(), "{title}: gridPos.{k}");
        }
        assert_eq!(p["datasource"]["type"], "prometheus", "{title}");
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("an expr");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{title}: {expr}");
            for name in names {
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|f| metrics.contains(&format!("# TYPE {f} histogram")))
                    .unwrap_or(&name);
                assert!(
                    metrics.contains(&format!("# TYPE {family} ")),
                    "{title}: {name} is not served:\n{metrics}"
                );
                if expr.contains("by (export") {
                    assert!(
                        metrics.contains(&format!("{name}{{export=\"")),
                        "{title}: {name} has no export label"
                    );
                }
                queried += 1;
            }
        }
    }
    assert!(queried >= 20, "{queried} metrics queried");
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_systemd_unit_verifies() {
    if !tiercache_testsupport::tool("systemd-analyze") {
        return;
    }
    let unit = std::fs::read_to_string(repo().join("examples/systemd/tiercache@.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/tiercache serve /etc/tiercache/%i.toml"));
    // The unit as installed, with this build's binary where `cargo install` puts it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiercache@vm1.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/tiercache", bin())).unwrap();
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    ok(&o, "systemd-analyze verify");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `tiercache ARGS` run as the user `nobody` (uid and gid 65534, no supplementary groups) by
/// `setpriv`; `None` when this process cannot switch users (not root, or no `setpriv`): the
/// test is then skipped, and fails under CI.
fn as_nobody(args: &[&str]) -> Option<Output> {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let problem = if !root {
        Some("switching to another user needs root".to_string())
    } else {
        match Command::new("setpriv").arg("--version").output() {
            Ok(_) => None,
            Err(e) => Some(format!("`setpriv --version`: {e}")),
        }
    };
    if !tiercache_testsupport::require("setpriv", "util-linux", problem) {
        return None;
    }
    Some(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin())
            .args(args)
            .output()
            .unwrap(),
    )
}

#[test]
fn another_user_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    // `nobody` must reach the socket's directory (the socket's own mode is what keeps it out).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = write_config(dir.path());
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _server = start(dir.path(), &cfg, &[]);
    let ctl = dir.path().join("nbd.sock.ctl");
    let ctl_s = ctl.to_str().unwrap();
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // The file mode keeps the other user out at connect.
    let Some(o) = as_nobody(&["status", "--control", ctl_s]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "nobody was let in: {err}");
    assert!(
        err.contains("permission denied") && err.contains(&format!("uid {me}")),
        "{err}"
    );
    // A socket whose mode was loosened (copied, chmod-ed) still refuses the other user: the
    // server checks the peer's uid and says why.
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o666)).unwrap();
    for args in [
        &["status", "--control", ctl_s][..],
        &[
            "set",
            "--control",
            ctl_s,
            "cache.write_policy=write-through",
        ][..],
        &["detach", "--control", ctl_s][..],
    ] {
        let o = as_nobody(args).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: nobody was let in: {err}");
        assert!(
            err.contains(&format!(
                "uid 65534 may not control a server run by uid {me}"
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Nothing the refused user asked for happened: the server runs, write-back as started.
    assert_eq!(status(&cfg)["policy"]["write_policy"], "write-back");
}
