//! A cache file on a file system with 3 MiB free (a tmpfs this test mounts; it needs root):
//! preallocated, the server refuses to start and says why; sparse, the server serves 16 MiB
//! of writes through a 32 MiB write-back cache, every one acknowledged, by degrading to
//! pass-through when the file system fills, saying so in its log, stats file and metrics
//! (docs/design.md §11). The dirty count reported at exit is what a flush writes.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_nbd::client::{Command, Connection};
use tiercache_nbd::NbdUri;
use tiercache_server::Server;

fn config(small: &std::path::Path, dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
[cache]
capacity = "32MiB"
line_size = "64KiB"
write_policy = "write-back"
[engine]
cache_path = "{s}/cache.img"
backend_path = "{d}/backend.img"
backend_size = "64MiB"
{extra}
[serve]
socket = "{d}/nbd.sock"
stats_file = "{d}/stats.json"
metrics_listen = "127.0.0.1:0"
"#,
        s = small.display(),
        d = dir.display()
    )
}

fn chunk(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8 + 1; 256 << 10]
}

#[test]
fn a_cache_file_on_a_full_file_system_degrades_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let Some(_mount) = tiercache_testsupport::tmpfs(&small, "3m") else {
        return;
    };
    let path = dir.path().join("serve.toml");

    // Preallocated (the default): the start fails, naming the path, the size and the room.
    std::fs::write(&path, config(&small, dir.path(), "")).unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let e = format!(
        "{:#}",
        Server::builder(setup).log(|_| {}).start().err().unwrap()
    );
    let cache_path = small.join("cache.img");
    assert!(e.contains(&cache_path.display().to_string()), "{e}");
    assert!(
        e.contains("bytes for the cache file") && e.contains("bytes free"),
        "{e}"
    );
    assert!(
        std::fs::metadata(&cache_path).map_or(0, |m| m.len()) == 0,
        "the failed allocation is given back"
    );

    // Sparse: every write succeeds.
    std::fs::write(
        &path,
        config(&small, dir.path(), "cache_preallocate = false"),
    )
    .unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let server = Server::builder(setup)
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    let uri: NbdUri = server.addr().parse().unwrap();
    let t = Duration::from_secs(30);
    let conn = Connection::open(&uri, t).unwrap();
    let n = (16u64 << 20) / (256 << 10);
    for i in 0..n {
        conn.call(
            Command::Write,
            false,
            i * (256 << 10),
            256 << 10,
            &chunk(i),
            t,
        )
        .unwrap_or_else(|e| panic!("write {i} of {n}: {e}"));
    }
    conn.call(Command::Flush, false, 0, 0, &[], t).unwrap();
    for i in 0..n {
        let got = conn
            .call(Command::Read, false, i * (256 << 10), 256 << 10, &[], t)
            .unwrap();
        assert!(got == chunk(i), "chunk {i} reads back");
    }
    // Metrics say it degraded, and why.
    let metrics_addr = server.metrics_addr().unwrap().to_string();
    let metrics = http(&metrics_addr, "GET", "/metrics");
    assert!(metrics.contains("tiercache_degraded 1"), "{metrics}");
    assert!(
        metrics.contains(
            "tiercache_device_errors_total{device=\"cache\",op=\"write\",kind=\"enospc\"}"
        ),
        "{metrics}"
    );
    drop(conn);
    let report = server.stop().unwrap();
    let h = &report.engine.health;
    assert!(h.degraded && h.degraded_entered == 1, "{h:?}");
    assert_eq!(report.engine.errors, 0, "no client saw an error");
    let said = said.lock().unwrap().join("\n");
    assert!(
        said.contains("first enospc write error on the cache device"),
        "{said}"
    );
    assert!(said.contains("DEGRADED"), "{said}");
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["engine"]["health"]["degraded"], true);

    // The figures match: the dirty lines reported at exit are what a flush writes back, and
    // then the backend alone holds every byte.
    let dirty = report.engine.dirty_lines;
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let flushed = tiercache_server::flush::flush(&setup).unwrap();
    assert_eq!(flushed.dirty_lines, dirty);
    assert_eq!(flushed.flushed_lines, dirty);
    let backend = std::fs::read(dir.path().join("backend.img")).unwrap();
    for i in 0..n as usize {
        assert!(
            backend[i * (256 << 10)..(i + 1) * (256 << 10)] == chunk(i as u64)[..],
            "chunk {i} on the backend"
        );
    }
}

