//! The handshake phase: options, export information, the export chosen.

use super::*;

fn opt_reply(s: &mut impl Write, opt: u32, typ: u32, data: &[u8]) -> io::Result<()> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&typ.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v)
}

/// The export description (size, transmission flags) of `dev`.
fn export_info(dev: &dyn BlockDevice) -> Vec<u8> {
    let mut flags =
        FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
    if dev.multi_conn() {
        flags |= FLAG_CAN_MULTI_CONN;
    }
    let mut export = Vec::new();
    export.extend_from_slice(&dev.size().to_be_bytes());
    export.extend_from_slice(&flags.to_be_bytes());
    export
}

/// Runs the handshake; the chosen export's device when the client entered transmission.
pub(super) fn handshake<S: Read + Write>(
    s: &mut S,
    exports: &Exports,
    cfg: &ServerConfig,
    stats: &ServerStats,
    demote_session: &mut Option<Arc<crate::demote::Ledger>>,
) -> io::Result<Option<Arc<dyn BlockDevice>>> {
    let mut hello = Vec::new();
    hello.extend_from_slice(NBDMAGIC);
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    // Fixed newstyle, no zeroes.
    hello.extend_from_slice(&(HANDSHAKE_FIXED_NEWSTYLE | HANDSHAKE_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;
    s.flush()?;
    let client_flags = u32::from_be_bytes(rd(s)?);
    if client_flags & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
        // The protocol: a server MUST close the connection on a client flag it does not know.
        stats.protocol_errors.fetch_add(1, Relaxed);
        return Ok(None);
    }
    let no_zeroes = client_flags & CLIENT_NO_ZEROES != 0;
    loop {
        if u64::from_be_bytes(rd(s)?) != IHAVEOPT {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(None);
        }
        let opt = u32::from_be_bytes(rd(s)?);
        let len = u32::from_be_bytes(rd(s)?);
        if len > MAX_OPTION_LEN {
            stats.protocol_errors.fetch_add(1, Relaxed);
            if opt == OPT_EXPORT_NAME || len > MAX_OPTION_SKIP {
                // No error reply exists for this option; and reading past gigabytes a broken
                // or hostile client announced would only tie the connection up.
                return Ok(None);
            }
            // The protocol's answer to an option too long to hold: its data is read past
            // (never held) and refused with NBD_REP_ERR_TOO_BIG; the handshake goes on.
            let skipped = io::copy(&mut (&mut *s).take(u64::from(len)), &mut io::sink())?;
            if skipped < u64::from(len) {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            opt_reply(s, opt, REP_ERR_TOO_BIG, &[])?;
            s.flush()?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        match opt {
            OPT_EXPORT_NAME => {
                // No error reply exists for this option: an unknown name ends the connection.
                let Some(e) = exports.find(&data) else {
                    return Ok(None);
                };
                let mut out = export_info(&*e.device);
                if !no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&out)?;
                s.flush()?;
                return Ok(Some(e.device.clone()));
            }
            OPT_ABORT => {
                let _ = opt_reply(s, opt, REP_ACK, &[]);
                return Ok(None);
            }
            OPT_LIST => {
                if len != 0 {
                    opt_reply(s, opt, REP_ERR_INVALID, &[])?;
                } else {
                    for e in exports.list() {
                        let name = e.name.as_bytes();
                        let mut d = (name.len() as u32).to_be_bytes().to_vec();
                        d.extend_from_slice(name);
                        opt_reply(s, opt, REP_SERVER, &d)?;
                    }
                    opt_reply(s, opt, REP_ACK, &[])?;
                }
            }
            OPT_INFO | OPT_GO => {
                // Payload: name length, name, number of info requests, 2 bytes per request;
                // the lengths must add up to the option's.
                let nlen = (len >= 6)
                    .then(|| u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize)
                    .filter(|&nlen| {
                        nlen + 6 <= data.len() && {
                            let n = &data[4 + nlen..6 + nlen];
                            let requests = u16::from_be_bytes([n[0], n[1]]) as usize;
                            data.len() == nlen + 6 + 2 * requests
                        }
                    });
                let Some(nlen) = nlen else {
                    opt_reply(s, opt, REP_ERR_INVALID, &[])?;
                    s.flush()?;
                    continue;
                };
                let Some(e) = exports.find(&data[4..4 + nlen]) else {
                    opt_reply(s, opt, REP_ERR_UNKNOWN, &[])?;
                    s.flush()?;
                    continue;
                };
                let mut info = INFO_EXPORT.to_be_bytes().to_vec();
                info.extend_from_slice(&export_info(&*e.device));
                opt_reply(s, opt, REP_INFO, &info)?;
                let mut bs = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                for v in [1u32, 4096, cfg.max_payload] {
                    bs.extend_from_slice(&v.to_be_bytes());
                }
                opt_reply(s, opt, REP_INFO, &bs)?;
                opt_reply(s, opt, REP_ACK, &[])?;
                if opt == OPT_GO {
                    s.flush()?;
                    return Ok(Some(e.device.clone()));
                }
            }
            // A demote session belongs to one device's write tracking, and the option comes
            // before the client names its export: it is offered by single-export servers.
            crate::demote::OPT_TIERCACHE_DEMOTE => match match exports.list() {
                [only] => crate::demote::negotiate(&*only.device, &data),
                _ => Err(REP_ERR_UNSUP),
            } {
                Ok(ledger) => {
                    *demote_session = Some(ledger);
                    opt_reply(s, opt, REP_ACK, &[])?
                }
                Err(rep) => opt_reply(s, opt, rep, &[])?,
            },
            _ => opt_reply(s, opt, REP_ERR_UNSUP, &[])?,
        }
        s.flush()?;
    }
}

/// The handshake reads through the buffered reader and writes through the shared writer.
pub(super) struct HandshakeIo<'a, R, W: Write> {
    pub(super) r: &'a mut R,
    pub(super) w: &'a Mutex<BufWriter<W>>,
}

impl<R: Read, W: Write> Read for HandshakeIo<'_, R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.r.read(buf)
    }
}

impl<R, W: Write> Write for HandshakeIo<'_, R, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}
