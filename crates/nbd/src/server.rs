//! Handshake and transmission phases.

use crate::exports::Exports;
use crate::proto::*;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::RawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::BlockDevice;

/// Server counters, readable while serving.
#[derive(Default, Debug, serde::Serialize)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections that reached the transmission phase.
    pub sessions: AtomicU64,
    /// Requests handled (all commands).
    pub requests: AtomicU64,
    /// Connections closed for protocol violations (bad magic, oversized write, bad option).
    pub protocol_errors: AtomicU64,
    /// Connections that ended mid-request (the client vanished).
    pub broken_connections: AtomicU64,
    /// EINVAL replies sent (unknown command, out-of-range request).
    pub einval: AtomicU64,
    /// EIO replies sent (the device failed).
    pub eio: AtomicU64,
    /// Bytes read by clients.
    pub bytes_read: AtomicU64,
    /// Bytes written by clients.
    pub bytes_written: AtomicU64,
    /// Connections the listener failed to accept for want of a resource (file descriptors,
    /// memory) or because the client gave up first; the listener goes on.
    pub accept_errors: AtomicU64,
}

/// Server limits and settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Largest READ/WRITE payload accepted. A larger READ gets EINVAL; a larger WRITE ends the
    /// connection (its payload cannot be skipped safely).
    pub max_payload: u32,
    /// Requests run concurrently per connection (0: one at a time, in the reader).
    pub workers: usize,
    /// Export name reported to clients that list exports.
    pub export_name: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_payload: 32 << 20,
            workers: 8,
            export_name: String::new(),
        }
    }
}

/// A handle that stops a running `serve_*` loop.
#[derive(Clone, Default)]
pub struct Shutdown(Arc<ShutdownState>);

#[derive(Default)]
struct ShutdownState {
    triggered: AtomicBool,
    /// Open connections, by number: each a way to end its reading side, so a connection
    /// waiting for a client's next request (or for its handshake) ends now.
    connections: Mutex<std::collections::HashMap<u64, Box<dyn Fn() + Send>>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shutdown")
            .field("triggered", &self.is_triggered())
            .finish_non_exhaustive()
    }
}

impl Shutdown {
    /// A new handle, not triggered.
    pub fn new() -> Self {
        Self::default()
    }
    /// Stops accepting connections. Open connections end at once where they wait for a
    /// client (their reading side is shut): requests already taken are answered first, reads
    /// started on the device included.
    pub fn trigger(&self) {
        self.0.triggered.store(true, SeqCst);
        let connections = self.0.connections.lock().unwrap_or_else(|e| e.into_inner());
        for end_reading in connections.values() {
            end_reading();
        }
    }
    /// Whether [`trigger`](Self::trigger) was called.
    pub fn is_triggered(&self) -> bool {
        self.0.triggered.load(SeqCst)
    }
    /// Registers a connection's way to end its reading side, until the guard drops; ends it
    /// at once if the handle was triggered already.
    fn register(&self, end_reading: Box<dyn Fn() + Send>) -> Registered<'_> {
        let id = self.0.next.fetch_add(1, Relaxed);
        let mut connections = self.0.connections.lock().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock `trigger` takes: a trigger either sees this connection or
        // came before this check.
        if self.is_triggered() {
            end_reading();
        }
        connections.insert(id, end_reading);
        Registered { shutdown: self, id }
    }
}

/// A connection registered with a [`Shutdown`]; unregistered on drop.
struct Registered<'a> {
    shutdown: &'a Shutdown,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut connections = self
            .shutdown
            .0
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        connections.remove(&self.id);
    }
}

/// A byte stream a connection runs over.
pub trait Stream: Read + Write + Send + Sized + 'static {
    /// A second handle to the same connection (for the writer).
    fn try_clone(&self) -> io::Result<Self>;
    /// Ends both directions.
    fn shutdown(&self);
    /// Ends the reading side: a read waiting for the peer returns end of stream, replies can
    /// still be sent.
    fn shutdown_read(&self) {
        self.shutdown()
    }
    /// The descriptor to poll for readability, if there is one.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

