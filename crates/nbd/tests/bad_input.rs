//! Malformed traffic: each case gets an error reply or ends only its own connection; the
//! server keeps serving its other clients and no data is harmed.
mod common;

use common::serve;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice, ReapWait};
use tiercache_nbd::*;

/// Connects and completes the handshake with NBD_OPT_GO.
fn connect(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[0..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut opt = Vec::new();
    opt.extend_from_slice(&0x4948_4156_454F_5054u64.to_be_bytes());
    opt.extend_from_slice(&7u32.to_be_bytes());
    opt.extend_from_slice(&6u32.to_be_bytes());
    opt.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    s.write_all(&opt).unwrap();
    // Replies until ACK (type 1).
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).unwrap();
        if typ == 1 {
            return s;
        }
    }
}

/// A request's bytes, appended to `r` (several go out in one write).
fn encode(r: &mut Vec<u8>, typ: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) {
    r.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    r.extend_from_slice(&0u16.to_be_bytes());
    r.extend_from_slice(&typ.to_be_bytes());
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    r.extend_from_slice(payload);
}

fn request(s: &mut UnixStream, typ: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) {
    let mut r = Vec::new();
    encode(&mut r, typ, handle, offset, len, payload);
    s.write_all(&r).unwrap();
}

/// Reads one simple reply: (error, handle).
fn reply(s: &mut UnixStream, data_len: usize) -> (u32, u64, Vec<u8>) {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x6744_6698);
    let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
    let mut d = vec![0u8; if err == 0 { data_len } else { 0 }];
    s.read_exact(&mut d).unwrap();
    (err, u64::from_be_bytes(h[8..16].try_into().unwrap()), d)
}

fn closed(s: &mut UnixStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn malformed_requests_are_answered_or_end_only_their_connection() {
    let dev = Arc::new(MemDevice::new(1 << 20));
    let cfg = ServerConfig {
        max_payload: 1 << 20,
        ..ServerConfig::default()
    };
    let (sock, stats, stop, _d) = serve(dev.clone(), cfg);
    let mut good = connect(&sock);
    request(&mut good, 1, 1, 0, 4096, &[0x11; 4096]);
    assert_eq!(reply(&mut good, 0).0, 0);

    // Unknown command: EINVAL, the connection goes on.
    let mut c = connect(&sock);
    request(&mut c, 99, 2, 0, 0, &[]);
    assert_eq!(reply(&mut c, 0), (22, 2, vec![]));
    // Out of range read and write (payload consumed): EINVAL, the connection goes on.
    request(&mut c, 0, 3, (1 << 20) - 10, 4096, &[]);
    assert_eq!(reply(&mut c, 0).0, 22);
    request(&mut c, 1, 4, u64::MAX - 5, 8, &[0xEE; 8]);
    assert_eq!(reply(&mut c, 0).0, 22);
    // Oversized read: EINVAL.
    request(&mut c, 0, 5, 0, 2 << 20, &[]);
    assert_eq!(reply(&mut c, 0).0, 22);
    request(&mut c, 0, 6, 0, 4096, &[]);
    let (e, h, d) = reply(&mut c, 4096);
    assert_eq!((e, h), (0, 6));
    assert_eq!(d, vec![0x11; 4096]);
    // Oversized write: the payload cannot be skipped, the connection closes.
    request(&mut c, 1, 7, 0, 64 << 20, &[]);
    assert!(closed(&mut c));

    // Bad request magic: closed.
    let mut c = connect(&sock);
    c.write_all(&[0xde; 28]).unwrap();
    assert!(closed(&mut c));

    // A client vanishing mid-payload: its partial write is never applied.
    let mut c = connect(&sock);
    request(&mut c, 1, 8, 0, 4096, &[0x99; 1000]);
    drop(c);

    // Bad option magic in the handshake: closed.
    let mut c = UnixStream::connect(&sock).unwrap();
    let mut hello = [0u8; 18];
    c.read_exact(&mut hello).unwrap();
    c.write_all(&3u32.to_be_bytes()).unwrap();
    c.write_all(&[0x42; 16]).unwrap();
    assert!(closed(&mut c));

    // An option past any length the server reads past (16 MiB): closed.
    let mut c = UnixStream::connect(&sock).unwrap();
    c.read_exact(&mut hello).unwrap();
    c.write_all(&3u32.to_be_bytes()).unwrap();
    let mut opt = 0x4948_4156_454F_5054u64.to_be_bytes().to_vec();
    opt.extend_from_slice(&7u32.to_be_bytes());
    opt.extend_from_slice(&u32::MAX.to_be_bytes());
    c.write_all(&opt).unwrap();
    assert!(closed(&mut c));

    // The first client is still served and its data intact.
    std::thread::sleep(Duration::from_millis(50));
    request(&mut good, 0, 9, 0, 4096, &[]);
    let (e, _, d) = reply(&mut good, 4096);
    assert_eq!(e, 0);
    assert_eq!(d, vec![0x11; 4096], "no malformed request changed the data");
    request(&mut good, 3, 10, 0, 0, &[]);
    assert_eq!(reply(&mut good, 0).0, 0, "flush");
    request(&mut good, 2, 11, 0, 0, &[]);
    assert!(closed(&mut good), "DISC closes");
    assert!(stats.protocol_errors.load(Relaxed) >= 4);
    assert!(stats.einval.load(Relaxed) >= 4);
    assert!(stats.broken_connections.load(Relaxed) >= 1);
    stop.trigger();
}

/// One option sent raw: (option, data); returns the replies' (type, data) up to the first
/// final one (ACK or an error).
fn option(s: &mut UnixStream, opt: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut o = Vec::new();
    o.extend_from_slice(&0x4948_4156_454F_5054u64.to_be_bytes());
    o.extend_from_slice(&opt.to_be_bytes());
    o.extend_from_slice(&(data.len() as u32).to_be_bytes());
    o.extend_from_slice(data);
    s.write_all(&o).unwrap();
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h)
            .expect("a reply to the option (not a hang)");
        assert_eq!(u32::from_be_bytes(h[8..12].try_into().unwrap()), opt);
        let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).unwrap();
        out.push((typ, d));
        if typ == 1 || typ & (1 << 31) != 0 {
            return out;
        }
    }
}

