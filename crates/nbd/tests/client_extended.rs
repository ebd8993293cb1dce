//! The client's extended headers (`NBD_OPT_EXTENDED_HEADERS`): negotiated when the server
//! offers them, then 32-byte requests and every reply in extended chunks. Against this
//! crate's server (every command, error replies, requests pipelined from several threads,
//! the server's count of extended sessions), against qemu-nbd (which offers them, and sends a
//! sparse READ as hole and data chunks the client assembles), and against nbdkit 1.32
//! (which does not: the client stays compact).

mod common;

use std::io;
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::client::{Command, Connection};
use tiercache_nbd::*;
use tiercache_testsupport::ServerProcess;

const T: Duration = Duration::from_secs(10);

fn unix_uri(sock: &Path, export: &str) -> NbdUri {
    format!("nbd+unix:///{export}?socket={}", sock.display())
        .parse()
        .unwrap()
}

/// A memory device whose reads of its last 4 KiB fail (an error reply to send).
struct FailingTail(MemDevice);

impl BlockDevice for FailingTail {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        if off + buf.len() as u64 > self.size() - 4096 {
            return Err(io::Error::other("bad sector"));
        }
        self.0.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.0.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn extended_headers_with_our_server_every_command_and_errors() {
    let dev = Arc::new(FailingTail(MemDevice::new(8 << 20)));
    let (sock, stats, stop, _dir) = common::serve(dev.clone(), ServerConfig::default());
    let c = Connection::open(&unix_uri(&sock, ""), T).unwrap();
    assert!(c.extended_headers(), "our server offers extended headers");
    assert_eq!(c.info().size, 8 << 20);

    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    c.call(Command::Write, true, 12_345, data.len() as u32, &data, T)
        .unwrap();
    assert!(dev.0.snapshot()[12_345..12_345 + data.len()] == data[..]);
    // Counted before the session's first request was read.
    assert_eq!(stats.extended_headers.load(Relaxed), 1);
    let back = c
        .call(Command::Read, false, 12_345, data.len() as u32, &[], T)
        .unwrap();
    assert!(back == data, "a READ's data chunk, at the request's offset");
    c.call(Command::WriteZeroes, false, 20_000, 5000, &[], T)
        .unwrap();
    let back = c.call(Command::Read, false, 20_000, 5000, &[], T).unwrap();
    assert_eq!(back, vec![0u8; 5000]);
    c.call(Command::Flush, false, 0, 0, &[], T).unwrap();
    c.call(Command::Trim, false, 1 << 20, 4096, &[], T).unwrap();
    c.call(Command::Cache, false, 0, 65536, &[], T).unwrap();
    // An error chunk: the request fails, the connection goes on.
    let e = c
        .call(Command::Read, false, (8 << 20) - 4096, 4096, &[], T)
        .unwrap_err();
    assert!(matches!(e, ClientError::Reply(5)), "{e}");
    assert!(c.is_alive());
    // A zero-length read: a success with no data (NBD_REPLY_TYPE_NONE).
    assert_eq!(c.call(Command::Read, false, 0, 0, &[], T).unwrap(), b"");

    // Pipelined from several threads: each reply finds its request by cookie.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let c = &c;
            s.spawn(move || {
                let base = (2 << 20) + t * (256 << 10);
                let sent: Vec<_> = (0..16u64)
                    .map(|i| {
                        let d = vec![(t * 16 + i) as u8; 4096];
                        c.send(Command::Write, false, base + i * 4096, 4096, &d)
                            .unwrap()
                    })
                    .collect();
                for s in sent {
                    s.wait(T).unwrap();
                }
                let reads: Vec<_> = (0..16u64)
                    .map(|i| {
                        c.send(Command::Read, false, base + i * 4096, 4096, &[])
                            .unwrap()
                    })
                    .collect();
                for (i, r) in reads.into_iter().enumerate() {
                    assert_eq!(r.wait(T).unwrap(), vec![(t * 16 + i as u64) as u8; 4096]);
                }
            });
        }
    });
    assert_eq!(stats.protocol_errors.load(Relaxed), 0);
    drop(c);
    // The remote backend's pool speaks them too.
    let remote = Remote::connect(unix_uri(&sock, ""), RemoteConfig::default()).unwrap();
    let mut b = vec![0u8; 4096];
    remote.read(&mut b, (2 << 20) + 4096).unwrap();
    assert_eq!(b, vec![1u8; 4096], "thread 0's second block");
    assert!(stats.extended_headers.load(Relaxed) >= 2);
    stop.trigger();
}

/// A server process on a Unix socket (its errors not shown), killed when dropped.
fn start(cmd: &mut Process, sock: &Path) -> ServerProcess {
    ServerProcess::start(cmd.stderr(Stdio::null()), sock)
}

