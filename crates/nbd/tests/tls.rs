//! NBD over TLS between this crate's client and server, with certificates made at test time:
//! data round trips, the FORCEDTLS refusals before the upgrade (no downgrade), credentials
//! refused both ways (wrong CA, expired, no client certificate) with the server up for the
//! next good client, exports authorised per client identity, and DEMOTE over TLS.

mod common;

use common::wire::{reply, send_opt, REP_ACK};
use common::{open, serve_exports, wait_for};

use common::pki::Pki;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, DemoteReply, MemDevice};
use tiercache_nbd::*;

const OPT_EXPORT_NAME: u32 = 1;
const OPT_LIST: u32 = 3;
const OPT_STARTTLS: u32 = 5;
const OPT_INFO: u32 = 6;
const REP_SERVER: u32 = 2;
const ERR_POLICY: u32 = (1 << 31) + 2;
const ERR_INVALID: u32 = (1 << 31) + 3;
const ERR_TLS_REQD: u32 = (1 << 31) + 5;

fn single(size: usize) -> Exports {
    Exports::single("", Arc::new(MemDevice::new(size)))
}

fn nbds(sock: &Path, export: &str, certs: &Path) -> NbdUri {
    format!(
        "nbds+unix:///{export}?socket={}&tls-certificates={}",
        sock.display(),
        certs.display()
    )
    .parse()
    .unwrap()
}

fn plain(sock: &Path, export: &str) -> NbdUri {
    format!("nbd+unix:///{export}?socket={}", sock.display())
        .parse()
        .unwrap()
}

const T: Duration = Duration::from_secs(10);

#[test]
fn data_round_trips_over_tls_from_many_threads() {
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let cdir = pki.client_dir("client", None);
    let s = serve_exports(
        single(8 << 20),
        Some(pki.server_tls(&sdir, TlsMode::Require, false, None)),
    );
    let remote = Arc::new(
        Remote::connect(
            nbds(&s.sock, "", &cdir),
            RemoteConfig {
                connections: 4,
                ..RemoteConfig::default()
            },
        )
        .unwrap(),
    );
    assert!(remote.stats().uri.starts_with("nbds+unix://"));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let remote = remote.clone();
            std::thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t);
                let base = t * (2 << 20);
                // Requests from 1 byte to 1 MiB: inside one TLS record and across many.
                for len in [1usize, 4096, 16 << 10, 100_000, 1 << 20] {
                    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    remote.write(&data, base, false).unwrap();
                    let mut back = vec![0u8; len];
                    remote.read(&mut back, base).unwrap();
                    assert!(back == data, "thread {t}, {len} bytes");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    remote.flush_since(remote.epoch()).unwrap();
    assert!(s.stats.tls_sessions.load(Relaxed) >= 1);
    assert_eq!(s.stats.tls_handshake_failures.load(Relaxed), 0);
    assert_eq!(s.stats.protocol_errors.load(Relaxed), 0);
}

/// Speaks the handshake by hand up to option haggling: the server's flags.
fn greet(s: &mut UnixStream) -> u16 {
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    u16::from_be_bytes([hello[16], hello[17]])
}

