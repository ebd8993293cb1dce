//! `[serve.tls]` through the serve lifecycle: a server built from a config with TLS required
//! and exports authorised per client certificate, reached over `nbds://` (TCP, the server's
//! certificate checked against 127.0.0.1); a plaintext client refused; its TLS counters in
//! the stats file and on the live `/metrics`; a listener beyond loopback without TLS refused at
//! load; and pre-shared keys (`psk = FILE`): per-identity exports, a wrong key counted, a
//! cache above writing back over a PSK session, a malformed key file named with its line.

#[path = "../../nbd/tests/common/pki.rs"]
#[allow(dead_code)] // shared with the NBD crate's tests, which use all of it
mod pki;

use std::time::Duration;
use tiercache_nbd::client::{Command, Connection};
use tiercache_nbd::NbdUri;
use tiercache_server::Server;

fn config(dir: &std::path::Path, serve: &str) -> String {
    format!(
        r#"
[cache]
capacity = "4MiB"
line_size = "4KiB"
[engine]
cache_path = "{d}/cache.img"
backend_path = "{d}/backend.img"
backend_size = "16MiB"
[serve]
stats_file = "{d}/stats.json"
export_name = "vol"
{serve}
"#,
        d = dir.display()
    )
}

#[test]
fn a_served_cache_requires_tls_and_authorises_its_export() {
    let pki = pki::Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let alice = pki.client_dir("alice", Some("alice"));
    let mallory = pki.client_dir("mallory", Some("mallory"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(
        &path,
        config(
            dir.path(),
            &format!(
                r#"listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
[serve.tls]
mode = "require"
certificates = "{}"
verify_peer = true
[[serve.tls.clients]]
identity = "alice"
exports = ["vol"]
"#,
                sdir.display()
            ),
        ),
    )
    .unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let server = Server::builder(setup).log(|_| {}).start().unwrap();
    let port = server.addr().rsplit(':').next().unwrap().to_string();
    let t = Duration::from_secs(10);
    let at = |certs: &std::path::Path| -> NbdUri {
        format!(
            "nbds://127.0.0.1:{port}/vol?tls-certificates={}",
            certs.display()
        )
        .parse()
        .unwrap()
    };
    let conn = Connection::open(&at(&alice), t).unwrap();
    let data = vec![0x5au8; 8192];
    conn.call(Command::Write, false, 4096, 8192, &data, t)
        .unwrap();
    assert_eq!(
        conn.call(Command::Read, false, 4096, 8192, &[], t).unwrap(),
        data
    );
    drop(conn);
    let e = Connection::open(&at(&mallory), t)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("may not use export"), "{e}");
    let plain: NbdUri = server.addr().parse().unwrap();
    let e = Connection::open(&plain, t).err().unwrap().to_string();
    assert!(e.contains("0x80000005"), "{e}");
    // A client certificate of another CA: the handshake fails (and is counted).
    let other_ca = pki::Pki::new("another CA");
    let stranger = other_ca.client_dir("eve", Some("alice"));
    Connection::open(&at(&stranger), t).err().unwrap();
    // The TLS counters, live on /metrics. The refused client may hear of its failure before
    // the server has counted it: the endpoint is read until it shows them (or 10 s pass).
    let want = [
        ("tiercache_nbd_tls_handshakes_total", 2),
        ("tiercache_nbd_tls_handshake_failures_total", 1),
        ("tiercache_nbd_tls_required_total", 1),
        ("tiercache_nbd_authz_refusals_total", 1),
    ];
    let shows = |metrics: &str| {
        want.iter()
            .all(|(name, v)| metrics.lines().any(|l| l == format!("{name} {v}")))
    };
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = http_get(server.metrics_addr().unwrap(), "/metrics");
        if shows(&metrics) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(shows(&metrics), "{want:?} not in:\n{metrics}");
    server.stop().unwrap();
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("stats.json")).unwrap()).unwrap();
    let nbd = &stats["server"];
    assert_eq!(nbd["tls_sessions"], 2, "{nbd}");
    assert_eq!(nbd["authz_refusals"], 1, "{nbd}");
    assert_eq!(nbd["tls_required"], 1, "{nbd}");
    assert_eq!(nbd["tls_handshake_failures"], 1, "{nbd}");
}

