//! A TLS session over a socket, shared by a connection's reader and its writers.
//!
//! A connection reads on one thread while replies (server) or requests (client) are written
//! from others, each through its own handle ([`Stream::try_clone`]). The TLS library (rustls,
//! or OpenSSL for pre-shared keys: [`Session`]) keeps one state per session, so the handles
//! share it under a lock taken only to encrypt or decrypt: the
//! socket is read and written outside it, so a reader waiting for the peer never holds up a
//! writer. Records go out in the order they were sealed: the socket's write lock is taken
//! before the session's.

use super::session::Session;
use crate::server::Stream;
use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes read from the socket at a time.
const RAW_CHUNK: usize = 64 << 10;

/// One TLS session over the socket `S`; clones share it.
pub struct TlsStream<S: Stream> {
    shared: Arc<Shared<S>>,
}

struct Shared<S: Write> {
    session: Mutex<Session>,
    /// The reading side: its socket handle and ciphertext read but not yet taken by the session.
    reading: Mutex<Reading<S>>,
    /// The writing side's socket handle; held while sealed records go out, in order.
    writing: Mutex<S>,
    /// A handle for shutting the socket down.
    control: Mutex<S>,
    /// The socket's descriptor, for polling.
    fd: Option<RawFd>,
    /// A close_notify went out (once is enough).
    closed: std::sync::atomic::AtomicBool,
}