/// A handshake begun: the greeting read and the client's flags sent.
fn greet(sock: &Path, flags: u32) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&flags.to_be_bytes()).unwrap();
    s
}

/// A malformed NBD_OPT_GO or NBD_OPT_INFO gets NBD_REP_ERR_INVALID at once (its reply sat
/// unsent in the buffer and both sides waited forever) and negotiation goes on; a client flag
/// the server does not know ends the handshake, as the protocol says it must.
#[test]
fn malformed_options_are_answered_and_unknown_client_flags_refused() {
    const GO: u32 = 7;
    const INFO: u32 = 6;
    const ERR_INVALID: u32 = (1 << 31) + 3;
    let dev = Arc::new(MemDevice::new(1 << 20));
    let (sock, stats, _stop, _d) = serve(dev, ServerConfig::default());
    let mut s = greet(&sock, 3);
    // Too short; the name's length past the data; info requests the length leaves out; one
    // byte too many.
    for data in [
        &[][..],
        &[0, 0, 0, 9, 0, 0][..],
        &[0, 0, 0, 0, 0, 1][..],
        &[0, 0, 0, 0, 0, 0, 7][..],
    ] {
        for opt in [INFO, GO] {
            let r = option(&mut s, opt, data);
            assert_eq!(r.len(), 1, "{data:?}");
            assert_eq!(r[0].0, ERR_INVALID, "{data:?}");
        }
    }
    // A well-formed GO (one info request) then works, and so does a read.
    let r = option(&mut s, GO, &[0, 0, 0, 0, 0, 1, 0, 3]);
    assert_eq!(r.last().unwrap().0, 1, "ACK");
    request(&mut s, 0, 5, 0, 4096, &[]);
    assert_eq!(reply(&mut s, 4096).0, 0);

    let before = stats.protocol_errors.load(Relaxed);
    let mut s = greet(&sock, 3 | 8);
    assert!(closed(&mut s), "an unknown client flag ends the handshake");
    assert_eq!(stats.protocol_errors.load(Relaxed), before + 1);
}

