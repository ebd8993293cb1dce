//! Metadata contexts and block status on the wire, byte by byte: what the protocol document
//! asks of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` (structured replies
//! first, malformed lengths refused, unknown namespaces ignored), of `NBD_CMD_BLOCK_STATUS` (one chunk per
//! context, the last one done; EINVAL without a context or beyond the end), and of fast zero
//! (refused with ENOTSUP and nothing changed where zeroing is no faster than writing; done
//! where it is).
mod common;

use common::wire::REP_ACK;

use common::serve;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::ServerConfig;

const OPT_GO: u32 = 7;
const OPT_STRUCTURED_REPLY: u32 = 8;
const OPT_LIST: u32 = 9;
const OPT_SET: u32 = 10;
const REP_META_CONTEXT: u32 = 4;
const ERR_INVALID: u32 = (1 << 31) + 3;
const CMD_WRITE_ZEROES: u16 = 6;
const CMD_BLOCK_STATUS: u16 = 7;
const FLAG_FAST_ZERO: u16 = 1 << 4;
const FLAG_REQ_ONE: u16 = 1 << 3;
const EINVAL: u32 = 22;
const ENOTSUP: u32 = 95;

fn greet(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s
}

/// One option; its replies' (type, data) up to the final one.
fn option(s: &mut UnixStream, opt: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    common::wire::exchange(s, opt, data)
}

/// A meta-context option's data: export name and queries.
fn meta(export: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = (export.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend_from_slice(&(q.len() as u32).to_be_bytes());
        d.extend_from_slice(q.as_bytes());
    }
    d
}

/// The `(id, name)` of META_CONTEXT replies, and the final reply's type.
fn contexts(r: &[(u32, Vec<u8>)]) -> (Vec<(u32, String)>, u32) {
    let listed = r
        .iter()
        .filter(|(t, _)| *t == REP_META_CONTEXT)
        .map(|(_, d)| {
            (
                u32::from_be_bytes(d[0..4].try_into().unwrap()),
                String::from_utf8(d[4..].to_vec()).unwrap(),
            )
        })
        .collect();
    (listed, r.last().unwrap().0)
}

fn go(s: &mut UnixStream, export: &str) {
    let mut d = (export.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    assert_eq!(option(s, OPT_GO, &d).last().unwrap().0, REP_ACK);
}

fn request(s: &mut UnixStream, typ: u16, flags: u16, handle: u64, offset: u64, len: u32) {
    let mut r = 0x2560_9513u32.to_be_bytes().to_vec();
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&typ.to_be_bytes());
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    s.write_all(&r).unwrap();
}

/// A simple reply's error.
fn simple(s: &mut UnixStream, handle: u64) -> u32 {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x6744_6698);
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), handle);
    u32::from_be_bytes(h[4..8].try_into().unwrap())
}

/// A structured chunk: (flags, type, payload).
fn chunk(s: &mut UnixStream, handle: u64) -> (u16, u16, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x668e_33ef);
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), handle);
    let mut d = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
    s.read_exact(&mut d).unwrap();
    (
        u16::from_be_bytes([h[4], h[5]]),
        u16::from_be_bytes([h[6], h[7]]),
        d,
    )
}