fn info_payload(name: &str) -> Vec<u8> {
    let mut v = (name.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(&0u16.to_be_bytes());
    v
}

#[test]
fn require_answers_nothing_in_the_clear_but_the_way_to_tls() {
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let cdir = pki.client_dir("client", None);
    let s = serve_exports(
        single(1 << 20),
        Some(pki.server_tls(&sdir, TlsMode::Require, false, None)),
    );
    let mut raw = UnixStream::connect(&s.sock).unwrap();
    greet(&mut raw);
    for (opt, data) in [
        (OPT_LIST, Vec::new()),
        (OPT_INFO, info_payload("")),
        (7, info_payload("")),                      // GO
        (99, vec![1, 2, 3]),                        // unknown
        (0x7443_0001, 1u64.to_be_bytes().to_vec()), // tiercache's DEMOTE
    ] {
        send_opt(&mut raw, opt, &data);
        let (o, typ, _) = reply(&mut raw);
        assert_eq!((o, typ), (opt, ERR_TLS_REQD), "option {opt}");
    }
    assert_eq!(s.stats.tls_required.load(Relaxed), 5);
    // EXPORT_NAME has no error reply: the connection closes, nothing answered.
    send_opt(&mut raw, OPT_EXPORT_NAME, b"");
    let mut rest = Vec::new();
    raw.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(s.stats.tls_required.load(Relaxed), 6);
    // The library's plaintext client is refused at NBD_OPT_GO with the protocol's error.
    let e = open(&plain(&s.sock, "")).err().unwrap().to_string();
    assert!(e.contains("0x80000005"), "{e}");
    // And the server is up for a TLS client.
    let c = open(&nbds(&s.sock, "", &cdir)).unwrap();
    c.call(client::Command::Write, false, 0, 4, b"abcd", T)
        .unwrap();
    assert_eq!(
        c.call(client::Command::Read, false, 0, 4, &[], T).unwrap(),
        b"abcd"
    );
}

#[test]
fn tls_off_refuses_starttls_with_policy_and_the_client_does_not_fall_back() {
    let pki = Pki::new("tiercache test CA");
    let cdir = pki.client_dir("client", None);
    let s = serve_exports(single(1 << 20), None);
    let e = open(&nbds(&s.sock, "", &cdir)).err().unwrap().to_string();
    assert!(e.contains("refused TLS") && e.contains("0x80000002"), "{e}");
    assert_eq!(s.stats.sessions.load(Relaxed), 0);
    open(&plain(&s.sock, "")).unwrap();
}

/// A rustls client over a raw socket, after STARTTLS: for the options the library's client
/// never sends.
fn raw_tls(sock: &Path, certs: &Path) -> rustls::StreamOwned<rustls::ClientConnection, UnixStream> {
    let mut raw = UnixStream::connect(sock).unwrap();
    greet(&mut raw);
    send_opt(&mut raw, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut raw).1, REP_ACK);
    let mut roots = rustls::RootCertStore::empty();
    for c in tiercache_nbd::tls::load_certificates("CA", &certs.join("ca-cert.pem")).unwrap() {
        roots.add(c).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        #[allow(deprecated)]
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let cfg = if certs.join("client-cert.pem").exists() {
        b.with_client_auth_cert(
            tiercache_nbd::tls::load_certificates("cert", &certs.join("client-cert.pem")).unwrap(),
            tiercache_nbd::tls::load_key(&certs.join("client-key.pem")).unwrap(),
        )
        .unwrap()
    } else {
        b.with_no_client_auth()
    };
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), "localhost".try_into().unwrap()).unwrap();
    rustls::StreamOwned::new(conn, raw)
}

#[test]
fn tls_on_serves_both_and_a_second_starttls_is_invalid() {
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let cdir = pki.client_dir("client", None);
    let s = serve_exports(
        single(1 << 20),
        Some(pki.server_tls(&sdir, TlsMode::On, false, None)),
    );
    open(&plain(&s.sock, "")).unwrap();
    open(&nbds(&s.sock, "", &cdir)).unwrap();
    let mut t = raw_tls(&s.sock, &cdir);
    send_opt(&mut t, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut t).1, ERR_INVALID);
    // Haggling goes on over TLS.
    send_opt(&mut t, OPT_LIST, &[]);
    assert_eq!(reply(&mut t).1, REP_SERVER);
    assert_eq!(reply(&mut t).1, REP_ACK);
    assert_eq!(s.stats.tls_required.load(Relaxed), 0);
}

#[test]
fn bad_credentials_are_refused_both_ways_and_the_server_stays_up() {
    let pki = Pki::new("tiercache test CA");
    let other = Pki::new("another CA");
    let sdir = pki.server_dir("server", false);
    let good = pki.client_dir("alice", Some("alice"));
    let s = serve_exports(
        single(1 << 20),
        Some(pki.server_tls(&sdir, TlsMode::Require, true, None)),
    );
    let mut failures = 0;
    // The client trusts another CA: it refuses the server's certificate.
    let wrong_ca = other.client_dir("wrong-ca", Some("alice"));
    let e = open(&nbds(&s.sock, "", &wrong_ca))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("TLS handshake") && e.contains("UnknownIssuer"),
        "{e}"
    );
    failures += 1;
    assert_eq!(
        wait_for(&s.stats.tls_handshake_failures, failures),
        failures
    );
    // No client certificate, where the server verifies peers.
    let anonymous = pki.client_dir("anonymous", None);
    let e = open(&nbds(&s.sock, "", &anonymous)).err().unwrap();
    assert!(
        matches!(e, ClientError::Handshake(_) | ClientError::Transport(_)),
        "{e}"
    );
    failures += 1;
    assert_eq!(
        wait_for(&s.stats.tls_handshake_failures, failures),
        failures
    );
    // A client certificate another CA signed (the client trusts the server's CA).
    let forged = other.client_dir("forged", Some("alice"));
    std::fs::copy(good.join("ca-cert.pem"), forged.join("ca-cert.pem")).unwrap();
    assert!(open(&nbds(&s.sock, "", &forged)).is_err());
    failures += 1;
    assert_eq!(
        wait_for(&s.stats.tls_handshake_failures, failures),
        failures
    );
    // The server is up for the good client.
    let c = open(&nbds(&s.sock, "", &good)).unwrap();
    c.call(client::Command::Flush, false, 0, 0, &[], T).unwrap();
    assert_eq!(s.stats.tls_sessions.load(Relaxed), 1);

    // An expired server certificate: the client refuses it.
    let expired = pki.server_dir("expired", true);
    let s2 = serve_exports(
        single(1 << 20),
        Some(pki.server_tls(&expired, TlsMode::Require, false, None)),
    );
    let e = open(&nbds(&s2.sock, "", &good)).err().unwrap().to_string();
    assert!(e.contains("certificate expired"), "{e}");
    // A name the certificate does not carry.
    let mut uri = nbds(&s.sock, "", &good);
    uri.tls.as_mut().unwrap().hostname = Some("elsewhere.example".into());
    let e = open(&uri).err().unwrap().to_string();
    assert!(e.contains("not valid for name"), "{e}");
}

