//! The control socket's listener: a Unix socket only the server's user can open (mode 0600,
//! made in a private directory and renamed into place, so it is never reachable with looser
//! permissions; each peer's uid checked again with `SO_PEERCRED`), one thread accepting and
//! one per connection answering one request.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_engine::Engine;
use tiercache_nbd::ServerStats;
use tiercache_policy::TenancyModeKind;

use super::{Progress, Reply, Request};

/// One export as the control socket shows it.
#[derive(Debug, Clone)]
pub struct ExportInfo {
    /// Name clients ask for.
    pub name: String,
    /// Volume id.
    pub volume: u32,
    /// Its backend, as configured.
    pub backend: String,
}

/// The server's stop, as the control socket drives it: `detach` asks for a stop with every
/// dirty line written back, and waits for the server's final word.
#[derive(Default)]
pub struct Lifecycle {
    /// Set to stop the server (the supervisor's stop flag).
    pub stop: Arc<AtomicBool>,
    /// Set by `detach`: the stop writes every dirty line back, as `serve.flush_on_exit` does.
    pub detach: AtomicBool,
    state: Mutex<Finish>,
    done: Condvar,
}

/// The end of serving, as `detach` waits for it.
#[derive(Default)]
struct Finish {
    /// The server's final word, once stopped.
    outcome: Option<std::result::Result<String, String>>,
    /// The detach that asked for the stop has sent its answer.
    replied: bool,
}

