//! `tiercache serve`: the real cache over NBD; `tiercache flush`: detach (write every dirty
//! line back so the backend alone is complete).

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_blockdev::BlockDevice;
use tiercache_config::Document;
use tiercache_core::units::{de_bytes, de_nanos, de_opt_nanos};
use tiercache_engine::{Engine, EngineConfig, RamLevelConfig, TwoLevel};
use tiercache_nbd::{
    serve_tcp_exports, serve_unix_exports, Export, Exports, ServerConfig, ServerStats, Shutdown,
};
use tiercache_policy::CacheConfig;

/// The embedded `tiercache serve` config (examples/serve.toml).
pub const DEFAULT_SERVE_CONFIG: &str = include_str!("../../../examples/serve.toml");

/// The `[serve]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Unix socket to listen on (used unless `listen` is set).
    pub socket: PathBuf,
    /// TCP address to listen on instead, e.g. `127.0.0.1:10809`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Requests run concurrently per connection (cache hits run at once in the connection's
    /// reader). Default: matched to the cores, two per core, so one can wait on the backend
    /// while the other computes (at least 8).
    pub workers: usize,
    /// Largest read or write accepted.
    #[serde(deserialize_with = "de_bytes")]
    pub max_payload: u64,
    /// How long a connection with reads in flight on an O_DIRECT cache device polls for
    /// their completions and its next request before it sleeps (at most 10 ms; 0: sleeps at
    /// once). Spends up to a core per busy connection to save a thread wake-up per round
    /// trip, which matters where wake-ups are slow (virtual machines).
    #[serde(deserialize_with = "de_nanos")]
    pub busy_poll_ns: u64,
    /// Export name shown to clients that list exports.
    pub export_name: String,
    /// File rewritten with the live counters (JSON) while serving, and with the final ones
    /// at exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats_file: Option<PathBuf>,
    /// How often the stats file is rewritten.
    #[serde(deserialize_with = "de_nanos")]
    pub stats_interval_ns: u64,
    /// Stop after this long (benchmarks, tests); default: until SIGINT or SIGTERM.
    #[serde(
        deserialize_with = "de_opt_nanos",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ns: Option<u64>,
    /// Write every dirty line back before exiting (detach).
    pub flush_on_exit: bool,
    /// Several exports, one per volume, each over its own backend and sharing the cache
    /// device (`[[serve.exports]]`); none: `engine.backend_path` is the one export.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<crate::serve_exports::ExportConfig>,
    /// HTTP address serving the live counters as Prometheus text at `/metrics` (and
    /// taking partition resizes at `POST /partitions`), e.g. `127.0.0.1:9100`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// Offer tiercache's DEMOTE extension (docs/nbd-demote.md) to tiercache peers above.
    pub demote: ServeDemoteConfig,
}

/// The `[serve.demote]` section: demotes from tiercache caches above, and the bounded state
/// that keeps them from installing stale data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeDemoteConfig {
    /// Offer the extension (peers that do not ask are served as before).
    pub accept: bool,
    /// Granularity of the race checks; demotes must cover whole blocks.
    #[serde(deserialize_with = "de_bytes")]
    pub block_size: u64,
    /// Write-table entries (8 bytes each).
    pub table_entries: usize,
    /// Ledger entries per session (24 bytes each): blocks a peer can demote unchecked-by-read.
    pub ledger_entries: usize,
    /// Sessions (peers) with a ledger at once.
    pub max_sessions: usize,
}

impl Default for ServeDemoteConfig {
    fn default() -> Self {
        let d = tiercache_nbd::DemoteConfig::default();
        Self {
            accept: true,
            block_size: d.block_size,
            table_entries: d.table_entries,
            ledger_entries: d.ledger_entries,
            max_sessions: d.max_sessions,
        }
    }
}

impl ServeDemoteConfig {
    fn bounds(&self) -> tiercache_nbd::DemoteConfig {
        tiercache_nbd::DemoteConfig {
            block_size: self.block_size,
            table_entries: self.table_entries,
            ledger_entries: self.ledger_entries,
            max_sessions: self.max_sessions,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/tmp/tiercache.sock"),
            listen: None,
            workers: default_workers(),
            max_payload: 32 << 20,
            busy_poll_ns: 0,
            export_name: String::new(),
            stats_file: None,
            stats_interval_ns: 1_000_000_000,
            duration_ns: None,
            flush_on_exit: false,
            exports: Vec::new(),
            metrics_listen: None,
            demote: ServeDemoteConfig::default(),
        }
    }
}

