//! A connection's transmission phase: requests read, run (inline, on the device's started
//! reads, or on worker threads) and answered. `handshake` negotiates the export first;
//! `listen` accepts connections and stops the server.

mod handshake;
mod jobs;
mod listen;
mod meta;
mod replies;
mod started_reads;
mod upgrade;

pub(crate) use listen::accept_loop;
pub use listen::{serve_tcp, serve_unix, Shutdown, Stream};

use crate::exports::Exports;
use crate::proto::*;
use handshake::{greet, options, HandshakeIo, Negotiation, Outcome};
use jobs::{read_payload, run, Job};
use replies::{reply, Replies};
use started_reads::{
    answer_all_started, answer_started, hand_over, read_fast_batch, readable, take_waiting_reads,
    READ_BATCH,
};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tiercache_blockdev::{BlockDevice, ReapWait};
use upgrade::Transport;

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
    /// TLS sessions set up (`NBD_OPT_STARTTLS` and a completed TLS handshake).
    pub tls_sessions: AtomicU64,
    /// TLS handshakes that failed (a certificate refused either way, a peer speaking no
    /// TLS): each ended its connection.
    pub tls_handshake_failures: AtomicU64,
    /// Options refused with `NBD_REP_ERR_TLS_REQD` (or connections closed, for
    /// `NBD_OPT_EXPORT_NAME`) because TLS was not up.
    pub tls_required: AtomicU64,
    /// Exports refused to a TLS client whose identity may not use them
    /// (`NBD_REP_ERR_POLICY`).
    pub authz_refusals: AtomicU64,
    /// Sessions that negotiated extended headers (`NBD_OPT_EXTENDED_HEADERS`: 64-bit
    /// lengths).
    pub extended_headers: AtomicU64,
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
    /// How long a connection polls, without sleeping, for its next request and for the
    /// completions of its reads in flight on the device before it sleeps on them
    /// ([`MAX_BUSY_POLL`] at most; zero: sleeps at once). Busy polling spends up to a core
    /// per busy connection to save a wake-up per round trip: where waking a sleeping thread
    /// takes tens of microseconds (a virtual machine's idle vCPU), the device otherwise
    /// idles between a batch's completions and the client's next requests.
    pub busy_poll: Duration,
    /// TLS offered or required, and who may use which export (`None`: no TLS,
    /// `NBD_OPT_STARTTLS` refused).
    pub tls: Option<Arc<crate::tls::ServerTls>>,
}

