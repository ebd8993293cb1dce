//! NBD over TLS with pre-shared keys and the real tools, keys made by GnuTLS's `psktool`:
//! qemu-io (a `tls-creds-psk` object) and libnbd's nbdinfo, nbdsh and nbdcopy (`nbds://NAME@`
//! with `tls-psk-file=`) against this crate's server; this crate's client against nbdkit
//! `--tls=require --tls-psk`. Each cell of the matrix in docs/nbd-tls.md ("Pre-shared keys"):
//! the right key served; a wrong key, an unknown identity, an identity not allowed the export
//! and a plaintext client refused, with the server up for the good client after each.

mod common;

use common::interop::{self, serve_tcp_tls, text, Nbdkit};
use common::{have, wait_for};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::tls::PskKeys;
use tiercache_nbd::*;

/// `psktool -u NAME -p DIR/keys.psk` (a new random key, appended to the file): the file.
fn psktool(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("keys.psk");
    let o = Command::new("psktool")
        .args(["-u", name, "-p"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    file
}

/// Two exports: `a` (1 MiB, a pattern) and `b` (2 MiB); alice may use `a`, bob both.
fn two_exports() -> (Exports, Vec<u8>) {
    let a: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let pattern: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    a.write_at(&pattern, 0, false).unwrap();
    let exports = Exports::named(vec![
        Export {
            name: "a".into(),
            device: a,
        },
        Export {
            name: "b".into(),
            device: Arc::new(MemDevice::new(2 << 20)),
        },
    ])
    .unwrap();
    (exports, pattern)
}

fn rules() -> Option<Vec<ClientRule>> {
    Some(vec![
        ClientRule {
            identity: "alice".into(),
            exports: vec!["a".into()],
        },
        ClientRule {
            identity: "bob".into(),
            exports: vec!["*".into()],
        },
    ])
}

/// Key directories made with psktool: the server's (alice, bob), alice's own, alice with
/// another key, and carol (unknown to the server).
struct Keys {
    _tmp: tempfile::TempDir,
    server: PathBuf,
    alice: PathBuf,
    wrong: PathBuf,
    carol: PathBuf,
}

fn keys() -> Keys {
    let tmp = tempfile::tempdir().unwrap();
    let server = psktool(&tmp.path().join("server"), "alice");
    psktool(&tmp.path().join("server"), "bob");
    // Alice's own copy of her line (qemu and libnbd look her name up in the file).
    let alice_dir = tmp.path().join("alice");
    std::fs::create_dir_all(&alice_dir).unwrap();
    let line = std::fs::read_to_string(&server)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("alice:"))
        .unwrap()
        .to_string();
    std::fs::write(alice_dir.join("keys.psk"), line + "\n").unwrap();
    Keys {
        server,
        alice: alice_dir.join("keys.psk"),
        wrong: psktool(&tmp.path().join("wrong"), "alice"),
        carol: psktool(&tmp.path().join("carol"), "carol"),
        _tmp: tmp,
    }
}

/// qemu-io on `export` of 127.0.0.1:`port` with a `tls-creds-psk` object (`dir` holds
/// `keys.psk`, `user` the identity; none: plaintext); whether it succeeded, and its output.
fn qemu_io(port: u16, export: &str, psk: Option<(&Path, &str)>, cmd: &str) -> (bool, String) {
    let object = psk.map(|(file, user)| {
        format!(
            "tls-creds-psk,id=tls0,endpoint=client,dir={},username={user}",
            file.parent().unwrap().display()
        )
    });
    interop::qemu_io(port, export, object, cmd)
}

#[test]
fn qemu_io_with_a_pre_shared_key_and_its_refusals() {
    if !have("qemu-io") || !have("psktool") {
        return;
    }
    let k = keys();
    let (exports, _) = two_exports();
    let s = serve_tcp_tls(
        exports,
        ServerTls::with_psk(
            TlsMode::Require,
            PskKeys::load(&k.server).unwrap(),
            None,
            rules(),
        )
        .unwrap(),
    );
    let alice = Some((k.alice.as_path(), "alice"));
    let (ok, out) = qemu_io(s.port, "a", alice, "write -P 0x3c 8192 65536");
    assert!(ok, "{out}");
    let (ok, out) = qemu_io(s.port, "a", alice, "read -P 0x3c 8192 65536");
    assert!(ok, "{out}");
    // A wrong key: the handshake fails, counted.
    // (qemu tries a failed connection more than once: the counts grow, by one or more.)
    let (ok, out) = qemu_io(s.port, "a", Some((&k.wrong, "alice")), "read 0 4096");
    assert!(!ok, "{out}");
    let failures = wait_for(&s.stats.tls_handshake_failures, 1);
    assert!(failures >= 1);
    // An identity the server has no key for.
    let (ok, out) = qemu_io(s.port, "a", Some((&k.carol, "carol")), "read 0 4096");
    assert!(!ok, "{out}");
    assert!(wait_for(&s.stats.tls_handshake_failures, failures + 1) > failures);
    // Alice and export b: refused at GO with the policy error (qemu prints the message).
    let (ok, out) = qemu_io(s.port, "b", alice, "read 0 4096");
    assert!(!ok && out.contains("may not use export"), "{out}");
    assert!(s.stats.authz_refusals.load(Relaxed) >= 1);
    // Plaintext against require: TLS_REQD.
    let (ok, out) = qemu_io(s.port, "a", None, "read 0 4096");
    assert!(!ok && out.contains("TLS"), "{out}");
    // Still up for alice.
    let (ok, out) = qemu_io(s.port, "a", alice, "read -P 0x3c 8192 4096");
    assert!(ok, "{out}");
    assert!(s.stats.tls_sessions.load(Relaxed) >= 4);
}

fn nbds_psk(port: u16, user: &str, export: &str, file: &Path) -> String {
    format!(
        "nbds://{user}@127.0.0.1:{port}/{export}?tls-psk-file={}",
        file.display()
    )
}

#[test]
fn libnbd_with_a_pre_shared_key_and_its_refusals() {
    if !have("nbdinfo") || !have("nbdsh") || !have("nbdcopy") || !have("psktool") {
        return;
    }
    let k = keys();
    let (exports, pattern) = two_exports();
    let s = serve_tcp_tls(
        exports,
        ServerTls::with_psk(
            TlsMode::Require,
            PskKeys::load(&k.server).unwrap(),
            None,
            rules(),
        )
        .unwrap(),
    );
    let nbdinfo = |uri: String| Command::new("nbdinfo").arg(uri).output().unwrap();
    let o = nbdinfo(nbds_psk(s.port, "alice", "a", &k.alice));
    let out = text(&o);
    assert!(o.status.success() && out.contains("1048576"), "{out}");
    assert!(out.contains("newstyle-fixed with TLS"), "{out}");
    // nbdsh writes and reads back through the same kind of URI.
    // (nbdsh runs `python3 -m nbd`: the system's Python, which has python3-libnbd's module,
    // not a virtualenv's first on PATH.)
    let path = format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default());
    let o = Command::new("nbdsh")
        .env("PATH", path)
        .arg("-c")
        .arg(format!(
            "h.set_uri_allow_local_file(True)\n\
             h.connect_uri({:?})\n\
             h.pwrite(b'\\x5a' * 4096, 65536)\n\
             assert h.pread(4096, 65536) == b'\\x5a' * 4096\n\
             print('tls', h.get_tls_negotiated())",
            nbds_psk(s.port, "alice", "a", &k.alice)
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success() && text(&o).contains("tls True"),
        "{}",
        text(&o)
    );
    // nbdcopy of the whole export.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("a.img");
    let o = Command::new("nbdcopy")
        .arg(nbds_psk(s.port, "alice", "a", &k.alice))
        .arg(&copy)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let mut want = pattern;
    want[65536..65536 + 4096].fill(0x5a);
    assert!(std::fs::read(&copy).unwrap() == want);
    // A wrong key, an unknown identity: the handshake fails, counted.
    let o = nbdinfo(nbds_psk(s.port, "alice", "a", &k.wrong));
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(wait_for(&s.stats.tls_handshake_failures, 1), 1);
    let o = nbdinfo(nbds_psk(s.port, "carol", "a", &k.carol));
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(wait_for(&s.stats.tls_handshake_failures, 2), 2);
    // Alice and export b: refused at GO (POLICY: libnbd says "Operation not permitted"-like
    // errors without the server's message), counted.
    let o = nbdinfo(nbds_psk(s.port, "alice", "b", &k.alice));
    assert!(
        !o.status.success() && text(&o).contains("opt_go"),
        "{}",
        text(&o)
    );
    // (nbdinfo asks with NBD_OPT_INFO and NBD_OPT_GO: each refused and counted.)
    assert!(s.stats.authz_refusals.load(Relaxed) >= 1);
    // Bob may use b.
    let o = nbdinfo(nbds_psk(s.port, "bob", "b", &k.server));
    assert!(
        o.status.success() && text(&o).contains("2097152"),
        "{}",
        text(&o)
    );
    // Plaintext against require.
    let o = nbdinfo(format!("nbd://127.0.0.1:{}/a", s.port));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(s.stats.tls_required.load(Relaxed) >= 1);
    // Still up for alice.
    let o = nbdinfo(nbds_psk(s.port, "alice", "a", &k.alice));
    assert!(o.status.success(), "{}", text(&o));
}

fn nbdkit_psk(keys: &Path) -> Nbdkit {
    interop::nbdkit(&[format!("--tls-psk={}", keys.display())])
}

#[test]
fn the_client_uses_a_pre_shared_key_with_nbdkit() {
    if !have("nbdkit") || !have("psktool") {
        return;
    }
    let k = keys();
    let kit = nbdkit_psk(&k.server);
    let uri = |user: &str, file: &Path| -> NbdUri {
        format!(
            "nbds+unix://{user}@/?socket={}&tls-psk-file={}",
            kit.sock.display(),
            file.display()
        )
        .parse()
        .unwrap()
    };
    let remote = Remote::connect(uri("alice", &k.alice), RemoteConfig::default()).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    remote.write(&data, 12345, false).unwrap();
    let mut back = vec![0u8; data.len()];
    remote.read(&mut back, 12345).unwrap();
    assert!(back == data);
    remote.flush_since(remote.epoch()).unwrap();
    drop(remote);
    let t = Duration::from_secs(5);
    // A wrong key, an unknown identity: nbdkit refuses the handshake.
    let e = Connection::open(&uri("alice", &k.wrong), t)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("TLS handshake"), "{e}");
    let e = Connection::open(&uri("carol", &k.carol), t)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("TLS handshake"), "{e}");
    // Plaintext: TLS_REQD.
    let plain: NbdUri = format!("nbd+unix:///?socket={}", kit.sock.display())
        .parse()
        .unwrap();
    let e = Connection::open(&plain, t).err().unwrap().to_string();
    assert!(e.contains("0x80000005"), "{e}");
    // nbdkit is still up for alice, and kept the data.
    let c = Connection::open(&uri("alice", &k.alice), t).unwrap();
    assert_eq!(c.info().size, 4 << 20);
    let remote = Remote::connect(uri("alice", &k.alice), RemoteConfig::default()).unwrap();
    remote.read(&mut back, 12345).unwrap();
    assert!(back == data);
}
