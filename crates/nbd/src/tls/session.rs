//! One TLS session's state, whichever library runs it: rustls (X.509) or OpenSSL (pre-shared
//! keys, see `psk.rs`). [`TlsStream`](super::TlsStream) moves ciphertext between the socket
//! and the session and plaintext between the session and its callers; both libraries are
//! driven the same way, without touching the socket: ciphertext in ([`Session::read_tls`]),
//! sealed records out ([`Session::write_tls`]).

use super::PeerIdentity;
use openssl::ssl::{ErrorCode, Ssl, SslStream};
use std::io::{self, Read, Write};

/// A TLS session, not yet or already shaken hands.
// One per connection, kept behind its stream's `Arc`: boxing rustls's state would only add a
// pointer chase to every record.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Session {
    /// rustls's.
    Rustls(rustls::Connection),
    /// OpenSSL's, over memory buffers.
    OpenSsl(Box<OpenSslSession>),
}

impl From<rustls::Connection> for Session {
    fn from(c: rustls::Connection) -> Self {
        Self::Rustls(c)
    }
}

impl Session {
    /// Whether the handshake is still under way.
    pub(crate) fn is_handshaking(&self) -> bool {
        match self {
            Self::Rustls(c) => c.is_handshaking(),
            Self::OpenSsl(s) => !s.handshaken,
        }
    }

    /// Whether sealed records wait to go out.
    pub(crate) fn wants_write(&self) -> bool {
        match self {
            Self::Rustls(c) => c.wants_write(),
            Self::OpenSsl(s) => !s.stream.get_ref().outgoing.is_empty(),
        }
    }

    /// Moves sealed records to `out`.
    pub(crate) fn write_tls(&mut self, out: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Self::Rustls(c) => c.write_tls(out),
            Self::OpenSsl(s) => {
                let o = &mut s.stream.get_mut().outgoing;
                let n = o.len();
                out.append(o);
                Ok(n)
            }
        }
    }

    /// Takes ciphertext from the socket (empty: the peer's end of stream); how much was taken.
    pub(crate) fn read_tls(&mut self, mut input: &[u8]) -> io::Result<usize> {
        match self {
            Self::Rustls(c) => c.read_tls(&mut input),
            Self::OpenSsl(s) => {
                let m = s.stream.get_mut();
                if input.is_empty() {
                    m.eof = true;
                }
                m.incoming.extend_from_slice(input);
                Ok(input.len())
            }
        }
    }

    /// Processes the ciphertext taken: the handshake goes on. An error ends the session
    /// (the alert telling the peer why is sealed, to go out).
    pub(crate) fn process_new_packets(&mut self) -> Result<(), String> {
        match self {
            Self::Rustls(c) => c
                .process_new_packets()
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Self::OpenSsl(s) if !s.handshaken => s.drive(),
            // Records are opened as plaintext is read.
            Self::OpenSsl(_) => Ok(()),
        }
    }

    /// Plaintext received: `WouldBlock` if none yet, 0 at the peer's close_notify,
    /// `UnexpectedEof` at an end without one.
    pub(crate) fn read_plaintext(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Rustls(c) => c.reader().read(buf),
            Self::OpenSsl(s) => s.read(buf),
        }
    }

    /// Seals plaintext (some of it: how much).
    pub(crate) fn write_plaintext(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Rustls(c) => c.writer().write(buf),
            Self::OpenSsl(s) => s
                .stream
                .ssl_write(buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))),
        }
    }

    /// Seals a close_notify.
    pub(crate) fn send_close_notify(&mut self) {
        match self {
            Self::Rustls(c) => c.send_close_notify(),
            Self::OpenSsl(s) => {
                // Best effort: the peer's close_notify is not waited for.
                let _ = s.stream.shutdown();
            }
        }
    }

    /// Whether plaintext can be read without more ciphertext from the socket.
    pub(crate) fn has_plaintext(&mut self) -> bool {
        match self {
            Self::Rustls(c) => c
                .process_new_packets()
                .is_ok_and(|st| st.plaintext_bytes_to_read() > 0),
            Self::OpenSsl(s) => s.has_plaintext(),
        }
    }

    /// Who the peer is: its PSK identity, or the subject of the certificate it presented.
    pub(crate) fn peer_identity(&self) -> Option<PeerIdentity> {
        match self {
            Self::Rustls(c) => c
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| PeerIdentity::of_certificate(c.as_ref())),
            Self::OpenSsl(s) => s.peer_identity(),
        }
    }
}

