//! The connection's reply stream: simple replies, or, once the client negotiated
//! `NBD_OPT_STRUCTURED_REPLY`, structured chunks for every READ (its data as one
//! `NBD_REPLY_TYPE_OFFSET_DATA` chunk, its error as `NBD_REPLY_TYPE_ERROR`), as the protocol
//! requires; other commands keep simple replies, which it allows. With extended headers
//! (`NBD_OPT_EXTENDED_HEADERS`) every reply is an extended chunk (32-byte header naming the
//! request's offset; `NBD_REPLY_TYPE_NONE` for a success without data), as the extension
//! requires.

use super::*;
use std::collections::HashMap;

/// The writer replies go through, and what structured replies need to know.
pub(super) struct Replies<W: Write> {
    out: BufWriter<W>,
    /// Structured replies were negotiated.
    structured: bool,
    /// Extended headers were negotiated.
    extended: bool,
    /// Offsets of the requests not yet answered that need one in their reply, by handle:
    /// READs with structured replies (a data chunk names its offset), every request with
    /// extended headers (each reply header does). The paths that answer do not all carry it.
    reads: HashMap<[u8; 8], u64>,
}

impl<W: Write> Replies<W> {
    pub(super) fn new(out: BufWriter<W>) -> Self {
        Self {
            out,
            structured: false,
            extended: false,
            reads: HashMap::new(),
        }
    }

    /// From now on, READs are answered in structured chunks (`structured`), or every reply
    /// is an extended chunk (`extended`).
    pub(super) fn set_mode(&mut self, structured: bool, extended: bool) {
        self.structured = structured || extended;
        self.extended = extended;
    }

    /// Which requests must be registered with [`taken`](Self::taken): (READs, all).
    pub(super) fn registers(&self) -> (bool, bool) {
        (self.structured, self.extended)
    }

    /// A request of `offset` under `handle` was taken (a READ, or any with extended headers):
    /// its reply names the offset.
    pub(super) fn taken(&mut self, handle: [u8; 8], offset: u64) {
        if self.structured {
            self.reads.insert(handle, offset);
        }
    }

    /// Writes an extended reply header.
    fn extended_header(
        &mut self,
        flags: u16,
        typ: u16,
        handle: &[u8; 8],
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let mut h = [0u8; 32];
        h[0..4].copy_from_slice(&EXT_REPLY_MAGIC.to_be_bytes());
        h[4..6].copy_from_slice(&flags.to_be_bytes());
        h[6..8].copy_from_slice(&typ.to_be_bytes());
        h[8..16].copy_from_slice(handle);
        h[16..24].copy_from_slice(&offset.to_be_bytes());
        h[24..32].copy_from_slice(&len.to_be_bytes());
        self.out.write_all(&h)
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

const EXT_REPLY_MAGIC: u32 = 0x6e8a_278c;
const REPLY_TYPE_BLOCK_STATUS_EXT: u16 = 6;
const REPLY_TYPE_OFFSET_DATA: u16 = 1;
const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// Answers a BLOCK_STATUS at `offset`: one `NBD_REPLY_TYPE_BLOCK_STATUS` chunk per context
/// (its id and extents; `_EXT` with 64-bit lengths and flags under extended headers), the
/// last one flagged done. In the compact form extent lengths fit 32 bits: none is longer
/// than the request's 32-bit length.
pub(super) fn block_status<W: Write>(
    w: &Mutex<Replies<W>>,
    handle: &[u8; 8],
    offset: u64,
    chunks: &[(u32, Vec<tiercache_blockdev::Extent>)],
    more: bool,
) -> io::Result<()> {
    let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
    w.reads.remove(handle);
    for (i, (id, extents)) in chunks.iter().enumerate() {
        let done = if i + 1 == chunks.len() {
            REPLY_FLAG_DONE
        } else {
            0
        };
        if w.extended {
            let len = 8 + 16 * extents.len() as u64;
            w.extended_header(done, REPLY_TYPE_BLOCK_STATUS_EXT, handle, offset, len)?;
            let mut c = Vec::with_capacity(len as usize);
            c.extend_from_slice(&id.to_be_bytes());
            c.extend_from_slice(&(extents.len() as u32).to_be_bytes());
            for e in extents {
                c.extend_from_slice(&e.len.to_be_bytes());
                c.extend_from_slice(&u64::from(e.flags).to_be_bytes());
            }
            w.write_all(&c)?;
            continue;
        }
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
    if w.extended {
        // Every reply is a chunk naming the request's offset: data, none, or an error.
        let offset = read_offset.unwrap_or(0);
        if err != 0 {
            w.extended_header(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, handle, offset, 6)?;
            let mut e = [0u8; 6];
            e[0..4].copy_from_slice(&err.to_be_bytes());
            w.write_all(&e)?;
        } else if data.is_empty() {
            w.extended_header(REPLY_FLAG_DONE, REPLY_TYPE_NONE, handle, offset, 0)?;
        } else {
            let len = 8 + data.len() as u64;
            w.extended_header(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, handle, offset, len)?;
            w.write_all(&offset.to_be_bytes())?;
            w.write_all(data)?;
        }
        if !more {
            w.flush()?;
        }
        return Ok(());
    }
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
