//! Engine settings: where the devices are and how the cache runs on them. Policy settings
//! (capacity, line size, modes, promotion, eviction, cleaning) are the simulator's
//! `[cache]` section, one config language for both executors.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tiercache_core::units::{de_nanos, de_opt_bytes};
use tiercache_core::Nanos;
use tiercache_devices::DeviceConfig;

pub use tiercache_core::Lookup;

/// How file and block devices move data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IoEngine {
    /// io_uring for a device opened O_DIRECT, pread/pwrite for one through the page cache:
    /// each where it was measured faster. A direct read waits for the device, so a
    /// connection's waiting hits gain from being started together and answered as they
    /// finish (`bench/odirect_vs_fio.sh` here, 4 KiB all-hit reads at QD 16 over NBD on an
    /// ext4 file: 17.4–18.8k IOPS with io_uring against 6.8–10.8k with pread, 1.78×); a
    /// page-cache read is a memory copy, which the ring's hand-off to the kernel's workers
    /// only slows down (`bench/serve_io_engines.sh`: 16.6–17.4k against 177–190k IOPS for
    /// a tmpfs cache).
    #[default]
    Auto,
    /// pread/pwrite/fdatasync.
    Psync,
    /// io_uring for every file device (a ring per thread; a connection's waiting cache hits
    /// in one submission; registered files and buffers), falling back to pread/pwrite where
    /// the kernel has none.
    IoUring,
}

impl IoEngine {
    /// Whether a device opened with (`direct`) or without O_DIRECT moves data through io_uring.
    pub fn uses_io_uring(self, direct: bool) -> bool {
        match self {
            IoEngine::Auto => direct,
            IoEngine::Psync => false,
            IoEngine::IoUring => true,
        }
    }
}

/// The `[engine]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Cache device: a file (created when missing) or a block device. Default: a RAM disk
    /// file in /dev/shm.
    pub cache_path: PathBuf,
    /// Backend device: a file (created when missing), a block device, or a remote NBD export
    /// given as a URI (`nbd://host[:port]/export`, `nbd+unix:///export?socket=PATH`).
    #[serde(alias = "backend")]
    pub backend_path: PathBuf,
    /// How a remote (NBD) backend is reached: connections, timeouts, retries.
    pub remote: RemoteBackendConfig,
    /// Size of a backend file created or extended here (default 1 GiB); a block device keeps
    /// its size.
    #[serde(
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub backend_size: Option<u64>,
    /// Make the cache device behave like this model (a preset name or parameters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_device: Option<DeviceConfig>,
    /// Make the backend behave like this model, e.g. `{ preset = "sata-ssd-5100" }`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_device: Option<DeviceConfig>,
    /// Open the cache device with O_DIRECT (aligned data transfers bypass the page cache;
    /// not on tmpfs such as /dev/shm).
    pub cache_direct: bool,
    /// Serve cache-device reads from a memory mapping (one copy, no system call; ignored
    /// with `cache_direct`).
    pub cache_mapped_reads: bool,
    /// Open a backend file or block device with O_DIRECT.
    pub backend_direct: bool,
    /// How the devices move data.
    pub io: IoEngine,
    /// Answer a read once its data is in hand, finishing the cache fill (and any eviction
    /// it caused) in the background, as the simulator's critical path does; off: every read
    /// waits for its whole plan.
    pub answer_reads_early: bool,
    /// Lookup architecture.
    pub lookup: Lookup,
    /// Moved to `cache.shards` (the shards are the policy's, and the simulator runs them
    /// too): naming it here is an error that says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// Discard the cache device's contents (metadata and data) at start. Refused while the
    /// device holds dirty lines unless `force_format`.
    pub format: bool,
    /// Allow `format` to drop dirty lines (their data never reached the backend).
    pub force_format: bool,
    /// Longest sleep of the background flusher between polls.
    #[serde(deserialize_with = "de_nanos")]
    pub flusher_poll_ns: Nanos,
    /// Allocate a cache file's blocks when it is created or extended (fallocate), so a file
    /// system without room for it is an error at start naming the path, the size asked and
    /// the space free, not ENOSPC mid-run. Off: the file stays sparse (its blocks are taken
    /// as lines are written; running out is then a cache-device error, docs/design.md §11).
    pub cache_preallocate: bool,
    /// What cache-device errors do (docs/design.md §11): once their score (halving every
    /// `halflife_ns`) reaches `threshold`, serve in pass-through (`action = "pass-through"`)
    /// or halt (`"fail"`).
    pub on_error: crate::health::OnErrorConfig,
    /// Faults injected into the cache device (tests and demonstrations; docs/design.md §11):
    /// `[[engine.cache_faults]]` entries with `op`, `kind`, and optionally `start`, `end`,
    /// `after`, `count`, `probability`, `latency_ns`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_faults: Vec<crate::device::FaultRule>,
    /// Faults injected into the backend, as `cache_faults`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backend_faults: Vec<crate::device::FaultRule>,
    /// Seed of the injected faults' chances.
    pub fault_seed: u64,
}