impl Lifecycle {
    /// A lifecycle whose stop sets `stop`.
    pub fn new(stop: Arc<AtomicBool>) -> Self {
        Self {
            stop,
            ..Self::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Finish> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server stopped: `outcome` is its final word (or why it failed). After a detach,
    /// waits (a few seconds at most) until the detach has answered, so that the process does
    /// not exit under the operator's feet.
    pub fn finished(&self, outcome: std::result::Result<String, String>) {
        let mut g = self.lock();
        g.outcome = Some(outcome);
        self.done.notify_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.detach.load(Relaxed) && !g.replied {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .done
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn wait_finished(&self) -> std::result::Result<String, String> {
        let mut g = self.lock();
        loop {
            if let Some(o) = g.outcome.clone() {
                return o;
            }
            g = self.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn replied(&self) {
        self.lock().replied = true;
        self.done.notify_all();
    }
}

/// What the control socket reads and acts on.
pub struct ControlSource {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The NBD server's counters.
    pub server: Arc<ServerStats>,
    /// The exports.
    pub exports: Vec<ExportInfo>,
    /// The cache device's path.
    pub cache_path: PathBuf,
    /// The NBD address.
    pub address: String,
    /// The metrics listener's address.
    pub metrics_address: Option<String>,
    /// Line size (partition sizes are given in bytes).
    pub line_size: u64,
    /// The tenancy mode (operators resize only a `shared` cache's partitions).
    pub tenancy: TenancyModeKind,
    /// `engine.lookup` as configured.
    pub lookup: String,
    /// When serving started.
    pub started: Instant,
    /// The server's stop.
    pub lifecycle: Arc<Lifecycle>,
}

/// A listening control socket; dropping it stops it and removes the socket file.
pub struct ControlServer {
    /// The socket's path.
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listens on `path` (refusing one another live server answers on) and serves `src`.
    pub fn start(path: &Path, src: ControlSource) -> Result<Self> {
        let listener = bind_private(path)?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let src = Arc::new(src);
        let thread = std::thread::Builder::new()
            .name("tiercache-control".into())
            .spawn(move || {
                while !flag.load(Relaxed) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let src = src.clone();
                            let _ = std::thread::Builder::new()
                                .name("tiercache-control-conn".into())
                                .spawn(move || answer(&src, conn));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds a Unix socket at `path` that only this user can connect to: bound inside a fresh
/// directory of mode 0700, set to 0600, then renamed into place (a socket bound at `path`
/// directly would be reachable under the umask's permissions until the chmod).
fn bind_private(path: &Path) -> Result<UnixListener> {
    let shown = || format!("serve.control_socket {}", path.display());
    if UnixStream::connect(path).is_ok() {
        bail!(
            "{}: another server answers there (stop it, or give this one another serve.control_socket)",
            shown()
        );
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Unique per call, not per process: two servers of one process (tests, a library
    // embedding several) bind at once, and a shared name let one remove the other's directory
    // or fail on it (EEXIST). A leftover of a dead process with this pid is stale: removed.
    static BINDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let private = dir.join(format!(
        ".tiercache-control-{}-{}",
        std::process::id(),
        BINDS.fetch_add(1, Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .with_context(shown)?;
    let result = (|| {
        let tmp = private.join("ctl");
        let l = UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        // A stale socket of a server that died is replaced (a live one answered above).
        std::fs::rename(&tmp, path)?;
        Ok::<_, std::io::Error>(l)
    })();
    let _ = std::fs::remove_dir_all(&private);
    result.with_context(shown)
}

/// The uid of the process at the other end of `conn`.
fn peer_uid(conn: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `conn` owns a valid socket descriptor for the call; `cred` is a live, writable
    // `ucred` and `len` holds its exact size, which is what SO_PEERCRED writes (at most `len`
    // bytes, `len` updated); nothing else is touched.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Sends one reply line; false when the client went away.
fn send(conn: &mut UnixStream, reply: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_string(reply) else {
        return false;
    };
    line.push('\n');
    conn.write_all(line.as_bytes()).is_ok()
}

/// Answers one request on `conn`.
fn answer(src: &ControlSource, mut conn: UnixStream) {
    let _ = conn.set_nonblocking(false);
    // The file mode already keeps other users out; this also refuses a peer of another uid
    // (root excepted) should a copied or re-permissioned socket let one through.
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    match peer_uid(&conn) {
        Ok(uid) if uid == me || uid == 0 => {}
        Ok(uid) => {
            send(
                &mut conn,
                &Reply::Error(format!(
                    "uid {uid} may not control a server run by uid {me}"
                )),
            );
            return;
        }
        Err(e) => {
            send(&mut conn, &Reply::Error(format!("peer credentials: {e}")));
            return;
        }
    }
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = String::new();
    let read = match conn.try_clone() {
        Ok(c) => BufReader::new(c.take(1 << 20)).read_line(&mut line),
        Err(e) => Err(e),
    };
    let req: Request = match read {
        Err(e) => {
            send(
                &mut conn,
                &Reply::Error(format!("reading the request: {e}")),
            );
            return;
        }
        Ok(_) => match serde_json::from_str(line.trim_end()) {
            Ok(r) => r,
            Err(e) => {
                send(
                    &mut conn,
                    &Reply::Error(format!("not a control request: {e}")),
                );
                return;
            }
        },
    };
    let detach = req == Request::Detach;
    let reply = match run(src, req, &mut conn) {
        Ok(v) => Reply::Ok(v),
        Err(e) => Reply::Error(format!("{e:#}")),
    };
    send(&mut conn, &reply);
    if detach {
        src.lifecycle.replied();
    }
}

fn run(src: &ControlSource, req: Request, conn: &mut UnixStream) -> Result<serde_json::Value> {
    match req {
        Request::Status => Ok(serde_json::to_value(super::status::status(src))?),
        Request::Stats => Ok(super::status::stats(src)),
        Request::Set { settings } => {
            let done = super::settings::apply(src, &settings)?;
            Ok(serde_json::json!({ "set": done, "status": super::status::status(src) }))
        }
        Request::Flush { write_through } => {
            if write_through {
                write_through_everywhere(src)?;
            }
            let flushed = drain(src, conn)?;
            Ok(serde_json::json!({
                "flushed_lines": flushed,
                "dirty_lines": src.engine.stats().dirty_lines,
                "write_policy": super::status::config_name(&src.engine.policies().write_policy),
            }))
        }
        Request::Detach => {
            write_through_everywhere(src)?;
            let flushed = drain(src, conn)?;
            src.lifecycle.detach.store(true, Relaxed);
            src.lifecycle.stop.store(true, Relaxed);
            match src.lifecycle.wait_finished() {
                Ok(last) => Ok(serde_json::json!({ "flushed_lines": flushed, "stopped": last })),
                Err(e) => bail!("detaching: {e}"),
            }
        }
    }
}

/// Turns the cache and every export write-through (nothing new becomes dirty) for the rest of
/// this run: a restart runs the write policies of before the detach.
fn write_through_everywhere(src: &ControlSource) -> Result<()> {
    let volumes: Vec<u32> = src.exports.iter().map(|x| x.volume).collect();
    src.engine
        .write_through_until_restart(&volumes)
        .map_err(|e| anyhow::anyhow!("cache.{e}"))
}

/// Writes every dirty line back while serving, sending progress every 200 ms; the lines
/// written back.
fn drain(src: &ControlSource, conn: &mut UnixStream) -> Result<u64> {
    let before = src.engine.stats().flushed_lines;
    let engine = src.engine.clone();
    let worker = std::thread::Builder::new()
        .name("tiercache-control-flush".into())
        .spawn(move || engine.flush_all())?;
    let mut listening = true;
    while !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        if listening && !worker.is_finished() {
            let st = src.engine.stats();
            listening = send(
                conn,
                &Reply::Progress(Progress {
                    dirty_lines: st.dirty_lines,
                    flushed_lines: st.flushed_lines - before,
                }),
            );
        }
    }
    match worker.join() {
        Ok(r) => r.context("writing dirty lines back")?,
        Err(_) => bail!("the flush panicked"),
    }
    Ok(src.engine.stats().flushed_lines - before)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers of one process bind their control sockets at once in one directory (the
    /// default for TCP listeners is the temporary directory); each must get its own socket,
    /// private to its owner, and leave no staging directory behind.
    #[test]
    fn concurrent_binds_in_one_process_and_directory_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = (0..16)
            .map(|i| dir.path().join(format!("s{i}.ctl")))
            .collect();
        let barrier = std::sync::Barrier::new(paths.len());
        let listeners: Vec<UnixListener> = std::thread::scope(|s| {
            let hs: Vec<_> = paths
                .iter()
                .map(|p| {
                    let b = &barrier;
                    s.spawn(move || {
                        b.wait();
                        bind_private(p)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
        });
        assert_eq!(listeners.len(), paths.len());
        for p in &paths {
            let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
            UnixStream::connect(p).unwrap();
        }
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tiercache-control"))
            .collect();
        assert!(left.is_empty(), "staging directories left: {left:?}");
    }
}
