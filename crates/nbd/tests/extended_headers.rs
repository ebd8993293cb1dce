//! Extended headers (`NBD_OPT_EXTENDED_HEADERS`): 32-byte requests with 64-bit lengths,
//! every reply an extended chunk. On the wire byte by byte (negotiation, a WRITE with its
//! payload length, a READ's data chunk naming the request's offset, a success with no data as
//! `NBD_REPLY_TYPE_NONE`, an error chunk, a block status of more than 4 GiB in one 64-bit
//! extent, a WRITE's payload taken with or without `NBD_CMD_FLAG_PAYLOAD_LEN`, one too long
//! ending the connection), and with qemu,
//! which negotiates them when offered: qemu-io writes and reads back verified and
//! `qemu-img map` reads the holes of a 6 GiB sparse file through them.
mod common;

use common::wire::REP_ACK;

use common::serve;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, FileDevice, MemDevice};
use tiercache_nbd::ServerConfig;

const ERR_EXT_HEADER_REQD: u32 = (1 << 31) + 10;
const PAYLOAD_LEN: u16 = 1 << 5;

/// One option; the types of its replies up to the final one.
fn option(s: &mut UnixStream, opt: u32, data: &[u8]) -> Vec<u32> {
    common::wire::exchange(s, opt, data)
        .into_iter()
        .map(|(typ, _)| typ)
        .collect()
}

/// Connected with extended headers (and `base:allocation` selected) in transmission.
fn connect(sock: &std::path::Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    assert_eq!(
        option(&mut s, 11, &[7]),
        vec![(1 << 31) + 3],
        "data: INVALID"
    );
    assert_eq!(option(&mut s, 11, &[]), vec![REP_ACK]);
    // Structured replies after extended headers: the protocol's EXT_HEADER_REQD.
    assert_eq!(option(&mut s, 8, &[]), vec![ERR_EXT_HEADER_REQD]);
    let q = b"base:allocation";
    let mut m = 0u32.to_be_bytes().to_vec();
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(&(q.len() as u32).to_be_bytes());
    m.extend_from_slice(q);
    assert_eq!(option(&mut s, 10, &m), vec![4, REP_ACK]);
    assert_eq!(
        option(&mut s, 7, &[0, 0, 0, 0, 0, 0]).last(),
        Some(&REP_ACK)
    );
    s
}

fn request(s: &mut UnixStream, typ: u16, flags: u16, cookie: u64, offset: u64, len: u64) {
    let mut r = 0x21e4_1c71u32.to_be_bytes().to_vec();
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&typ.to_be_bytes());
    r.extend_from_slice(&cookie.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    s.write_all(&r).unwrap();
}

/// An extended reply: (flags, type, offset, payload).
fn reply(s: &mut UnixStream, cookie: u64) -> (u16, u16, u64, Vec<u8>) {
    let mut h = [0u8; 32];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x6e8a_278c);
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), cookie);
    let len = u64::from_be_bytes(h[24..32].try_into().unwrap());
    let mut d = vec![0u8; len as usize];
    s.read_exact(&mut d).unwrap();
    (
        u16::from_be_bytes([h[4], h[5]]),
        u16::from_be_bytes([h[6], h[7]]),
        u64::from_be_bytes(h[16..24].try_into().unwrap()),
        d,
    )
}

