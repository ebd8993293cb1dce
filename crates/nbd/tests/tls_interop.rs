//! NBD over TLS with the real tools, certificates made at test time: qemu-io (a
//! `tls-creds-x509` object) and libnbd's nbdinfo and nbdcopy (`nbds://` with
//! `tls-certificates`) against this crate's server; this crate's client against nbdkit
//! `--tls=require`. Each refusal the protocol defines (plaintext against require, wrong CA,
//! expired certificate, no client certificate, another client's export) is seen by the real
//! client, and the server stays up for the good one. The matrix in docs/nbd-tls.md is these
//! tests.

mod common;

use common::have;
use common::interop::{self, serve_tcp_tls, text, Nbdkit};
use common::pki::Pki;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::*;

/// qemu-io on export `export` of 127.0.0.1:`port`, with TLS credentials from `creds` (none:
/// plaintext); its output, and whether it succeeded.
fn qemu_io(port: u16, export: &str, creds: Option<&Path>, cmd: &str) -> (bool, String) {
    let object = creds.map(|dir| {
        format!(
            "tls-creds-x509,id=tls0,endpoint=client,dir={}",
            dir.display()
        )
    });
    interop::qemu_io(port, export, object, cmd)
}

fn nbds_uri(port: u16, export: &str, creds: &Path) -> String {
    format!(
        "nbds://127.0.0.1:{port}/{export}?tls-certificates={}",
        creds.display()
    )
}

#[test]
fn qemu_io_over_tls_and_its_refusals() {
    if !have("qemu-io") {
        return;
    }
    let pki = Pki::new("tiercache test CA");
    let other = Pki::new("another CA");
    let sdir = pki.server_dir("server", false);
    let good = pki.client_dir("client", Some("qemu"));
    let s = serve_tcp_tls(
        Exports::single("", Arc::new(MemDevice::new(4 << 20))),
        pki.server_tls(&sdir, TlsMode::Require, true, None),
    );
    let (ok, out) = qemu_io(s.port, "", Some(&good), "write -P 0x3c 8192 65536");
    assert!(ok, "{out}");
    let (ok, out) = qemu_io(s.port, "", Some(&good), "read -P 0x3c 8192 65536");
    assert!(ok, "{out}");
    // Plaintext against require: refused with TLS_REQD (qemu says the server requires TLS).
    let (ok, out) = qemu_io(s.port, "", None, "read 0 4096");
    assert!(!ok && out.contains("TLS"), "{out}");
    // A client trusting another CA refuses the server's certificate.
    let wrong_ca = other.client_dir("wrong-ca", Some("qemu"));
    let (ok, out) = qemu_io(s.port, "", Some(&wrong_ca), "read 0 4096");
    assert!(!ok, "{out}");
    // A client without a certificate, where the server verifies peers.
    let anonymous = pki.client_dir("anonymous", None);
    let (ok, out) = qemu_io(s.port, "", Some(&anonymous), "read 0 4096");
    assert!(!ok, "{out}");
    // The server stayed up for the good client.
    let (ok, out) = qemu_io(s.port, "", Some(&good), "read -P 0x3c 8192 4096");
    assert!(ok, "{out}");
    // (Counted by the server's connection thread, maybe after qemu exited: waited for.)
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while s.stats.tls_handshake_failures.load(Relaxed) < 2 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(s.stats.tls_handshake_failures.load(Relaxed) >= 2);
    assert!(s.stats.tls_required.load(Relaxed) >= 1);

    // An expired server certificate: qemu refuses it.
    let expired = pki.server_dir("expired", true);
    let s2 = serve_tcp_tls(
        Exports::single("", Arc::new(MemDevice::new(1 << 20))),
        pki.server_tls(&expired, TlsMode::Require, false, None),
    );
    let (ok, out) = qemu_io(s2.port, "", Some(&good), "read 0 4096");
    // (GnuTLS folds the reason into "not trusted"; the same client trusts the live one.)
    assert!(
        !ok && (out.contains("not trusted") || out.contains("expired")),
        "{out}"
    );
    // (qemu checks the certificate after the TLS handshake: it leaves before transmission.)
    assert_eq!(s2.stats.sessions.load(Relaxed), 0);
}