fn default_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    (2 * cores).max(8)
}

/// Arguments of `tiercache serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Config (TOML) with `[cache]` (as for `sim`), `[engine]` and `[serve]`. Without it, the
    /// embedded examples/serve.toml.
    pub config: Option<PathBuf>,
    /// Override a config key: `--set engine.backend_path=/dev/sdb` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Arguments of `tiercache flush`.
#[derive(Debug, Args)]
pub struct FlushArgs {
    /// The config the cache was served with.
    pub config: Option<PathBuf>,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// A resolved serve config.
pub struct ServeSetup {
    /// Policy settings.
    pub cache: CacheConfig,
    /// Devices.
    pub engine: EngineConfig,
    /// Sockets and reporting.
    pub serve: ServeConfig,
    /// A RAM cache level above the engine (`[ram_level]`), if configured.
    pub ram_level: Option<RamLevelConfig>,
    /// The whole document, for result records.
    pub config_json: serde_json::Value,
}

/// Loads a serve config (or the embedded default) and applies overrides. Relative device
/// paths are relative to the config file. `serve` and `flush` run one cache: a config with
/// `[[variant]]`s is refused (`bench` runs each variant, see [`setup_of`]).
pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<ServeSetup> {
    let (doc, base) = load_doc(path, overrides)?;
    let variants = doc.variants()?;
    if variants.len() > 1 {
        bail!(tiercache_config::ConfigError::Invalid {
            context: doc.context(),
            message: format!(
                "the config has {} [[variant]]s but a served cache is one design: keep one (or run them with `tiercache bench`)",
                variants.len()
            ),
        });
    }
    setup_of(&doc, path.map(|_| base.as_path()))
}

/// The config document (or the embedded default) with overrides applied, and the directory
/// relative paths start from.
pub fn load_doc(path: Option<&Path>, overrides: &[String]) -> Result<(Document, PathBuf)> {
    let (mut doc, base) = match path {
        Some(p) => (
            Document::load(p)?,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
        ),
        None => (
            Document::parse(DEFAULT_SERVE_CONFIG, "<embedded examples/serve.toml>")?,
            PathBuf::from("."),
        ),
    };
    doc.apply_overrides(overrides)?;
    Ok((doc, base))
}

/// The setup one document (a config, or one of its variants) describes. Relative paths start
/// from `base` when given (a config file's directory).
pub fn setup_of(doc: &Document, base: Option<&Path>) -> Result<ServeSetup> {
    let table = doc.value.as_table().context("the config must be a table")?;
    let has = |k: &str| table.contains_key(k);
    let cache: CacheConfig = if has("cache") {
        doc.typed(Some("cache"))?
    } else {
        CacheConfig::default()
    };
    let mut engine: EngineConfig = if has("engine") {
        doc.typed(Some("engine"))?
    } else {
        EngineConfig::default()
    };
    let mut serve: ServeConfig = if has("serve") {
        doc.typed(Some("serve"))?
    } else {
        ServeConfig::default()
    };
    let ram_level: Option<RamLevelConfig> = if has("ram_level") {
        Some(doc.typed(Some("ram_level"))?)
    } else {
        None
    };
    if let Some(base) = base {
        for p in [&mut engine.cache_path, &mut engine.backend_path] {
            let remote = p.to_str().is_some_and(tiercache_nbd::NbdUri::is_uri);
            if p.is_relative() && !remote {
                *p = base.join(&*p);
            }
        }
        if serve.socket.is_relative() {
            serve.socket = base.join(&serve.socket);
        }
        if let Some(f) = &mut serve.stats_file {
            if f.is_relative() {
                *f = base.join(&*f);
            }
        }
        crate::serve_exports::resolve_paths(&mut serve.exports, base);
    }
    crate::serve_exports::validate(&serve.exports, cache.capacity)?;
    if serve.workers > 1024 {
        bail!(tiercache_config::ConfigError::Invalid {
            context: doc.context(),
            message: format!("serve.workers = {}: at most 1024", serve.workers),
        });
    }
    if Duration::from_nanos(serve.busy_poll_ns) > tiercache_nbd::MAX_BUSY_POLL {
        bail!(tiercache_config::ConfigError::Invalid {
            context: doc.context(),
            message: format!(
                "serve.busy_poll_ns = {}: at most {} (10 ms); longer polling only burns the core",
                serve.busy_poll_ns,
                tiercache_nbd::MAX_BUSY_POLL.as_nanos()
            ),
        });
    }
    Ok(ServeSetup {
        cache,
        engine,
        serve,
        ram_level,
        config_json: doc.to_json(),
    })
}

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

/// The counters written to the stats file.
#[derive(Serialize)]
struct Live<'a> {
    elapsed_s: f64,
    /// The engine over the cache device (the level below the RAM level, if there is one).
    engine: tiercache_engine::EngineStats,
    /// The RAM level, if configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    ram_level: Option<tiercache_engine::EngineStats>,
    server: &'a ServerStats,
    /// Per export (several exports only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    exports: Vec<ExportLive>,
    /// The tenancy mode's last decision (`cache.tenancy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    tenancy: Option<tiercache_policy::TenancyReport>,
    /// Demotes received from tiercache peers above, if offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    demote_server: Option<&'a tiercache_nbd::demote::DemoteServerStats>,
}