impl Stream for UnixStream {
    fn try_clone(&self) -> io::Result<Self> {
        UnixStream::try_clone(self)
    }
    fn shutdown(&self) {
        let _ = UnixStream::shutdown(self, std::net::Shutdown::Both);
    }
    fn shutdown_read(&self) {
        let _ = UnixStream::shutdown(self, std::net::Shutdown::Read);
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(self))
    }
}

impl Stream for TcpStream {
    fn try_clone(&self) -> io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn shutdown(&self) {
        let _ = TcpStream::shutdown(self, std::net::Shutdown::Both);
    }
    fn shutdown_read(&self) {
        let _ = TcpStream::shutdown(self, std::net::Shutdown::Read);
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(self))
    }
}

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
fn handshake<S: Read + Write>(
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
            return Ok(None);
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

/// Bytes of a payload taken for granted before they arrive: the buffer grows by this much, or
/// by what it holds already (doubling), as bytes come.
const PAYLOAD_STEP: usize = 1 << 20;

/// Reads a `len`-byte payload into `payload`, which grows with the bytes that arrive (at most
/// double them), not with the header's length: a header alone holds no memory.
fn read_payload(reader: &mut impl Read, len: usize, payload: &mut Vec<u8>) -> io::Result<()> {
    payload.clear();
    while payload.len() < len {
        let have = payload.len();
        let next = (have + PAYLOAD_STEP.max(have)).min(len);
        payload.reserve_exact(next - have);
        payload.resize(next, 0);
        reader.read_exact(&mut payload[have..])?;
    }
    Ok(())
}

/// One request, validated and with its payload read.
struct Job {
    typ: u16,
    flags: u16,
    handle: [u8; 8],
    offset: u64,
    len: u32,
    payload: Vec<u8>,
}

/// Runs `job` on `dev`; returns the NBD error (0 = ok) and the read data.
fn run(job: &mut Job, dev: &dyn BlockDevice, stats: &ServerStats) -> u32 {
    let fua = job.flags & CMD_FLAG_FUA != 0;
    let len = job.len as u64;
    let res = match job.typ {
        CMD_READ => {
            job.payload.resize(job.len as usize, 0);
            dev.read_at(&mut job.payload, job.offset).map(|_| {
                stats.bytes_read.fetch_add(len, Relaxed);
            })
        }
        CMD_WRITE => dev.write_at(&job.payload, job.offset, fua).map(|_| {
            stats.bytes_written.fetch_add(len, Relaxed);
        }),
        CMD_FLUSH => dev.flush(),
        CMD_TRIM => dev.trim(job.offset, len),
        CMD_WRITE_ZEROES => dev.write_zeroes(job.offset, len, fua),
        crate::demote::CMD_TIERCACHE_DEMOTE => {
            return crate::demote::run(dev, &job.payload, job.offset)
        }
        _ => unreachable!("validated before dispatch"),
    };
    match res {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            stats.einval.fetch_add(1, Relaxed);
            EINVAL
        }
        Err(_) => {
            stats.eio.fetch_add(1, Relaxed);
            EIO
        }
    }
}

fn reply<W: Write>(
    w: &Mutex<BufWriter<W>>,
    handle: &[u8; 8],
    err: u32,
    data: &[u8],
    more: bool,
) -> io::Result<()> {
    let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&SIMPLE_MAGIC.to_be_bytes());
    h[4..8].copy_from_slice(&err.to_be_bytes());
    h[8..16].copy_from_slice(handle);
    w.write_all(&h)?;
    if err == 0 {
        w.write_all(data)?;
    }
    // Replies batch while the reader still has requests buffered.
    if !more {
        w.flush()?;
    }
    Ok(())
}