/// A 4 MiB sparse image: data (a distinct pattern) at 1 MiB + 4 KiB for 8 KiB and at 3 MiB for
/// 64 KiB; the rest holes.
fn sparse_image(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    use std::os::unix::fs::FileExt;
    let img = dir.join("disk.img");
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(4 << 20).unwrap();
    let mut whole = vec![0u8; 4 << 20];
    for (at, len) in [((1 << 20) + 4096, 8192usize), (3 << 20, 65536)] {
        let d: Vec<u8> = (0..len).map(|i| (i % 241 + 1) as u8).collect();
        f.write_all_at(&d, at).unwrap();
        whole[at as usize..at as usize + len].copy_from_slice(&d);
    }
    f.sync_all().unwrap();
    (img, whole)
}

/// qemu-nbd offers extended headers: the client takes them, assembles a READ over holes and
/// data from its chunks, writes, and gets qemu's error replies as errors.
#[test]
fn extended_headers_with_qemu_nbd() {
    if !common::have("qemu-nbd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, mut whole) = sparse_image(dir.path());
    let sock = dir.path().join("q.sock");
    let _q = start(
        Process::new("qemu-nbd")
            .args(["-f", "raw", "-t", "-e", "4", "-x", "vol", "-k"])
            .arg(&sock)
            .arg(&img),
        &sock,
    );
    let c = Connection::open(&unix_uri(&sock, "vol"), T).unwrap();
    assert!(c.extended_headers(), "qemu-nbd 10 offers extended headers");
    // Holes and data in one read: qemu answers it in several chunks.
    let back = c
        .call(Command::Read, false, 1 << 20, 1 << 20, &[], T)
        .unwrap();
    assert!(
        back[..] == whole[1 << 20..2 << 20],
        "a sparse read reassembled"
    );
    let back = c.call(Command::Read, false, 0, 4 << 20, &[], T).unwrap();
    assert!(back == whole, "the whole image");
    let d = vec![0x5au8; 10_000];
    c.call(Command::Write, true, (2 << 20) + 17, 10_000, &d, T)
        .unwrap();
    whole[(2 << 20) + 17..(2 << 20) + 17 + 10_000].copy_from_slice(&d);
    c.call(Command::WriteZeroes, false, 3 << 20, 4096, &[], T)
        .unwrap();
    whole[3 << 20..(3 << 20) + 4096].fill(0);
    c.call(Command::Flush, false, 0, 0, &[], T).unwrap();
    let back = c.call(Command::Read, false, 0, 4 << 20, &[], T).unwrap();
    assert!(back == whole, "writes and zeroes read back");
    drop(c);
    assert!(
        std::fs::read(&img).unwrap() == whole,
        "the image file holds what was written"
    );

    // A read-only export: a WRITE gets qemu's error chunk (EINVAL, "Export is read-only"),
    // with or without the payload flag; the connection goes on.
    let ro_sock = dir.path().join("ro.sock");
    let _ro = start(
        Process::new("qemu-nbd")
            .args(["-f", "raw", "-t", "-r", "-x", "vol", "-k"])
            .arg(&ro_sock)
            .arg(&img),
        &ro_sock,
    );
    let c = Connection::open(&unix_uri(&ro_sock, "vol"), T).unwrap();
    assert!(c.extended_headers() && c.info().read_only());
    let e = c.call(Command::Write, false, 0, 4, b"nope", T).unwrap_err();
    assert!(matches!(e, ClientError::Reply(22)), "EINVAL expected: {e}");
    assert!(c.is_alive());
    let back = c.call(Command::Read, false, 3 << 20, 8192, &[], T).unwrap();
    assert!(back[..] == whole[3 << 20..(3 << 20) + 8192]);
}

/// nbdkit 1.32 has no extended headers: the client asks, is refused, and stays compact.
#[test]
fn compact_headers_with_a_server_without_them() {
    if !common::have("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, whole) = sparse_image(dir.path());
    let sock = dir.path().join("k.sock");
    let _k = start(
        Process::new("nbdkit")
            .args(["-f", "-U"])
            .arg(&sock)
            .arg("file")
            .arg(&img),
        &sock,
    );
    let c = Connection::open(&unix_uri(&sock, ""), T).unwrap();
    let back = c.call(Command::Read, false, 0, 4 << 20, &[], T).unwrap();
    assert!(back == whole);
    c.call(Command::Write, true, 0, 4, b"abcd", T).unwrap();
    assert_eq!(c.call(Command::Read, false, 0, 4, &[], T).unwrap(), b"abcd");
    // Whether nbdkit offers them (1.38 and later do) or not, the session works; this
    // version's refusal is what the fallback needs.
    let offers = nbdkit_offers_extended_headers();
    assert_eq!(c.extended_headers(), offers);
}

/// Whether this nbdkit is 1.38 or later (extended headers came then).
fn nbdkit_offers_extended_headers() -> bool {
    let out = Process::new("nbdkit").arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    let mut nums = v
        .split_whitespace()
        .nth(1)
        .unwrap_or("0.0")
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    (major, minor) >= (1, 38)
}
