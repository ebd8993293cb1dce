//! The typed experiment: one config document resolved into a policy core, a workload (synthetic
//! or a trace) and a simulator setup. `sim`, `sweep`, `bench` and the Python package share
//! this resolution, so one config language describes a design everywhere.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tiercache_config::{ConfigError, Document};
use tiercache_core::{Arrival, RequestSource};
use tiercache_policy::CacheConfig;
use tiercache_sim::{DeviceConfig, HostConfig, RunLimits, SimConfig, VolumeBackend};
use tiercache_workload::{SyntheticWorkload, WorkloadSpec};

/// The embedded default experiment (examples/default.toml).
pub const DEFAULT_CONFIG: &str = include_str!("../../../examples/default.toml");

/// How a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RunMode {
    /// Discrete-event simulation in virtual time: latencies, IOPS, device load.
    #[default]
    Timed,
    /// The policy core alone, no timing: hit ratios and counters, as fast as possible.
    HitRatio,
}

/// `[run]`: mode and seed; the remaining keys are the simulator's run limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
struct RunHead {
    mode: RunMode,
    seed: u64,
}

/// The document's `[workload]` when it replays a trace (it has a `trace` key), with a relative
/// trace path resolved against `base_dir`; `None` for a synthetic workload.
pub fn trace_workload(
    doc: &Document,
    base_dir: &Path,
) -> Result<Option<TraceWorkload>, ConfigError> {
    let is_trace = doc
        .value
        .get("workload")
        .and_then(|w| w.get("trace"))
        .is_some();
    if !is_trace {
        return Ok(None);
    }
    let mut t: TraceWorkload = doc.typed(Some("workload"))?;
    if t.trace.is_relative() {
        t.trace = base_dir.join(&t.trace);
    }
    if t.jobs == 0 || t.iodepth == 0 {
        return Err(ConfigError::Invalid {
            context: doc.context(),
            message: "workload.jobs and workload.iodepth must be at least 1".into(),
        });
    }
    // The simulator allocates a slot per request in flight up front: the synthetic
    // workload's bounds hold for a replay too.
    for (field, v) in [("workload.jobs", t.jobs), ("workload.iodepth", t.iodepth)] {
        if v > MAX_PER_FIELD {
            return Err(ConfigError::Value {
                context: doc.context(),
                path: field.into(),
                message: format!("{v} is more than the {MAX_PER_FIELD} allowed"),
            });
        }
    }
    if u64::from(t.jobs) * u64::from(t.iodepth) > MAX_IN_FLIGHT {
        return Err(ConfigError::Value {
            context: doc.context(),
            path: "workload.iodepth".into(),
            message: format!(
                "jobs × iodepth = {} requests in flight, more than the {MAX_IN_FLIGHT} allowed",
                u64::from(t.jobs) * u64::from(t.iodepth)
            ),
        });
    }
    if !(t.speed.is_finite() && t.speed > 0.0) {
        // Before anything runs (the replay would otherwise fail at its first request).
        return Err(ConfigError::Value {
            context: doc.context(),
            path: "workload.speed".into(),
            message: format!("{} must be a finite number > 0", t.speed),
        });
    }
    Ok(Some(t))
}

/// Most `workload.jobs` and most `workload.iodepth` of a trace replay (as for a synthetic one).
const MAX_PER_FIELD: u32 = 65_536;
/// Most requests in flight, `jobs × iodepth`, of a trace replay.
const MAX_IN_FLIGHT: u64 = 1 << 20;

/// `run.seed` of a document (1 when absent), the seed `sim` gives the synthetic workload; `bench`
/// gives fio the same one.
pub fn run_seed(doc: &Document) -> Result<u64, ConfigError> {
    let has_run = doc.value.as_table().is_some_and(|t| t.contains_key("run"));
    let head: RunHead = if has_run {
        doc.typed(Some("run"))?
    } else {
        RunHead::default()
    };
    Ok(head.seed)
}