struct Reading<S> {
    socket: S,
    raw: Vec<u8>,
    /// Where the socket is read into (allocated once: a read per request batch).
    chunk: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn tls_error(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl<S: Stream> TlsStream<S> {
    /// A session over `socket` (not yet shaken hands: see [`handshake`](Self::handshake));
    /// `early` are bytes already read from the socket that belong to the session.
    pub(crate) fn new(socket: S, session: Session, early: &[u8]) -> io::Result<Self> {
        Ok(Self {
            shared: Arc::new(Shared {
                session: Mutex::new(session),
                reading: Mutex::new(Reading {
                    socket: socket.try_clone()?,
                    raw: early.to_vec(),
                    chunk: vec![0u8; RAW_CHUNK],
                }),
                writing: Mutex::new(socket.try_clone()?),
                fd: socket.raw_fd(),
                control: Mutex::new(socket),
                closed: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// Runs the TLS handshake to its end (a refused certificate, a wrong CA, a peer that
    /// speaks no TLS: an error, the alert sent first).
    pub(crate) fn handshake(&self) -> io::Result<()> {
        loop {
            let (handshaking, wants_write) = {
                let s = lock(&self.shared.session);
                (s.is_handshaking(), s.wants_write())
            };
            if wants_write {
                self.send_sealed()?;
                continue;
            }
            if !handshaking {
                return Ok(());
            }
            if !self.read_more()? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS: the peer closed the connection during the handshake",
                ));
            }
        }
    }

    /// Who the peer is (its PSK identity or its certificate's subject), if it said.
    pub(crate) fn peer_identity(&self) -> Option<super::PeerIdentity> {
        lock(&self.shared.session).peer_identity()
    }

    /// Ends the TLS session (a close_notify, best effort: the peer may be gone), so the
    /// peer tells a clean end from a cut connection, as the protocol asks of a disconnect.
    fn close_notify(&self) {
        if self
            .shared
            .closed
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let Ok(mut socket) = self.shared.writing.try_lock() else {
            // A writer is mid-record (a shutdown from another thread): no alert to splice in.
            return;
        };
        let mut out = Vec::new();
        {
            let mut s = lock(&self.shared.session);
            if s.is_handshaking() {
                return;
            }
            s.send_close_notify();
            while s.wants_write() {
                if s.write_tls(&mut out).is_err() {
                    break;
                }
            }
        }
        let _ = socket.write_all(&out).and_then(|_| socket.flush());
    }

    /// Sends the records the session has sealed (the socket's write lock first, then the
    /// session's: records leave in the order they were sealed).
    fn send_sealed(&self) -> io::Result<()> {
        let mut socket = lock(&self.shared.writing);
        let mut out = Vec::new();
        {
            let mut s = lock(&self.shared.session);
            while s.wants_write() {
                s.write_tls(&mut out)?;
            }
        }
        socket.write_all(&out)?;
        socket.flush()
    }

    /// Feeds the session more ciphertext (from what was read already, else from the socket);
    /// `false` at the peer's end of stream (told to the session).
    fn read_more(&self) -> io::Result<bool> {
        let mut r = lock(&self.shared.reading);
        let Reading { socket, raw, chunk } = &mut *r;
        let mut open = true;
        let outcome = if raw.is_empty() {
            let n = socket.read(chunk)?;
            open = n > 0;
            let mut s = lock(&self.shared.session);
            let taken = s.read_tls(&chunk[..n])?;
            // What the session did not take yet waits for the next call.
            raw.extend_from_slice(&chunk[taken..n]);
            s.process_new_packets().map(|_| s.wants_write())
        } else {
            let mut s = lock(&self.shared.session);
            let taken = s.read_tls(&raw[..])?;
            raw.drain(..taken);
            s.process_new_packets().map(|_| s.wants_write())
        };
        drop(r);
        match outcome {
            Ok(wants_write) => {
                if wants_write {
                    // A handshake message or a key update answered.
                    self.send_sealed()?;
                }
                Ok(open)
            }
            Err(e) => {
                // The alert telling the peer why goes out before the error.
                let _ = self.send_sealed();
                Err(tls_error(e))
            }
        }
    }
}

impl<S: Stream> Read for TlsStream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match lock(&self.shared.session).read_plaintext(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if !self.read_more()? {
                // The session now knows of the end: a close_notify before it reads as end of
                // stream, a cut connection as UnexpectedEof.
                return match lock(&self.shared.session).read_plaintext(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        Err(io::ErrorKind::UnexpectedEof.into())
                    }
                    other => other,
                };
            }
        }
    }
}

impl<S: Stream> Write for TlsStream<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut socket = lock(&self.shared.writing);
        let mut out = Vec::with_capacity(buf.len() + 64);
        {
            let mut s = lock(&self.shared.session);
            // The session takes a bounded amount of plaintext at a time: sealed as it goes.
            let mut at = 0;
            while at < buf.len() {
                let n = s.write_plaintext(&buf[at..])?;
                at += n;
                let sealed = s.wants_write();
                while s.wants_write() {
                    s.write_tls(&mut out)?;
                }
                if n == 0 && !sealed {
                    return Err(io::ErrorKind::WriteZero.into());
                }
            }
        }
        socket.write_all(&out)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        lock(&self.shared.writing).flush()
    }
}

impl<S: Stream> Stream for TlsStream<S> {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            shared: self.shared.clone(),
        })
    }
    fn shutdown(&self) {
        self.close_notify();
        lock(&self.shared.control).shutdown()
    }
    fn shutdown_read(&self) {
        lock(&self.shared.control).shutdown_read()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        self.shared.fd
    }
    fn buffered(&self) -> bool {
        // Decrypted bytes the socket no longer shows: a poll on it would miss them.
        let raw = self
            .shared
            .reading
            .try_lock()
            .is_ok_and(|r| !r.raw.is_empty());
        raw || lock(&self.shared.session).has_plaintext()
    }
}

impl<S: Write> Drop for Shared<S> {
    fn drop(&mut self) {
        // The last handle, not shut down first: a close_notify, so the peer tells a clean end
        // from a cut one.
        if *self.closed.get_mut() {
            return;
        }
        let s = self.session.get_mut().unwrap_or_else(|e| e.into_inner());
        if !s.is_handshaking() {
            s.send_close_notify();
            let mut out = Vec::new();
            while s.wants_write() {
                if s.write_tls(&mut out).is_err() {
                    break;
                }
            }
            let w = self.writing.get_mut().unwrap_or_else(|e| e.into_inner());
            let _ = w.write_all(&out).and_then(|_| w.flush());
        }
    }
}