/// Serves one connection until the client disconnects, breaks the protocol, or `shutdown`
/// triggers. Requests run on `cfg.workers` threads.
pub fn serve_connection<S: Stream>(
    s: S,
    dev: Arc<dyn BlockDevice>,
    cfg: &ServerConfig,
    stats: &ServerStats,
    shutdown: &Shutdown,
) -> io::Result<()> {
    let exports = Exports::single(cfg.export_name.clone(), dev);
    serve_connection_to(s, &exports, cfg, stats, shutdown)
}

/// As [`serve_connection`], the client choosing one of `exports` by name.
pub fn serve_connection_to<S: Stream>(
    s: S,
    exports: &Exports,
    cfg: &ServerConfig,
    stats: &ServerStats,
    shutdown: &Shutdown,
) -> io::Result<()> {
    stats.connections.fetch_add(1, Relaxed);
    let writer = Mutex::new(BufWriter::with_capacity(256 << 10, s.try_clone()?));
    // A shutdown ends this connection's wait for its client (its reading side).
    let closer = s.try_clone()?;
    let _registered = shutdown.register(Box::new(move || closer.shutdown_read()));
    let mut reader = BufReader::with_capacity(256 << 10, s);
    let mut demote_session = None;
    let dev = {
        let mut hs = HandshakeIo {
            r: &mut reader,
            w: &writer,
        };
        match handshake(&mut hs, exports, cfg, stats, &mut demote_session)? {
            Some(dev) => dev,
            None => return Ok(()),
        }
    };
    let demotes = demote_session.is_some();
    let dev = crate::demote::for_connection(dev, demote_session);
    stats.sessions.fetch_add(1, Relaxed);
    let (tx, rx) = mpsc::sync_channel::<Job>(cfg.workers.max(1) * 4);
    let rx = Mutex::new(rx);
    let result = std::thread::scope(|scope| {
        let (dev_ref, writer_ref, rx_ref) = (&*dev, &writer, &rx);
        let mut handles = Vec::new();
        for _ in 0..cfg.workers {
            handles.push(scope.spawn(move || loop {
                let job = rx_ref.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(mut job) = job else { return };
                let err = run(&mut job, dev_ref, stats);
                let data = if job.typ == CMD_READ {
                    &job.payload[..]
                } else {
                    &[][..]
                };
                if reply(writer_ref, &job.handle, err, data, false).is_err() {
                    return;
                }
            }));
        }
        let out = transmission(
            &mut reader,
            &*dev,
            cfg,
            stats,
            shutdown,
            &writer,
            (cfg.workers > 0).then_some(&tx),
            demotes,
        );
        // Started reads still in flight end here (their plans hold ordering tickets).
        while dev_ref.reap_started(true, &mut |_, _| {}) > 0 {}
        drop(tx);
        for h in handles {
            let _ = h.join();
        }
        out
    });
    let _ = writer.lock().unwrap_or_else(|e| e.into_inner()).flush();
    reader.get_ref().shutdown();
    match result {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
            ) =>
        {
            stats.broken_connections.fetch_add(1, Relaxed);
            Ok(())
        }
        other => other,
    }
}

/// The handshake reads through the buffered reader and writes through the shared writer.
struct HandshakeIo<'a, R, W: Write> {
    r: &'a mut R,
    w: &'a Mutex<BufWriter<W>>,
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

/// The reply error of a request run inline, counting its bytes or its EIO.
fn errno_of(res: io::Result<()>, stats: &ServerStats, bytes: &AtomicU64, len: u32) -> u32 {
    match res {
        Ok(()) => {
            bytes.fetch_add(len as u64, Relaxed);
            0
        }
        Err(_) => {
            stats.eio.fetch_add(1, Relaxed);
            EIO
        }
    }
}

/// Most reads offered to the device at once.
const READ_BATCH: usize = 32;