impl Default for RunHead {
    fn default() -> Self {
        Self {
            mode: RunMode::Timed,
            seed: 1,
        }
    }
}

/// `[workload]` when it replays a trace (it has a `trace` key).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TraceWorkload {
    /// Trace file (relative paths are relative to the config file).
    pub trace: PathBuf,
    /// Format; detected from the name and content when absent.
    #[serde(default)]
    pub format: Option<tiercache_trace::Format>,
    /// `timestamps` (open loop, by trace times) or `fast` (closed loop, as fast as possible).
    #[serde(default)]
    pub replay: ReplayMode,
    /// Divides trace times (2.0 replays twice as fast).
    #[serde(default = "one")]
    pub speed: f64,
    /// Parallel submitters for `fast` replay.
    #[serde(default = "one_u32")]
    pub jobs: u32,
    /// Requests in flight per submitter for `fast` replay.
    #[serde(default = "one_u32")]
    pub iodepth: u32,
    /// Skip and count malformed records instead of failing.
    #[serde(default)]
    pub skip_bad: bool,
    /// Column mapping of a `format = "csv"` trace, as `trace stats --csv-map` takes it.
    #[serde(default)]
    pub csv: Option<tiercache_trace::CsvSpec>,
    /// blkparse: the action kept per I/O (`queue`, `issue` or `complete`).
    #[serde(default = "default_blkparse_action")]
    pub blkparse_action: tiercache_trace::BlkAction,
    /// oracleGeneral: bytes per object id (what `trace convert --line-size` wrote).
    #[serde(default = "default_oracle_line_size")]
    pub oracle_line_size: u64,
    /// Replay only these volumes, by their name in the trace (e.g. the VolumeID for Tencent,
    /// host and disk for MSR) or by dense id written `"#3"`. Empty: every volume.
    #[serde(default)]
    pub volumes: Vec<String>,
}

fn one() -> f64 {
    1.0
}
fn default_blkparse_action() -> tiercache_trace::BlkAction {
    tiercache_trace::ReadOptions::default().blkparse_action
}
fn default_oracle_line_size() -> u64 {
    tiercache_trace::ReadOptions::default().oracle_line_size
}

impl TraceWorkload {
    /// The trace opened and replayed as configured (arrival from `replay`, `jobs` and
    /// `iodepth`; `speed`), every volume; an open error names `key` before the file.
    pub fn replay(&self, key: &str) -> Result<tiercache_trace::ReplaySource> {
        let opts = self.read_options();
        let path = self.trace.to_str().context("trace path is not UTF-8")?;
        let reader = tiercache_trace::open(path, self.format, &opts)
            .with_context(|| format!("{key}{}", self.trace.display()))?;
        let arrival = match self.replay {
            ReplayMode::Timestamps => Arrival::Open,
            ReplayMode::Fast => Arrival::Closed {
                jobs: self.jobs,
                iodepth: self.iodepth,
            },
        };
        Ok(tiercache_trace::ReplaySource::new(
            reader, arrival, self.speed,
        ))
    }

    /// How to read the trace (opening a `csv` trace without `csv` names the key).
    pub fn read_options(&self) -> tiercache_trace::ReadOptions {
        tiercache_trace::ReadOptions {
            skip_bad: self.skip_bad,
            blkparse_action: self.blkparse_action,
            oracle_line_size: self.oracle_line_size,
            csv: self.csv.clone(),
        }
    }
}
fn one_u32() -> u32 {
    1
}

/// Trace replay timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayMode {
    /// Open loop at trace times.
    #[default]
    Timestamps,
    /// Closed loop with `jobs × iodepth` requests in flight.
    Fast,
}

/// `[devices]`. Defaults: a RAM-disk cache over one SATA SSD.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Devices {
    /// The cache device.
    pub cache: DeviceConfig,
    /// The backend shared by all volumes (unless given per volume).
    pub backend: DeviceConfig,
    /// Per-volume backends.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_backends: Vec<VolumeBackend>,
}