/// An option longer than the server holds (64 KiB) is read past and refused with
/// NBD_REP_ERR_TOO_BIG, and negotiation goes on (the server closed the connection); a too-long
/// NBD_OPT_EXPORT_NAME, which has no error reply, still ends it.
#[test]
fn an_option_too_long_is_refused_as_too_big_and_negotiation_goes_on() {
    const GO: u32 = 7;
    const EXPORT_NAME: u32 = 1;
    const ERR_TOO_BIG: u32 = (1 << 31) + 9;
    let dev = Arc::new(MemDevice::new(1 << 20));
    let (sock, stats, _stop, _d) = serve(dev, ServerConfig::default());
    let mut s = greet(&sock, 3);
    let r = option(&mut s, GO, &vec![0u8; 1 << 20]);
    assert_eq!(r, vec![(ERR_TOO_BIG, Vec::new())]);
    assert_eq!(stats.protocol_errors.load(Relaxed), 1);
    let r = option(&mut s, GO, &[0, 0, 0, 0, 0, 0]);
    assert_eq!(r.last().unwrap().0, 1, "ACK after the refused option");
    request(&mut s, 0, 5, 0, 4096, &[]);
    assert_eq!(reply(&mut s, 4096).0, 0);

    let mut s = greet(&sock, 3);
    let mut o = Vec::new();
    o.extend_from_slice(&0x4948_4156_454F_5054u64.to_be_bytes());
    o.extend_from_slice(&EXPORT_NAME.to_be_bytes());
    o.extend_from_slice(&((1u32 << 20).to_be_bytes()));
    s.write_all(&o).unwrap();
    assert!(closed(&mut s), "a too-long export name ends the handshake");
    assert_eq!(stats.protocol_errors.load(Relaxed), 2);
}

/// The DEMOTE command type on a connection that did not negotiate DEMOTE is an unknown
/// command: EINVAL at once, no payload read (the server waited for 4096 bytes the client never
/// sent, or took its next requests for them).
#[test]
fn a_demote_without_its_option_is_an_unknown_command() {
    let dev = Arc::new(MemDevice::new(1 << 20));
    let (sock, _stats, _stop, _d) = serve(dev, ServerConfig::default());
    let mut s = connect(&sock);
    request(
        &mut s,
        tiercache_nbd::demote::CMD_TIERCACHE_DEMOTE,
        1,
        0,
        4096,
        &[],
    );
    request(&mut s, 0, 2, 0, 4096, &[]);
    assert_eq!(reply(&mut s, 0), (22, 1, vec![]));
    let (err, handle, _) = reply(&mut s, 4096);
    assert_eq!((err, handle), (0, 2));
}

/// The plain I/O of a test device, handed to its `MemDevice` field.
macro_rules! forward_to_memory {
    ($mem:tt) => {
        fn size(&self) -> u64 {
            self.$mem.size()
        }
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
            self.$mem.read_at(buf, off)
        }
        fn write_at(&self, data: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
            self.$mem.write_at(data, off, fua)
        }
        fn flush(&self) -> std::io::Result<()> {
            self.$mem.flush()
        }
    };
}

/// A device whose hits wait for it, and whose every started read fails at once (as an engine
/// that halted answers them).
struct StartsFail(MemDevice);