#[test]
fn exports_are_authorised_per_client_identity() {
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let dev = |n| -> Arc<dyn BlockDevice> { Arc::new(MemDevice::new(n)) };
    let exports = Exports::named(vec![
        Export {
            name: "a".into(),
            device: dev(1 << 20),
        },
        Export {
            name: "b".into(),
            device: dev(2 << 20),
        },
    ])
    .unwrap();
    let rules = vec![
        ClientRule {
            identity: "alice".into(),
            exports: vec!["a".into()],
        },
        ClientRule {
            identity: "CN=bob,O=tiercache tests".into(),
            exports: vec!["*".into()],
        },
    ];
    let s = serve_exports(
        exports,
        Some(pki.server_tls(&sdir, TlsMode::On, true, Some(rules))),
    );
    let (alice, bob, carol) = (
        pki.client_dir("alice", Some("alice")),
        pki.client_dir("bob", Some("bob")),
        pki.client_dir("carol", Some("carol")),
    );
    assert_eq!(
        open(&nbds(&s.sock, "a", &alice)).unwrap().info().size,
        1 << 20
    );
    let e = open(&nbds(&s.sock, "b", &alice)).err().unwrap().to_string();
    assert!(
        e.contains("0x80000002") && e.contains("may not use export"),
        "{e}"
    );
    assert_eq!(
        open(&nbds(&s.sock, "b", &bob)).unwrap().info().size,
        2 << 20
    );
    assert!(open(&nbds(&s.sock, "a", &carol)).is_err());
    assert_eq!(s.stats.authz_refusals.load(Relaxed), 2);
    // Without TLS no identity: the exports are TLS-only.
    let e = open(&plain(&s.sock, "a")).err().unwrap().to_string();
    assert!(e.contains("0x80000005"), "{e}");
    // Alice's list shows only her export.
    let mut t = raw_tls(&s.sock, &alice);
    send_opt(&mut t, OPT_LIST, &[]);
    let (_, typ, d) = reply(&mut t);
    assert_eq!((typ, &d[4..]), (REP_SERVER, &b"a"[..]));
    assert_eq!(reply(&mut t).1, REP_ACK);
    send_opt(&mut t, OPT_INFO, &info_payload("b"));
    assert_eq!(reply(&mut t).1, ERR_POLICY);
    assert_eq!(s.stats.authz_refusals.load(Relaxed), 3);
}

/// A device that installs accepted demotes (as a cache would) so they can be read back.
struct Installing(MemDevice);

impl BlockDevice for Installing {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.0.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.0.trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.0.write_zeroes(off, len, fua)
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        if !still_valid() {
            return Ok(DemoteReply::Rejected);
        }
        self.0.write_at(data, off, false)?;
        Ok(DemoteReply::Accepted)
    }
}