/// The longest [`ServerConfig::busy_poll`]: beyond a few device latencies spinning only burns
/// the core.
pub const MAX_BUSY_POLL: Duration = Duration::from_millis(10);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_payload: 32 << 20,
            workers: 8,
            export_name: String::new(),
            busy_poll: Duration::ZERO,
            tls: None,
        }
    }
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
    // A shutdown ends this connection's wait for its client (its reading side).
    let closer = s.try_clone()?;
    let _registered = shutdown.register(Box::new(move || closer.shutdown_read()));
    let mut writer = Mutex::new(Replies::new(BufWriter::with_capacity(
        256 << 10,
        Transport::Plain(s.try_clone()?),
    )));
    let mut reader = BufReader::with_capacity(256 << 10, Transport::Plain(s.try_clone()?));
    let mut demote_session = None;
    let mut neg = Negotiation::default();
    {
        let mut hs = HandshakeIo {
            r: &mut reader,
            w: &writer,
        };
        if !greet(&mut hs, stats, &mut neg)? {
            return Ok(());
        }
    }
    let dev = loop {
        let mut hs = HandshakeIo {
            r: &mut reader,
            w: &writer,
        };
        match options(&mut hs, exports, cfg, stats, &mut demote_session, &mut neg)? {
            Outcome::Go(dev) => break dev,
            Outcome::Close => return Ok(()),
            Outcome::StartTls => {
                let Some(tls) = cfg.tls.as_ref() else {
                    return Ok(()); // Acknowledged only with TLS configured.
                };
                // Bytes the client sent after STARTTLS (its TLS hello) may sit in the
                // reader's buffer already: they open the session.
                let early = reader.buffer().to_vec();
                let session = tls
                    .session()
                    .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                let t = crate::tls::TlsStream::new(s.try_clone()?, session, &early)?;
                if t.handshake().is_err() {
                    // A certificate refused, an expired one, a client that speaks no TLS:
                    // the alert went out; this connection ends, the server goes on.
                    stats.tls_handshake_failures.fetch_add(1, Relaxed);
                    return Ok(());
                }
                stats.tls_sessions.fetch_add(1, Relaxed);
                neg.tls = true;
                neg.identity = t.peer_identity();
                reader = BufReader::with_capacity(256 << 10, Transport::Tls(t.try_clone()?));
                writer = Mutex::new(Replies::new(BufWriter::with_capacity(
                    256 << 10,
                    Transport::Tls(t),
                )));
                // Negotiated in the clear, structured replies and contexts are negotiated again.
                neg.forget_plaintext_options();
            }
        }
    };
    writer
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .set_mode(neg.structured, neg.extended);
    if neg.extended {
        stats.extended_headers.fetch_add(1, Relaxed);
    }
    let demotes = demote_session.is_some();
    let contexts = std::mem::take(&mut neg.contexts);
    let dev = crate::demote::for_connection(dev, demote_session);
    stats.sessions.fetch_add(1, Relaxed);
    let (tx, rx) = mpsc::sync_channel::<Job>(cfg.workers.max(1) * 4);
    let rx = Mutex::new(rx);
    let broken = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        let (dev_ref, writer_ref, rx_ref) = (&*dev, &writer, &rx);
        let mut handles = Vec::new();
        let broken_ref = &broken;
        for _ in 0..cfg.workers {
            // A worker lives as long as the queue: were they all to leave when replies fail
            // (the client stopped reading), the reader would block for ever handing them a job
            // and never see the connection end. Once a reply failed, jobs are dropped unrun:
            // nobody will hear of them.
            handles.push(scope.spawn(move || loop {
                let job = rx_ref.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(mut job) = job else { return };
                if broken_ref.load(Relaxed) {
                    continue;
                }
                let err = run(&mut job, dev_ref, stats);
                let data = if job.typ == CMD_READ {
                    &job.payload[..]
                } else {
                    &[][..]
                };
                if reply(writer_ref, &job.handle, err, data, false).is_err() {
                    broken_ref.store(true, Relaxed);
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
            &contexts,
        );
        // Started reads still in flight end here (their plans hold ordering tickets).
        while dev_ref.reap_started(ReapWait::Completion, &mut |_, _| {}) > 0 {}
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

/// A request's header: compact (28 bytes, 32-bit length) or, with extended headers,
/// 32 bytes with a 64-bit length.
struct Header {
    flags: u16,
    typ: u16,
    handle: [u8; 8],
    offset: u64,
    /// The effect length, or with `CMD_FLAG_PAYLOAD_LEN` the payload's.
    len: u64,
}

/// The header's size in bytes.
fn header_size(extended: bool) -> usize {
    if extended {
        32
    } else {
        28
    }
}

impl Header {
    /// `b` (of [`header_size`] bytes) parsed; `None` when its magic is not the one its size
    /// calls for.
    fn parse(b: &[u8]) -> Option<Header> {
        let magic = u32::from_be_bytes(b[0..4].try_into().unwrap());
        let len = match (b.len(), magic) {
            (28, REQ_MAGIC) => u64::from(u32::from_be_bytes(b[24..28].try_into().unwrap())),
            (32, EXT_REQ_MAGIC) => u64::from_be_bytes(b[24..32].try_into().unwrap()),
            _ => return None,
        };
        Some(Header {
            flags: u16::from_be_bytes([b[4], b[5]]),
            typ: u16::from_be_bytes([b[6], b[7]]),
            handle: b[8..16].try_into().unwrap(),
            offset: u64::from_be_bytes(b[16..24].try_into().unwrap()),
            len,
        })
    }
}

/// Serves requests until the client leaves; `demotes`: the client negotiated DEMOTE;
/// `contexts`: the metadata contexts block status reports.
#[allow(clippy::too_many_arguments)] // the connection's parts, each used on the request path
fn transmission<S: Stream, W: Write>(
    reader: &mut BufReader<S>,
    dev: &dyn BlockDevice,
    cfg: &ServerConfig,
    stats: &ServerStats,
    shutdown: &Shutdown,
    writer: &Mutex<Replies<W>>,
    pool: Option<&mpsc::SyncSender<Job>>,
    demotes: bool,
    contexts: &[meta::MetaContext],
) -> io::Result<()> {
    let fd = reader.get_ref().raw_fd();
    let (structured, extended) = writer.lock().unwrap_or_else(|e| e.into_inner()).registers();
    // Structured replies name a READ's offset, extended ones every request's: each request
    // taken that needs it is told to the writer first.
    let taken = |reads: &[([u8; 8], u64, u32)]| {
        if structured {
            let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
            for &(h, o, _) in reads {
                w.taken(h, o);
            }
        }
    };
    let mut read_buf = Vec::new();
    // Reads started on the device (see `BlockDevice::start_reads`) not answered yet.
    let mut started_reads = 0usize;
    loop {
        if shutdown.is_triggered() {
            // Reads already started are answered before the connection ends.
            return answer_all_started(dev, stats, writer, &mut started_reads);
        }
        if started_reads > 0 {
            answer_started(
                dev,
                stats,
                writer,
                reader,
                fd,
                cfg.busy_poll,
                &mut started_reads,
            )?;
        }
        if let (Some(fd), false) = (fd, cfg.busy_poll.is_zero()) {
            if reader.buffer().is_empty() && !reader.get_ref().buffered() {
                // The next request is polled for before the read below sleeps on it.
                let until = Instant::now() + cfg.busy_poll;
                while !readable(fd) && Instant::now() < until && !shutdown.is_triggered() {
                    std::hint::spin_loop();
                }
            }
        }
        let mut raw = [0u8; 32];
        let raw = &mut raw[..header_size(extended)];
        match reader.read_exact(raw) {
            Ok(()) => {}
            // The shutdown ended the wait: what was taken is answered.
            Err(_) if shutdown.is_triggered() => {
                return answer_all_started(dev, stats, writer, &mut started_reads);
            }
            Err(e) => return Err(e),
        }
        let Some(Header {
            flags,
            typ,
            handle,
            offset,
            len: effect_len,
        }) = Header::parse(raw)
        else {
            stats.protocol_errors.fetch_add(1, Relaxed);
            return Ok(());
        };
        stats.requests.fetch_add(1, Relaxed);
        // READ and WRITE lengths are payloads' (at most `max_payload`, 32 bits); a longer
        // one saturates here and is refused below.
        let len = u32::try_from(effect_len).unwrap_or(u32::MAX);
        if typ == CMD_READ || extended {
            taken(&[(handle, offset, len)]);
        }
        let in_range = offset
            .checked_add(effect_len)
            .is_some_and(|e| e <= dev.size());
        let mut payload = Vec::new();
        // A DEMOTE carries a payload only on a connection that negotiated it: elsewhere its
        // type is unknown (answered EINVAL at once, nothing read). With extended headers the
        // flag says a payload follows, whatever the command; a WRITE has one flagged or not
        // (the extension asks for the flag, qemu 10 leaves it out, and qemu's server takes
        // both).
        let has_payload = typ == CMD_WRITE
            || (typ == crate::demote::CMD_TIERCACHE_DEMOTE && demotes)
            || (extended && flags & CMD_FLAG_PAYLOAD_LEN != 0);
        if has_payload {
            if effect_len > u64::from(cfg.max_payload) {
                stats.protocol_errors.fetch_add(1, Relaxed);
                return Ok(());
            }
            read_payload(reader, len as usize, &mut payload)?;
        }
        let unexpected_payload = has_payload
            && typ != CMD_WRITE
            && !(typ == crate::demote::CMD_TIERCACHE_DEMOTE && demotes);
        let invalid = unexpected_payload
            || match typ {
                // The protocol: every request before the disconnect is handled (the client may
                // have closed already: answering is best effort).
                CMD_DISC => {
                    let _ = answer_all_started(dev, stats, writer, &mut started_reads);
                    return Ok(());
                }
                CMD_READ => !in_range || len > cfg.max_payload,
                CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_CACHE => !in_range,
                CMD_FLUSH => false,
                // Asked with no context selected, or of no bytes: the protocol's EINVAL.
                CMD_BLOCK_STATUS => contexts.is_empty() || !in_range || effect_len == 0,
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
        if typ == CMD_BLOCK_STATUS {
            // Answered here: a lookup of metadata, with no data to move.
            let req_one = flags & CMD_FLAG_REQ_ONE != 0;
            let chunks: io::Result<Vec<_>> = contexts
                .iter()
                .map(|&c| {
                    meta::block_status(dev, c, offset, effect_len, req_one).map(|x| (c.id(), x))
                })
                .collect();
            match chunks {
                Ok(chunks) => replies::block_status(writer, &handle, offset, &chunks, more)?,
                Err(_) => {
                    stats.eio.fetch_add(1, Relaxed);
                    reply(writer, &handle, EIO, &[], more)?;
                }
            }
            continue;
        }
        if typ == CMD_WRITE_ZEROES && flags & CMD_FLAG_FAST_ZERO != 0 && !dev.fast_zeroes() {
            // No faster than writing the zeroes: refused at once, nothing changed (the
            // client writes them itself, or skips what it knows reads as zero).
            reply(writer, &handle, ENOTSUP, &[], more)?;
            continue;
        }
        if let (CMD_READ, Some(tx)) = (typ, pool) {
            if dev.hits_wait_for_device() {
                // Hits wait for the device (O_DIRECT): started together, answered as they
                // finish, while the reader goes on taking requests.
                let reads = take_waiting_reads(
                    reader,
                    dev,
                    cfg,
                    stats,
                    (handle, offset, len),
                    READ_BATCH,
                    extended,
                );
                taken(&reads[1..]);
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
                                len: l.into(),
                                payload: Vec::new(),
                            };
                            if !hand_over(tx, job, dev, stats, writer, &mut started_reads)? {
                                return Ok(());
                            }
                        }
                    }
                }
                answer_started(
                    dev,
                    stats,
                    writer,
                    reader,
                    fd,
                    cfg.busy_poll,
                    &mut started_reads,
                )?;
                continue;
            }
            if more {
                // Several reads waiting: offered to the device together (their cache hits
                // start at once); the ones it does not claim go to the workers.
                let reads = take_waiting_reads(
                    reader,
                    dev,
                    cfg,
                    stats,
                    (handle, offset, len),
                    READ_BATCH,
                    extended,
                );
                taken(&reads[1..]);
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
            len: effect_len,
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
