//! The serve lifecycle: [`Server::builder`] opens the engine from a [`ServeSetup`] (with its
//! RAM level, exports and initial partitions), starts the NBD listener, the metrics listener
//! and a supervisor thread that rewrites the stats file and watches for the end (the
//! configured duration, [`ServerHandle::stop`], SIGINT/SIGTERM when asked for, the engine
//! halting); the end stops accepting, lets open requests finish, makes everything durable (or
//! detaches) and writes the final counters.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let setup = tiercache_server::config::load(None, &[])?;
//! let server = tiercache_server::Server::builder(setup).start()?;
//! println!("serving on {}", server.addr());
//! let report = server.stop()?;
//! println!("{} reads", report.engine.reads);
//! # Ok(())
//! # }
//! ```

use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_blockdev::BlockDevice;
use tiercache_engine::{Engine, EngineStats, TwoLevel};
use tiercache_nbd::{
    serve_tcp_exports, serve_unix_exports, Export, Exports, ServerConfig, ServerStats, Shutdown,
};

use crate::config::{ServeConfig, ServeSetup};
use crate::stats::{write_stats, Served};

/// Where the lifecycle's messages go (startup, notes, the final counters).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// Set by the SIGINT/SIGTERM handler; read by servers built with
/// [`ServerBuilder::stop_on_signals`].
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Relaxed);
}

/// Routes SIGINT and SIGTERM to a flag (a clean shutdown instead of dying mid-write).
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only stores to an atomic,
        // which is async-signal-safe; installing a handler has no other precondition.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// A served cache, started by [`Server::builder`].
pub struct Server;

impl Server {
    /// A builder serving `setup`.
    pub fn builder(setup: ServeSetup) -> ServerBuilder {
        ServerBuilder {
            setup,
            log: Arc::new(|m: &str| eprintln!("tiercache serve: {m}")),
            signals: false,
            devices: None,
        }
    }
}

/// How to start a server (see [`Server::builder`]).
pub struct ServerBuilder {
    setup: ServeSetup,
    log: Log,
    signals: bool,
    devices: Option<crate::early::Devices>,
}

impl ServerBuilder {
    /// Serves over `cache` and `backend` instead of opening `engine.cache_path` and
    /// `engine.backend_path` (an embedder's own devices, or a test's that holds the scan):
    /// one export, so `serve.exports` must be empty.
    pub fn devices(mut self, cache: Arc<dyn BlockDevice>, backend: Arc<dyn BlockDevice>) -> Self {
        self.devices = Some((cache, backend));
        self
    }

    /// Sends the lifecycle's messages to `log` instead of stderr (where they go prefixed
    /// `tiercache serve: `).
    pub fn log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.log = Arc::new(log);
        self
    }

    /// Stops on SIGINT or SIGTERM: installs process-wide handlers when the server starts (a
    /// command's choice; a library embedding the server keeps its own signals).
    pub fn stop_on_signals(mut self) -> Self {
        self.signals = true;
        self
    }

    /// Opens the engine and starts serving; returns once the NBD listener listens, which is
    /// before the cache's scan ends where the configuration allows (docs/design.md §13,
    /// "Serving before the scan ends").
    pub fn start(self) -> Result<ServerHandle> {
        start(self)
    }
}

/// What a server did, when it stopped.
#[derive(Debug, Clone)]
pub struct ServeReport {
    /// The engine's final counters.
    pub engine: EngineStats,
}

/// A running server. Dropping it stops it (errors then go unreported: use
/// [`ServerHandle::stop`] or [`ServerHandle::wait`] to see them).
pub struct ServerHandle {
    addr: String,
    metrics_addr: Option<String>,
    stop: Arc<AtomicBool>,
    supervisor: Option<JoinHandle<Result<ServeReport>>>,
}

