//! An NBD client: fixed newstyle handshake (NBD_OPT_GO, falling back to EXPORT_NAME), extended
//! headers (`NBD_OPT_EXTENDED_HEADERS`: 32-byte requests, every reply in chunks) when the
//! server offers them and simple replies otherwise, requests pipelined on each connection.
//!
//! A [`Connection`] has one reader thread that matches replies to requests by handle, so any
//! number of threads may have requests in flight on it at once. A connection that errors,
//! closes or stalls past the caller's timeout is dead for good: every request still waiting on
//! it fails, and the caller (see [`crate::Remote`]) opens a new one.

use crate::proto::*;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

mod replies;
mod status;
mod uri;

use replies::{reader_loop, Waiting};

pub use status::StatusConnection;
pub use uri::{NbdUri, Target, UriCredentials, UriError, UriTls, DEFAULT_PORT};

/// What the server said about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags (`NBD_FLAG_*`).
    pub flags: u16,
}

impl ExportInfo {
    /// The server accepts FLUSH.
    pub fn can_flush(&self) -> bool {
        self.flags & FLAG_SEND_FLUSH != 0
    }
    /// The server accepts the FUA flag.
    pub fn can_fua(&self) -> bool {
        self.flags & FLAG_SEND_FUA != 0
    }
    /// The server accepts TRIM.
    pub fn can_trim(&self) -> bool {
        self.flags & FLAG_SEND_TRIM != 0
    }
    /// The server accepts CACHE (a prefetch).
    pub fn can_cache(&self) -> bool {
        self.flags & FLAG_SEND_CACHE != 0
    }
    /// The server accepts WRITE_ZEROES.
    pub fn can_write_zeroes(&self) -> bool {
        self.flags & FLAG_SEND_WRITE_ZEROES != 0
    }
    /// Several connections see one consistent export and a FLUSH on one covers all.
    pub fn multi_conn(&self) -> bool {
        self.flags & FLAG_CAN_MULTI_CONN != 0
    }
    /// The export refuses writes.
    pub fn read_only(&self) -> bool {
        self.flags & FLAG_READ_ONLY != 0
    }
}

/// A failed client operation.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting or talking to the server failed; the connection is dead.
    #[error("NBD connection: {0}")]
    Transport(#[from] io::Error),
    /// The server broke the protocol; the connection is dead.
    #[error("NBD protocol: {0}")]
    Protocol(String),
    /// The handshake was refused (no such export, unsupported option).
    #[error("NBD handshake: {0}")]
    Handshake(String),
    /// No reply within the timeout: the server is stalled; the connection is dead.
    #[error("NBD request timed out after {0:?}")]
    TimedOut(Duration),
    /// The connection closed with the request in flight.
    #[error("NBD connection closed")]
    Closed,
    /// The server answered with an error (`errno`); the connection is fine.
    #[error("NBD server error reply: errno {0}")]
    Reply(u32),
    /// Connections died since the writes a flush was to cover (see [`crate::Remote`]).
    #[error(
        "{0} NBD connection loss(es) since the writes this flush covers: they may not have \
         reached stable storage"
    )]
    WritesMayBeLost(u64),
    /// The request cannot be sent to this export (out of range, unsupported command).
    #[error("NBD request refused locally: {0}")]
    Invalid(String),
}

impl ClientError {
    /// Whether the connection the request ran on is dead (as opposed to one failed request).
    pub fn connection_lost(&self) -> bool {
        matches!(
            self,
            Self::Transport(_) | Self::Protocol(_) | Self::TimedOut(_) | Self::Closed
        )
    }
}

