//! The handshake phase: options, export information, the export chosen.

use super::meta::{self, MetaContext};
use super::*;
use crate::tls::TlsMode;

fn opt_reply(s: &mut impl Write, opt: u32, typ: u32, data: &[u8]) -> io::Result<()> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&typ.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v)
}

/// The export description (size, transmission flags) of `dev`; `structured`: the client
/// negotiated structured replies.
fn export_info(dev: &dyn BlockDevice, structured: bool) -> Vec<u8> {
    let mut flags = FLAG_HAS_FLAGS
        | FLAG_SEND_FLUSH
        | FLAG_SEND_FUA
        | FLAG_SEND_TRIM
        | FLAG_SEND_WRITE_ZEROES
        | FLAG_SEND_CACHE
        // Offered whatever the device: a fast zero it cannot do is refused at once, which
        // the protocol counts as fast (copying tools then write the zeroes themselves).
        | FLAG_SEND_FAST_ZERO;
    if dev.multi_conn() {
        flags |= FLAG_CAN_MULTI_CONN;
    }
    if structured {
        // Every READ is answered in one data chunk: "don't fragment" always holds.
        flags |= FLAG_SEND_DF;
    }
    let mut export = Vec::new();
    export.extend_from_slice(&dev.size().to_be_bytes());
    export.extend_from_slice(&flags.to_be_bytes());
    export
}

/// How option haggling ended.
pub(super) enum Outcome {
    /// The client entered transmission on this device.
    Go(Arc<dyn BlockDevice>),
    /// The connection ends (the client aborted, broke the protocol, or was refused in a way
    /// that has no error reply).
    Close,
    /// `NBD_OPT_STARTTLS` was acknowledged: the TLS handshake comes next, then more options.
    StartTls,
}

/// What the option haggling of one connection knows so far.
#[derive(Default)]
pub(super) struct Negotiation {
    /// The client asked for no zeroes after `NBD_OPT_EXPORT_NAME`'s reply.
    pub(super) no_zeroes: bool,
    /// TLS is up.
    pub(super) tls: bool,
    /// Who the client is (its certificate), once TLS is up.
    pub(super) identity: Option<crate::tls::PeerIdentity>,
    /// The client asked for structured replies (`NBD_OPT_STRUCTURED_REPLY`).
    pub(super) structured: bool,
    /// The client negotiated extended headers (`NBD_OPT_EXTENDED_HEADERS`): 32-byte requests
    /// with 64-bit lengths, every reply an extended chunk.
    pub(super) extended: bool,
    /// The metadata contexts the last `NBD_OPT_SET_META_CONTEXT` selected, and the export it
    /// named: block status is answered only on that export.
    pub(super) contexts: Vec<MetaContext>,
    meta_export: Option<String>,
}

impl Negotiation {
    /// What TLS starting forgets: options negotiated in the clear are negotiated again.
    pub(super) fn forget_plaintext_options(&mut self) {
        self.structured = false;
        self.extended = false;
        self.contexts.clear();
        self.meta_export = None;
    }

    /// Entering transmission on `export`: contexts selected for another export are dropped.
    fn entering(&mut self, export: &str) {
        if self.meta_export.as_deref() != Some(export) {
            self.contexts.clear();
        }
    }
}

/// Sends the server's greeting and reads the client's flags; `false`: the connection ends
/// (a client flag the server does not know).
pub(super) fn greet<S: Read + Write>(
    s: &mut S,
    stats: &ServerStats,
    neg: &mut Negotiation,
) -> io::Result<bool> {
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
        return Ok(false);
    }
    neg.no_zeroes = client_flags & CLIENT_NO_ZEROES != 0;
    Ok(true)
}

