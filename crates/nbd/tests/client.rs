//! The client and the pool against this crate's own server: data round trips from many
//! threads, error replies, stalls, reconnection, and flush refusal after a connection loss.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::*;

#[test]
fn uris_parse_and_print() {
    let u: NbdUri = "nbd://example.com:10900/disk%201".parse().unwrap();
    assert_eq!(
        u.target,
        Target::Tcp {
            host: "example.com".into(),
            port: 10900
        }
    );
    assert_eq!(u.export, "disk 1");
    let u: NbdUri = "nbd://127.0.0.1".parse().unwrap();
    assert_eq!(
        u.target,
        Target::Tcp {
            host: "127.0.0.1".into(),
            port: 10809
        }
    );
    assert_eq!(u.export, "");
    let u: NbdUri = "nbd://[::1]:7000/x".parse().unwrap();
    assert_eq!(
        u.target,
        Target::Tcp {
            host: "::1".into(),
            port: 7000
        }
    );
    assert_eq!(u.to_string(), "nbd://[::1]:7000/x");
    let u: NbdUri = "nbd+unix:///vol?socket=/run/a%20b.sock".parse().unwrap();
    assert_eq!(u.target, Target::Unix("/run/a b.sock".into()));
    assert_eq!(u.export, "vol");
    assert_eq!(u.to_string(), "nbd+unix:///vol?socket=/run/a b.sock");
    for (bad, why) in [
        ("nbd+unix:///x", "socket"),
        ("nbd://host:99999/x", "port"),
        ("nbds://host/x", "tls-certificates"),
        ("http://host/x", "scheme"),
        ("nbd:///x", "host"),
        ("nbd://h/x?socket=/s", "socket="),
        ("nbd://h/x?bogus=1", "bogus"),
        ("/dev/sdb", "expected"),
    ] {
        let e = bad.parse::<NbdUri>().unwrap_err().to_string();
        assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
    }
    assert!(NbdUri::is_uri("nbd+unix:///?socket=x") && !NbdUri::is_uri("/tmp/nbd.img"));
}

/// A device whose faults tests switch on: error replies at chosen offsets, stalls.
struct Faulty {
    inner: MemDevice,
    fail_at: Mutex<Option<u64>>,
    stall: AtomicBool,
    calls: AtomicU64,
}

impl Faulty {
    fn new(size: usize) -> Self {
        Faulty {
            inner: MemDevice::new(size),
            fail_at: Mutex::new(None),
            stall: AtomicBool::new(false),
            calls: AtomicU64::new(0),
        }
    }
    fn check(&self, off: u64) -> io::Result<()> {
        self.calls.fetch_add(1, Relaxed);
        while self.stall.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if *self.fail_at.lock().unwrap() == Some(off) {
            return Err(io::Error::other("injected"));
        }
        Ok(())
    }
}

impl BlockDevice for Faulty {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.check(off)?;
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.check(off)?;
        self.inner.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.check(u64::MAX)?;
        self.inner.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.inner.trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.inner.write_zeroes(off, len, fua)
    }
    fn multi_conn(&self) -> bool {
        true
    }
}

fn uri(sock: &std::path::Path) -> NbdUri {
    format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap()
}