/// The socket side of an OpenSSL session: ciphertext received and not yet opened, and records
/// sealed and not yet sent.
#[derive(Default)]
struct Memory {
    incoming: Vec<u8>,
    /// How much of `incoming` OpenSSL has taken.
    taken: usize,
    outgoing: Vec<u8>,
    /// The peer ended the stream.
    eof: bool,
}

impl Memory {
    fn unread(&self) -> bool {
        self.taken < self.incoming.len()
    }
}

impl Read for Memory {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.unread() {
            self.incoming.clear();
            self.taken = 0;
            return if self.eof {
                Ok(0)
            } else {
                // OpenSSL's WANT_READ: the stream reads the socket and comes back.
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.incoming.len() - self.taken);
        buf[..n].copy_from_slice(&self.incoming[self.taken..self.taken + n]);
        self.taken += n;
        Ok(n)
    }
}

impl Write for Memory {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outgoing.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An OpenSSL session over [`Memory`].
pub(crate) struct OpenSslSession {
    stream: SslStream<Memory>,
    handshaken: bool,
    /// A client's: the server must have used the pre-shared key, not a certificate.
    psk_client: bool,
}

impl OpenSslSession {
    /// A server session (`accept`) or a client one; a client's hello is sealed at once.
    pub(crate) fn new(mut ssl: Ssl, accept: bool) -> Result<Self, String> {
        if accept {
            ssl.set_accept_state();
        } else {
            ssl.set_connect_state();
        }
        let stream = SslStream::new(ssl, Memory::default()).map_err(|e| e.to_string())?;
        let mut s = Self {
            stream,
            handshaken: false,
            psk_client: !accept,
        };
        if !accept {
            s.drive()?;
        }
        Ok(s)
    }

    /// Takes the handshake as far as the ciphertext received allows.
    fn drive(&mut self) -> Result<(), String> {
        match self.stream.do_handshake() {
            Ok(()) => {
                if self.psk_client && self.stream.ssl().peer_certificate().is_some() {
                    // Unreachable while no CA is trusted: kept as the invariant's guard.
                    return Err(
                        "the server authenticated with a certificate, not the pre-shared key"
                            .into(),
                    );
                }
                self.handshaken = true;
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::WANT_READ => Ok(()),
            Err(e) => Err(self.describe(e)),
        }
    }

    fn describe(&self, e: openssl::ssl::Error) -> String {
        if self.stream.get_ref().eof && !self.stream.get_ref().unread() {
            return "the peer closed the connection".into();
        }
        match e.ssl_error() {
            // The reasons OpenSSL queued ("tlsv1 alert decrypt error", ...), without codes.
            Some(stack) => stack
                .errors()
                .iter()
                .map(|x| x.reason().unwrap_or("unknown").to_string())
                .collect::<Vec<_>>()
                .join("; "),
            None => e.to_string(),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.stream.ssl_read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.code() == ErrorCode::ZERO_RETURN => Ok(0),
            Err(e) if e.code() == ErrorCode::WANT_READ && !self.stream.get_ref().eof => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(_) if self.stream.get_ref().eof && !self.stream.get_ref().unread() => {
                // An end without close_notify: possibly a truncation, never a clean end.
                Err(io::ErrorKind::UnexpectedEof.into())
            }
            Err(e) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS: {}", self.describe(e)),
            )),
        }
    }

    fn has_plaintext(&mut self) -> bool {
        if self.stream.ssl().pending() > 0 {
            return true;
        }
        if !self.stream.get_ref().unread() {
            return false;
        }
        // Ciphertext taken but not opened: open it (kept for the next read).
        match self.stream.ssl_peek(&mut [0u8; 1]) {
            Ok(n) => n > 0,
            Err(e) => e.code() != ErrorCode::WANT_READ,
        }
    }

    fn peer_identity(&self) -> Option<PeerIdentity> {
        let ssl = self.stream.ssl();
        if let Some(id) = super::psk::identity_index()
            .ok()
            .and_then(|i| ssl.ex_data(i))
        {
            return Some(PeerIdentity {
                subject: id.clone(),
                common_name: None,
            });
        }
        let der = ssl.peer_certificate()?.to_der().ok()?;
        PeerIdentity::of_certificate(&der)
    }
}