impl ServerHandle {
    /// The NBD address clients connect to (`nbd://HOST:PORT` or `nbd+unix:///?socket=PATH`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The metrics listener's address, when `serve.metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<&str> {
        self.metrics_addr.as_deref()
    }

    /// Whether the server has stopped by itself (its duration, a signal, a halted engine).
    pub fn is_finished(&self) -> bool {
        self.supervisor.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the server and waits for the clean stop.
    pub fn stop(self) -> Result<ServeReport> {
        self.stop.store(true, Relaxed);
        self.wait()
    }

    /// Waits until the server stops by itself (its duration, a signal when asked for, the
    /// engine halting) and returns what it did.
    pub fn wait(mut self) -> Result<ServeReport> {
        match self.supervisor.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the serving supervisor panicked"),
            None => bail!("the server was already stopped"),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.supervisor.take() {
            let _ = t.join();
        }
    }
}

fn start(b: ServerBuilder) -> Result<ServerHandle> {
    let ServerBuilder {
        setup,
        log,
        signals,
        devices,
    } = b;
    let s = &setup.serve;
    if setup.ram_level.is_some() && !s.exports.is_empty() {
        bail!("ram_level: a RAM level serves one export; remove it or serve.exports");
    }
    if devices.is_some() && !s.exports.is_empty() {
        bail!("serve.exports: a server over given devices serves one export");
    }
    // Taken before anything opens a file: descriptor 3 is the service manager's socket, and
    // must be checked and made close-on-exec before any other use of the process's fds.
    let inherited = crate::activation::take()?;
    let (engine, opening) = match crate::early::open(&setup, devices, &log)? {
        crate::early::Opened::Whole(e) => {
            announce(&setup, &e, &log)?;
            (Some(e), None)
        }
        crate::early::Opened::Early(o) => (None, Some(o)),
    };
    let two = match (&setup.ram_level, &engine) {
        (Some(r), Some(engine)) => {
            let t =
                TwoLevel::new(r, &setup.cache, engine.clone()).context("starting the RAM level")?;
            log(&format!(
                "RAM level of {} MiB ({} lines, {}) above it, {}",
                r.capacity >> 20,
                t.ram().stats().capacity_lines,
                crate::control::config_name(&r.eviction),
                if r.exclusive {
                    "exclusive (clean victims demoted below)"
                } else {
                    "inclusive"
                }
            ));
            Some(Arc::new(t))
        }
        _ => None,
    };
    let cfg = ServerConfig {
        max_payload: s.max_payload.min(u32::MAX as u64) as u32,
        workers: s.workers,
        export_name: s.export_name.clone(),
        busy_poll: Duration::from_nanos(s.busy_poll_ns),
        tls: s.tls.server_tls()?,
    };
    if let Some(tls) = &cfg.tls {
        log(&format!(
            "TLS {} (NBD_OPT_STARTTLS, {}){}",
            match tls.mode {
                tiercache_nbd::TlsMode::Require => "required",
                _ => "offered",
            },
            match &s.tls.psk {
                Some(psk) if s.tls.certificates.is_some() || s.tls.certificate.is_some() => {
                    format!("a certificate and pre-shared keys from {}", psk.display())
                }
                Some(psk) => format!("pre-shared keys from {}", psk.display()),
                None => "a certificate".to_string(),
            },
            if s.tls.clients.is_empty() {
                String::new()
            } else {
                format!(
                    "; exports authorised for {} client identities",
                    s.tls.clients.len()
                )
            }
        ));
    }
    if !cfg.busy_poll.is_zero() {
        log(&format!(
            "each connection polls {} µs for its next request and its reads' completions before it sleeps (serve.busy_poll_ns)",
            cfg.busy_poll.as_micros()
        ));
    }
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    if signals {
        catch_signals();
    }
    let mut tracker = None;
    let exports = Arc::new(if s.exports.is_empty() {
        let mut dev: Arc<dyn BlockDevice> = match (&two, &engine, &opening) {
            (Some(t), _, _) => t.clone(),
            (None, Some(e), _) => e.clone(),
            (None, None, Some(o)) => o.clone(),
            (None, None, None) => unreachable!("an engine, open or opening"),
        };
        if s.demote.accept {
            let export = tiercache_nbd::DemoteExport::new(dev, s.demote.bounds())
                .map_err(|e| anyhow::anyhow!("serve.{e}"))?;
            tracker = Some(export.tracker().clone());
            dev = Arc::new(export);
        }
        Exports::single(s.export_name.clone(), dev)
    } else {
        // DEMOTE sessions are offered by single-export servers only (docs/nbd-demote.md).
        let list = s
            .exports
            .iter()
            .map(|e| {
                let handle = engine
                    .as_ref()
                    .context("several exports open the engine first")?
                    .volume_handle(e.volume)
                    .context("an export's volume is not served")?;
                Ok(Export {
                    name: e.name.clone(),
                    device: Arc::new(handle),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Exports::named(list).context("serve.exports")?
    });
    let metrics = match (&s.metrics_listen, &engine) {
        (Some(listen), Some(engine)) => {
            let m = crate::metrics::MetricsServer::start(
                listen,
                crate::metrics::MetricsSource {
                    engine: engine.clone(),
                    server: stats.clone(),
                    exports: if s.exports.is_empty() {
                        let first = engine.volumes()[0].0;
                        vec![(s.export_name.clone(), first)]
                    } else {
                        s.exports
                            .iter()
                            .map(|e| (e.name.clone(), e.volume))
                            .collect()
                    },
                },
            )?;
            log(&format!("metrics on http://{}/metrics", m.addr));
            Some(m)
        }
        _ => None,
    };
    let started = Instant::now();
    let activated = inherited.is_some();
    let (server, addr) = {
        let (stats, stop) = (stats.clone(), stop.clone());
        let listener = match inherited {
            Some(l) => {
                let l = inherited_listener(l, s)?;
                log(&format!(
                    "listening on the socket the service manager passed (LISTEN_FDS){}",
                    match &l {
                        Listener::Unix(_) => format!(" for {}", s.socket.display()),
                        Listener::Tcp(_) => String::new(),
                    }
                ));
                l
            }
            None => match &s.listen {
                Some(addr) => Listener::Tcp(
                    std::net::TcpListener::bind(addr)
                        .with_context(|| format!("serve.listen {addr}"))?,
                ),
                None => {
                    let _ = std::fs::remove_file(&s.socket);
                    Listener::Unix(
                        std::os::unix::net::UnixListener::bind(&s.socket)
                            .with_context(|| format!("serve.socket {}", s.socket.display()))?,
                    )
                }
            },
        };
        match listener {
            Listener::Tcp(l) => {
                let shown = format!("nbd://{}", l.local_addr()?);
                log(&format!("listening on {shown}"));
                let t = std::thread::spawn(move || serve_tcp_exports(l, exports, cfg, stats, stop));
                (t, shown)
            }
            Listener::Unix(l) => {
                let shown = format!("nbd+unix:///?socket={}", s.socket.display());
                log(&format!("listening on {shown}"));
                let t =
                    std::thread::spawn(move || serve_unix_exports(l, exports, cfg, stats, stop));
                (t, shown)
            }
        }
    };
    let stop_asked = Arc::new(AtomicBool::new(false));
    let metrics_addr = metrics.as_ref().map(|m| m.addr.clone());
    let lifecycle = Arc::new(crate::control::Lifecycle::new(stop_asked.clone()));
    let listening = Listening {
        setup,
        log,
        signals,
        stats,
        stop,
        server,
        started,
        stop_asked: stop_asked.clone(),
        metrics,
        lifecycle,
        activated,
        addr: addr.clone(),
        metrics_addr: metrics_addr.clone(),
        two,
        tracker,
    };
    let supervisor = std::thread::Builder::new().name("tiercache-serve".into());
    let supervisor = match (engine, opening) {
        (Some(engine), _) => {
            let running = listening.run(engine)?;
            supervisor.spawn(move || running.supervise())?
        }
        (None, Some(opening)) => supervisor.spawn(move || {
            // The parts that need the engine start when the open ends (docs/design.md §13).
            let engine = crate::early::finish(&opening, &listening.log)
                .and_then(|e| announce(&listening.setup, &e, &listening.log).map(|()| e));
            match engine {
                Ok(e) => listening.run(e)?.supervise(),
                Err(e) => {
                    listening.abandon();
                    Err(e)
                }
            }
        })?,
        (None, None) => unreachable!("an engine, open or opening"),
    };
    Ok(ServerHandle {
        addr,
        metrics_addr,
        stop: stop_asked,
        supervisor: Some(supervisor),
    })
}

/// A server listening, before it has the engine that the control socket and the
/// supervisor need (at once, or when an early open ends).
struct Listening {
    setup: ServeSetup,
    log: Log,
    signals: bool,
    stats: Arc<ServerStats>,
    stop: Shutdown,
    server: JoinHandle<std::io::Result<()>>,
    started: Instant,
    stop_asked: Arc<AtomicBool>,
    metrics: Option<crate::metrics::MetricsServer>,
    lifecycle: Arc<crate::control::Lifecycle>,
    activated: bool,
    addr: String,
    metrics_addr: Option<String>,
    two: Option<Arc<TwoLevel>>,
    tracker: Option<Arc<tiercache_nbd::DemoteTracker>>,
}

impl Listening {
    /// Stops the listener (nothing is served without its engine or control socket).
    fn abandon(self) {
        self.stop.trigger();
        let _ = self.server.join();
    }

    /// Starts the control socket over `engine`: the server runs.
    fn run(self, engine: Arc<Engine>) -> Result<Running> {
        let control = self.control(&engine);
        let control = match control {
            Ok(c) => c,
            Err(e) => {
                self.abandon();
                return Err(e);
            }
        };
        Ok(Running {
            served: Served {
                engine,
                two: self.two,
                tracker: self.tracker,
            },
            setup: self.setup,
            log: self.log,
            signals: self.signals,
            stats: self.stats,
            stop: self.stop,
            server: Some(self.server),
            started: self.started,
            stop_asked: self.stop_asked,
            _metrics: self.metrics,
            lifecycle: self.lifecycle,
            _control: control,
            activated: self.activated,
        })
    }

    fn control(&self, engine: &Arc<Engine>) -> Result<crate::control::ControlServer> {
        let (setup, s, addr) = (&self.setup, &self.setup.serve, &self.addr);
        let path = s.control_path_bound(addr.strip_prefix("nbd://"));
        let exports = if s.exports.is_empty() {
            vec![crate::control::ExportInfo {
                name: s.export_name.clone(),
                volume: engine.volumes()[0].0,
                backend: setup.engine.backend_path.display().to_string(),
            }]
        } else {
            s.exports
                .iter()
                .map(|e| crate::control::ExportInfo {
                    name: e.name.clone(),
                    volume: e.volume,
                    backend: e.backend_path.display().to_string(),
                })
                .collect()
        };
        let c = crate::control::ControlServer::start(
            &path,
            crate::control::ControlSource {
                engine: engine.clone(),
                server: self.stats.clone(),
                exports,
                cache_path: setup.engine.cache_path.clone(),
                address: addr.clone(),
                metrics_address: self.metrics_addr.clone(),
                line_size: setup.cache.line_size,
                tenancy: setup.cache.tenancy.mode,
                lookup: crate::control::config_name(&setup.engine.lookup),
                started: self.started,
                lifecycle: self.lifecycle.clone(),
            },
        )?;
        (self.log)(&format!(
            "control on {} (tiercache status, stats, set, flush --live, detach)",
            path.display()
        ));
        Ok(c)
    }
}

/// What the open engine is told and the log says once it is open: its log, the exports'
/// initial partitions, what recovery found.
fn announce(setup: &ServeSetup, engine: &Arc<Engine>, log: &Log) -> Result<()> {
    let s = &setup.serve;
    // Device errors and degraded-mode transitions go to the server's log.
    engine.set_log(log.clone());
    let initial = crate::exports::initial_partitions(&s.exports, setup.cache.line_size);
    if !initial.is_empty() {
        engine
            .set_volume_partitions(&initial)
            .context("serve.exports.partition")?;
    }
    let rec = engine.stats().recovery;
    log(&format!(
        "{} over {} ({} MiB), {} cache ({} lines; recovered {} lines, {} dirty{})",
        setup.engine.cache_path.display(),
        if s.exports.is_empty() {
            setup.engine.backend_path.display().to_string()
        } else {
            format!("{} exports", s.exports.len())
        },
        engine.volumes().iter().map(|v| v.1).sum::<u64>() >> 20,
        crate::control::config_name(&setup.cache.write_policy),
        engine.stats().capacity_lines,
        rec.lines,
        rec.dirty_lines,
        if rec.corrupt_records > 0 {
            format!(", {} corrupt records ignored", rec.corrupt_records)
        } else {
            String::new()
        },
    ));
    for note in engine.notes() {
        log(&format!("note: {note}"));
    }
    for e in &s.exports {
        log(&format!(
            "export {:?}: volume {} over {}",
            e.name,
            e.volume,
            e.backend_path.display()
        ));
    }
    Ok(())
}

/// Everything a started server holds, owned by its supervisor thread.
/// The NBD listener, bound here or passed by the service manager.
enum Listener {
    Unix(std::os::unix::net::UnixListener),
    Tcp(std::net::TcpListener),
}

/// A socket the service manager passed, checked against the config: a Unix socket stands for
/// `serve.socket` (the same file, which the control socket's default path and clients are
/// derived from), a TCP one for `serve.listen`, under the same rule about plaintext beyond
/// loopback.
fn inherited_listener(l: crate::activation::Inherited, s: &ServeConfig) -> Result<Listener> {
    use crate::activation::Inherited;
    match (l, &s.listen) {
        (Inherited::Unix(l), None) => {
            let passed = l
                .local_addr()?
                .as_pathname()
                .map(std::path::Path::to_path_buf);
            let same = |p: &std::path::Path| {
                std::fs::canonicalize(p).ok() == std::fs::canonicalize(&s.socket).ok()
                    && std::fs::canonicalize(p).is_ok()
            };
            match passed {
                Some(p) if same(&p) => Ok(Listener::Unix(l)),
                other => bail!(
                    "the service manager passed a Unix socket at {}, but serve.socket is {}: \
                     make the .socket unit's ListenStream= the config's serve.socket (clients and \
                     the control socket are found from it)",
                    other.map_or("no path".into(), |p| p.display().to_string()),
                    s.socket.display()
                ),
            }
        }
        (Inherited::Tcp(l), Some(_)) => {
            let bound = l.local_addr()?;
            crate::tls::check_listen(&bound.to_string(), s.tls.mode, s.allow_plaintext)
                .context("the socket passed by the service manager")?;
            Ok(Listener::Tcp(l))
        }
        (Inherited::Unix(_), Some(listen)) => bail!(
            "the service manager passed a Unix socket, but serve.listen is {listen} (TCP): \
             remove serve.listen, or make ListenStream= that address"
        ),
        (Inherited::Tcp(l), None) => bail!(
            "the service manager passed a TCP socket ({}), but the config serves on a Unix \
             socket: set serve.listen to that address",
            l.local_addr().map_or("?".into(), |a| a.to_string())
        ),
    }
}

struct Running {
    setup: ServeSetup,
    log: Log,
    signals: bool,
    served: Served,
    stats: Arc<ServerStats>,
    stop: Shutdown,
    /// The NBD listener's thread (taken when joined).
    server: Option<JoinHandle<std::io::Result<()>>>,
    started: Instant,
    stop_asked: Arc<AtomicBool>,
    /// Kept alive while serving; dropped (stopped) with the supervisor.
    _metrics: Option<crate::metrics::MetricsServer>,
    /// The stop as the control socket drives it (`detach`).
    lifecycle: Arc<crate::control::Lifecycle>,
    /// The control socket; dropped (stopped, its file removed) with the supervisor.
    _control: crate::control::ControlServer,
    /// The NBD listener came from the service manager (socket activation), which owns its file.
    activated: bool,
}

impl Running {
    /// Serves until asked to stop (or the duration, a signal, the engine halting), then
    /// stops cleanly.
    fn supervise(self) -> Result<ServeReport> {
        let lifecycle = self.lifecycle.clone();
        let report = self.serve_and_stop();
        lifecycle.finished(match &report {
            Ok(r) => Ok(format!(
                "stopped with {} dirty lines{}",
                r.engine.dirty_lines,
                if r.engine.dirty_lines == 0 {
                    ": the backends alone are complete"
                } else {
                    ""
                }
            )),
            Err(e) => Err(format!("{e:#}")),
        });
        report
    }

    /// Serves until asked to stop, then stops cleanly.
    fn serve_and_stop(mut self) -> Result<ServeReport> {
        let watched = self.watch();
        // Stop accepting whatever ended the watch (a stats file that cannot be written too).
        self.stop.trigger();
        let joined = match self.server.take().map(JoinHandle::join) {
            Some(Ok(r)) => r.context("serving"),
            Some(Err(_)) => Err(anyhow::anyhow!("the server thread panicked")),
            None => Ok(()),
        };
        watched?;
        joined?;
        self.finish()
    }

    /// Rewrites the stats file until something ends the serving.
    fn watch(&self) -> Result<()> {
        let s = &self.setup.serve;
        let deadline = s
            .duration_ns
            .map(|d| self.started + Duration::from_nanos(d));
        let mut next_stats = self.started;
        let signalled = || self.signals && SIGNALLED.load(Relaxed);
        let listening = || self.server.as_ref().is_some_and(|t| !t.is_finished());
        while !self.stop_asked.load(Relaxed)
            && !signalled()
            && deadline.is_none_or(|d| Instant::now() < d)
            && listening()
            && self.served.halted().is_none()
        {
            if let Some(f) = &s.stats_file {
                if Instant::now() >= next_stats {
                    write_stats(f, &self.served, &self.stats, self.started, &s.exports)?;
                    next_stats += Duration::from_nanos(s.stats_interval_ns.max(1_000_000));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The clean stop after the listener stopped: everything durable, the final counters.
    fn finish(self) -> Result<ServeReport> {
        let s = &self.setup.serve;
        let served = &self.served;
        if let Some(why) = served.halted() {
            // Fail-stop: an error, so a supervisor restarts the cache, whose recovery takes
            // the line back from its durable record.
            let why = why.to_string();
            let _ = served.shutdown();
            if let Some(f) = &s.stats_file {
                write_stats(f, served, &self.stats, self.started, &s.exports)?;
            }
            bail!("the cache engine halted: {why}");
        }
        if let Some(t) = &served.two {
            // The RAM level holds nothing dirty; stopping it first finishes its fills and
            // demotes.
            t.ram().shutdown().context("stopping the RAM level")?;
        }
        if s.flush_on_exit || self.lifecycle.detach.load(Relaxed) {
            served
                .engine
                .flush_all()
                .context("flushing dirty lines on exit")?;
        }
        served
            .shutdown()
            .context("making everything durable on exit")?;
        if let Some(f) = &s.stats_file {
            write_stats(f, served, &self.stats, self.started, &s.exports)?;
        }
        let st = served.engine.stats();
        (self.log)(&format!(
            "stopped: {} reads, {} writes, hit ratio {:.3}, {} dirty lines kept (durable){}",
            st.reads,
            st.writes,
            if st.cache.line_accesses > 0 {
                st.cache.line_hits as f64 / st.cache.line_accesses as f64
            } else {
                0.0
            },
            st.dirty_lines,
            if st.health.degraded {
                format!(
                    "; DEGRADED ({}), {} cache-device errors",
                    st.health.degraded_reason.as_deref().unwrap_or("?"),
                    st.health.cache_errors()
                )
            } else {
                String::new()
            },
        ));
        // A socket the service manager bound is its to remove (it listens again for the next
        // activation).
        if s.listen.is_none() && !self.activated {
            let _ = std::fs::remove_file(&s.socket);
        }
        Ok(ServeReport { engine: st })
    }
}