/// `first` (handle, offset, length) and the valid READ requests that follow it, whole, in the
/// reader's buffer (up to `max`), consumed from it.
fn take_waiting_reads<S: Read>(
    reader: &mut BufReader<S>,
    dev: &dyn BlockDevice,
    cfg: &ServerConfig,
    stats: &ServerStats,
    first: ([u8; 8], u64, u32),
    max: usize,
) -> Vec<([u8; 8], u64, u32)> {
    let mut reads = vec![first];
    while reads.len() < max {
        let b = reader.buffer();
        if b.len() < 28
            || u32::from_be_bytes(b[0..4].try_into().unwrap()) != REQ_MAGIC
            || u16::from_be_bytes([b[6], b[7]]) != CMD_READ
        {
            break;
        }
        let handle: [u8; 8] = b[8..16].try_into().unwrap();
        let offset = u64::from_be_bytes(b[16..24].try_into().unwrap());
        let len = u32::from_be_bytes(b[24..28].try_into().unwrap());
        let valid = len <= cfg.max_payload
            && offset
                .checked_add(len as u64)
                .is_some_and(|e| e <= dev.size());
        if !valid {
            // Answered on its own by the main loop (EINVAL).
            break;
        }
        io::BufRead::consume(reader, 28);
        stats.requests.fetch_add(1, Relaxed);
        reads.push((handle, offset, len));
    }
    reads
}

/// Offers `reads` to the device together; replies to those it serves (in order), and hands
/// the rest to the workers. `more`: requests still wait in the reader's buffer.
fn read_fast_batch<W: Write>(
    reads: Vec<([u8; 8], u64, u32)>,
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<BufWriter<W>>,
    tx: &mpsc::SyncSender<Job>,
    more: bool,
) -> io::Result<()> {
    let mut bufs: Vec<Vec<u8>> = reads.iter().map(|r| vec![0u8; r.2 as usize]).collect();
    let answers = {
        let mut ios: Vec<(u64, &mut [u8])> = reads
            .iter()
            .zip(bufs.iter_mut())
            .map(|(r, b)| (r.1, &mut b[..]))
            .collect();
        dev.read_fast_many(&mut ios)
    };
    let last = reads.len() - 1;
    for (i, ((r, buf), answer)) in reads.into_iter().zip(bufs).zip(answers).enumerate() {
        let (handle, offset, len) = r;
        match answer {
            Some(res) => {
                let err = errno_of(res, stats, &stats.bytes_read, len);
                reply(writer, &handle, err, &buf, more || i < last)?;
            }
            None => {
                let job = Job {
                    typ: CMD_READ,
                    flags: 0,
                    handle,
                    offset,
                    len,
                    payload: buf,
                };
                if tx.send(job).is_err() {
                    return Ok(());
                }
            }
        }
    }
    // Replies held back for a later read a worker took: out now unless more are coming.
    if !more {
        writer.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    }
    Ok(())
}

/// Answers the started reads that finished; while some are in flight and no request waits
/// (in the reader's buffer or on the socket `fd`), waits for the next to finish. Replies go
/// out at once: the client sends its next requests as it gets them.
fn answer_started<S: Read, W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<BufWriter<W>>,
    reader: &BufReader<S>,
    fd: Option<RawFd>,
    in_flight: &mut usize,
) -> io::Result<()> {
    let mut wait = false;
    loop {
        reap_and_answer(dev, stats, writer, wait, in_flight)?;
        if *in_flight == 0 || !reader.buffer().is_empty() || fd.is_none_or(readable) {
            return Ok(());
        }
        wait = true;
    }
}

/// Hands `job` to the workers; `false` when they are gone. While their queue is full and
/// reads started on the device are in flight, those are answered first: a started read holds
/// its lines' ordering ticket until it is reaped, here, so workers waiting on those lines
/// could otherwise wait for a reader blocked on their full queue.
fn hand_over<W: Write>(
    tx: &mpsc::SyncSender<Job>,
    job: Job,
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<BufWriter<W>>,
    started: &mut usize,
) -> io::Result<bool> {
    let mut job = job;
    while *started > 0 {
        match tx.try_send(job) {
            Ok(()) => return Ok(true),
            Err(mpsc::TrySendError::Disconnected(_)) => return Ok(false),
            Err(mpsc::TrySendError::Full(j)) => {
                job = j;
                if reap_and_answer(dev, stats, writer, true, started)? == 0 {
                    // Nothing in flight after all (the device says): block below.
                    *started = 0;
                }
            }
        }
    }
    Ok(tx.send(job).is_ok())
}