impl Default for Devices {
    fn default() -> Self {
        Self {
            cache: DeviceConfig::preset("ram-disk"),
            backend: DeviceConfig::preset("sata-ssd-5100"),
            volume_backends: Vec::new(),
        }
    }
}

/// Where the requests come from.
#[derive(Debug, Clone)]
pub enum Workload {
    /// fio-like synthetic workload.
    Synthetic(Box<WorkloadSpec>),
    /// Trace replay.
    Trace(Box<TraceWorkload>),
    /// Several volumes, each with its own workload (`[[volumes]]`).
    Volumes(Vec<crate::volumes::VolumePart>),
}

/// One fully resolved run.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Run name (the variant's name, or the document's `name`).
    pub name: String,
    /// Timed or hit-ratio-only.
    pub mode: RunMode,
    /// Seed of every random choice.
    pub seed: u64,
    /// Policy core configuration.
    pub cache: CacheConfig,
    /// Simulator configuration (devices, host, limits).
    pub sim: SimConfig,
    /// Request source.
    pub workload: Workload,
    /// The whole document as JSON, recorded with the result.
    pub config_json: serde_json::Value,
    /// What the run does that its config did not say (a default it had to choose), printed
    /// before it runs.
    pub notes: Vec<String>,
}

/// Requests measured by a synthetic run that nothing else bounds (no `run.requests`,
/// `run.duration_ns`, `workload.requests` or `workload.duration_ns`): without a bound it would
/// run forever.
pub const DEFAULT_RUN_REQUESTS: u64 = 1_000_000;

const TOP_KEYS: [&str; 10] = [
    "name", "run", "workload", "cache", "devices", "host", "engine", "serve", "bench", "volumes",
];