/// Four threads share a four-connection pool; every byte read matches a shadow copy.
#[test]
fn pooled_round_trip_from_many_threads_matches_a_shadow() {
    const SIZE: usize = 4 << 20;
    let dev = Arc::new(Faulty::new(SIZE));
    let (sock, _stats, stop, _dir) = common::serve(dev.clone(), ServerConfig::default());
    let remote = Arc::new(Remote::connect(uri(&sock), RemoteConfig::default()).unwrap());
    assert_eq!(remote.size(), SIZE as u64);
    assert!(remote.info().multi_conn());
    assert_eq!(remote.stats().connections, 4);
    let shadow = Arc::new(Mutex::new(vec![0u8; SIZE]));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (remote, shadow) = (remote.clone(), shadow.clone());
            std::thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t);
                // Each thread owns a quarter, so the shadow is exact without ordering.
                let base = t * (SIZE as u64 / 4);
                for i in 0..400 {
                    let off = base + rng.gen_range(0..(SIZE as u64 / 4 - 65536));
                    let len = rng.gen_range(1..65536usize);
                    if rng.gen_bool(0.5) {
                        let data: Vec<u8> =
                            (0..len).map(|k| (k as u64 * 31 + i + t) as u8).collect();
                        remote.write(&data, off, i % 7 == 0).unwrap();
                        shadow.lock().unwrap()[off as usize..off as usize + len]
                            .copy_from_slice(&data);
                    } else {
                        let mut buf = vec![0u8; len];
                        remote.read(&mut buf, off).unwrap();
                        assert!(
                            buf == shadow.lock().unwrap()[off as usize..off as usize + len],
                            "thread {t} op {i}"
                        );
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let e = remote.epoch();
    remote.flush_since(e).unwrap();
    let s = remote.stats();
    assert_eq!(
        (s.retries, s.connection_losses, s.failed_requests),
        (0, 0, 0)
    );
    assert_eq!(s.requests, 1601, "1600 ops and a flush");
    let e = remote.read(&mut [0u8; 8], SIZE as u64 - 4).unwrap_err();
    assert!(matches!(e, ClientError::Invalid(_)), "{e}");
    stop.trigger();
}

/// Error replies are retried on the same healthy connections, counted, and then returned.
#[test]
fn error_replies_are_retried_then_returned_without_losing_the_connection() {
    let dev = Arc::new(Faulty::new(1 << 20));
    let (sock, _stats, stop, _dir) = common::serve(dev.clone(), ServerConfig::default());
    let cfg = RemoteConfig {
        retries: 2,
        backoff: Duration::from_millis(1),
        ..RemoteConfig::default()
    };
    let remote = Remote::connect(uri(&sock), cfg).unwrap();
    *dev.fail_at.lock().unwrap() = Some(8192);
    let e = remote.write(&[7u8; 4096], 8192, false).unwrap_err();
    assert!(matches!(e, ClientError::Reply(5)), "{e}");
    remote.write(&[9u8; 4096], 0, false).unwrap();
    let s = remote.stats();
    assert_eq!((s.error_replies, s.retries, s.failed_requests), (3, 2, 1));
    assert_eq!(
        s.connection_losses, 0,
        "an error reply leaves the connection up"
    );
    *dev.fail_at.lock().unwrap() = None;
    remote.write(&[7u8; 4096], 8192, false).unwrap();
    let mut b = [0u8; 4096];
    remote.read(&mut b, 8192).unwrap();
    assert_eq!(b, [7u8; 4096]);
    stop.trigger();
}

/// A stalled server: the request fails within its retries' timeouts, the connections are
/// declared dead and reopened when the server answers again, and a flush that was to cover
/// writes sent before the loss is refused.
#[test]
fn stalls_time_out_reconnect_and_refuse_flushes_across_the_loss() {
    let dev = Arc::new(Faulty::new(1 << 20));
    let (sock, _stats, stop, _dir) = common::serve(dev.clone(), ServerConfig::default());
    let cfg = RemoteConfig {
        connections: 2,
        timeout: Duration::from_millis(150),
        retries: 1,
        backoff: Duration::from_millis(1),
        ..RemoteConfig::default()
    };
    let remote = Remote::connect(uri(&sock), cfg).unwrap();
    let before = remote.epoch();
    remote.write(&[1u8; 4096], 0, false).unwrap();
    dev.stall.store(true, Relaxed);
    let e = remote.read(&mut [0u8; 4096], 4096).unwrap_err();
    assert!(matches!(e, ClientError::TimedOut(_)), "{e}");
    let s = remote.stats();
    assert_eq!((s.timeouts, s.retries, s.failed_requests), (2, 1, 1));
    assert_eq!(s.connection_losses, 2, "each stalled connection is dropped");
    dev.stall.store(false, Relaxed);
    let mut b = [0u8; 4096];
    remote.read(&mut b, 0).unwrap();
    assert_eq!(b, [1u8; 4096]);
    assert!(remote.stats().reconnects >= 1);
    let e = remote.flush_since(before).unwrap_err();
    assert!(matches!(e, ClientError::WritesMayBeLost(2)), "{e}");
    let now = remote.epoch();
    remote.write(&[1u8; 4096], 0, false).unwrap();
    remote.flush_since(now).unwrap();
    let s = remote.stats();
    assert_eq!((s.flushes, s.flushes_refused), (2, 1));
    stop.trigger();
}

/// An unreachable server is a transport error; a named export connects.
#[test]
fn unreachable_servers_fail_and_named_exports_connect() {
    let dir = tempfile::tempdir().unwrap();
    let missing = uri(&dir.path().join("none.sock"));
    let e = Remote::connect(missing, RemoteConfig::default())
        .err()
        .unwrap();
    assert!(matches!(e, ClientError::Transport(_)), "{e}");
    let dev = Arc::new(Faulty::new(1 << 20));
    let cfg = ServerConfig {
        export_name: "vol".into(),
        ..ServerConfig::default()
    };
    let (sock, _stats, stop, _dir) = common::serve(dev, cfg);
    let named: NbdUri = format!("nbd+unix:///vol?socket={}", sock.display())
        .parse()
        .unwrap();
    Remote::connect(named, RemoteConfig::default()).unwrap();
    stop.trigger();
}

/// Against qemu-nbd (a real, independent server): a named export is found and refused by
/// name, and data written through the pool is in the image file.
#[test]
fn qemu_nbd_exports_are_found_refused_and_written() {
    if !common::have("qemu-nbd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    let sock = dir.path().join("q.sock");
    let server = tiercache_testsupport::ServerProcess::start(
        std::process::Command::new("qemu-nbd")
            .args(["-f", "raw", "-t", "-e", "4", "-x", "vol", "-k"])
            .arg(&sock)
            .arg(&img)
            .stderr(std::process::Stdio::null()),
        &sock,
    );
    let at = |name: &str| -> NbdUri {
        format!("nbd+unix:///{name}?socket={}", sock.display())
            .parse()
            .unwrap()
    };
    let e = Remote::connect(at("nope"), RemoteConfig::default())
        .err()
        .unwrap();
    assert!(
        matches!(&e, ClientError::Handshake(m) if m.contains("`nope`")),
        "{e}"
    );
    let remote = Remote::connect(at("vol"), RemoteConfig::default()).unwrap();
    assert_eq!(remote.size(), 4 << 20);
    let data: Vec<u8> = (0..65536u32).map(|i| (i % 253) as u8).collect();
    remote.write(&data, 1 << 20, true).unwrap();
    let e = remote.epoch();
    remote.flush_since(e).unwrap();
    let mut back = vec![0u8; 65536];
    remote.read(&mut back, 1 << 20).unwrap();
    assert!(back == data);
    drop(remote);
    server.kill9();
    let file = std::fs::read(&img).unwrap();
    assert!(
        file[1 << 20..(1 << 20) + 65536] == data[..],
        "the data is in the image"
    );
}