/// One HTTP/1.1 request with an empty body over a plain TCP connection (the metrics listener
/// speaks HTTP/1.1); the whole response, status line included.
fn http(addr: &str, method: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// Faults injected from the config (`[[engine.cache_faults]]`, for demonstrations): every
/// cache read past the first MiB fails with EIO; the server says so at start, logs the first
/// error, degrades past the threshold (metrics and log), and the operator's `degraded=off` over
/// the control socket returns it to service (logged and counted).
#[test]
fn faults_from_the_config_degrade_the_server_and_an_operator_returns_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    let extra = r#"
[[engine.cache_faults]]
op = "read"
kind = "eio"
start = "1MiB"
# The device is "fixed" after three errors: with faults left firing, the cleaner's retries could
# degrade the engine again between the operator's `degraded=off` and the metrics read.
count = 3
[engine.on_error]
threshold = 2
halflife_ns = "10s"
"#;
    std::fs::write(&path, config(dir.path(), dir.path(), extra)).unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let server = Server::builder(setup)
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    let uri: NbdUri = server.addr().parse().unwrap();
    let t = Duration::from_secs(30);
    let conn = Connection::open(&uri, t).unwrap();
    for i in 0..8u64 {
        conn.call(
            Command::Write,
            false,
            i * (256 << 10),
            256 << 10,
            &chunk(i),
            t,
        )
        .unwrap();
    }
    let metrics_addr = server.metrics_addr().unwrap().to_string();
    for i in 0..8u64 {
        // Write-back: this data is only in the cache, whose reads fail; such a read may fail
        // (the cache held the only copy), and its errors degrade the engine.
        let _ = conn.call(Command::Read, false, i * (256 << 10), 256 << 10, &[], t);
    }
    let metrics = http(&metrics_addr, "GET", "/metrics");
    assert!(metrics.contains("tiercache_degraded 1"), "{metrics}");
    let said_now = said.lock().unwrap().join("\n");
    assert!(said_now.contains("1 fault rule(s) injected"), "{said_now}");
    assert!(
        said_now.contains("first eio read error on the cache device"),
        "{said_now}"
    );
    // The metrics listener changes nothing: the switch is the control socket's.
    let refused = http(&metrics_addr, "POST", "/degraded?off");
    assert!(refused.starts_with("HTTP/1.1 404"), "{refused}");
    let control = tiercache_server::control::Client::new(dir.path().join("nbd.sock.ctl"));
    let back = control
        .call(
            &tiercache_server::control::Request::Set {
                settings: vec!["degraded=off".into()],
            },
            |_| {},
        )
        .unwrap()
        .to_string();
    assert!(back.contains("returned to service"), "{back}");
    let again = control
        .call(
            &tiercache_server::control::Request::Set {
                settings: vec!["degraded=maybe".into()],
            },
            |_| {},
        )
        .unwrap_err()
        .to_string();
    assert!(
        again.contains("degraded") && again.contains("maybe"),
        "{again}"
    );
    let metrics = http(&metrics_addr, "GET", "/metrics");
    assert!(metrics.contains("tiercache_degraded 0"), "{metrics}");
    assert!(
        metrics.contains("tiercache_degraded_transitions_total{direction=\"left\"} 1"),
        "{metrics}"
    );
    drop(conn);
    let report = server.stop().unwrap();
    assert!(report.engine.health.cache_errors() >= 2);
}