/// Answers every started read still in flight, waiting for each (the connection is ending).
fn answer_all_started<W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<BufWriter<W>>,
    in_flight: &mut usize,
) -> io::Result<()> {
    while *in_flight > 0 {
        if reap_and_answer(dev, stats, writer, true, in_flight)? == 0 {
            break;
        }
    }
    writer.lock().unwrap_or_else(|e| e.into_inner()).flush()
}

/// Hands each started read that finished (with `wait`, first waiting for one) its reply, its
/// bytes or EIO, and sends the replies; counts them off `in_flight` and returns how many.
fn reap_and_answer<W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<BufWriter<W>>,
    wait: bool,
    in_flight: &mut usize,
) -> io::Result<usize> {
    let mut out = Ok(());
    let n = dev.reap_started(wait, &mut |tag, res| {
        if out.is_err() {
            // The connection broke: the rest are reaped, not answered.
            return;
        }
        let (err, data) = match res {
            Ok(d) => {
                stats.bytes_read.fetch_add(d.len() as u64, Relaxed);
                (0, d)
            }
            Err(_) => {
                stats.eio.fetch_add(1, Relaxed);
                (EIO, &[][..])
            }
        };
        out = reply(writer, &tag.to_be_bytes(), err, data, true);
    });
    *in_flight = in_flight.saturating_sub(n);
    out?;
    if n > 0 {
        writer.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    }
    Ok(n)
}

/// Whether `fd` has bytes to read now (or an error or hang-up to report).
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd, alive for the call; a zero timeout never blocks.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r != 0
}

