//! What the interoperability tests share: a TLS server on loopback TCP for the real tools,
//! qemu-io run with a credentials object, and nbdkit with TLS required.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use tiercache_nbd::*;
use tiercache_testsupport::ServerProcess;

/// A TLS server on 127.0.0.1, stopped when dropped.
pub struct Tcp {
    /// Its port.
    pub port: u16,
    /// Its counters.
    pub stats: Arc<ServerStats>,
    stop: Shutdown,
}

impl Drop for Tcp {
    fn drop(&mut self) {
        self.stop.trigger();
    }
}

/// Serves `exports` with `tls` on a free loopback port.
pub fn serve_tcp_tls(exports: Exports, tls: ServerTls) -> Tcp {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let cfg = ServerConfig {
        tls: Some(Arc::new(tls)),
        ..ServerConfig::default()
    };
    let (st, sd) = (stats.clone(), stop.clone());
    std::thread::spawn(move || serve_tcp_exports(l, Arc::new(exports), cfg, st, sd));
    Tcp { port, stats, stop }
}

/// A tool's stdout and stderr together.
pub fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

/// qemu-io running `cmd` on `export` of 127.0.0.1:`port`, with `creds` (a qemu `--object`
/// making TLS credentials with id `tls0`; none: plaintext): whether it succeeded, and its
/// output.
pub fn qemu_io(port: u16, export: &str, creds: Option<String>, cmd: &str) -> (bool, String) {
    let mut c = Command::new("qemu-io");
    let mut opts = format!(
        "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port},export={export}"
    );
    if let Some(object) = creds {
        c.args(["--object", &object]);
        opts.push_str(",tls-creds=tls0");
    }
    let o = c.args(["--image-opts", &opts, "-c", cmd]).output().unwrap();
    let out = text(&o);
    // qemu-io reports a failed command on stderr with status 0 for some errors.
    let ok = o.status.success()
        && !out.contains("failed")
        && !out.contains("Pattern verification")
        && !out.contains("error");
    (ok, out)
}

/// nbdkit with `--tls=require` and `tls_args` serving a 4 MiB memory disk on a Unix socket;
/// killed on drop.
pub struct Nbdkit {
    _process: ServerProcess,
    /// Its socket.
    pub sock: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts nbdkit (see [`Nbdkit`]) and waits until its socket accepts.
pub fn nbdkit(tls_args: &[String]) -> Nbdkit {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbdkit.sock");
    let process = ServerProcess::start(
        Command::new("nbdkit")
            .args(["-f", "--exit-with-parent", "--tls=require"])
            .args(tls_args)
            .arg("-U")
            .arg(&sock)
            .args(["memory", "4M"]),
        &sock,
    );
    Nbdkit {
        _process: process,
        sock,
        _dir: dir,
    }
}