/// One export's counters in the stats file.
#[derive(Serialize)]
struct ExportLive {
    name: String,
    read_hit_ratio: f64,
    #[serde(flatten)]
    stats: tiercache_engine::VolumeStats,
}

/// What `serve` runs: the engine, and the RAM level and demote tracking when configured.
struct Served {
    engine: Arc<Engine>,
    two: Option<Arc<TwoLevel>>,
    tracker: Option<Arc<tiercache_nbd::DemoteTracker>>,
}

impl Served {
    fn halted(&self) -> Option<&str> {
        match &self.two {
            Some(t) => t.halted(),
            None => self.engine.halted(),
        }
    }

    /// Stops the RAM level (if any) and the engine, making everything durable.
    fn shutdown(&self) -> std::io::Result<()> {
        if let Some(t) = &self.two {
            t.ram().shutdown()?;
        }
        self.engine.shutdown()
    }
}

fn write_stats(
    path: &Path,
    served: &Served,
    server: &ServerStats,
    started: Instant,
    exports: &[crate::serve_exports::ExportConfig],
) -> Result<()> {
    let engine = &served.engine;
    let vols = if exports.is_empty() {
        Vec::new()
    } else {
        engine.volume_stats()
    };
    let live = Live {
        elapsed_s: started.elapsed().as_secs_f64(),
        engine: served.engine.stats(),
        ram_level: served.two.as_ref().map(|t| t.ram().stats()),
        server,
        exports: vols
            .into_iter()
            .map(|stats| ExportLive {
                name: exports
                    .iter()
                    .find(|e| e.volume == stats.volume)
                    .map_or_else(String::new, |e| e.name.clone()),
                read_hit_ratio: stats.read_hit_ratio(),
                stats,
            })
            .collect(),
        tenancy: engine.tenancy_report(),
        demote_server: served.tracker.as_ref().map(|t| &t.stats),
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&live)?)?;
    std::fs::rename(&tmp, path).with_context(|| format!("stats file {}", path.display()))?;
    Ok(())
}

/// Serves until SIGINT/SIGTERM or the configured duration; then stops accepting, lets open
/// requests finish, makes everything durable (or detaches) and writes the final counters.
pub fn run(args: ServeArgs) -> Result<()> {
    let setup = load(args.config.as_deref(), &args.overrides)?;
    serve(&setup, None)
}