/// The body of a `GET path` on `addr`.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn plaintext_beyond_loopback_is_refused_at_load_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config(dir.path(), "listen = \"0.0.0.0:0\"")).unwrap();
    let e = match tiercache_server::config::load(Some(&path), &[]) {
        Ok(_) => panic!("a plaintext listener on 0.0.0.0 was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("0.0.0.0 is not a loopback address") && e.contains("serve.allow_plaintext"),
        "{e}"
    );
    tiercache_server::config::load(Some(&path), &["serve.allow_plaintext=true".into()]).unwrap();
}

#[test]
fn a_cache_whose_backend_is_nbds_writes_back_over_tls() {
    let pki = pki::Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let upper_creds = pki.client_dir("upper", Some("upper-cache"));
    let dir = tempfile::tempdir().unwrap();
    let lower_dir = dir.path().join("lower");
    std::fs::create_dir_all(&lower_dir).unwrap();
    let path = lower_dir.join("serve.toml");
    std::fs::write(
        &path,
        config(
            &lower_dir,
            &format!(
                "listen = \"127.0.0.1:0\"\nflush_on_exit = true\n[serve.tls]\nmode = \"require\"\ncertificates = \"{}\"\nverify_peer = true\n[[serve.tls.clients]]\nidentity = \"upper-cache\"\nexports = [\"vol\"]\n",
                sdir.display()
            ),
        ),
    )
    .unwrap();
    let lower = Server::builder(tiercache_server::config::load(Some(&path), &[]).unwrap())
        .log(|_| {})
        .start()
        .unwrap();
    let port = lower.addr().rsplit(':').next().unwrap().to_string();
    let upper_dir = dir.path().join("upper");
    std::fs::create_dir_all(&upper_dir).unwrap();
    let upper_toml = format!(
        r#"
[cache]
capacity = "2MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "{d}/cache.img"
backend_path = "nbds://127.0.0.1:{port}/vol?tls-certificates={c}"
[serve]
socket = "{d}/nbd.sock"
flush_on_exit = true
"#,
        d = upper_dir.display(),
        c = upper_creds.display()
    );
    let path = upper_dir.join("serve.toml");
    std::fs::write(&path, upper_toml).unwrap();
    let upper = Server::builder(tiercache_server::config::load(Some(&path), &[]).unwrap())
        .log(|_| {})
        .start()
        .unwrap();
    let t = Duration::from_secs(10);
    let conn = Connection::open(&upper.addr().parse().unwrap(), t).unwrap();
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 13) as u8).collect();
    conn.call(Command::Write, false, 1 << 20, 65536, &data, t)
        .unwrap();
    drop(conn);
    // Detaching the upper cache writes its dirty lines back over TLS.
    upper.stop().unwrap();
    let direct: NbdUri = format!(
        "nbds://127.0.0.1:{port}/vol?tls-certificates={}",
        upper_creds.display()
    )
    .parse()
    .unwrap();
    let conn = Connection::open(&direct, t).unwrap();
    assert!(
        conn.call(Command::Read, false, 1 << 20, 65536, &[], t)
            .unwrap()
            == data
    );
    drop(conn);
    lower.stop().unwrap();
}