#[test]
fn extended_requests_and_replies_on_the_wire() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    // 6 GiB, sparse: a block status reply longer than 32 bits.
    let dev = Arc::new(FileDevice::open(&dir.path().join("big.img"), 6 << 30).unwrap());
    dev.write_at(&[5; 4096], 1 << 20, false).unwrap();
    let (sock, stats, _stop, _d) = serve(dev.clone(), ServerConfig::default());
    let mut s = connect(&sock);
    // WRITE: the payload's length, flagged; answered with NONE naming the offset.
    request(&mut s, 1, PAYLOAD_LEN, 1, 8192, 4096);
    s.write_all(&[0xab; 4096]).unwrap();
    assert_eq!(reply(&mut s, 1), (1, 0, 8192, vec![]));
    assert_eq!(stats.extended_headers.load(Relaxed), 1);
    // READ: one data chunk, its payload the offset then the bytes.
    request(&mut s, 0, 0, 2, 8192, 4096);
    let (flags, typ, off, d) = reply(&mut s, 2);
    assert_eq!((flags, typ, off), (1, 1, 8192));
    assert_eq!(&d[..8], &8192u64.to_be_bytes());
    assert!(d[8..] == [0xab; 4096]);
    // Beyond the end: an error chunk (EINVAL).
    request(&mut s, 0, 0, 3, 6 << 30, 4096);
    let (flags, typ, _, d) = reply(&mut s, 3);
    assert_eq!((flags, typ), (1, (1 << 15) + 1));
    assert_eq!(&d[..4], &22u32.to_be_bytes());
    // Block status of everything past the data (5+ GiB) in one request: 64-bit extents.
    let from = 2 << 20;
    request(&mut s, 7, 0, 4, from, (6 << 30) - from);
    let (flags, typ, off, d) = reply(&mut s, 4);
    assert_eq!((flags, typ, off), (1, 6, from));
    assert_eq!(&d[..8], &[0, 0, 0, 1, 0, 0, 0, 1], "context 1, one extent");
    assert_eq!(
        u64::from_be_bytes(d[8..16].try_into().unwrap()),
        (6 << 30) - from
    );
    assert_eq!(
        u64::from_be_bytes(d[16..24].try_into().unwrap()),
        3,
        "hole, zero"
    );
    // A payload on a command that takes none is read past and refused; the connection goes on.
    request(&mut s, 3, PAYLOAD_LEN, 5, 0, 16);
    s.write_all(&[0; 16]).unwrap();
    assert_eq!(reply(&mut s, 5).1, (1 << 15) + 1);
    request(&mut s, 3, 0, 6, 0, 0);
    assert_eq!(reply(&mut s, 6), (1, 0, 0, vec![]));
    // A WRITE without the payload flag (as qemu 10 sends them) still carries its payload.
    request(&mut s, 1, 0, 7, 0, 4096);
    s.write_all(&[0xcd; 4096]).unwrap();
    assert_eq!(reply(&mut s, 7), (1, 0, 0, vec![]));
    request(&mut s, 0, 0, 8, 0, 4096);
    assert!(reply(&mut s, 8).3[8..] == [0xcd; 4096]);
    // A payload longer than the server takes: the connection ends.
    let before = stats.protocol_errors.load(Relaxed);
    request(&mut s, 1, PAYLOAD_LEN, 9, 0, 64 << 20);
    let mut b = [0u8; 1];
    assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
    assert_eq!(stats.protocol_errors.load(Relaxed), before + 1);
}

#[test]
fn qemu_negotiates_extended_headers_and_reads_back_verified() {
    if !common::have("qemu-io") || !common::have("qemu-img") {
        return;
    }
    let dev = Arc::new(MemDevice::new(64 << 20));
    let (sock, stats, _stop, _d) = serve(dev, ServerConfig::default());
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    for cmd in [
        "write -P 0x33 1M 256k",
        "read -P 0x33 1M 256k",
        "read -P 0 0 64k",
    ] {
        let o = Command::new("qemu-io")
            .args(["-f", "raw", "-c", cmd, &uri])
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && !out.contains("fail") && !out.contains("error"),
            "{cmd}: {out}"
        );
    }
    assert_eq!(
        stats.extended_headers.load(Relaxed),
        3,
        "qemu-io did not negotiate extended headers"
    );
    // qemu-img map asks for block status (a memory device: all data) through them.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let dev = Arc::new(FileDevice::open(&dir.path().join("big.img"), 6 << 30).unwrap());
    dev.write_at(&[5; 65536], 5 << 30, false).unwrap();
    let (sock, stats, _stop, _d) = serve(dev, ServerConfig::default());
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let o = Command::new("qemu-img")
        .args(["map", "--output=json", "-f", "raw", &uri])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(stats.extended_headers.load(Relaxed), 1, "{out}");
    let data: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("\"data\": true"))
        .collect();
    assert_eq!(data.len(), 1, "{out}");
    assert!(
        data[0].contains(&format!("\"start\": {}", 5u64 << 30)),
        "{out}"
    );
}