/// Serves requests until the client leaves; `demotes`: the client negotiated DEMOTE.
#[allow(clippy::too_many_arguments)] // the connection's parts, each used on the request path
fn transmission<S: Stream, W: Write>(
    reader: &mut BufReader<S>,
    dev: &dyn BlockDevice,
    cfg: &ServerConfig,
    stats: &ServerStats,
    shutdown: &Shutdown,
    writer: &Mutex<BufWriter<W>>,
    pool: Option<&mpsc::SyncSender<Job>>,
    demotes: bool,
) -> io::Result<()> {
    let fd = reader.get_ref().raw_fd();
    let mut read_buf = Vec::new();
    // Reads started on the device (see `BlockDevice::start_reads`) not answered yet.
    let mut started_reads = 0usize;
    loop {
        if shutdown.is_triggered() {
            // Reads already started are answered before the connection ends.
            return answer_all_started(dev, stats, writer, &mut started_reads);
        }
        if started_reads > 0 {
            answer_started(dev, stats, writer, reader, fd, &mut started_reads)?;
        }
        let h: [u8; 28] = match rd(reader) {
            Ok(h) => h,
            // The shutdown ended the wait: what was taken is answered.
            Err(_) if shutdown.is_triggered() => {
                return answer_all_started(dev, stats, writer, &mut started_reads);
            }
            Err(e) => return Err(e),
        };
        if u32::from_be_bytes(h[0..4].try_into().unwrap()) != REQ_MAGIC {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        }
        stats.requests.fetch_add(1, Relaxed);
        let flags = u16::from_be_bytes([h[4], h[5]]);
        let typ = u16::from_be_bytes([h[6], h[7]]);
        let handle: [u8; 8] = h[8..16].try_into().unwrap();
        let offset = u64::from_be_bytes(h[16..24].try_into().unwrap());
        let len = u32::from_be_bytes(h[24..28].try_into().unwrap());
        let in_range = offset
            .checked_add(len as u64)
            .is_some_and(|e| e <= dev.size());
        let mut payload = Vec::new();
        // A DEMOTE carries a payload only on a connection that negotiated it: elsewhere its
        // type is unknown (answered EINVAL at once, nothing read).
        if typ == CMD_WRITE || (typ == crate::demote::CMD_TIERCACHE_DEMOTE && demotes) {
            if len > cfg.max_payload {
                stats.protocol_errors.fetch_add(1, Relaxed);
                return Ok(());
            }
            read_payload(reader, len as usize, &mut payload)?;
        }
        let invalid = match typ {
            // The protocol: every request before the disconnect is handled (the client may
            // have closed already: answering is best effort).
            CMD_DISC => {
                let _ = answer_all_started(dev, stats, writer, &mut started_reads);
                return Ok(());
            }
            CMD_READ => !in_range || len > cfg.max_payload,
            CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES => !in_range,
            CMD_FLUSH => false,
            crate::demote::CMD_TIERCACHE_DEMOTE => {
                !demotes || !in_range || crate::demote::tracker_of(dev).is_none()
            }
            _ => true,
        };
        let more = !reader.buffer().is_empty();
        if invalid {
            stats.einval.fetch_add(1, Relaxed);
            reply(writer, &handle, EINVAL, &[], more)?;
            continue;
        }
        if let (CMD_READ, Some(tx)) = (typ, pool) {
            if dev.hits_wait_for_device() {
                // Hits wait for the device (O_DIRECT): started together, answered as they
                // finish, while the reader goes on taking requests.
                let reads =
                    take_waiting_reads(reader, dev, cfg, stats, (handle, offset, len), READ_BATCH);
                let tags: Vec<(u64, u64, u32)> = reads
                    .iter()
                    .map(|&(h, o, l)| (u64::from_be_bytes(h), o, l))
                    .collect();
                let started = dev.start_reads(&tags);
                for ((h, o, l), st) in reads.into_iter().zip(started) {
                    match st {
                        Some(Ok(())) => started_reads += 1,
                        Some(Err(_)) => {
                            stats.eio.fetch_add(1, Relaxed);
                            // Out now unless a request waits (its reply flushes): no reap
                            // below need flush it.
                            reply(writer, &h, EIO, &[], !reader.buffer().is_empty())?;
                        }
                        None => {
                            let job = Job {
                                typ,
                                flags: 0,
                                handle: h,
                                offset: o,
                                len: l,
                                payload: Vec::new(),
                            };
                            if !hand_over(tx, job, dev, stats, writer, &mut started_reads)? {
                                return Ok(());
                            }
                        }
                    }
                }
                answer_started(dev, stats, writer, reader, fd, &mut started_reads)?;
                continue;
            }
            if more {
                // Several reads waiting: offered to the device together (their cache hits
                // start at once); the ones it does not claim go to the workers.
                let reads =
                    take_waiting_reads(reader, dev, cfg, stats, (handle, offset, len), READ_BATCH);
                read_fast_batch(reads, dev, stats, writer, tx, !reader.buffer().is_empty())?;
                continue;
            }
        }
        if typ == CMD_READ && pool.is_some() {
            // Cheap reads (cache hits) run here: no hand-off, replies batched.
            let mut buf = std::mem::take(&mut read_buf);
            buf.resize(len as usize, 0);
            if let Some(res) = dev.read_fast(&mut buf, offset) {
                let err = errno_of(res, stats, &stats.bytes_read, len);
                reply(writer, &handle, err, &buf, more)?;
                read_buf = buf;
                continue;
            }
            read_buf = buf;
        }
        if typ == CMD_WRITE && pool.is_some() && flags & CMD_FLAG_FUA == 0 {
            // Cheap writes (write-back hits) likewise; FUA writes always go to a worker.
            if let Some(res) = dev.write_fast(&payload, offset) {
                let err = errno_of(res, stats, &stats.bytes_written, len);
                reply(writer, &handle, err, &[], more)?;
                continue;
            }
        }
        let mut job = Job {
            typ,
            flags,
            handle,
            offset,
            len,
            payload,
        };
        match pool {
            Some(tx) => {
                if !hand_over(tx, job, dev, stats, writer, &mut started_reads)? {
                    return Ok(());
                }
            }
            None => {
                let err = run(&mut job, dev, stats);
                let data = if typ == CMD_READ {
                    &job.payload[..]
                } else {
                    &[][..]
                };
                reply(writer, &handle, err, data, more)?;
            }
        }
    }
}