/// The `[engine.remote]` section: the NBD client pool of a remote backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteBackendConfig {
    /// Connections to keep open (when the server offers multi-conn; else one).
    pub connections: usize,
    /// A request unanswered this long marks its connection stalled; it is then retried.
    #[serde(deserialize_with = "de_nanos")]
    pub timeout_ns: Nanos,
    /// Retries after a failed attempt before the client gets an error (EIO).
    pub retries: u32,
    /// Wait before the first retry, doubling each time (at most 2 s).
    #[serde(deserialize_with = "de_nanos")]
    pub backoff_ns: Nanos,
    /// Longest wait to connect and complete the handshake.
    #[serde(deserialize_with = "de_nanos")]
    pub connect_timeout_ns: Nanos,
}

impl Default for RemoteBackendConfig {
    fn default() -> Self {
        let d = tiercache_nbd::RemoteConfig::default();
        Self {
            connections: d.connections,
            timeout_ns: d.timeout.as_nanos() as Nanos,
            retries: d.retries,
            backoff_ns: d.backoff.as_nanos() as Nanos,
            connect_timeout_ns: d.connect_timeout.as_nanos() as Nanos,
        }
    }
}

impl RemoteBackendConfig {
    /// Checks the settings, naming the first bad one as `(field, reason)`: none is silently
    /// raised to a working value.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.connections == 0 {
            return Err(("engine.remote.connections", "must be at least 1".into()));
        }
        for (field, ns) in [
            ("engine.remote.timeout_ns", self.timeout_ns),
            ("engine.remote.connect_timeout_ns", self.connect_timeout_ns),
        ] {
            if ns < 1_000_000 {
                return Err((field, format!("{ns} ns: must be at least 1 ms")));
            }
        }
        Ok(())
    }

    /// The client's settings (after [`validate`](Self::validate)).
    pub fn client(&self) -> tiercache_nbd::RemoteConfig {
        use std::time::Duration;
        tiercache_nbd::RemoteConfig {
            connections: self.connections.max(1),
            timeout: Duration::from_nanos(self.timeout_ns.max(1_000_000)),
            retries: self.retries,
            backoff: Duration::from_nanos(self.backoff_ns),
            connect_timeout: Duration::from_nanos(self.connect_timeout_ns.max(1_000_000)),
            ..tiercache_nbd::RemoteConfig::default()
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            cache_path: PathBuf::from("/dev/shm/tiercache-cache.img"),
            backend_path: PathBuf::from("tiercache-backend.img"),
            remote: RemoteBackendConfig::default(),
            backend_size: None,
            cache_device: None,
            backend_device: None,
            cache_direct: false,
            cache_mapped_reads: true,
            backend_direct: false,
            io: IoEngine::Auto,
            answer_reads_early: true,
            lookup: Lookup::HtFg,
            shards: None,
            format: false,
            force_format: false,
            flusher_poll_ns: 20_000_000,
            cache_preallocate: true,
            on_error: crate::health::OnErrorConfig::default(),
            cache_faults: Vec::new(),
            backend_faults: Vec::new(),
            fault_seed: 0,
        }
    }
}

/// One volume of a multi-volume engine: its own backend, sharing the cache device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeConfig {
    /// Volume id (what the cache's records and partitions name).
    pub volume: u32,
    /// Its backend: a file (created when missing) or a block device.
    pub backend_path: PathBuf,
    /// Size of a backend file created or extended here (default 1 GiB).
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub backend_size: Option<u64>,
}

/// Policy shards the shipped engine configs use (`cache.shards`): several per core on common
/// machines, few enough that per-shard replacement stays close to global.
pub const SUGGESTED_SHARDS: u32 = 16;

/// Default size of a backend file created by the engine.
pub const DEFAULT_BACKEND_SIZE: u64 = 1 << 30;