/// Reads past `len` bytes of option data (never held); `false` at the end of the stream.
fn skip<S: Read>(s: &mut S, len: u32) -> io::Result<()> {
    let skipped = io::copy(&mut (&mut *s).take(u64::from(len)), &mut io::sink())?;
    if skipped < u64::from(len) {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Whether `export` is refused to this client: TLS is required for it (`NBD_REP_ERR_TLS_REQD`,
/// before the upgrade) or the client's identity may not use it (`NBD_REP_ERR_POLICY`).
/// Counted.
fn refusal(
    export: &str,
    cfg: &ServerConfig,
    stats: &ServerStats,
    neg: &Negotiation,
) -> Option<(u32, String)> {
    let tls = cfg.tls.as_ref()?;
    if tls.allows(neg.identity.as_ref(), export) {
        return None;
    }
    if !neg.tls {
        // Authorised exports are TLS-only: an identity comes with TLS.
        stats.tls_required.fetch_add(1, Relaxed);
        return Some((REP_ERR_TLS_REQD, format!("export {export:?} needs TLS")));
    }
    stats.authz_refusals.fetch_add(1, Relaxed);
    let who = neg
        .identity
        .as_ref()
        .map_or("a client without a certificate".to_string(), |i| {
            format!("{:?}", i.subject)
        });
    Some((
        REP_ERR_POLICY,
        format!("{who} may not use export {export:?}"),
    ))
}

/// Option haggling until the client enters transmission, leaves, or starts TLS.
pub(super) fn options<S: Read + Write>(
    s: &mut S,
    exports: &Exports,
    cfg: &ServerConfig,
    stats: &ServerStats,
    demote_session: &mut Option<Arc<crate::demote::Ledger>>,
    neg: &mut Negotiation,
) -> io::Result<Outcome> {
    let mode = cfg.tls.as_ref().map_or(TlsMode::Off, |t| t.mode);
    loop {
        if u64::from_be_bytes(rd(s)?) != IHAVEOPT {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(Outcome::Close);
        }
        let opt = u32::from_be_bytes(rd(s)?);
        let len = u32::from_be_bytes(rd(s)?);
        if mode == TlsMode::Require && !neg.tls && opt != OPT_STARTTLS && opt != OPT_ABORT {
            // FORCEDTLS: nothing is answered in the clear but the way to TLS (a man in the
            // middle learns nothing and cannot steer the session to plaintext).
            stats.tls_required.fetch_add(1, Relaxed);
            if opt == OPT_EXPORT_NAME || len > MAX_OPTION_SKIP {
                // No error reply exists for EXPORT_NAME: the protocol says close.
                return Ok(Outcome::Close);
            }
            skip(s, len)?;
            opt_reply(
                s,
                opt,
                REP_ERR_TLS_REQD,
                b"TLS is required: send NBD_OPT_STARTTLS",
            )?;
            s.flush()?;
            continue;
        }
        if len > MAX_OPTION_LEN {
            stats.protocol_errors.fetch_add(1, Relaxed);
            if opt == OPT_EXPORT_NAME || len > MAX_OPTION_SKIP {
                // No error reply exists for this option; and reading past gigabytes a broken
                // or hostile client announced would only tie the connection up.
                return Ok(Outcome::Close);
            }
            // The protocol's answer to an option too long to hold: its data is read past
            // (never held) and refused with NBD_REP_ERR_TOO_BIG; the handshake goes on.
            skip(s, len)?;
            opt_reply(s, opt, REP_ERR_TOO_BIG, &[])?;
            s.flush()?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        match opt {
            OPT_STARTTLS => {
                let rep = if len != 0 || neg.tls {
                    // A second STARTTLS (or one with data): the protocol's INVALID.
                    REP_ERR_INVALID
                } else if mode == TlsMode::Off {
                    REP_ERR_POLICY
                } else {
                    opt_reply(s, opt, REP_ACK, &[])?;
                    s.flush()?;
                    return Ok(Outcome::StartTls);
                };
                opt_reply(s, opt, rep, &[])?;
            }
            OPT_STRUCTURED_REPLY => {
                let rep = if len != 0 {
                    REP_ERR_INVALID
                } else if neg.extended {
                    // Extended headers take precedence (the protocol's answer).
                    REP_ERR_EXT_HEADER_REQD
                } else {
                    neg.structured = true;
                    REP_ACK
                };
                opt_reply(s, opt, rep, &[])?;
            }
            OPT_EXTENDED_HEADERS => {
                let rep = if len != 0 {
                    REP_ERR_INVALID
                } else {
                    neg.extended = true;
                    REP_ACK
                };
                opt_reply(s, opt, rep, &[])?;
            }
            OPT_EXPORT_NAME if neg.extended => {
                // A client with extended headers must use GO (EXPORT_NAME has no way to
                // refuse): the protocol broken, the connection ends.
                stats.protocol_errors.fetch_add(1, Relaxed);
                return Ok(Outcome::Close);
            }
            OPT_EXPORT_NAME => {
                // No error reply exists for this option: an unknown name ends the connection.
                let Some(e) = exports.find(&data) else {
                    return Ok(Outcome::Close);
                };
                if refusal(&e.name, cfg, stats, neg).is_some() {
                    return Ok(Outcome::Close);
                }
                neg.entering(&e.name);
                let mut out = export_info(&*e.device, neg.structured || neg.extended);
                if !neg.no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&out)?;
                s.flush()?;
                return Ok(Outcome::Go(e.device.clone()));
            }
            OPT_ABORT => {
                let _ = opt_reply(s, opt, REP_ACK, &[]);
                let _ = s.flush();
                return Ok(Outcome::Close);
            }
            OPT_LIST => {
                if len != 0 {
                    opt_reply(s, opt, REP_ERR_INVALID, &[])?;
                } else {
                    // Exports this client may not use are not shown (the protocol allows
                    // leaving TLS-only exports out).
                    let visible = exports.list().iter().filter(|e| {
                        cfg.tls
                            .as_ref()
                            .is_none_or(|t| t.allows(neg.identity.as_ref(), &e.name))
                    });
                    for e in visible {
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
                if let Some((rep, why)) = refusal(&e.name, cfg, stats, neg) {
                    opt_reply(s, opt, rep, why.as_bytes())?;
                    s.flush()?;
                    continue;
                }
                let mut info = INFO_EXPORT.to_be_bytes().to_vec();
                info.extend_from_slice(&export_info(&*e.device, neg.structured || neg.extended));
                opt_reply(s, opt, REP_INFO, &info)?;
                let mut bs = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                for v in [1u32, 4096, cfg.max_payload] {
                    bs.extend_from_slice(&v.to_be_bytes());
                }
                opt_reply(s, opt, REP_INFO, &bs)?;
                opt_reply(s, opt, REP_ACK, &[])?;
                if opt == OPT_GO {
                    neg.entering(&e.name);
                    s.flush()?;
                    return Ok(Outcome::Go(e.device.clone()));
                }
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                let set = opt == OPT_SET_META_CONTEXT;
                if set {
                    // A SET replaces the selection even when it fails.
                    neg.contexts.clear();
                    neg.meta_export = None;
                }
                let replies_carry_data = neg.structured || neg.extended;
                let Some((name, queries)) = meta::parse(&data).filter(|_| replies_carry_data)
                else {
                    // Malformed, or before structured replies (which block status needs).
                    opt_reply(s, opt, REP_ERR_INVALID, &[])?;
                    s.flush()?;
                    continue;
                };
                let Some(e) = exports.find(name) else {
                    opt_reply(s, opt, REP_ERR_UNKNOWN, &[])?;
                    s.flush()?;
                    continue;
                };
                if let Some((rep, why)) = refusal(&e.name, cfg, stats, neg) {
                    opt_reply(s, opt, rep, why.as_bytes())?;
                    s.flush()?;
                    continue;
                }
                let chosen = meta::select(&*e.device, &queries, !set);
                for &c in &chosen {
                    opt_reply(s, opt, REP_META_CONTEXT, &meta::reply_data(c, !set))?;
                }
                if set {
                    neg.contexts = chosen;
                    neg.meta_export = Some(e.name.clone());
                }
                opt_reply(s, opt, REP_ACK, &[])?;
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
    pub(super) w: &'a Mutex<Replies<W>>,
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
