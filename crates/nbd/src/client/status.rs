//! A connection for block status only: structured replies and the `base:allocation` context
//! negotiated, then one `NBD_CMD_BLOCK_STATUS` at a time, answered in order. Kept apart from
//! the data connections, whose reader speaks simple replies: a cache asks its remote backend
//! for its holes here (so that the cache's own `base:allocation` reports them).

use super::*;
use tiercache_blockdev::extent::{Extent, Extents};

/// Largest block-status chunk taken (the protocol's recommended most descriptors, 2^20, and
/// the context id).
const MAX_STATUS_CHUNK: u32 = 4 + 8 * (1 << 20);

/// A connection that asks for block status.
pub struct StatusConnection {
    s: Mutex<Box<dyn Socket>>,
    /// The id the server gave `base:allocation`.
    context: u32,
    info: ExportInfo,
    next_handle: AtomicU64,
}

impl StatusConnection {
    /// Connects to `uri` (TLS as it says) and negotiates structured replies and
    /// `base:allocation`: `Ok(None)` when the server offers either not (it has no holes to
    /// tell).
    pub fn open(uri: &NbdUri, timeout: Duration) -> Result<Option<Self>, ClientError> {
        let tls = uri
            .client_tls()
            .map_err(|e| ClientError::Handshake(e.to_string()))?;
        let mut s = open_socket(&uri.target, timeout)?;
        let no_zeroes = greet(&mut *s)?;
        if let Some(tls) = &tls {
            s = start_tls(s, tls)?;
        }
        send_option(&mut *s, OPT_STRUCTURED_REPLY, &[])?;
        if option_reply(&mut *s, OPT_STRUCTURED_REPLY)?.0 != REP_ACK {
            return Ok(None);
        }
        let query = b"base:allocation";
        let mut d = (uri.export.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(uri.export.as_bytes());
        d.extend_from_slice(&1u32.to_be_bytes());
        d.extend_from_slice(&(query.len() as u32).to_be_bytes());
        d.extend_from_slice(query);
        send_option(&mut *s, OPT_SET_META_CONTEXT, &d)?;
        let mut context = None;
        loop {
            match option_reply(&mut *s, OPT_SET_META_CONTEXT)? {
                (REP_META_CONTEXT, d) if d.len() >= 4 && &d[4..] == query => {
                    context = Some(u32::from_be_bytes(d[0..4].try_into().expect("4 bytes")));
                }
                (REP_ACK, _) => break,
                (t, _) if t & (1 << 31) != 0 => return Ok(None),
                _ => {} // Other contexts or reply types: skipped.
            }
        }
        let Some(context) = context else {
            return Ok(None);
        };
        // Compact headers: this connection's parser reads `NBD_REPLY_TYPE_BLOCK_STATUS`.
        let info = options(&mut *s, &uri.export, None, no_zeroes, false)?.info;
        Ok(Some(StatusConnection {
            s: Mutex::new(s),
            context,
            info,
            next_handle: AtomicU64::new(1),
        }))
    }

    /// The export as the server described it.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// The allocation of `len` bytes at `offset` (cut to the request: a server may answer
    /// less, or its last extent more), as [`tiercache_blockdev::BlockDevice::allocation`]
    /// gives it. An error leaves the connection unusable (the caller opens another).
    pub fn allocation(&self, offset: u64, len: u32) -> Result<Vec<Extent>, ClientError> {
        let proto = |m: String| ClientError::Protocol(m);
        let handle = self.next_handle.fetch_add(1, Relaxed);
        let mut s = self.s.lock().unwrap_or_else(|e| e.into_inner());
        let mut hdr = [0u8; 28];
        hdr[0..4].copy_from_slice(&REQ_MAGIC.to_be_bytes());
        hdr[6..8].copy_from_slice(&CMD_BLOCK_STATUS.to_be_bytes());
        hdr[8..16].copy_from_slice(&handle.to_be_bytes());
        hdr[16..24].copy_from_slice(&offset.to_be_bytes());
        hdr[24..28].copy_from_slice(&len.to_be_bytes());
        s.write_all(&hdr)?;
        s.flush()?;
        let mut out = Extents::new();
        let mut error = None;
        let mut done = false;
        while !done {
            let magic = u32::from_be_bytes(rd(&mut **s)?);
            if magic == SIMPLE_MAGIC {
                let errno = u32::from_be_bytes(rd(&mut **s)?);
                let _: [u8; 8] = rd(&mut **s)?;
                return Err(if errno != 0 {
                    ClientError::Reply(errno)
                } else {
                    proto("a simple reply to BLOCK_STATUS".into())
                });
            }
            if magic != STRUCTURED_MAGIC {
                return Err(proto(format!("bad reply magic {magic:#x}")));
            }
            let flags = u16::from_be_bytes(rd(&mut **s)?);
            let typ = u16::from_be_bytes(rd(&mut **s)?);
            let got = u64::from_be_bytes(rd(&mut **s)?);
            let clen = u32::from_be_bytes(rd(&mut **s)?);
            if got != handle {
                return Err(proto(format!("reply to handle {got}, asked {handle}")));
            }
            if clen > MAX_STATUS_CHUNK {
                return Err(proto(format!("a reply chunk of {clen} bytes")));
            }
            let mut d = vec![0u8; clen as usize];
            s.read_exact(&mut d)?;
            done = flags & REPLY_FLAG_DONE != 0;
            match typ {
                REPLY_TYPE_BLOCK_STATUS => {
                    if d.len() < 12 || !(d.len() - 4).is_multiple_of(8) {
                        return Err(proto(format!("a block status chunk of {} bytes", d.len())));
                    }
                    if u32::from_be_bytes(d[0..4].try_into().expect("4 bytes")) != self.context {
                        continue;
                    }
                    for e in d[4..].chunks_exact(8) {
                        let n = u32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
                        let f = u32::from_be_bytes(e[4..8].try_into().expect("4 bytes"));
                        let room = u64::from(len) - out.covered();
                        out.push(u64::from(n).min(room), f & 3);
                    }
                }
                t if t & (1 << 15) != 0 => {
                    // The rest of the reply (if any) is read before returning the error.
                    error = Some(
                        d.get(0..4)
                            .map_or(EIO, |b| u32::from_be_bytes(b.try_into().expect("4 bytes"))),
                    );
                }
                REPLY_TYPE_NONE => {}
                t => return Err(proto(format!("unexpected reply chunk type {t}"))),
            }
        }
        if let Some(errno) = error {
            return Err(ClientError::Reply(errno));
        }
        let out = out.into_vec();
        if out.is_empty() {
            return Err(proto("a block status reply without extents".into()));
        }
        Ok(out)
    }
}