impl tiercache_blockdev::BlockDevice for StartsFail {
    forward_to_memory!(0);
    fn hits_wait_for_device(&self) -> bool {
        true
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<std::io::Result<()>>> {
        reads
            .iter()
            .map(|_| Some(Err(std::io::Error::other("halted"))))
            .collect()
    }
}

/// A read that fails as it is started is answered EIO at once: its reply was buffered and
/// never sent when no other reply followed.
#[test]
fn a_started_read_that_fails_at_once_is_answered() {
    let dev = Arc::new(StartsFail(MemDevice::new(1 << 20)));
    assert!(dev.hits_wait_for_device());
    let (sock, stats, _stop, _d) = serve(dev, ServerConfig::default());
    let mut s = connect(&sock);
    request(&mut s, 0, 9, 0, 4096, &[]);
    assert_eq!(reply(&mut s, 4096), (5, 9, vec![]));
    assert_eq!(stats.eio.load(Relaxed), 1);
}

/// A device whose hits wait for it and whose started reads complete `delay` after they
/// start; a reap waiting for a completion or a readable descriptor wakes for either.
struct SlowStarts {
    mem: MemDevice,
    delay: Duration,
    started: std::sync::Mutex<Vec<(u64, u64, u32, std::time::Instant)>>,
}

impl SlowStarts {
    fn new(mem: MemDevice, delay: Duration) -> SlowStarts {
        SlowStarts {
            mem,
            delay,
            started: Default::default(),
        }
    }
}

impl tiercache_blockdev::BlockDevice for SlowStarts {
    forward_to_memory!(mem);
    fn hits_wait_for_device(&self) -> bool {
        true
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<std::io::Result<()>>> {
        let due = std::time::Instant::now() + self.delay;
        let mut s = self.started.lock().unwrap();
        reads
            .iter()
            .map(|&(tag, off, len)| {
                s.push((tag, off, len, due));
                Some(Ok(()))
            })
            .collect()
    }
    fn reap_started(
        &self,
        wait: ReapWait,
        f: &mut dyn FnMut(u64, std::io::Result<&[u8]>),
    ) -> usize {
        let mut s = self.started.lock().unwrap();
        let Some(&(_, _, _, due)) = s.first() else {
            return 0;
        };
        let now = std::time::Instant::now();
        if due > now {
            match wait {
                ReapWait::No => return 0,
                ReapWait::Completion => std::thread::sleep(due - now),
                ReapWait::CompletionOrReadable(fd) => {
                    let mut p = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let ms = (due - now).as_millis() as i32 + 1;
                    // SAFETY: one valid pollfd, alive for the call.
                    if unsafe { libc::poll(&mut p, 1, ms) } > 0 {
                        return 0;
                    }
                }
            }
        }
        let (tag, off, len, _) = s.remove(0);
        let mut buf = vec![0u8; len as usize];
        self.mem.read_at(&mut buf, off).unwrap();
        f(tag, Ok(&buf));
        1
    }
}

/// A read started on the device and still in flight when the client disconnects is answered
/// before the connection ends (the protocol: the server handles every request sent before
/// NBD_CMD_DISC); its reply was dropped.
#[test]
fn a_disconnect_answers_the_reads_in_flight_first() {
    let mem = MemDevice::new(1 << 20);
    mem.write_at(&[0x5a; 4096], 8192, false).unwrap();
    let dev = Arc::new(SlowStarts::new(mem, Duration::from_millis(50)));
    let (sock, _stats, _stop, _d) = serve(dev, ServerConfig::default());
    let mut s = connect(&sock);
    // The read and the disconnect in one write: the server sees the disconnect while the
    // read is on the device.
    let mut both = Vec::new();
    encode(&mut both, 0, 3, 8192, 4096, &[]);
    encode(&mut both, 2, 4, 0, 0, &[]);
    s.write_all(&both).unwrap();
    assert_eq!(reply(&mut s, 4096), (0, 3, vec![0x5a; 4096]));
    assert!(closed(&mut s));
}

/// A request that arrives while a read is on the device is taken at once and answered first:
/// the reader sleeps on the device and the socket together (it slept on the device alone, so
/// the write's reply came only after the read's, 2 s on). With busy polling, the same.
#[test]
fn a_request_arriving_while_a_read_is_on_the_device_is_not_held_behind_it() {
    for busy_poll in [Duration::ZERO, Duration::from_millis(1)] {
        let mem = MemDevice::new(1 << 20);
        mem.write_at(&[0x5a; 4096], 8192, false).unwrap();
        let dev = Arc::new(SlowStarts::new(mem, Duration::from_secs(2)));
        let cfg = ServerConfig {
            busy_poll,
            ..ServerConfig::default()
        };
        let (sock, _stats, _stop, _d) = serve(dev, cfg);
        let mut s = connect(&sock);
        request(&mut s, 0, 3, 8192, 4096, &[]);
        std::thread::sleep(Duration::from_millis(100));
        let t0 = std::time::Instant::now();
        request(&mut s, 1, 4, 65536, 512, &[7; 512]);
        assert_eq!(reply(&mut s, 0), (0, 4, vec![]), "the write's reply first");
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "the write waited {:?} ({busy_poll:?} busy polling)",
            t0.elapsed()
        );
        assert_eq!(reply(&mut s, 4096), (0, 3, vec![0x5a; 4096]));
    }
}

/// A device whose started reads hold the lines' ordering tickets, as the engine's do: a write
/// waits until every started read is reaped, and a started read is done only when the server
/// waits for it.
struct TicketsHeld {
    mem: MemDevice,
    started: std::sync::Mutex<Vec<(u64, u64, u32)>>,
    reaped: std::sync::Condvar,
}

impl tiercache_blockdev::BlockDevice for TicketsHeld {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.mem.read_at(buf, off)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.mem.flush()
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
        let s = self.started.lock().unwrap();
        let (s, timeout) = self
            .reaped
            .wait_timeout_while(s, Duration::from_secs(20), |s| !s.is_empty())
            .unwrap();
        drop(s);
        if timeout.timed_out() {
            return Err(std::io::Error::other("waited 20 s for a started read"));
        }
        self.mem.write_at(data, off, fua)
    }
    fn hits_wait_for_device(&self) -> bool {
        true
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<std::io::Result<()>>> {
        let mut s = self.started.lock().unwrap();
        reads
            .iter()
            .map(|&r| {
                s.push(r);
                Some(Ok(()))
            })
            .collect()
    }
    fn reap_started(
        &self,
        wait: ReapWait,
        f: &mut dyn FnMut(u64, std::io::Result<&[u8]>),
    ) -> usize {
        if wait == ReapWait::No {
            return 0;
        }
        let done: Vec<_> = std::mem::take(&mut *self.started.lock().unwrap());
        for &(tag, off, len) in &done {
            let mut buf = vec![0u8; len as usize];
            self.mem.read_at(&mut buf, off).unwrap();
            f(tag, Ok(&buf));
        }
        self.reaped.notify_all();
        done.len()
    }
}

/// Writes queued behind a started read (they wait for its ordering ticket, released when the
/// read is reaped) fill the workers' queue: the reader answers the started read instead of
/// blocking on the full queue, where nothing would ever reap it (a deadlock of the connection,
/// and of every other one waiting on those lines).
#[test]
fn a_full_worker_queue_does_not_strand_a_started_read() {
    let dev = Arc::new(TicketsHeld {
        mem: MemDevice::new(1 << 20),
        started: Default::default(),
        reaped: Default::default(),
    });
    let cfg = ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    };
    let (sock, _stats, _stop, _d) = serve(dev, cfg);
    let mut s = connect(&sock);
    let mut all = Vec::new();
    encode(&mut all, 0, 1, 0, 4096, &[]);
    // One write taken by the worker, four queued, the sixth on a full queue.
    for h in 2..8 {
        encode(&mut all, 1, h, 0, 4096, &[h as u8; 4096]);
    }
    s.write_all(&all).unwrap();
    let mut handles = Vec::new();
    for _ in 0..7 {
        let mut h = [0u8; 16];
        s.read_exact(&mut h).expect("a reply (not a deadlock)");
        assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0);
        let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
        if handle == 1 {
            let mut d = vec![0u8; 4096];
            s.read_exact(&mut d).unwrap();
        }
        handles.push(handle);
    }
    handles.sort();
    assert_eq!(handles, (1..8).collect::<Vec<_>>());
}