#[test]
fn demote_works_over_tls() {
    let pki = Pki::new("tiercache test CA");
    let sdir = pki.server_dir("server", false);
    let cdir = pki.client_dir("client", None);
    let export = Arc::new(
        DemoteExport::new(
            Arc::new(Installing(MemDevice::new(1 << 20))),
            DemoteConfig::default(),
        )
        .unwrap(),
    );
    let s = serve_exports(
        Exports::single("", export),
        Some(pki.server_tls(&sdir, TlsMode::Require, false, None)),
    );
    let remote = Remote::connect(
        nbds(&s.sock, "", &cdir),
        RemoteConfig {
            demote: true,
            ..RemoteConfig::default()
        },
    )
    .unwrap();
    assert!(remote.demote_enabled());
    // Read first (the ledger learns the block is unchanged since), then demote a copy.
    let mut buf = vec![0u8; 4096];
    remote.read(&mut buf, 8192).unwrap();
    assert_eq!(
        remote.demote(&[7u8; 4096], 8192).unwrap(),
        DemoteReply::Accepted
    );
    remote.read(&mut buf, 8192).unwrap();
    assert_eq!(buf, vec![7u8; 4096]);
}

#[test]
fn nbds_uris_parse_and_print() {
    use tiercache_nbd::client::UriCredentials;
    let u: NbdUri = "nbds://127.0.0.1:10900/disk?tls-certificates=/etc/pki/nbd&tls-hostname=srv"
        .parse()
        .unwrap();
    let t = u.tls.as_ref().unwrap();
    assert_eq!(
        t.credentials,
        UriCredentials::Certificates("/etc/pki/nbd".into())
    );
    assert_eq!(t.hostname.as_deref(), Some("srv"));
    assert_eq!(
        u.to_string(),
        "nbds://127.0.0.1:10900/disk?tls-certificates=/etc/pki/nbd&tls-hostname=srv"
    );
    let u: NbdUri = "nbds+unix:///x?socket=/s&tls-certificates=/c"
        .parse()
        .unwrap();
    assert_eq!(
        u.to_string(),
        "nbds+unix:///x?socket=/s&tls-certificates=/c"
    );
    // Pre-shared keys as libnbd spells them: the identity as the user or tls-username=.
    for (uri, printed) in [
        (
            "nbds://alice@127.0.0.1:10900/disk?tls-psk-file=/k/keys.psk",
            "nbds://127.0.0.1:10900/disk?tls-psk-file=/k/keys.psk&tls-username=alice",
        ),
        (
            "nbds://127.0.0.1:10900/disk?tls-psk-file=/k/keys.psk&tls-username=alice",
            "nbds://127.0.0.1:10900/disk?tls-psk-file=/k/keys.psk&tls-username=alice",
        ),
        (
            "nbds+unix://alice@/disk?socket=/s&tls-psk-file=/k/keys.psk",
            "nbds+unix:///disk?socket=/s&tls-psk-file=/k/keys.psk&tls-username=alice",
        ),
    ] {
        let u: NbdUri = uri.parse().unwrap();
        assert_eq!(
            u.tls.as_ref().unwrap().credentials,
            UriCredentials::Psk {
                file: "/k/keys.psk".into(),
                username: "alice".into()
            },
            "{uri}"
        );
        assert_eq!(u.to_string(), printed);
        assert_eq!(printed.parse::<NbdUri>().unwrap(), u);
    }
    for (bad, why) in [
        ("nbds://h/x", "tls-certificates=DIR"),
        ("nbds://h/x", "tls-psk-file=FILE"),
        (
            "nbds://a@h/x?tls-certificates=/c&tls-psk-file=/k",
            "give one",
        ),
        ("nbds://h/x?tls-psk-file=/k", "needs the identity"),
        ("nbds://a@h/x?tls-psk-file=/k&tls-username=b", "given twice"),
        ("nbds://a@h/x?tls-certificates=/c", "needs tls-psk-file"),
        ("nbd://a@h/x", "belongs to nbds"),
        ("nbd://h/x?tls-psk-file=/k", "belong to nbds"),
        (
            "nbds://a@h/x?tls-psk-file=/k&tls-hostname=h",
            "tls-hostname",
        ),
        ("nbd://h/x?tls-certificates=/c", "belong to nbds"),
        (
            "nbds://h/x?tls-certificates=/c&tls-verify-peer=false",
            "tls-verify-peer",
        ),
    ] {
        let e = bad.parse::<NbdUri>().unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // A directory without a CA bundle: a clear error at connect, naming the file.
    let dir = tempfile::tempdir().unwrap();
    let u: NbdUri = format!(
        "nbds://127.0.0.1:1/?tls-certificates={}",
        dir.path().display()
    )
    .parse()
    .unwrap();
    let e = open(&u).err().unwrap().to_string();
    assert!(e.contains("ca-cert.pem"), "{e}");
}