impl Experiment {
    /// Resolves a document (one variant) into an experiment. `base_dir` resolves relative
    /// trace paths.
    pub fn from_document(name: &str, doc: &Document, base_dir: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            context: doc.context(),
            message,
        };
        let table = doc
            .value
            .as_table()
            .ok_or_else(|| invalid("the document must be a table".into()))?;
        for k in table.keys() {
            if !TOP_KEYS.contains(&k.as_str()) {
                return Err(ConfigError::Value {
                    context: doc.context(),
                    path: k.clone(),
                    message: format!("unknown section (expected one of {})", TOP_KEYS.join(", ")),
                });
            }
        }
        let head: RunHead = if table.contains_key("run") {
            doc.typed(Some("run"))?
        } else {
            RunHead::default()
        };
        // The rest of [run] are the simulator's limits (checked with their own unknown-key rule).
        let mut limits_doc = doc.clone();
        if let Some(run) = limits_doc
            .value
            .get_mut("run")
            .and_then(|v| v.as_table_mut())
        {
            run.remove("mode");
            run.remove("seed");
        }
        let limits: RunLimits = if table.contains_key("run") {
            limits_doc.typed(Some("run"))?
        } else {
            RunLimits::default()
        };
        let mut cache: CacheConfig = if table.contains_key("cache") {
            doc.typed(Some("cache"))?
        } else {
            CacheConfig::default()
        };
        let mut devices: Devices = if table.contains_key("devices") {
            doc.typed(Some("devices"))?
        } else {
            Devices::default()
        };
        let host: Option<HostConfig> = if table.contains_key("host") {
            Some(doc.typed(Some("host"))?)
        } else {
            None
        };
        let trace = trace_workload(doc, base_dir)?;
        let volumes = crate::volumes::resolve(
            doc,
            head.seed,
            trace.as_ref(),
            &mut cache,
            &mut devices.volume_backends,
        )?;
        let workload = if let Some(parts) = volumes {
            if trace.is_none() && table.contains_key("workload") {
                return Err(invalid(
                    "with [[volumes]], each volume has its own workload: [workload] may only name the trace that trace_volumes take requests from".into(),
                ));
            }
            Workload::Volumes(parts)
        } else if let Some(t) = trace {
            Workload::Trace(Box::new(t))
        } else {
            // The generator's seed is run.seed: a workload.seed would be recorded with the
            // result yet replaced, so two "different" seeds would give identical runs.
            if doc
                .value
                .get("workload")
                .and_then(|w| w.get("seed"))
                .is_some()
            {
                return Err(ConfigError::Value {
                    context: doc.context(),
                    path: "workload.seed".into(),
                    message: "not used: the workload is seeded by run.seed (a sweep sets it per repetition); set run.seed instead".into(),
                });
            }
            let mut spec: WorkloadSpec = if table.contains_key("workload") {
                doc.typed(Some("workload"))?
            } else {
                WorkloadSpec::default()
            };
            spec.seed = head.seed;
            spec.validate().map_err(|e| ConfigError::Value {
                context: doc.context(),
                path: "workload".into(),
                message: e.to_string(),
            })?;
            Workload::Synthetic(Box::new(spec))
        };
        // Check the cache now so a bad value is reported before anything runs. Belady runs
        // offline (docs/design.md §12): its own conditions, and the other fields checked as
        // for an online cache.
        if cache.eviction == tiercache_policy::EvictionKind::Belady {
            let why = if head.mode != RunMode::HitRatio {
                Some("needs run.mode = \"hit-ratio\": it knows the future, so it has no timed counterpart")
            } else if !matches!(workload, Workload::Trace(_)) {
                Some("needs a trace workload (workload.trace): it reads the requests twice")
            } else if cache.shards > 1 || !cache.partitions.is_empty() || cache.tenancy.partitions()
            {
                Some("models one cache of cache.capacity: no cache.shards, partitions or partitioning tenancy")
            } else if cache.admission != tiercache_policy::AdmissionConfig::All {
                Some("caches every miss (MIN decides by eviction alone): cache.admission must be \"all\"")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(invalid(format!("cache.eviction = \"belady\" {why}")));
            }
            let mut online = cache.clone();
            online.eviction = tiercache_policy::EvictionKind::Lru;
            tiercache_policy::Cache::new(&online).map_err(|e| invalid(e.to_string()))?;
        } else {
            tiercache_policy::ShardedCache::new(&cache).map_err(|e| invalid(e.to_string()))?;
        }
        if cache.victim == tiercache_policy::VictimConfig::Demote {
            // The policy demotes; no executor has a cache level below one to take it yet.
            return Err(invalid(
                "cache.victim: \"demote\" needs a cache level below this one, and runs have one level over the backend".into(),
            ));
        }
        if head.mode == RunMode::HitRatio {
            clockless_settings(doc, &workload, &limits, &cache)?;
        }
        let mut notes = Vec::new();
        let mut limits = limits;
        let mut config_json = doc.to_json();
        let unbounded_volumes = match &workload {
            Workload::Volumes(parts) => crate::volumes::unbounded(parts),
            _ => false,
        };
        if unbounded_volumes && limits.requests.is_none() && limits.duration_ns.is_none() {
            limits.requests = Some(DEFAULT_RUN_REQUESTS);
            if let Some(run) = config_json
                .as_object_mut()
                .map(|t| t.entry("run").or_insert_with(|| serde_json::json!({})))
                .and_then(|r| r.as_object_mut())
            {
                run.insert("requests".into(), DEFAULT_RUN_REQUESTS.into());
            }
            notes.push(format!(
                "a volume's workload is unbounded and nothing else bounds the run (run.requests, run.duration_ns): measuring {DEFAULT_RUN_REQUESTS} requests"
            ));
        }
        if let Workload::Synthetic(spec) = &workload {
            let unbounded = limits.requests.is_none()
                && limits.duration_ns.is_none()
                && spec.requests.is_none()
                && spec.duration_ns.is_none();
            if unbounded {
                limits.requests = Some(DEFAULT_RUN_REQUESTS);
                // The record describes the run that was made.
                if let Some(t) = config_json.as_object_mut() {
                    let run = t.entry("run").or_insert_with(|| serde_json::json!({}));
                    if let Some(run) = run.as_object_mut() {
                        run.insert("requests".into(), DEFAULT_RUN_REQUESTS.into());
                    }
                }
                notes.push(format!(
                    "nothing bounds the run (run.requests, run.duration_ns, workload.requests, workload.duration_ns): measuring {DEFAULT_RUN_REQUESTS} requests"
                ));
            }
            let data = spec
                .footprint
                .saturating_mul(u64::from(spec.volumes.max(1)));
            if cache.capacity > data {
                notes.push(format!(
                    "cache.capacity ({} bytes) is larger than the data it caches (workload footprint {} bytes × {} volume(s)): every line fits",
                    cache.capacity, spec.footprint, spec.volumes.max(1)
                ));
            }
        }
        if let Some(size) = doc
            .value
            .get("engine")
            .and_then(|e| e.get("backend_size"))
            .and_then(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .or_else(|| v.as_integer().map(|i| i.to_string()))
            })
            .and_then(|v| tiercache_core::units::parse_bytes(&v).ok())
        {
            if cache.capacity > size {
                notes.push(format!(
                    "cache.capacity ({} bytes) is larger than engine.backend_size ({size} bytes): `serve` refuses this",
                    cache.capacity
                ));
            }
        }
        let sim = SimConfig {
            cache_device: devices.cache,
            backend: devices.backend,
            volume_backends: devices.volume_backends,
            host,
            run: limits,
        };
        Ok(Self {
            name: name.to_string(),
            mode: head.mode,
            seed: head.seed,
            cache,
            sim,
            workload,
            config_json,
            notes,
        })
    }

    /// Opens the request source.
    pub fn source(&self) -> crate::Result<Box<dyn RequestSource + Send>> {
        self.open_source().map_err(crate::RunError::from)
    }

    fn open_source(&self) -> Result<Box<dyn RequestSource + Send>> {
        match &self.workload {
            Workload::Synthetic(spec) => {
                Ok(Box::new(SyntheticWorkload::new(spec).context("workload")?))
            }
            Workload::Volumes(parts) => crate::volumes::source(parts),
            Workload::Trace(t) => Ok(filtered(t.replay("workload.trace ")?, t.volumes.clone())),
        }
    }
}

