//! The config of a served cache: `[cache]` (as for `sim`), `[engine]`, `[serve]` and
//! `[ram_level]`, resolved into a [`ServeSetup`] with relative paths made absolute and the
//! serving limits checked.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tiercache_config::Document;
use tiercache_core::units::{de_bytes, de_nanos, de_opt_nanos};
use tiercache_engine::{EngineConfig, RamLevelConfig};
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
    pub exports: Vec<crate::exports::ExportConfig>,
    /// HTTP address serving the live counters as Prometheus text at `GET /metrics` (only
    /// that: operator actions go over the control socket), e.g. `127.0.0.1:9100`; a bare
    /// port (`"9100"`) listens on loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// The control socket (`tiercache status`, `stats`, `set`, `flush --live`, `detach`): a
    /// Unix socket only this user can open. Default: `socket` with `.ctl` appended, or with a
    /// TCP `listen`, `tiercache-ADDR.ctl` in the temporary directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_socket: Option<PathBuf>,
    /// Offer tiercache's DEMOTE extension (docs/nbd-demote.md) to tiercache peers above.
    pub demote: ServeDemoteConfig,
    /// NBD over TLS (`[serve.tls]`, docs/nbd-tls.md).
    pub tls: crate::tls::ServeTlsConfig,
    /// Serve in the clear on a TCP address beyond loopback (refused otherwise: anyone who
    /// reaches the port would read and write every export).
    pub allow_plaintext: bool,
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
    /// The bounds of the NBD server's demote tracking.
    pub fn bounds(&self) -> tiercache_nbd::DemoteConfig {
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
            control_socket: None,
            demote: ServeDemoteConfig::default(),
            tls: crate::tls::ServeTlsConfig::default(),
            allow_plaintext: false,
        }
    }
}

impl ServeConfig {
    /// The control socket's path: `control_socket`, or `socket` with `.ctl` appended, or for
    /// a TCP listener `tiercache-ADDR.ctl` in the temporary directory (`bound`: the address
    /// actually bound, which differs from `listen` for port 0).
    pub fn control_path_bound(&self, bound: Option<&str>) -> PathBuf {
        match (&self.control_socket, &self.listen) {
            (Some(p), _) => p.clone(),
            (None, None) => crate::control::default_path(&self.socket),
            (None, Some(listen)) => crate::control::default_tcp_path(bound.unwrap_or(listen)),
        }
    }

    /// The control socket's path as the config gives it (see
    /// [`control_path_bound`](Self::control_path_bound)).
    pub fn control_path(&self) -> PathBuf {
        self.control_path_bound(None)
    }
}

fn default_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    (2 * cores).max(8)
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

/// The setups a config's text describes (one per variant), or the first error, every path
/// relative to the working directory: what the `config_loader` fuzz target drives (for any
/// text, setups or a named error, never a panic).
pub fn load_text(text: &str) -> Result<Vec<ServeSetup>> {
    let doc = Document::parse(text, "<text>")?;
    doc.variants()?
        .iter()
        .map(|(_, d)| setup_of(d, None))
        .collect()
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
        if let Some(c) = &mut serve.control_socket {
            if c.is_relative() {
                *c = base.join(&*c);
            }
        }
        if let Some(f) = &mut serve.stats_file {
            if f.is_relative() {
                *f = base.join(&*f);
            }
        }
        crate::exports::resolve_paths(&mut serve.exports, base);
        serve.tls.resolve_paths(base);
    }
    crate::exports::validate(&serve.exports, cache.capacity)?;
    let invalid = |e: anyhow::Error| tiercache_config::ConfigError::Invalid {
        context: doc.context(),
        message: format!("{e:#}"),
    };
    let export_names: Vec<&str> = if serve.exports.is_empty() {
        vec![serve.export_name.as_str()]
    } else {
        serve.exports.iter().map(|e| e.name.as_str()).collect()
    };
    serve.tls.validate(&export_names).map_err(invalid)?;
    if let Some(listen) = &serve.listen {
        crate::tls::check_listen(listen, serve.tls.mode, serve.allow_plaintext).map_err(invalid)?;
    }
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
