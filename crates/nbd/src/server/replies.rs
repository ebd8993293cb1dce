//! The connection's reply stream: simple replies, or, once the client negotiated
//! `NBD_OPT_STRUCTURED_REPLY`, structured chunks for every READ (its data as one
//! `NBD_REPLY_TYPE_OFFSET_DATA` chunk, its error as `NBD_REPLY_TYPE_ERROR`), as the protocol
//! requires; other commands keep simple replies, which it allows.

use super::*;
use std::collections::HashMap;

/// The writer replies go through, and what structured replies need to know.
pub(super) struct Replies<W: Write> {
    out: BufWriter<W>,
    /// Structured replies were negotiated.
    structured: bool,
    /// Offsets of the READs not yet answered, by handle (structured replies only: a data
    /// chunk names its offset, and the paths that answer reads do not all carry it).
    reads: HashMap<[u8; 8], u64>,
}

impl<W: Write> Replies<W> {
    pub(super) fn new(out: BufWriter<W>) -> Self {
        Self {
            out,
            structured: false,
            reads: HashMap::new(),
        }
    }

    /// From now on, READs are answered in structured chunks.
    pub(super) fn set_structured(&mut self, on: bool) {
        self.structured = on;
    }

    /// Whether READs must be registered with [`read_started`](Self::read_started).
    pub(super) fn structured(&self) -> bool {
        self.structured
    }

    /// A READ of `offset` under `handle` was taken: its reply will be structured.
    pub(super) fn read_taken(&mut self, handle: [u8; 8], offset: u64) {
        if self.structured {
            self.reads.insert(handle, offset);
        }
    }
}

impl<W: Write> Write for Replies<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

const STRUCTURED_MAGIC: u32 = 0x668e_33ef;
const REPLY_FLAG_DONE: u16 = 1;
const REPLY_TYPE_OFFSET_DATA: u16 = 1;
const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
const REPLY_TYPE_BLOCK_STATUS: u16 = 5;

/// Answers a BLOCK_STATUS: one `NBD_REPLY_TYPE_BLOCK_STATUS` chunk per context (its id and
/// extents), the last one flagged done. Extent lengths fit 32 bits: none is longer than the
/// request's 32-bit length.
pub(super) fn block_status<W: Write>(
    w: &Mutex<Replies<W>>,
    handle: &[u8; 8],
    chunks: &[(u32, Vec<tiercache_blockdev::Extent>)],
    more: bool,
) -> io::Result<()> {
    let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
    for (i, (id, extents)) in chunks.iter().enumerate() {
        let done = if i + 1 == chunks.len() {
            REPLY_FLAG_DONE
        } else {
            0
        };
        let mut c = Vec::with_capacity(24 + 8 * extents.len());
        c.extend_from_slice(&STRUCTURED_MAGIC.to_be_bytes());
        c.extend_from_slice(&done.to_be_bytes());
        c.extend_from_slice(&REPLY_TYPE_BLOCK_STATUS.to_be_bytes());
        c.extend_from_slice(handle);
        c.extend_from_slice(&((4 + 8 * extents.len()) as u32).to_be_bytes());
        c.extend_from_slice(&id.to_be_bytes());
        for e in extents {
            c.extend_from_slice(&(e.len.min(u64::from(u32::MAX)) as u32).to_be_bytes());
            c.extend_from_slice(&e.flags.to_be_bytes());
        }
        w.write_all(&c)?;
    }
    if !more {
        w.flush()?;
    }
    Ok(())
}

/// Sends one reply: `data` follows a successful READ's. `more`: requests wait in the
/// reader's buffer (replies batch until they are taken).
pub(super) fn reply<W: Write>(
    w: &Mutex<Replies<W>>,
    handle: &[u8; 8],
    err: u32,
    data: &[u8],
    more: bool,
) -> io::Result<()> {
    let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
    let read_offset = if w.structured {
        w.reads.remove(handle)
    } else {
        None
    };
    match read_offset {
        Some(offset) => {
            let (typ, len) = if err == 0 {
                (REPLY_TYPE_OFFSET_DATA, 8 + data.len())
            } else {
                (REPLY_TYPE_ERROR, 6)
            };
            let mut h = [0u8; 20];
            h[0..4].copy_from_slice(&STRUCTURED_MAGIC.to_be_bytes());
            h[4..6].copy_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
            h[6..8].copy_from_slice(&typ.to_be_bytes());
            h[8..16].copy_from_slice(handle);
            h[16..20].copy_from_slice(&(len as u32).to_be_bytes());
            w.write_all(&h)?;
            if err == 0 {
                w.write_all(&offset.to_be_bytes())?;
                w.write_all(data)?;
            } else {
                // The error, and an empty message.
                let mut e = [0u8; 6];
                e[0..4].copy_from_slice(&err.to_be_bytes());
                w.write_all(&e)?;
            }
        }
        None => {
            let mut h = [0u8; 16];
            h[0..4].copy_from_slice(&SIMPLE_MAGIC.to_be_bytes());
            h[4..8].copy_from_slice(&err.to_be_bytes());
            h[8..16].copy_from_slice(handle);
            w.write_all(&h)?;
            if err == 0 {
                w.write_all(data)?;
            }
        }
    }
    if !more {
        w.flush()?;
    }
    Ok(())
}
