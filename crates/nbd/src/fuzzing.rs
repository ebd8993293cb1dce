//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz) and their regression tests under
//! stable (`tests/fuzz_regression.rs`): the server fed a client's bytes (option haggling,
//! STARTTLS, the transmission phase), and the client fed a server's (greeting, option
//! replies, transmission replies). Each runs a real connection over a socket pair, so what is
//! fuzzed is the code clients and servers reach, not a copy of its parsers.
//!
//! The contract a fuzzer checks: no input panics, hangs, or holds memory beyond what its
//! bytes justify; malformed input ends only its own connection.

use crate::client::{Command, Connection, NbdUri};
use crate::exports::Exports;
use crate::server::{serve_connection_to, ServerConfig, ServerStats, Shutdown};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};

/// Size of the export the server fuzz target serves.
pub const FUZZ_EXPORT_SIZE: usize = 1 << 20;

/// What the server did with one input.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServerOutcome {
    /// Bytes the server sent back.
    pub reply_bytes: usize,
    /// Requests it handled in the transmission phase.
    pub requests: u64,
    /// Whether the client reached transmission.
    pub transmission: bool,
    /// Protocol violations it counted.
    pub protocol_errors: u64,
}

/// Serves one connection whose client sends `input` (then closes its side), over an export
/// of [`FUZZ_EXPORT_SIZE`] bytes, TLS as `tls` says. With `greeted`, the greeting's client
/// flags (fixed newstyle, no zeroes) and a `NBD_OPT_GO` for the default export come first,
/// so that `input` lands in the transmission phase.
pub fn serve_input(
    input: &[u8],
    tls: Option<Arc<crate::tls::ServerTls>>,
    greeted: bool,
) -> ServerOutcome {
    let (server_end, mut client_end) = UnixStream::pair().expect("socket pair");
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(FUZZ_EXPORT_SIZE));
    let exports = Exports::single("", dev);
    let cfg = ServerConfig {
        workers: 2,
        max_payload: 1 << 20,
        tls,
        ..ServerConfig::default()
    };
    let stats = Arc::new(ServerStats::default());
    let mut bytes = Vec::new();
    if greeted {
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(&crate::proto::IHAVEOPT.to_be_bytes());
        bytes.extend_from_slice(&crate::proto::OPT_GO.to_be_bytes());
        bytes.extend_from_slice(&6u32.to_be_bytes());
        bytes.extend_from_slice(&[0u8; 6]);
    }
    bytes.extend_from_slice(input);
    let writer_end = client_end.try_clone().expect("clone");
    // The client's bytes go in from one thread while the replies are drained on another: a
    // server blocked on a full socket would otherwise hang the target.
    let feeder = std::thread::spawn(move || {
        let mut w = writer_end;
        let _ = w.write_all(&bytes);
        let _ = w.shutdown(std::net::Shutdown::Write);
    });
    let drainer = std::thread::spawn(move || {
        let mut n = 0usize;
        let mut buf = [0u8; 64 << 10];
        while let Ok(k) = client_end.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    });
    let _ = serve_connection_to(server_end, &exports, &cfg, &stats, &Shutdown::new());
    let _ = feeder.join();
    let reply_bytes = drainer.join().unwrap_or(0);
    ServerOutcome {
        reply_bytes,
        requests: stats.requests.load(Relaxed),
        transmission: stats.sessions.load(Relaxed) > 0,
        protocol_errors: stats.protocol_errors.load(Relaxed),
    }
}

/// What the client made of one server's bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ClientOutcome {
    /// The export size the handshake reported, if it completed.
    pub size: Option<u64>,
    /// Requests that got an answer (data or an error reply).
    pub answered: usize,
}

/// Connects the client to a "server" that plays `input`: its first two bytes (big-endian)
/// say how many of the rest come at once (the greeting and option replies); the others
/// (transmission replies) come once the client has sent its requests, a read of 4 KiB and of
/// 1 byte at offset 0 and a flush (handles 1, 2, 3), so that a reply never precedes its
/// request. The "server" then closes its side.
pub fn client_input(input: &[u8]) -> ClientOutcome {
    let (first, rest) = match input {
        [hi, lo, rest @ ..] => {
            let split = (u16::from_be_bytes([*hi, *lo]) as usize).min(rest.len());
            (rest[..split].to_vec(), rest[split..].to_vec())
        }
        _ => (Vec::new(), Vec::new()),
    };
    let Some(dir) = tempfile_dir() else {
        return ClientOutcome::default();
    };
    let sock = dir.join("fuzz.sock");
    let Ok(listener) = std::os::unix::net::UnixListener::bind(&sock) else {
        return ClientOutcome::default();
    };
    let (go_on, requests_sent) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        let Ok(mut w) = conn.try_clone() else {
            return;
        };
        // The client's bytes are read and dropped until it leaves.
        let drainer = std::thread::spawn(move || {
            let mut r = conn;
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let _ = w.write_all(&first);
        // Until the requests are out, or the client gave up (the sender dropped).
        let _ = requests_sent.recv();
        let _ = w.write_all(&rest);
        let _ = w.shutdown(std::net::Shutdown::Write);
        let _ = drainer.join();
    });
    let uri: NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .expect("a valid URI");
    // Short: a handshake cut short by the split waits this long for bytes that never come.
    let timeout = Duration::from_millis(300);
    let mut out = ClientOutcome::default();
    if let Ok(c) = Connection::open_with(&uri, timeout, Arc::new(AtomicU64::new(0)), Some(1)) {
        out.size = Some(c.info().size);
        let len = 4096.min(c.info().size) as u32;
        let sent: Vec<_> = [
            (Command::Read, len),
            (Command::Read, 1.min(len)),
            (Command::Flush, 0),
        ]
        .into_iter()
        .filter_map(|(cmd, n)| c.send(cmd, false, 0, n, &[]).ok())
        .collect();
        let _ = go_on.send(());
        for s in sent {
            match s.wait(Duration::from_secs(2)) {
                Ok(_) | Err(crate::ClientError::Reply(_)) => out.answered += 1,
                Err(_) => {}
            }
        }
        c.kill();
    }
    drop(go_on);
    let _ = server.join();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// A fresh private directory under the system's temporary directory.
fn tempfile_dir() -> Option<std::path::PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "tiercache-nbd-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Relaxed)
    ));
    std::fs::create_dir_all(&d).ok()?;
    Some(d)
}
