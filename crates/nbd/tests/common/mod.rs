//! Shared test helpers: a server on a fresh Unix socket, tool detection.
#![allow(dead_code)]

pub mod pki;

use std::path::PathBuf;
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;
use tiercache_nbd::*;

/// Whether `tool` runs; on CI a missing tool fails the test instead of skipping it.
pub fn have(tool: &str) -> bool {
    tiercache_testsupport::tool(tool)
}

/// A server over `dev` on a new Unix socket; returns the socket path, stats and its stop
/// handle.
pub fn serve(
    dev: Arc<dyn BlockDevice>,
    cfg: ServerConfig,
) -> (PathBuf, Arc<ServerStats>, Shutdown, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let (st, sd) = (stats.clone(), stop.clone());
    std::thread::spawn(move || serve_unix(l, dev, cfg, st, sd));
    (sock, stats, stop, dir)
}