/// A server on a 1 MiB memory device whose end is watched: the receiver hears once
/// `serve_unix` returned (with whether it returned `Ok`).
fn serve_watched(
    cfg: ServerConfig,
) -> (
    std::path::PathBuf,
    Arc<ServerStats>,
    Shutdown,
    std::sync::mpsc::Receiver<bool>,
    tempfile::TempDir,
) {
    let dev = Arc::new(MemDevice::new(1 << 20));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (st, stopper) = (stats.clone(), stop.clone());
    std::thread::spawn(move || {
        let out = serve_unix(listener, dev, cfg, st, stopper);
        let _ = done_tx.send(out.is_ok());
    });
    (sock, stats, stop, done_rx, dir)
}

/// A shutdown ends the server while clients sit idle: one that finished its handshake and
/// sends nothing, one that connected and never began it. Their connections waited for a next
/// request that never came, so the server (and a SIGTERM, a halt or a deadline) waited with
/// them.
#[test]
fn a_shutdown_ends_connections_waiting_for_idle_clients() {
    let (sock, stats, stop, done_rx, _dir) = serve_watched(ServerConfig::default());
    let mut idle = connect(&sock);
    request(&mut idle, 0, 1, 0, 4096, &[]);
    assert_eq!(reply(&mut idle, 4096).0, 0);
    let mut silent = UnixStream::connect(&sock).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut hello = [0u8; 18];
    silent.read_exact(&mut hello).unwrap();
    // Both connections are open and waiting on their clients.
    let t0 = std::time::Instant::now();
    while stats.connections.load(Relaxed) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.trigger();
    let ended = done_rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(ended, Ok(true), "the server waited for its idle clients");
    assert!(closed(&mut idle) && closed(&mut silent));
}

/// A client that stops reading its replies (and then goes): the workers' replies fail, and
/// they must keep taking jobs, or the reader blocks for ever handing one over, never sees the
/// client go, and the server's shutdown waits for that connection.
#[test]
fn a_client_that_stops_reading_does_not_wedge_its_connection() {
    let (sock, _stats, stop, done_rx, _dir) = serve_watched(ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    });
    let mut s = connect(&sock);
    s.shutdown(std::net::Shutdown::Read).unwrap();
    // Far more requests than the workers' queue holds, each answered into a closed reader.
    let mut all = Vec::new();
    for h in 0..64u64 {
        encode(&mut all, 3, h, 0, 0, &[]);
        encode(
            &mut all,
            1,
            1000 + h,
            (h % 16) * 4096,
            4096,
            &[h as u8; 4096],
        );
    }
    // The server may stop reading once it is wedged: the write must not hold the test up.
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(&all);
    drop(s);
    std::thread::sleep(Duration::from_millis(200));
    stop.trigger();
    let ended = done_rx.recv_timeout(Duration::from_secs(20));
    assert!(
        ended.is_ok(),
        "the server's shutdown waited for a wedged connection"
    );
}