impl From<ClientError> for io::Error {
    fn from(e: ClientError) -> Self {
        let kind = match &e {
            ClientError::TimedOut(_) => io::ErrorKind::TimedOut,
            ClientError::Closed | ClientError::Transport(_) => io::ErrorKind::ConnectionAborted,
            ClientError::Invalid(_) => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// One transmission command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// READ `len` bytes.
    Read,
    /// WRITE the payload.
    Write,
    /// FLUSH every completed write.
    Flush,
    /// TRIM a range.
    Trim,
    /// WRITE_ZEROES over a range.
    WriteZeroes,
    /// CACHE a range (a prefetch hint; no data comes back).
    Cache,
    /// tiercache's DEMOTE (payload as WRITE; only on a connection that negotiated it, see
    /// [`crate::demote`]). The reply's error field is the outcome.
    Demote,
}

impl Command {
    fn code(self) -> u16 {
        match self {
            Command::Read => CMD_READ,
            Command::Write => CMD_WRITE,
            Command::Flush => CMD_FLUSH,
            Command::Trim => CMD_TRIM,
            Command::WriteZeroes => CMD_WRITE_ZEROES,
            Command::Cache => CMD_CACHE,
            Command::Demote => crate::demote::CMD_TIERCACHE_DEMOTE,
        }
    }
}

pub(crate) trait Socket: Read + Write + Send + Sync + 'static {
    fn clone_socket(&self) -> io::Result<Box<dyn Socket>>;
    fn close(&self);
}

/// A connection's socket is what a TLS session runs over.
impl crate::server::Stream for Box<dyn Socket> {
    fn try_clone(&self) -> io::Result<Self> {
        self.clone_socket()
    }
    fn shutdown(&self) {
        self.close()
    }
}

impl Socket for crate::tls::TlsStream<Box<dyn Socket>> {
    fn clone_socket(&self) -> io::Result<Box<dyn Socket>> {
        Ok(Box::new(crate::server::Stream::try_clone(self)?))
    }
    fn close(&self) {
        crate::server::Stream::shutdown(self)
    }
}

impl Socket for UnixStream {
    fn clone_socket(&self) -> io::Result<Box<dyn Socket>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Socket for TcpStream {
    fn clone_socket(&self) -> io::Result<Box<dyn Socket>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

type Reply = Result<Vec<u8>, ClientError>;

struct Shared {
    pending: Mutex<HashMap<u64, Waiting>>,
    alive: AtomicBool,
    /// Counts this connection's death (once).
    losses: Arc<AtomicU64>,
}

impl Shared {
    /// Ends the connection: every waiting request fails with `Closed`.
    fn kill(&self) {
        if self.alive.swap(false, Relaxed) {
            self.losses.fetch_add(1, Relaxed);
        }
        let drained: Vec<Waiting> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, w)| w)
            .collect();
        for w in drained {
            let _ = w.tx.try_send(Err(ClientError::Closed));
        }
    }
}

/// One connection in the transmission phase.
pub struct Connection {
    info: ExportInfo,
    /// The server took tiercache's DEMOTE extension.
    demote: bool,
    /// Extended headers were negotiated: 32-byte requests, every reply in extended chunks.
    extended: bool,
    writer: Mutex<Box<dyn Socket>>,
    closer: Box<dyn Socket>,
    shared: Arc<Shared>,
    next_handle: AtomicU64,
    reader: Mutex<Option<JoinHandle<()>>>,
}

fn open_socket(target: &Target, timeout: Duration) -> io::Result<Box<dyn Socket>> {
    match target {
        Target::Unix(p) => {
            let s = UnixStream::connect(p)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Ok(Box::new(s))
        }
        Target::Tcp { host, port } => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
            for addr in (host.as_str(), *port).to_socket_addrs()? {
                match TcpStream::connect_timeout(&addr, timeout) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        s.set_read_timeout(Some(timeout))?;
                        s.set_write_timeout(Some(timeout))?;
                        return Ok(Box::new(s));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

fn send_option(s: &mut dyn Socket, opt: u32, data: &[u8]) -> io::Result<()> {
    let mut v = Vec::with_capacity(16 + data.len());
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&opt.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    s.write_all(&v)?;
    s.flush()
}

/// Reads the header of an option reply to `opt`: (type, length of its data, not read).
fn option_reply_header(s: &mut dyn Socket, opt: u32) -> Result<(u32, u32), ClientError> {
    if u64::from_be_bytes(rd(s)?) != REPLY_MAGIC {
        return Err(ClientError::Protocol("bad option reply magic".into()));
    }
    let got = u32::from_be_bytes(rd(s)?);
    let typ = u32::from_be_bytes(rd(s)?);
    let len = u32::from_be_bytes(rd(s)?);
    if got != opt {
        return Err(ClientError::Protocol(format!(
            "reply to option {got}, asked {opt}"
        )));
    }
    Ok((typ, len))
}

/// Reads one option reply to `opt`: (type, data).
fn option_reply(s: &mut dyn Socket, opt: u32) -> Result<(u32, Vec<u8>), ClientError> {
    let (typ, len) = option_reply_header(s, opt)?;
    if len > MAX_OPTION_LEN {
        return Err(ClientError::Protocol(format!(
            "option reply of {len} bytes"
        )));
    }
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data)?;
    Ok((typ, data))
}

/// Asks for tiercache's DEMOTE extension for `session`: whether the server took it. Any
/// refusal (an unknown option to any other server) means no demotes on this connection.
fn negotiate_demote(s: &mut dyn Socket, session: u64) -> Result<bool, ClientError> {
    use crate::demote::OPT_TIERCACHE_DEMOTE;
    send_option(s, OPT_TIERCACHE_DEMOTE, &session.to_be_bytes())?;
    loop {
        let (typ, _) = option_reply(s, OPT_TIERCACHE_DEMOTE)?;
        match typ {
            REP_ACK => return Ok(true),
            t if t & (1 << 31) != 0 => return Ok(false),
            _ => {} // Unknown reply types are skipped, as the protocol asks.
        }
    }
}

/// Asks for TLS (`NBD_OPT_STARTTLS`, the first option, so that nothing else is said in the
/// clear) and runs the TLS handshake: the socket the rest of the connection runs over. A
/// refusal ends the connection (an `nbds://` URI insists on TLS: a man in the middle that
/// answers STARTTLS with an error must not get a plaintext session).
fn start_tls(
    mut s: Box<dyn Socket>,
    tls: &crate::tls::ClientTls,
) -> Result<Box<dyn Socket>, ClientError> {
    send_option(&mut *s, OPT_STARTTLS, &[])?;
    // The header alone: a refusal's message is read leniently, for the error it explains.
    let (typ, len) = option_reply_header(&mut *s, OPT_STARTTLS)?;
    if typ != REP_ACK {
        let mut msg = vec![0u8; len.min(MAX_OPTION_LEN) as usize];
        let _ = s.read_exact(&mut msg);
        let msg = String::from_utf8_lossy(&msg);
        return Err(ClientError::Handshake(format!(
            "the server refused TLS (reply {typ:#x}{}{msg}); an nbds:// URI does not fall back to plaintext",
            if msg.is_empty() { "" } else { ": " }
        )));
    }
    if len != 0 {
        return Err(ClientError::Protocol(
            "STARTTLS acknowledged with data".into(),
        ));
    }
    let session = tls
        .session()
        .map_err(|e| ClientError::Handshake(format!("TLS: {e}")))?;
    let t = crate::tls::TlsStream::new(s, session, &[])?;
    t.handshake()
        .map_err(|e| ClientError::Handshake(format!("TLS handshake: {e}")))?;
    Ok(Box::new(t))
}

/// The server's greeting, and the client's flags: whether both sides dropped the zeroes
/// after `NBD_OPT_EXPORT_NAME`'s reply.
fn greet(s: &mut dyn Socket) -> Result<bool, ClientError> {
    let proto = |m: String| ClientError::Protocol(m);
    let magic: [u8; 8] = rd(s)?;
    if &magic != NBDMAGIC {
        return Err(proto(format!("bad server magic {magic:02x?}")));
    }
    let opt_magic = u64::from_be_bytes(rd(s)?);
    if opt_magic != IHAVEOPT {
        return Err(proto(format!(
            "server speaks oldstyle or unknown negotiation (magic {opt_magic:#x})"
        )));
    }
    let hflags = u16::from_be_bytes(rd(s)?);
    if hflags & HANDSHAKE_FIXED_NEWSTYLE == 0 {
        return Err(proto("server lacks fixed newstyle negotiation".into()));
    }
    let no_zeroes = hflags & HANDSHAKE_NO_ZEROES != 0;
    let client_flags = HANDSHAKE_FIXED_NEWSTYLE as u32 | if no_zeroes { 2 } else { 0 };
    s.write_all(&client_flags.to_be_bytes())?;
    Ok(no_zeroes)
}

/// What option haggling agreed.
struct Negotiated {
    info: ExportInfo,
    /// The server took the DEMOTE extension.
    demote: bool,
    /// The server took extended headers.
    extended: bool,
}

/// Asks for extended headers (`NBD_OPT_EXTENDED_HEADERS`): whether the server took them. Any
/// refusal (an older server's "unsupported") leaves the connection compact.
fn negotiate_extended(s: &mut dyn Socket) -> Result<bool, ClientError> {
    send_option(s, OPT_EXTENDED_HEADERS, &[])?;
    loop {
        let (typ, data) = option_reply(s, OPT_EXTENDED_HEADERS)?;
        match typ {
            REP_ACK if data.is_empty() => return Ok(true),
            REP_ACK => {
                return Err(ClientError::Protocol(
                    "EXTENDED_HEADERS acknowledged with data".into(),
                ))
            }
            // Nothing but STARTTLS is answered in the clear: GO would be refused the same way.
            REP_ERR_TLS_REQD => {
                return Err(ClientError::Handshake(format!(
                    "the server requires TLS (reply {REP_ERR_TLS_REQD:#x}): use an nbds:// URI"
                )))
            }
            t if t & (1 << 31) != 0 => return Ok(false),
            _ => {} // Unknown reply types are skipped, as the protocol asks.
        }
    }
}

/// Option haggling: the export, whether the server took the DEMOTE extension and (asked with
/// `ask_extended`) extended headers.
fn options(
    s: &mut dyn Socket,
    export: &str,
    demote_session: Option<u64>,
    no_zeroes: bool,
    ask_extended: bool,
) -> Result<Negotiated, ClientError> {
    let proto = |m: String| ClientError::Protocol(m);
    if export.len() > 4096 {
        return Err(ClientError::Invalid("export name over 4096 bytes".into()));
    }
    let extended = ask_extended && negotiate_extended(s)?;
    let demote = match demote_session {
        Some(id) => negotiate_demote(s, id)?,
        None => false,
    };
    let mut go = Vec::new();
    go.extend_from_slice(&(export.len() as u32).to_be_bytes());
    go.extend_from_slice(export.as_bytes());
    go.extend_from_slice(&0u16.to_be_bytes());
    send_option(s, OPT_GO, &go)?;
    let mut info = None;
    loop {
        let (typ, data) = option_reply(s, OPT_GO)?;
        match typ {
            REP_INFO
                if data.len() >= 12 && u16::from_be_bytes([data[0], data[1]]) == INFO_EXPORT =>
            {
                let size = u64::from_be_bytes(data[2..10].try_into().expect("8 bytes"));
                let flags = u16::from_be_bytes([data[10], data[11]]);
                info = Some(ExportInfo { size, flags });
            }
            REP_ACK => {
                return info
                    .map(|info| Negotiated {
                        info,
                        demote,
                        extended,
                    })
                    .ok_or_else(|| proto("NBD_OPT_GO acknowledged without export info".into()))
            }
            // EXPORT_NAME cannot follow extended headers (the protocol's rule).
            REP_ERR_UNSUP if !extended => break,
            t if t & (1 << 31) != 0 => {
                let msg = String::from_utf8_lossy(&data).into_owned();
                return Err(ClientError::Handshake(format!(
                    "export `{export}` refused (error {:#x}){}{msg}",
                    t,
                    if msg.is_empty() { "" } else { ": " }
                )));
            }
            _ => {} // Unknown reply types are skipped, as the protocol asks.
        }
    }
    // Old servers: NBD_OPT_EXPORT_NAME, which has no error reply (a refusal closes).
    send_option(s, OPT_EXPORT_NAME, export.as_bytes())?;
    let size = u64::from_be_bytes(rd(s)?);
    let flags = u16::from_be_bytes(rd(s)?);
    if !no_zeroes {
        let _: [u8; 124] = rd(s)?;
    }
    Ok(Negotiated {
        info: ExportInfo { size, flags },
        demote,
        extended: false,
    })
}

impl Connection {
    /// Connects to `uri` and enters transmission. `timeout` bounds the connect and each
    /// handshake read.
    pub fn open(uri: &NbdUri, timeout: Duration) -> Result<Self, ClientError> {
        Self::open_counted(uri, timeout, Arc::new(AtomicU64::new(0)))
    }

    /// As [`open`](Self::open); the connection's death (however it comes) increments
    /// `losses`.
    pub fn open_counted(
        uri: &NbdUri,
        timeout: Duration,
        losses: Arc<AtomicU64>,
    ) -> Result<Self, ClientError> {
        Self::open_with(uri, timeout, losses, None)
    }

    /// As [`open_counted`](Self::open_counted); with `demote_session`, also asks for
    /// tiercache's DEMOTE extension for that session (see [`demote_enabled`](Self::demote_enabled)).
    pub fn open_with(
        uri: &NbdUri,
        timeout: Duration,
        losses: Arc<AtomicU64>,
        demote_session: Option<u64>,
    ) -> Result<Self, ClientError> {
        let tls = uri
            .client_tls()
            .map_err(|e| ClientError::Handshake(e.to_string()))?;
        let mut s = open_socket(&uri.target, timeout)?;
        let no_zeroes = greet(&mut *s)?;
        if let Some(tls) = &tls {
            s = start_tls(s, tls)?;
        }
        let Negotiated {
            info,
            demote,
            extended,
        } = options(&mut *s, &uri.export, demote_session, no_zeroes, true)?;
        // The reader's socket keeps the connect-time read timeout; it treats a timeout as "no
        // reply yet" (see `read_full`). Stalls are the callers' timeouts to detect.
        let reader_sock = s.clone_socket()?;
        let closer = s.clone_socket()?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            losses,
        });
        let sh = shared.clone();
        let reader = std::thread::Builder::new()
            .name("nbd-client-reader".into())
            .spawn(move || reader_loop(reader_sock, &sh, extended))
            .map_err(ClientError::Transport)?;
        Ok(Connection {
            info,
            demote,
            extended,
            writer: Mutex::new(s),
            closer,
            shared,
            next_handle: AtomicU64::new(1),
            reader: Mutex::new(Some(reader)),
        })
    }

    /// The export as the server described it.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// Whether the server took tiercache's DEMOTE extension on this connection.
    pub fn demote_enabled(&self) -> bool {
        self.demote
    }

    /// Whether extended headers (`NBD_OPT_EXTENDED_HEADERS`) were negotiated on this
    /// connection: the server offered them.
    pub fn extended_headers(&self) -> bool {
        self.extended
    }

    /// Whether the connection still works.
    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Relaxed)
    }

    /// Ends the connection now; requests in flight fail with [`ClientError::Closed`].
    pub fn kill(&self) {
        self.shared.kill();
        self.closer.close();
    }

    /// Sends one request and waits up to `timeout` for its reply. READ returns the data;
    /// other commands an empty vector. A timeout kills the connection (a stalled server
    /// cannot be trusted with the requests behind it).
    pub fn call(
        &self,
        cmd: Command,
        fua: bool,
        offset: u64,
        len: u32,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, ClientError> {
        self.send(cmd, fua, offset, len, payload)?.wait(timeout)
    }

    /// Sends one request without waiting for its reply: several sent before any is waited
    /// for travel together (pipelined), each answered through its own [`Sent`].
    pub fn send(
        &self,
        cmd: Command,
        fua: bool,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> Result<Sent<'_>, ClientError> {
        if !self.is_alive() {
            return Err(ClientError::Closed);
        }
        let carries = matches!(cmd, Command::Write | Command::Demote);
        if cmd == Command::Demote && !self.demote {
            return Err(ClientError::Invalid(
                "DEMOTE on a connection that did not negotiate it".into(),
            ));
        }
        if carries && payload.len() != len as usize {
            return Err(ClientError::Invalid(
                "payload length differs from the request's".into(),
            ));
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|e| e > self.info.size)
        {
            return Err(ClientError::Invalid(format!(
                "{offset}+{len} beyond the export's {} bytes",
                self.info.size
            )));
        }
        let handle = self.next_handle.fetch_add(1, Relaxed);
        let (tx, rx) = mpsc::sync_channel(1);
        let data_len = if cmd == Command::Read {
            len as usize
        } else {
            0
        };
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                handle,
                Waiting {
                    data_len,
                    offset,
                    tx,
                },
            );
        let mut flags = if fua { CMD_FLAG_FUA } else { 0 };
        if carries && self.extended {
            // The length is the payload's (the extension asks for the flag on every request
            // that carries one).
            flags |= CMD_FLAG_PAYLOAD_LEN;
        }
        let hdr = request_header(self.extended, flags, cmd.code(), handle, offset, len);
        let sent = {
            let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            w.write_all(&hdr)
                .and_then(|_| {
                    if carries {
                        w.write_all(payload)
                    } else {
                        Ok(())
                    }
                })
                .and_then(|_| w.flush())
        };
        if let Err(e) = sent {
            self.kill();
            return Err(ClientError::Transport(e));
        }
        Ok(Sent { conn: self, rx })
    }
}