#[test]
fn a_served_cache_takes_pre_shared_keys_and_a_cache_above_uses_one() {
    let dir = tempfile::tempdir().unwrap();
    let lower_dir = dir.path().join("lower");
    std::fs::create_dir_all(&lower_dir).unwrap();
    let (alice, bob) = ("a1".repeat(32), "b0".repeat(32));
    // psktool's format; the path in the config is relative to the config file.
    std::fs::write(
        lower_dir.join("keys.psk"),
        format!("upper:{alice}\nbob:{bob}\n"),
    )
    .unwrap();
    let path = lower_dir.join("serve.toml");
    std::fs::write(
        &path,
        config(
            &lower_dir,
            "listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nflush_on_exit = true\n[serve.tls]\nmode = \"require\"\npsk = \"keys.psk\"\n[[serve.tls.clients]]\nidentity = \"upper\"\nexports = [\"vol\"]\n",
        ),
    )
    .unwrap();
    let lower = Server::builder(tiercache_server::config::load(Some(&path), &[]).unwrap())
        .log(|_| {})
        .start()
        .unwrap();
    let port = lower.addr().rsplit(':').next().unwrap().to_string();
    let t = Duration::from_secs(10);
    let key_file = |name: &str, line: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, line).unwrap();
        p
    };
    let at = |user: &str, file: &std::path::Path| -> NbdUri {
        format!(
            "nbds://{user}@127.0.0.1:{port}/vol?tls-psk-file={}",
            file.display()
        )
        .parse()
        .unwrap()
    };
    // A wrong key: the handshake fails and is counted; bob (no rule): refused at GO.
    let wrong = key_file("wrong.psk", format!("upper:{bob}\n"));
    let e = Connection::open(&at("upper", &wrong), t)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("TLS handshake"), "{e}");
    let bobs = key_file("bob.psk", format!("bob:{bob}\n"));
    let e = Connection::open(&at("bob", &bobs), t)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("\"bob\" may not use export \"vol\""), "{e}");
    // A cache above, its backend the lower one over nbds:// with the key of "upper".
    let upper_dir = dir.path().join("upper");
    std::fs::create_dir_all(&upper_dir).unwrap();
    let uppers = key_file("upper.psk", format!("upper:{alice}\n"));
    let upper_toml = format!(
        r#"
[cache]
capacity = "2MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "{d}/cache.img"
backend_path = "nbds://upper@127.0.0.1:{port}/vol?tls-psk-file={k}"
[serve]
socket = "{d}/nbd.sock"
flush_on_exit = true
"#,
        d = upper_dir.display(),
        k = uppers.display()
    );
    let path = upper_dir.join("serve.toml");
    std::fs::write(&path, upper_toml).unwrap();
    let upper = Server::builder(tiercache_server::config::load(Some(&path), &[]).unwrap())
        .log(|_| {})
        .start()
        .unwrap();
    let conn = Connection::open(&upper.addr().parse().unwrap(), t).unwrap();
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 29) as u8).collect();
    conn.call(Command::Write, false, 1 << 20, 65536, &data, t)
        .unwrap();
    drop(conn);
    upper.stop().unwrap();
    // Written back over the PSK session: read directly from the lower cache.
    let conn = Connection::open(&at("upper", &uppers), t).unwrap();
    assert!(
        conn.call(Command::Read, false, 1 << 20, 65536, &[], t)
            .unwrap()
            == data
    );
    drop(conn);
    let want = [
        ("tiercache_nbd_tls_handshake_failures_total", 1),
        ("tiercache_nbd_authz_refusals_total", 1),
    ];
    let shows = |metrics: &str| {
        want.iter()
            .all(|(name, v)| metrics.lines().any(|l| l == format!("{name} {v}")))
    };
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = http_get(lower.metrics_addr().unwrap(), "/metrics");
        if shows(&metrics) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(shows(&metrics), "{want:?} not in:\n{metrics}");
    lower.stop().unwrap();
}

#[test]
fn a_malformed_psk_file_is_named_with_its_line_when_serving() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keys.psk"), "alice:00ff\nbob 00ff\n").unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(
        &path,
        config(
            dir.path(),
            "[serve.tls]\nmode = \"require\"\npsk = \"keys.psk\"\n",
        ),
    )
    .unwrap();
    let e = match tiercache_server::config::load(Some(&path), &[]) {
        Ok(_) => panic!("a malformed PSK file was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("keys.psk line 2") && e.contains("identity:hexkey"),
        "{e}"
    );
}
