//! The connection's reader: replies matched to the requests waiting on them. Simple replies
//! (16 bytes, then a READ's data) on a compact connection; with extended headers
//! (`NBD_OPT_EXTENDED_HEADERS`) every reply is a run of 32-byte-header chunks ending with one
//! flagged done: a READ's data may come in several `NBD_REPLY_TYPE_OFFSET_DATA` and
//! `NBD_REPLY_TYPE_OFFSET_HOLE` chunks (qemu-nbd sends a sparse range that way), interleaved
//! with other requests' chunks, and is assembled here before its waiter sees it.
//!
//! A server that breaks the protocol (a reply to nothing asked, a chunk outside its request,
//! a READ not covered exactly, a chunk longer than its request could justify) ends the
//! connection: its stream can no longer be trusted. Memory is bounded by the requests the
//! client sent, never by a length the server wrote.

use super::*;
use std::collections::BTreeMap;

/// Extended reply header magic (`NBD_EXTENDED_REPLY_MAGIC`).
const EXT_REPLY_MAGIC: u32 = 0x6e8a_278c;
const REPLY_TYPE_OFFSET_DATA: u16 = 1;
const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Error chunk types have this bit set.
const REPLY_TYPE_ERR_BIT: u16 = 1 << 15;
/// Longest error chunk taken: error, message length, a message of the protocol's longest
/// string (4096 bytes) and `NBD_REPLY_TYPE_ERROR_OFFSET`'s offset.
const MAX_ERROR_CHUNK: u64 = 4 + 2 + 4096 + 8;

/// A request whose reply is awaited.
pub(super) struct Waiting {
    /// Bytes of data that follow a successful reply (READ).
    pub(super) data_len: usize,
    /// The request's offset: where a READ's data chunks must land.
    pub(super) offset: u64,
    pub(super) tx: mpsc::SyncSender<Reply>,
}

/// A request some of whose reply chunks came (extended headers), not yet flagged done.
struct Assembling {
    waiting: Waiting,
    /// A READ's data so far (holes and bytes not yet sent are zeroes).
    data: Vec<u8>,
    /// Bytes of `data` the chunks covered.
    covered: u64,
    /// The ranges covered (start to end), so that an overlap is caught: the protocol forbids
    /// it, and the bytes it hides would be missing from the read.
    ranges: BTreeMap<u64, u64>,
    /// The first error chunk's error.
    error: Option<u32>,
}

/// Why the reader stopped: the stream is broken (the named violation), or the socket ended.
enum Broken {
    Protocol(String),
    Io,
}

impl From<io::Error> for Broken {
    fn from(_: io::Error) -> Self {
        Broken::Io
    }
}

/// Reads replies until the connection ends or breaks, then fails every request still waiting.
pub(super) fn reader_loop(mut s: Box<dyn Socket>, shared: &Shared, extended: bool) {
    let mut assembling = HashMap::new();
    let broken = loop {
        let step = if extended {
            extended_reply(&mut *s, shared, &mut assembling)
        } else {
            simple_reply(&mut *s, shared)
        };
        if let Err(b) = step {
            break b;
        }
    };
    let why = match broken {
        Broken::Protocol(m) => Some(m),
        Broken::Io => None,
    };
    for (_, a) in assembling.drain() {
        let _ = a.waiting.tx.try_send(Err(match &why {
            Some(m) => ClientError::Protocol(m.clone()),
            None => ClientError::Closed,
        }));
    }
    shared.kill();
    s.close();
}

/// The waiter of `handle`, taken from the pending requests.
fn take_waiting(shared: &Shared, handle: u64) -> Result<Waiting, Broken> {
    shared
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&handle)
        // A reply to nothing we asked (or to a request already given up on): the stream can
        // no longer be trusted.
        .ok_or_else(|| Broken::Protocol(format!("a reply to handle {handle}, not in flight")))
}

/// One simple reply, handed to its waiter.
fn simple_reply(s: &mut dyn Socket, shared: &Shared) -> Result<(), Broken> {
    let mut hdr = [0u8; 16];
    read_full(s, &mut hdr, shared)?;
    let magic = u32::from_be_bytes(hdr[0..4].try_into().expect("4 bytes"));
    if magic != SIMPLE_MAGIC {
        // Structured and extended replies were not negotiated; anything else is garbage too.
        return Err(Broken::Protocol(format!("reply magic {magic:#x}")));
    }
    let errno = u32::from_be_bytes(hdr[4..8].try_into().expect("4 bytes"));
    let handle = u64::from_be_bytes(hdr[8..16].try_into().expect("8 bytes"));
    let w = take_waiting(shared, handle)?;
    let reply = if errno != 0 {
        Err(ClientError::Reply(errno))
    } else {
        let mut data = vec![0u8; w.data_len];
        if let Err(e) = read_full(s, &mut data, shared) {
            let _ = w.tx.try_send(Err(ClientError::Closed));
            return Err(e.into());
        }
        Ok(data)
    };
    let _ = w.tx.try_send(reply);
    Ok(())
}