pub(crate) fn accept_loop<L, S: Stream>(
    accept: impl Fn(&L) -> io::Result<S>,
    listener: &L,
    exports: Arc<Exports>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    std::thread::scope(|scope| {
        while !shutdown.is_triggered() {
            match accept(listener) {
                Ok(conn) => {
                    let (exports, cfg, stats, shutdown) = (
                        exports.clone(),
                        cfg.clone(),
                        stats.clone(),
                        shutdown.clone(),
                    );
                    scope.spawn(move || {
                        // A client that vanishes only ends its own connection.
                        let _ = serve_connection_to(conn, &exports, &cfg, &stats, &shutdown);
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if accept_can_go_on(&e) => {
                    // One connection lost (or the process out of descriptors until some
                    // close): not the end of the listener. Only a want of resources waits for
                    // some to come back; a client that gave up does not slow the others.
                    stats.accept_errors.fetch_add(1, Relaxed);
                    if out_of_resources(&e) {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
}

/// Whether an error accepting a connection leaves the listener usable: out of descriptors or
/// memory (until connections close), or a connection that failed before it was taken.
fn accept_can_go_on(e: &io::Error) -> bool {
    out_of_resources(e)
        || matches!(
            e.raw_os_error(),
            Some(libc::ECONNABORTED | libc::EPROTO | libc::EPERM)
        )
        || matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
        )
}

/// Whether the process is out of descriptors or memory (for a while: connections close).
fn out_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accepts Unix-socket connections until `shutdown` triggers (then waits for open
/// connections to end), one thread per connection.
pub fn serve_unix(
    listener: UnixListener,
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let accept = |l: &UnixListener| {
        let (c, _) = l.accept()?;
        c.set_nonblocking(false)?;
        Ok(c)
    };
    let exports = Arc::new(Exports::single(cfg.export_name.clone(), dev));
    accept_loop(accept, &listener, exports, cfg, stats, shutdown)
}

/// As [`serve_unix`] over TCP.
pub fn serve_tcp(
    listener: TcpListener,
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let accept = |l: &TcpListener| {
        let (c, _) = l.accept()?;
        c.set_nonblocking(false)?;
        c.set_nodelay(true)?;
        Ok(c)
    };
    let exports = Arc::new(Exports::single(cfg.export_name.clone(), dev));
    accept_loop(accept, &listener, exports, cfg, stats, shutdown)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Running out of descriptors or memory, or a client that gave up before it was taken,
    /// loses one connection; a listener that is not one any more ends the loop.
    #[test]
    fn accept_errors_that_leave_the_listener_usable_are_told_apart() {
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::ECONNABORTED,
        ] {
            assert!(
                accept_can_go_on(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        for errno in [libc::EBADF, libc::EINVAL, libc::ENOTSOCK] {
            assert!(
                !accept_can_go_on(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        // Only a want of resources waits before the next accept.
        assert!(out_of_resources(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!out_of_resources(&io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }

    /// A payload's buffer grows with the bytes that arrive: a header promising 32 MiB followed
    /// by 100 bytes holds about 1 MiB, not 32 (the buffer was zero-filled to the header's
    /// length first); a whole payload reads exactly.
    #[test]
    fn a_payload_holds_memory_by_the_bytes_that_arrive() {
        let mut payload = Vec::new();
        let e = read_payload(&mut &[7u8; 100][..], 32 << 20, &mut payload).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(payload.capacity() <= PAYLOAD_STEP, "{}", payload.capacity());
        let data: Vec<u8> = (0..(3 << 20) + 5).map(|i| i as u8).collect();
        read_payload(&mut &data[..], data.len(), &mut payload).unwrap();
        assert!(payload == data);
        read_payload(&mut &data[..4096], 4096, &mut payload).unwrap();
        assert!(payload[..] == data[..4096]);
    }
}
