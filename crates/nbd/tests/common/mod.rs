//! Shared test helpers: a server on a fresh Unix socket, tool detection.
#![allow(dead_code)]

pub mod interop;
pub mod pki;
pub mod wire;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_blockdev::BlockDevice;
use tiercache_nbd::*;

/// Whether `tool` runs; on CI a missing tool fails the test instead of skipping it.
pub fn have(tool: &str) -> bool {
    tiercache_testsupport::tool(tool)
}

/// A server over `dev` (the export `cfg.export_name`) on a new Unix socket; returns the
/// socket path, stats, its stop handle and the socket's directory.
pub fn serve(
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
) -> (PathBuf, Arc<ServerStats>, Shutdown, tempfile::TempDir) {
    start(Exports::single(cfg.export_name.clone(), dev), cfg)
}

/// Serves `exports` with `cfg` on a new Unix socket, in a thread of its own.
fn start(
    exports: Exports,
    cfg: ServerConfig,
) -> (PathBuf, Arc<ServerStats>, Shutdown, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let (st, sd) = (stats.clone(), stop.clone());
    std::thread::spawn(move || serve_unix_exports(l, Arc::new(exports), cfg, st, sd));
    (sock, stats, stop, dir)
}

/// A server of several exports on a new Unix socket, stopped when dropped.
pub struct Served {
    /// The socket.
    pub sock: PathBuf,
    /// The server's counters.
    pub stats: Arc<ServerStats>,
    /// Its stop handle.
    pub stop: Shutdown,
    /// The directory holding the socket (and whatever a test puts beside it).
    pub dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.trigger();
    }
}

/// Serves `exports` on a new Unix socket, with `tls` if given.
pub fn serve_exports(exports: Exports, tls: impl Into<Option<tls::ServerTls>>) -> Served {
    let cfg = ServerConfig {
        tls: tls.into().map(Arc::new),
        ..ServerConfig::default()
    };
    let (sock, stats, stop, dir) = start(exports, cfg);
    Served {
        sock,
        stats,
        stop,
        dir,
    }
}

/// A client connection to `uri` (5 s to connect).
pub fn open(uri: &NbdUri) -> Result<Connection, ClientError> {
    Connection::open(uri, Duration::from_secs(5))
}

/// Waits (at most 10 s) for a server counter the server thread bumps after the client saw
/// the outcome; returns its value.
pub fn wait_for(counter: &AtomicU64, at_least: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(10);
    while counter.load(Relaxed) < at_least && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    counter.load(Relaxed)
}