/// One extended reply chunk, added to its request's reply; the reply goes to its waiter once
/// a chunk is flagged done.
fn extended_reply(
    s: &mut dyn Socket,
    shared: &Shared,
    assembling: &mut HashMap<u64, Assembling>,
) -> Result<(), Broken> {
    let proto = |m: String| Err(Broken::Protocol(m));
    let mut hdr = [0u8; 32];
    read_full(s, &mut hdr, shared)?;
    let magic = u32::from_be_bytes(hdr[0..4].try_into().expect("4 bytes"));
    if magic != EXT_REPLY_MAGIC {
        return proto(format!(
            "reply magic {magic:#x} on a connection with extended headers"
        ));
    }
    let flags = u16::from_be_bytes([hdr[4], hdr[5]]);
    let typ = u16::from_be_bytes([hdr[6], hdr[7]]);
    let handle = u64::from_be_bytes(hdr[8..16].try_into().expect("8 bytes"));
    let len = u64::from_be_bytes(hdr[24..32].try_into().expect("8 bytes"));
    let a = match assembling.entry(handle) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
            let waiting = take_waiting(shared, handle)?;
            v.insert(Assembling {
                data: vec![0u8; waiting.data_len],
                waiting,
                covered: 0,
                ranges: BTreeMap::new(),
                error: None,
            })
        }
    };
    let read_len = a.data.len() as u64;
    let is_read = a.waiting.data_len > 0;
    match typ {
        REPLY_TYPE_NONE if len == 0 => {}
        REPLY_TYPE_OFFSET_DATA if is_read && len > 8 && len - 8 <= read_len - a.covered => {
            let mut at = [0u8; 8];
            read_full(s, &mut at, shared)?;
            let n = len - 8;
            let start = chunk_start(u64::from_be_bytes(at), n, a)?;
            read_full(s, &mut a.data[start..start + n as usize], shared)?;
            a.covered += n;
        }
        REPLY_TYPE_OFFSET_HOLE if is_read && len == 12 => {
            let mut b = [0u8; 12];
            read_full(s, &mut b, shared)?;
            let at = u64::from_be_bytes(b[0..8].try_into().expect("8 bytes"));
            let n = u64::from(u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")));
            if n == 0 || n > read_len - a.covered {
                return proto(format!("a hole of {n} bytes in a read of {read_len}"));
            }
            let start = chunk_start(at, n, a)?;
            a.data[start..start + n as usize].fill(0);
            a.covered += n;
        }
        t if t & REPLY_TYPE_ERR_BIT != 0 && (6..=MAX_ERROR_CHUNK).contains(&len) => {
            let mut b = vec![0u8; len as usize];
            read_full(s, &mut b, shared)?;
            let errno = u32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
            let msg_len = u64::from(u16::from_be_bytes([b[4], b[5]]));
            if errno == 0 || 6 + msg_len > len {
                return proto(format!(
                    "an error chunk of {len} bytes with error {errno} and a {msg_len}-byte message"
                ));
            }
            a.error.get_or_insert(errno);
        }
        t => {
            return proto(format!(
                "a reply chunk of type {t} and {len} bytes to a request of {read_len} bytes"
            ))
        }
    }
    if flags & REPLY_FLAG_DONE == 0 {
        return Ok(());
    }
    let a = assembling.remove(&handle).expect("just used");
    let reply = match a.error {
        Some(errno) => Err(ClientError::Reply(errno)),
        None if a.covered != read_len => {
            let m = format!(
                "a read reply covering {} of its {read_len} bytes",
                a.covered
            );
            let _ = a.waiting.tx.try_send(Err(ClientError::Protocol(m.clone())));
            return proto(m);
        }
        None => Ok(a.data),
    };
    let _ = a.waiting.tx.try_send(reply);
    Ok(())
}

/// Where a chunk of `n` bytes at absolute offset `at` lands in its READ's buffer (the range
/// then counted as covered): it must lie within the request and overlap no earlier chunk.
fn chunk_start(at: u64, n: u64, a: &mut Assembling) -> Result<usize, Broken> {
    let read_len = a.data.len() as u64;
    let rel = match at.checked_sub(a.waiting.offset) {
        Some(rel) if rel.checked_add(n).is_some_and(|end| end <= read_len) => rel,
        _ => {
            return Err(Broken::Protocol(format!(
                "a chunk of {n} bytes at {at} outside the read of {read_len} at {}",
                a.waiting.offset
            )))
        }
    };
    let end = rel + n;
    let before = a
        .ranges
        .range(..end)
        .next_back()
        .is_some_and(|(_, &e)| e > rel);
    if before {
        return Err(Broken::Protocol(format!(
            "a chunk of {n} bytes at {at} overlapping another of the same read"
        )));
    }
    a.ranges.insert(rel, end);
    Ok(rel as usize)
}

/// `read_exact` that rides out socket read timeouts while the connection is alive and idle.
fn read_full(s: &mut dyn Socket, buf: &mut [u8], shared: &Shared) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if !shared.alive.load(Relaxed) {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
