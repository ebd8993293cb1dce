//! Listening: accepting connections, the streams they run over, and the handle that stops
//! a server (ending the connections that wait for their clients).

use super::*;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

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
    pub(super) fn register(&self, end_reading: Box<dyn Fn() + Send>) -> Registered<'_> {
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
pub(super) struct Registered<'a> {
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
    /// Whether bytes wait inside the stream that polling its descriptor would not show
    /// (decrypted TLS records).
    fn buffered(&self) -> bool {
        false
    }
}

/// The socket streams: the same methods under the same names.
macro_rules! socket_stream {
    ($t:ty) => {
        impl Stream for $t {
            fn try_clone(&self) -> io::Result<Self> {
                <$t>::try_clone(self)
            }
            fn shutdown(&self) {
                let _ = <$t>::shutdown(self, std::net::Shutdown::Both);
            }
            fn shutdown_read(&self) {
                let _ = <$t>::shutdown(self, std::net::Shutdown::Read);
            }
            fn raw_fd(&self) -> Option<RawFd> {
                Some(std::os::fd::AsRawFd::as_raw_fd(self))
            }
        }
    };
}
socket_stream!(UnixStream);
socket_stream!(TcpStream);

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
    let exports = Arc::new(Exports::single(cfg.export_name.clone(), dev));
    crate::exports::serve_unix_exports(listener, exports, cfg, stats, shutdown)
}

/// As [`serve_unix`] over TCP.
pub fn serve_tcp(
    listener: TcpListener,
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    let exports = Arc::new(Exports::single(cfg.export_name.clone(), dev));
    crate::exports::serve_tcp_exports(listener, exports, cfg, stats, shutdown)
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
}