/// `replay` kept to the volumes `wanted` names (every volume when it is empty).
pub fn filtered(
    replay: tiercache_trace::ReplaySource,
    wanted: Vec<String>,
) -> Box<dyn RequestSource + Send> {
    if wanted.is_empty() {
        Box::new(replay)
    } else {
        Box::new(VolumeFilter {
            inner: replay,
            choice: VolumeChoice::new(wanted),
        })
    }
}

impl Experiment {
    /// The trace replay as batches (the batched hit-ratio path), or `None` for a synthetic
    /// workload. Same requests, times and volume choice as [`Experiment::source`].
    pub fn trace_batches(&self) -> crate::Result<Option<TraceBatches>> {
        self.open_trace_batches().map_err(crate::RunError::from)
    }

    fn open_trace_batches(&self) -> Result<Option<TraceBatches>> {
        let Workload::Trace(t) = &self.workload else {
            return Ok(None);
        };
        Ok(Some(TraceBatches {
            replay: t.replay("workload.trace ")?,
            choice: (!t.volumes.is_empty()).then(|| VolumeChoice::new(t.volumes.clone())),
        }))
    }
}

/// A trace replay handing out batches of requests, of the chosen volumes only.
pub struct TraceBatches {
    replay: tiercache_trace::ReplaySource,
    choice: Option<VolumeChoice>,
}