#[test]
fn nbdinfo_and_nbdcopy_over_tls_with_exports_authorised_per_client() {
    if !have("nbdinfo") || !have("nbdcopy") {
        return;
    }
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let dev = |n| -> Arc<dyn BlockDevice> { Arc::new(MemDevice::new(n)) };
    let a = dev(1 << 20);
    let pattern: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    a.write_at(&pattern, 0, false).unwrap();
    let exports = Exports::named(vec![
        Export {
            name: "a".into(),
            device: a,
        },
        Export {
            name: "b".into(),
            device: dev(2 << 20),
        },
    ])
    .unwrap();
    let rules = vec![ClientRule {
        identity: "alice".into(),
        exports: vec!["a".into()],
    }];
    let s = serve_tcp_tls(
        exports,
        pki.server_tls(&sdir, TlsMode::Require, true, Some(rules)),
    );
    let alice = pki.client_dir("alice", Some("alice"));
    let o = Command::new("nbdinfo")
        .arg(nbds_uri(s.port, "a", &alice))
        .output()
        .unwrap();
    let out = text(&o);
    assert!(o.status.success() && out.contains("1048576"), "{out}");
    assert!(out.contains("newstyle-fixed with TLS"), "{out}");
    // Alice's copy of her export, over TLS.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("a.img");
    let o = Command::new("nbdcopy")
        .arg(nbds_uri(s.port, "a", &alice))
        .arg(&copy)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read(&copy).unwrap() == pattern);
    // Another export: refused at NBD_OPT_GO with the protocol's policy error.
    let o = Command::new("nbdinfo")
        .arg(nbds_uri(s.port, "b", &alice))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(s.stats.authz_refusals.load(Relaxed) >= 1);
    // Plaintext against require.
    let o = Command::new("nbdinfo")
        .arg(format!("nbd://127.0.0.1:{}/a", s.port))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    // Still up for Alice.
    let o = Command::new("nbdinfo")
        .arg(nbds_uri(s.port, "a", &alice))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

fn nbdkit_tls(certs: &Path, verify_peer: bool) -> Nbdkit {
    let mut args = vec![format!("--tls-certificates={}", certs.display())];
    if verify_peer {
        args.push("--tls-verify-peer".into());
    }
    interop::nbdkit(&args)
}

#[test]
fn the_client_speaks_tls_to_nbdkit() {
    if !have("nbdkit") {
        return;
    }
    let pki = Pki::new("tiercache test CA");
    let other = Pki::new("another CA");
    let sdir = pki.server_dir("server", false);
    let good = pki.client_dir("client", Some("tiercache"));
    let kit = nbdkit_tls(&sdir, true);
    let uri = |creds: &Path| -> NbdUri {
        format!(
            "nbds+unix:///?socket={}&tls-certificates={}",
            kit.sock.display(),
            creds.display()
        )
        .parse()
        .unwrap()
    };
    let remote = Remote::connect(uri(&good), RemoteConfig::default()).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    remote.write(&data, 12345, false).unwrap();
    let mut back = vec![0u8; data.len()];
    remote.read(&mut back, 12345).unwrap();
    assert!(back == data);
    remote.flush_since(remote.epoch()).unwrap();
    // Plaintext: nbdkit refuses with TLS_REQD; the client says so.
    let plain: NbdUri = format!("nbd+unix:///?socket={}", kit.sock.display())
        .parse()
        .unwrap();
    let e = Connection::open(&plain, Duration::from_secs(5))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("0x80000005"), "{e}");
    // Another CA: the client refuses nbdkit's certificate.
    let e = Connection::open(&uri(&other.client_dir("x", None)), Duration::from_secs(5))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("UnknownIssuer"), "{e}");
    // No client certificate: nbdkit (--tls-verify-peer) refuses the client.
    assert!(Connection::open(&uri(&pki.client_dir("anon", None)), Duration::from_secs(5)).is_err());
    // nbdkit is still up for the good client.
    Connection::open(&uri(&good), Duration::from_secs(5)).unwrap();
}