/// Serves `setup`; `ready` (if given) is called with the address once listening.
pub fn serve(setup: &ServeSetup, ready: Option<&dyn Fn(&str)>) -> Result<()> {
    let s = &setup.serve;
    if setup.ram_level.is_some() && !s.exports.is_empty() {
        bail!("ram_level: a RAM level serves one export; remove it or serve.exports");
    }
    let volumes = crate::serve_exports::volume_configs(&s.exports);
    let engine = Arc::new(
        Engine::open_volumes(&setup.cache, &setup.engine, &volumes)
            .context("starting the engine")?,
    );
    let initial = crate::serve_exports::initial_partitions(&s.exports, setup.cache.line_size);
    if !initial.is_empty() {
        engine
            .set_volume_partitions(&initial)
            .context("serve.exports.partition")?;
    }
    let rec = engine.stats().recovery;
    eprintln!(
        "tiercache serve: {} over {} ({} MiB), {:?} cache ({} lines; recovered {} lines, {} dirty{})",
        setup.engine.cache_path.display(),
        if s.exports.is_empty() {
            setup.engine.backend_path.display().to_string()
        } else {
            format!("{} exports", s.exports.len())
        },
        engine.volumes().iter().map(|v| v.1).sum::<u64>() >> 20,
        setup.cache.write_policy,
        engine.stats().capacity_lines,
        rec.lines,
        rec.dirty_lines,
        if rec.corrupt_records > 0 { format!(", {} corrupt records ignored", rec.corrupt_records) } else { String::new() },
    );
    for note in engine.notes() {
        eprintln!("tiercache serve: note: {note}");
    }
    for e in &s.exports {
        eprintln!(
            "tiercache serve: export {:?}: volume {} over {}",
            e.name,
            e.volume,
            e.backend_path.display()
        );
    }
    let two = match &setup.ram_level {
        Some(r) => {
            let t =
                TwoLevel::new(r, &setup.cache, engine.clone()).context("starting the RAM level")?;
            eprintln!(
                "tiercache serve: RAM level of {} MiB ({} lines, {:?}) above it, {}",
                r.capacity >> 20,
                t.ram().stats().capacity_lines,
                r.eviction,
                if r.exclusive {
                    "exclusive (clean victims demoted below)"
                } else {
                    "inclusive"
                }
            );
            Some(Arc::new(t))
        }
        None => None,
    };
    let cfg = ServerConfig {
        max_payload: s.max_payload.min(u32::MAX as u64) as u32,
        workers: s.workers,
        export_name: s.export_name.clone(),
        busy_poll: Duration::from_nanos(s.busy_poll_ns),
    };
    if !cfg.busy_poll.is_zero() {
        eprintln!(
            "tiercache serve: each connection polls {} µs for its next request and its reads' completions before it sleeps (serve.busy_poll_ns)",
            cfg.busy_poll.as_micros()
        );
    }
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    catch_signals();
    let mut tracker = None;
    let exports = Arc::new(if s.exports.is_empty() {
        let mut dev: Arc<dyn BlockDevice> = match &two {
            Some(t) => t.clone(),
            None => engine.clone(),
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
    let _metrics = match &s.metrics_listen {
        Some(listen) => {
            let m = crate::serve_metrics::MetricsServer::start(
                listen,
                crate::serve_metrics::MetricsSource {
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
                    line_size: setup.cache.line_size,
                    tenancy: setup.cache.tenancy.mode,
                },
            )?;
            eprintln!("tiercache serve: metrics on http://{}/metrics", m.addr);
            Some(m)
        }
        None => None,
    };
    let served = Served {
        engine: engine.clone(),
        two,
        tracker,
    };
    let started = Instant::now();
    let server = {
        let (stats, stop) = (stats.clone(), stop.clone());
        match &s.listen {
            Some(addr) => {
                let l = std::net::TcpListener::bind(addr)
                    .with_context(|| format!("serve.listen {addr}"))?;
                let shown = format!("nbd://{}", l.local_addr()?);
                eprintln!("tiercache serve: listening on {shown}");
                if let Some(f) = ready {
                    f(&shown);
                }
                std::thread::spawn(move || serve_tcp_exports(l, exports, cfg, stats, stop))
            }
            None => {
                let _ = std::fs::remove_file(&s.socket);
                let l = std::os::unix::net::UnixListener::bind(&s.socket)
                    .with_context(|| format!("serve.socket {}", s.socket.display()))?;
                let shown = format!("nbd+unix:///?socket={}", s.socket.display());
                eprintln!("tiercache serve: listening on {shown}");
                if let Some(f) = ready {
                    f(&shown);
                }
                std::thread::spawn(move || serve_unix_exports(l, exports, cfg, stats, stop))
            }
        }
    };
    let deadline = s.duration_ns.map(|d| started + Duration::from_nanos(d));
    let mut next_stats = started;
    while !SIGNALLED.load(Relaxed)
        && deadline.is_none_or(|d| Instant::now() < d)
        && !server.is_finished()
        && served.halted().is_none()
    {
        if let Some(f) = &s.stats_file {
            if Instant::now() >= next_stats {
                write_stats(f, &served, &stats, started, &s.exports)?;
                next_stats += Duration::from_nanos(s.stats_interval_ns.max(1_000_000));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.trigger();
    match server.join() {
        Ok(r) => r.context("serving")?,
        Err(_) => bail!("the server thread panicked"),
    }
    if let Some(why) = served.halted() {
        // Fail-stop: exit non-zero so a supervisor restarts the cache, whose recovery takes
        // the line back from its durable record.
        let why = why.to_string();
        let _ = served.shutdown();
        if let Some(f) = &s.stats_file {
            write_stats(f, &served, &stats, started, &s.exports)?;
        }
        bail!("the cache engine halted: {why}");
    }
    if let Some(t) = &served.two {
        // The RAM level holds nothing dirty; stopping it first finishes its fills and demotes.
        t.ram().shutdown().context("stopping the RAM level")?;
    }
    if s.flush_on_exit {
        engine.flush_all().context("flushing dirty lines on exit")?;
    }
    served
        .shutdown()
        .context("making everything durable on exit")?;
    if let Some(f) = &s.stats_file {
        write_stats(f, &served, &stats, started, &s.exports)?;
    }
    let st = engine.stats();
    eprintln!(
        "tiercache serve: stopped: {} reads, {} writes, hit ratio {:.3}, {} dirty lines kept (durable)",
        st.reads,
        st.writes,
        if st.cache.line_accesses > 0 { st.cache.line_hits as f64 / st.cache.line_accesses as f64 } else { 0.0 },
        st.dirty_lines,
    );
    if s.listen.is_none() {
        let _ = std::fs::remove_file(&s.socket);
    }
    Ok(())
}

/// `tiercache flush`: opens the cache (recovering it), writes every dirty line back and
/// syncs the backend.
pub fn flush(args: FlushArgs) -> Result<()> {
    let setup = load(args.config.as_deref(), &args.overrides)?;
    // Flushing creates nothing: a missing file means the wrong config, not an empty cache.
    if !setup.engine.cache_path.exists() {
        bail!(
            "engine.cache_path {}: no such cache device: nothing to flush (is this the config the cache was served with?)",
            setup.engine.cache_path.display()
        );
    }
    for (i, e) in setup.serve.exports.iter().enumerate() {
        if !e.backend_path.exists() {
            bail!(
                "serve.exports[{i}].backend_path {}: no such backend: flush writes dirty lines back to an existing backend",
                e.backend_path.display()
            );
        }
    }
    let backend = setup.engine.backend_path.to_str().unwrap_or("");
    if setup.serve.exports.is_empty()
        && !tiercache_nbd::NbdUri::is_uri(backend)
        && !setup.engine.backend_path.exists()
    {
        bail!(
            "engine.backend_path {}: no such backend: flush writes dirty lines back to an existing backend",
            setup.engine.backend_path.display()
        );
    }
    let volumes = crate::serve_exports::volume_configs(&setup.serve.exports);
    let engine =
        Engine::open_volumes(&setup.cache, &setup.engine, &volumes).context("opening the cache")?;
    let before = engine.stats().dirty_lines;
    engine.flush_all().context("writing dirty lines back")?;
    engine.shutdown()?;
    let st = engine.stats();
    let backends = if setup.serve.exports.is_empty() {
        format!("the backend {} is", setup.engine.backend_path.display())
    } else {
        let names: Vec<String> = setup
            .serve
            .exports
            .iter()
            .map(|e| e.backend_path.display().to_string())
            .collect();
        format!("the backends {} are", names.join(", "))
    };
    println!(
        "flushed {} dirty lines ({} written back); {backends} complete",
        before, st.flushed_lines,
    );
    Ok(())
}