impl TraceBatches {
    /// The read error that ended the replay, if any.
    pub fn take_error(&mut self) -> Option<tiercache_core::SourceError> {
        self.replay.take_error()
    }

    /// What the reader left out, as notes.
    pub fn input_notes(&self) -> Vec<String> {
        self.replay.input_notes()
    }
}

impl tiercache_sim::RequestBatches for TraceBatches {
    fn next_batch(&mut self, out: &mut Vec<tiercache_core::Request>) {
        let max = out.capacity().max(1);
        loop {
            self.replay.next_batch(out, max);
            let Some(choice) = &mut self.choice else {
                return;
            };
            if out.is_empty() {
                return;
            }
            let volumes = self.replay.reader().volumes();
            out.retain(|r| choice.wanted(r.volume, volumes.name(r.volume).unwrap_or("")));
            // A batch of other volumes only is not the end of the trace.
            if !out.is_empty() {
                return;
            }
        }
    }
}

/// The volumes `workload.volumes` chooses, by name in the trace or by dense id written `"#3"`
/// (every volume when it is empty). Volume ids are assigned as a reader meets them, so each
/// id's verdict is decided the first time it is seen, and kept.
pub struct VolumeChoice {
    wanted: Vec<String>,
    /// Verdict per dense volume id: `None` not decided yet.
    keep: Vec<Option<bool>>,
}

impl VolumeChoice {
    /// The choice `wanted` names.
    pub fn new(wanted: Vec<String>) -> Self {
        Self {
            wanted,
            keep: Vec::new(),
        }
    }

    /// Whether volume `v`, named `name` in the trace, is chosen.
    pub fn wanted(&mut self, v: tiercache_core::VolumeId, name: &str) -> bool {
        if self.wanted.is_empty() {
            return true;
        }
        let i = v.0 as usize;
        if self.keep.len() <= i {
            self.keep.resize(i + 1, None);
        }
        let wanted = &self.wanted;
        *self.keep[i].get_or_insert_with(|| {
            let id = format!("#{}", v.0);
            wanted.iter().any(|w| w == name || *w == id)
        })
    }
}

/// Replays only the requests of chosen volumes.
struct VolumeFilter {
    inner: tiercache_trace::ReplaySource,
    choice: VolumeChoice,
}

impl RequestSource for VolumeFilter {
    fn arrival(&self) -> Arrival {
        self.inner.arrival()
    }

    fn next_request(&mut self, job: u32) -> Option<tiercache_core::Request> {
        loop {
            let r = self.inner.next_request(job)?;
            let name = self.inner.reader().volumes().name(r.volume).unwrap_or("");
            if self.choice.wanted(r.volume, name) {
                return Some(r);
            }
        }
    }

    fn take_error(&mut self) -> Option<tiercache_core::SourceError> {
        self.inner.take_error()
    }

    fn input_notes(&self) -> Vec<String> {
        self.inner.input_notes()
    }
}

/// Loads a config (or the embedded default), applies overrides and resolves every variant.
pub fn load(path: Option<&Path>, overrides: &[String]) -> crate::Result<Vec<Experiment>> {
    load_any(path, overrides).map_err(crate::RunError::from)
}

fn load_any(path: Option<&Path>, overrides: &[String]) -> Result<Vec<Experiment>> {
    let (doc, base_dir) = match path {
        Some(p) => (
            Document::load(p)?,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
        ),
        None => (
            Document::parse(DEFAULT_CONFIG, "<embedded examples/default.toml>")?,
            PathBuf::from("."),
        ),
    };
    resolve(doc, &base_dir, overrides)
}

/// Parses config text (named `source` in errors), applies overrides and resolves every variant.
pub fn load_str(text: &str, source: &str, overrides: &[String]) -> crate::Result<Vec<Experiment>> {
    load_str_in(text, source, Path::new("."), overrides)
}