/// A request header: compact (28 bytes, 32-bit length) or extended (32 bytes, 64-bit length).
fn request_header(
    extended: bool,
    flags: u16,
    typ: u16,
    handle: u64,
    offset: u64,
    len: u32,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(32);
    let magic = if extended { EXT_REQ_MAGIC } else { REQ_MAGIC };
    h.extend_from_slice(&magic.to_be_bytes());
    h.extend_from_slice(&flags.to_be_bytes());
    h.extend_from_slice(&typ.to_be_bytes());
    h.extend_from_slice(&handle.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    if extended {
        h.extend_from_slice(&u64::from(len).to_be_bytes());
    } else {
        h.extend_from_slice(&len.to_be_bytes());
    }
    h
}

/// A request sent on a [`Connection`], its reply not yet taken.
pub struct Sent<'a> {
    conn: &'a Connection,
    rx: mpsc::Receiver<Reply>,
}

impl Sent<'_> {
    /// Waits up to `timeout` for the reply (READ: the data; else empty). A timeout kills the
    /// connection.
    pub fn wait(self, timeout: Duration) -> Result<Vec<u8>, ClientError> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.conn.kill();
                Err(ClientError::TimedOut(timeout))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.is_alive() {
            // NBD_CMD_DISC: a polite goodbye; no reply comes.
            let hdr = request_header(self.extended, 0, CMD_DISC, 0, 0, 0);
            if let Ok(mut w) = self.writer.lock() {
                let _ = w.write_all(&hdr).and_then(|_| w.flush());
            }
        }
        self.kill();
        if let Some(h) = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}