#[test]
fn contexts_are_negotiated_as_the_protocol_says_and_block_status_answers_them() {
    let dev = Arc::new(MemDevice::new(1 << 20));
    let cfg = ServerConfig {
        export_name: "vol".into(),
        ..ServerConfig::default()
    };
    let (sock, _stats, _stop, _d) = serve(dev, cfg);
    let mut s = greet(&sock);
    // Before structured replies: refused.
    let r = option(&mut s, OPT_SET, &meta("vol", &["base:allocation"]));
    assert_eq!(r, vec![(ERR_INVALID, vec![])]);
    assert_eq!(
        option(&mut s, OPT_STRUCTURED_REPLY, &[]),
        vec![(REP_ACK, vec![])]
    );
    // A query's length past the option's data; a count the data cannot hold.
    let mut bad = meta("vol", &["base:allocation"]);
    bad.truncate(bad.len() - 1);
    assert_eq!(option(&mut s, OPT_SET, &bad)[0].0, ERR_INVALID);
    let mut bad = meta("vol", &[]);
    bad[7..11].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(option(&mut s, OPT_LIST, &bad)[0].0, ERR_INVALID);
    // LIST of everything: a plain device has allocation only (it is no cache), id 0.
    let (listed, last) = contexts(&option(&mut s, OPT_LIST, &meta("vol", &[])));
    assert_eq!(
        (listed, last),
        (vec![(0, "base:allocation".into())], REP_ACK)
    );
    // The namespace as a wildcard in LIST, not in SET; other namespaces ignored.
    let (listed, _) = contexts(&option(&mut s, OPT_LIST, &meta("vol", &["base:"])));
    assert_eq!(listed.len(), 1);
    let (set, last) = contexts(&option(&mut s, OPT_SET, &meta("vol", &["base:", "qemu:x"])));
    assert_eq!((set.len(), last), (0, REP_ACK));
    let r = option(
        &mut s,
        OPT_SET,
        &meta("vol", &["x-foo:bar", "base:allocation"]),
    );
    let (set, last) = contexts(&r);
    assert_eq!(
        (set.clone(), last),
        (vec![(1, "base:allocation".into())], REP_ACK)
    );
    go(&mut s, "vol");
    // One chunk (this context's), done, one extent of data covering the request.
    request(&mut s, CMD_BLOCK_STATUS, 0, 9, 4096, 65536);
    let (flags, typ, d) = chunk(&mut s, 9);
    assert_eq!((flags, typ), (1, 5));
    assert_eq!(
        d,
        [1u32, 65536, 0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect::<Vec<_>>()
    );
    request(&mut s, CMD_BLOCK_STATUS, FLAG_REQ_ONE, 10, 0, 4096);
    assert_eq!(chunk(&mut s, 10).2.len(), 12);
    // Beyond the end; of no bytes.
    request(&mut s, CMD_BLOCK_STATUS, 0, 11, (1 << 20) - 10, 4096);
    assert_eq!(simple(&mut s, 11), EINVAL);
    request(&mut s, CMD_BLOCK_STATUS, 0, 12, 0, 0);
    assert_eq!(simple(&mut s, 12), EINVAL);

    // A connection that selected no context gets EINVAL.
    let mut s = greet(&sock);
    option(&mut s, OPT_STRUCTURED_REPLY, &[]);
    go(&mut s, "vol");
    request(&mut s, CMD_BLOCK_STATUS, 0, 13, 0, 4096);
    assert_eq!(simple(&mut s, 13), EINVAL);
}

/// A device that keeps the default: zeroing is no faster than writing.
struct SlowZeroes(MemDevice);

impl BlockDevice for SlowZeroes {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.0.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
        self.0.write_at(data, off, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_fast_zero_is_refused_where_zeroing_is_slow_and_done_where_it_is_fast() {
    let slow = Arc::new(SlowZeroes(MemDevice::from_bytes(vec![9; 1 << 16])));
    let (sock, _st, _stop, _d) = serve(slow.clone(), ServerConfig::default());
    let mut s = greet(&sock);
    go(&mut s, "");
    request(&mut s, CMD_WRITE_ZEROES, FLAG_FAST_ZERO, 1, 0, 4096);
    assert_eq!(simple(&mut s, 1), ENOTSUP);
    assert_eq!(
        slow.0.snapshot(),
        vec![9; 1 << 16],
        "a refused fast zero changes nothing"
    );
    request(&mut s, CMD_WRITE_ZEROES, 0, 2, 0, 4096);
    assert_eq!(simple(&mut s, 2), 0);
    assert_eq!(
        &slow.0.snapshot()[..4097],
        &[&[0; 4096][..], &[9]].concat()[..]
    );

    let fast = Arc::new(MemDevice::from_bytes(vec![9; 1 << 16]));
    let (sock, _st, _stop, _d) = serve(fast.clone(), ServerConfig::default());
    let mut s = greet(&sock);
    go(&mut s, "");
    request(&mut s, CMD_WRITE_ZEROES, FLAG_FAST_ZERO, 3, 4096, 4096);
    assert_eq!(simple(&mut s, 3), 0);
    assert_eq!(
        &fast.snapshot()[4095..8193],
        &[&[9][..], &[0; 4096], &[9]].concat()[..]
    );
}