/// [`load_str`] with relative paths (trace files) resolved against `base_dir`, as if the text
/// were a file there.
pub fn load_str_in(
    text: &str,
    source: &str,
    base_dir: &Path,
    overrides: &[String],
) -> crate::Result<Vec<Experiment>> {
    Document::parse(text, source)
        .map_err(anyhow::Error::from)
        .and_then(|doc| resolve(doc, base_dir, overrides))
        .map_err(crate::RunError::from)
}

/// `[workload]` keys a trace replay takes (see [`TraceWorkload`]).
const TRACE_WORKLOAD_KEYS: [&str; 11] = [
    "trace",
    "format",
    "replay",
    "speed",
    "jobs",
    "iodepth",
    "skip_bad",
    "csv",
    "blkparse_action",
    "oracle_line_size",
    "volumes",
];

/// Hit-ratio mode runs a closed-loop synthetic workload without a clock: its requests carry
/// no times, so a setting that acts at a time would never act (the run hung on a duration, or
/// ran without the partitions a tenancy mode was to set). Refused, naming the setting.
fn clockless_settings(
    doc: &Document,
    workload: &Workload,
    limits: &RunLimits,
    cache: &CacheConfig,
) -> Result<(), ConfigError> {
    let mut specs: Vec<(String, &WorkloadSpec)> = Vec::new();
    match workload {
        Workload::Synthetic(s) => specs.push(("workload".into(), s)),
        Workload::Volumes(parts) => {
            for (i, p) in parts.iter().enumerate() {
                if let crate::volumes::VolumeWorkload::Synthetic(s) = &p.workload {
                    specs.push((format!("volumes[{i}]"), s));
                }
            }
        }
        Workload::Trace(_) => {}
    }
    let closed: Vec<&(String, &WorkloadSpec)> =
        specs.iter().filter(|(_, s)| !s.is_open_loop()).collect();
    if closed.is_empty() {
        return Ok(());
    }
    let mut timed: Vec<String> = Vec::new();
    if limits.duration_ns.is_some() {
        timed.push("run.duration_ns".into());
    }
    if limits.warmup_ns > 0 {
        timed.push("run.warmup_ns".into());
    }
    if cache.tenancy.partitions() {
        timed.push("cache.tenancy.mode".into());
    }
    for (at, s) in &closed {
        if s.duration_ns.is_some() {
            timed.push(format!("{at}.duration_ns"));
        }
        if s.bursts.is_some() {
            timed.push(format!("{at}.bursts"));
        }
    }
    match timed.first() {
        None => Ok(()),
        Some(path) => Err(ConfigError::Value {
            context: doc.context(),
            path: path.clone(),
            message: "run.mode = \"hit-ratio\" runs a closed-loop workload without a clock (its \
                      requests carry no times), so this would never take effect: bound the run \
                      by requests (run.requests, workload.requests), or use run.mode = \"timed\""
                .into(),
        }),
    }
}

fn resolve(mut doc: Document, base_dir: &Path, overrides: &[String]) -> Result<Vec<Experiment>> {
    // Choosing a trace from the command line replaces the config's synthetic workload: its
    // generator keys (block sizes, distributions, …) mean nothing for a replay.
    let picks_trace = overrides.iter().any(|o| {
        o.split('=')
            .next()
            .is_some_and(|k| k.trim() == "workload.trace")
    });
    if picks_trace {
        if let Some(w) = doc.value.get_mut("workload").and_then(|w| w.as_table_mut()) {
            w.retain(|k, _| TRACE_WORKLOAD_KEYS.contains(&k));
        }
    }
    doc.apply_overrides(overrides)?;
    // The command line wins over a variant's own `set`: `--set cache.line_size=8KiB` holds in
    // a variant that sets the line size too.
    let variants = doc.variants_with(overrides)?;
    if variants.is_empty() {
        bail!("no runs in the config");
    }
    variants
        .iter()
        .map(|(name, d)| Experiment::from_document(name, d, base_dir).map_err(anyhow::Error::from))
        .collect()
}
