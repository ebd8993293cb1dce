//! The bench runner (`tiercache bench`): runs the engine for real, drives it with fio (nbd
//! engine) from the config's `[workload]`, and returns the same result record as the
//! simulator, so a simulated and a measured run of one design compare field by field.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;
use tiercache_config::{ConfigError, Document};
use tiercache_core::units::de_nanos;
use tiercache_engine::Engine;
use tiercache_metrics::{LatencySummary, RunKind, RunMetrics, RunRecord};
use tiercache_nbd::{serve_unix, ServerConfig, ServerStats, Shutdown};
use tiercache_server::config::{load_doc, setup_of, ServeSetup};
use tiercache_workload::{AddressDist, WorkloadSpec};

/// The `[bench]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct BenchConfig {
    /// Measured time.
    #[serde(deserialize_with = "de_nanos")]
    runtime_ns: u64,
    /// Time run before measuring (fio's ramp_time).
    #[serde(deserialize_with = "de_nanos")]
    ramp_ns: u64,
    /// Read the whole footprint once before the run (a warm cache).
    prewarm: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            runtime_ns: 10_000_000_000,
            ramp_ns: 0,
            prewarm: false,
        }
    }
}

fn invalid(doc: &Document, message: String) -> anyhow::Error {
    ConfigError::Invalid {
        context: doc.context(),
        message,
    }
    .into()
}

/// fio job options equivalent to a synthetic workload, or an error naming what fio cannot
/// express.
pub fn fio_options(w: &WorkloadSpec, volume_bytes: u64) -> Result<Vec<String>, String> {
    let mut o = Vec::new();
    if w.volumes > 1 && w.volume_weights.is_some() {
        return Err(
            "workload.volume_weights: fio drives one export; volumes are laid out on it one after another, one per job (job j on volume j mod volumes), and cannot be weighted"
                .into(),
        );
    }
    if w.trim_fraction > 0.0 {
        return Err("workload.trim_fraction: fio's read/write mix has no trims".into());
    }
    if w.bursts.is_some() {
        return Err("workload.bursts: not expressible in fio".into());
    }
    let volumes = u64::from(w.volumes.max(1));
    if w.footprint == 0 || w.footprint.saturating_mul(volumes) > volume_bytes {
        return Err(format!(
            "workload.footprint: {} bytes × {volumes} volume(s), the export has {volume_bytes}",
            w.footprint
        ));
    }
    let sequential = matches!(w.distribution, AddressDist::Sequential);
    let rw = match (w.read_fraction, sequential) {
        (r, false) if r >= 1.0 => "randread",
        (r, false) if r <= 0.0 => "randwrite",
        (_, false) => "randrw",
        (r, true) if r >= 1.0 => "read",
        (r, true) if r <= 0.0 => "write",
        (_, true) => "rw",
    };
    o.push(format!("--rw={rw}"));
    if !sequential {
        // The workload draws every offset independently, with replacement; fio's default
        // random map would visit each block of a job once before any repeats, and remove the
        // reuse within a job that the simulator sees.
        o.push("--norandommap".into());
    }
    o.push(format!(
        "--rwmixread={}",
        (w.read_fraction * 100.0).round() as u32
    ));
    match &w.distribution {
        AddressDist::Uniform | AddressDist::Sequential => {}
        AddressDist::Zipf { theta, .. } => o.push(format!("--random_distribution=zipf:{theta}")),
        other => {
            return Err(format!(
            "workload.distribution: {other:?} has no fio equivalent (uniform, zipf, sequential do)"
        ))
        }
    }
    if w.write_distribution.is_some() {
        return Err("workload.write_distribution: fio uses one distribution".into());
    }
    match &w.block_sizes[..] {
        [one] => o.push(format!("--bs={}", one.size)),
        many => {
            let total: f64 = many.iter().map(|b| b.weight).sum();
            let mut left = 100u32;
            let parts: Vec<String> = many
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let pct = if i + 1 == many.len() {
                        left
                    } else {
                        ((b.weight / total * 100.0).round() as u32).min(left)
                    };
                    left -= pct;
                    format!("{}/{pct}", b.size)
                })
                .collect();
            o.push(format!("--bssplit={}", parts.join(":")));
        }
    }
    o.push(format!("--size={}", w.footprint));
    o.push(format!("--iodepth={}", w.iodepth.unwrap_or(1)));
    if let Some(r) = w.rate_iops {
        o.push(format!(
            "--rate_iops={}",
            (r / w.jobs.max(1) as f64).ceil() as u64
        ));
    }
    Ok(o)
}

/// fio job sections, one per workload job, each with its own random seed derived from the
/// workload's: fio's `--numjobs` clones share one `--randseed`, so every clone would issue the
/// same offsets and hit what the others just brought in (a 77% hit ratio where the workload
/// gives 1.5%). Volumes lie one after another on the export, and job `j` works on volume
/// `j mod volumes`, as the simulator's generator assigns them. Goes after the global options.
pub fn fio_jobs(w: &WorkloadSpec) -> Vec<String> {
    let volumes = u64::from(w.volumes.max(1));
    (0..u64::from(w.jobs.max(1)))
        .flat_map(|i| {
            [
                format!("--name=job{i}"),
                format!(
                    "--randseed={}",
                    w.seed.wrapping_mul(1_000_003).wrapping_add(i)
                ),
                format!("--offset={}", (i % volumes) * w.footprint),
            ]
        })
        .collect()
}

/// Sets `a.b.c` in a JSON object tree, creating objects on the way.
fn set_json_path(root: &mut serde_json::Value, path: &str, value: serde_json::Value) {
    let mut v = root;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        if !v.is_object() {
            *v = serde_json::json!({});
        }
        let map = v.as_object_mut().expect("made an object above");
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        v = map.entry(part).or_insert_with(|| serde_json::json!({}));
    }
}

/// What fio drives the engine with.
enum Load {
    /// A synthetic workload, as fio job options.
    Synthetic(Box<WorkloadSpec>),
    /// A trace, as a fio iolog.
    Trace(crate::bench_trace::IologReplay),
}

impl Load {
    /// One past the highest byte the load touches.
    fn end(&self) -> u64 {
        match self {
            Load::Synthetic(w) => w.footprint.saturating_mul(u64::from(w.volumes.max(1))),
            Load::Trace(t) => t.end,
        }
    }
}

fn summary(side: &serde_json::Value) -> LatencySummary {
    let clat = &side["clat_ns"];
    let p = |q: &str| clat["percentile"][q].as_f64().unwrap_or(0.0) / 1000.0;
    LatencySummary {
        count: side["total_ios"].as_u64().unwrap_or(0),
        mean: clat["mean"].as_f64().unwrap_or(0.0) / 1000.0,
        p50: p("50.000000"),
        p90: p("90.000000"),
        p99: p("99.000000"),
        p999: p("99.900000"),
        p9999: p("99.990000"),
        max: clat["max"].as_f64().unwrap_or(0.0) / 1000.0,
    }
}

/// One design to benchmark: a config or one of its variants, with overrides applied.
pub struct BenchRun {
    /// The variant's name.
    pub name: String,
    /// The document as it runs.
    pub doc: Document,
    /// The directory relative paths start from.
    base: PathBuf,
}

/// The designs `tiercache bench` runs of the config at `config`: every variant (as `sim` runs
/// them: the command line's overrides win over a variant's own `set`), kept to those whose
/// name contains `only`. Each runs on a fresh engine.
pub fn bench_runs(
    config: &Path,
    overrides: &[String],
    only: Option<&str>,
) -> crate::Result<Vec<BenchRun>> {
    let runs = || -> Result<Vec<BenchRun>> {
        let (doc, base) = load_doc(Some(config), overrides)?;
        let mut variants = doc.variants_with(overrides)?;
        if let Some(only) = only {
            variants.retain(|(name, _)| name.contains(only));
            if variants.is_empty() {
                bail!("--only {only}: no variant's name contains it");
            }
        }
        Ok(variants
            .into_iter()
            .map(|(name, doc)| BenchRun {
                name,
                doc,
                base: base.clone(),
            })
            .collect())
    };
    runs().map_err(crate::RunError::from)
}

/// Fails unless fio can be run.
pub fn check_fio() -> crate::Result<()> {
    if Command::new("fio").arg("--version").output().is_err() {
        return Err(anyhow::anyhow!("fio is not installed (scripts/setup.sh installs it)").into());
    }
    Ok(())
}

/// What `bench` reads of a config (`run.seed` is its fio seed); a sweep point that varies any
/// other key would give every value the same measurement (docs/design.md §9).
const BENCH_READS: [&str; 7] = [
    "name", "cache", "engine", "serve", "workload", "bench", "run.seed",
];

/// Whether `bench` reads the config key `key` (dotted, as `--set` takes it).
pub fn bench_reads(key: &str) -> bool {
    crate::reads(&BENCH_READS, key)
}

/// The first key of `p`'s own overrides (its workload's `set`, its axes) that `bench` does not
/// read: the simulator's devices, `run.requests`, a `[hierarchy]`.
fn unread_key(p: &tiercache_sweep::PointSpec) -> Option<String> {
    if p.doc.value.get("hierarchy").is_some() {
        return Some("hierarchy".into());
    }
    p.overrides
        .iter()
        .filter_map(|o| o.split_once('='))
        .map(|(k, _)| k.trim())
        .find(|k| !bench_reads(k))
        .map(str::to_string)
}

/// Runs one sweep point on a fresh engine under fio (`tiercache sweep --backend bench`) and
/// returns its record, a `RunRecord` of kind `bench`, the shape of the simulator's. A point
/// whose own settings (workload `set`, axes) include a key `bench` does not read fails naming
/// the point and the key, rather than measuring every value alike.
pub fn bench_point(
    p: &tiercache_sweep::PointSpec,
) -> std::result::Result<serde_json::Value, String> {
    if let Some(key) = unread_key(p) {
        return Err(format!(
            "point {} ({} / {}): `{key}` is not read by --backend bench (it runs [cache], [engine], [serve], [workload] and [bench] for [bench].runtime_ns under fio); sweep it with --backend sim",
            p.id, p.workload, p.name
        ));
    }
    let run = BenchRun {
        name: p.name.clone(),
        doc: p.doc.clone(),
        base: p.base_dir.clone(),
    };
    let record = run
        .run(None)
        .map_err(|e| format!("{:#}", e.into_anyhow()))?;
    serde_json::to_value(&record).map_err(|e| e.to_string())
}

impl BenchRun {
    /// Benchmarks the design on a fresh engine: fio's own JSON output goes to `fio_output`
    /// when given (else to a private file removed afterwards).
    pub fn run(&self, fio_output: Option<PathBuf>) -> crate::Result<RunRecord> {
        bench_one(&self.name, &self.doc, &self.base, fio_output)
            .with_context(|| format!("bench `{}`", self.name))
            .map_err(crate::RunError::from)
    }
}

/// Benchmarks one design (a config or one of its variants).
fn bench_one(
    name: &str,
    doc: &Document,
    base: &std::path::Path,
    fio_output: Option<PathBuf>,
) -> Result<RunRecord> {
    let mut setup: ServeSetup = setup_of(doc, Some(base))?;
    let table = doc.value.as_table().context("the config must be a table")?;
    if !table.contains_key("workload") {
        return Err(invalid(doc, "bench needs a [workload] section".into()));
    }
    if setup.ram_level.is_some() {
        // Not run by bench yet: refused rather than measured without it.
        return Err(invalid(
            doc,
            "ram_level: bench runs one cache level; measure a RAM level with `tiercache serve` \
             and fio (bench/two_level_serve.sh)"
                .into(),
        ));
    }
    // Files the config does not name are the bench's own, made fresh and removed at the end:
    // the defaults belong to `serve`, and a running cache may be using them.
    let dir = tempfile::Builder::new()
        .prefix("tiercache-bench-")
        .tempdir()
        .context("making the bench's private directory")?;
    // The private cache file goes to RAM (as `serve`'s default does) where there is /dev/shm.
    let mut shm_dir = None;
    let seed = crate::experiment::run_seed(doc)?;
    let load = if let Some(t) = crate::experiment::trace_workload(doc, base)? {
        Load::Trace(crate::bench_trace::prepare(
            &t,
            &crate::bench_trace::iolog_path(dir.path()),
        )?)
    } else {
        let mut w: WorkloadSpec = doc.typed(Some("workload"))?;
        w.seed = seed;
        Load::Synthetic(Box::new(w))
    };
    let engine_key = |k: &str| doc.value.get("engine").and_then(|e| e.get(k)).is_some();
    if !engine_key("cache_path") {
        if std::path::Path::new("/dev/shm").is_dir() {
            shm_dir = Some(
                tempfile::Builder::new()
                    .prefix("tiercache-bench-")
                    .tempdir_in("/dev/shm")
                    .context("making the bench's private directory in /dev/shm")?,
            );
        }
        setup.engine.cache_path = shm_dir
            .as_ref()
            .map_or(dir.path(), |d| d.path())
            .join("cache.img");
    }
    if !engine_key("backend_path") {
        setup.engine.backend_path = dir.path().join("backend.img");
        if !engine_key("backend_size") {
            // Room for every byte the load touches (a sparse file), at least the serve default.
            setup.engine.backend_size = Some(
                load.end()
                    .next_multiple_of(1 << 20)
                    .max(tiercache_engine::DEFAULT_BACKEND_SIZE),
            );
        }
    }
    let bench: BenchConfig = if table.contains_key("bench") {
        doc.typed(Some("bench"))?
    } else {
        BenchConfig::default()
    };
    let engine =
        Arc::new(Engine::open(&setup.cache, &setup.engine).context("starting the engine")?);
    let fio_opts = match &load {
        Load::Synthetic(w) => {
            let mut o = fio_options(w, engine.size()).map_err(|m| invalid(doc, m))?;
            o.extend([
                "--time_based".to_string(),
                format!("--runtime={}ms", (bench.runtime_ns / 1_000_000).max(1)),
                format!("--ramp_time={}ms", bench.ramp_ns / 1_000_000),
            ]);
            o.extend(fio_jobs(w));
            o
        }
        Load::Trace(t) => {
            if t.end > engine.size() {
                return Err(invalid(
                    doc,
                    format!(
                        "workload.trace: the trace reaches byte {} but the backend has {} (engine.backend_size)",
                        t.end,
                        engine.size()
                    ),
                ));
            }
            t.fio_args.clone()
        }
    };
    let sock = dir.path().join("bench.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock)?;
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let dev: Arc<dyn BlockDevice> = engine.clone();
    let server = {
        let cfg = ServerConfig {
            workers: setup.serve.workers,
            ..ServerConfig::default()
        };
        let (stats, stop) = (stats.clone(), stop.clone());
        std::thread::spawn(move || serve_unix(listener, dev, cfg, stats, stop))
    };
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    if let (true, Load::Synthetic(workload)) = (bench.prewarm, &load) {
        prewarm(&uri, workload.footprint, &stats, dir.path())?;
    }
    let before = engine.stats();
    let out_json = fio_output.unwrap_or_else(|| dir.path().join("fio.json"));
    let o = Command::new("fio")
        .args([
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--group_reporting",
            "--output-format=json",
        ])
        .arg(format!("--output={}", out_json.display()))
        .args(&fio_opts)
        .output()?;
    let after = engine.stats();
    stop.trigger();
    let _ = server.join();
    engine.shutdown()?;
    if !o.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let fio: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json)?).context("fio's JSON output")?;
    let job = &fio["jobs"][0];
    let (r, w) = (&job["read"], &job["write"]);
    let reads = r["total_ios"].as_u64().unwrap_or(0);
    let writes = w["total_ios"].as_u64().unwrap_or(0);
    let secs = match &load {
        Load::Synthetic(_) => bench.runtime_ns as f64 / 1e9,
        // A replay ends with the trace: fio's own run time.
        Load::Trace(t) => {
            if reads + writes != t.requests {
                bail!(
                    "fio replayed {} of the trace's {} requests",
                    reads + writes,
                    t.requests
                );
            }
            job["job_runtime"].as_f64().unwrap_or(0.0) / 1e3
        }
    };
    let (rl, wl) = (summary(r), summary(w));
    let all = LatencySummary {
        count: reads + writes,
        mean: if reads + writes > 0 {
            (rl.mean * reads as f64 + wl.mean * writes as f64) / (reads + writes) as f64
        } else {
            0.0
        },
        // fio reports reads and writes apart: the larger of the two bounds the mix.
        p50: rl.p50.max(wl.p50),
        p90: rl.p90.max(wl.p90),
        p99: rl.p99.max(wl.p99),
        p999: rl.p999.max(wl.p999),
        p9999: rl.p9999.max(wl.p9999),
        max: rl.max.max(wl.max),
    };
    let mut m = RunMetrics {
        requests: reads + writes,
        read_requests: reads,
        write_requests: writes,
        bytes: r["io_bytes"].as_u64().unwrap_or(0) + w["io_bytes"].as_u64().unwrap_or(0),
        iops: r["iops"].as_f64().unwrap_or(0.0) + w["iops"].as_f64().unwrap_or(0.0),
        bandwidth_bytes_per_s: r["bw_bytes"].as_f64().unwrap_or(0.0)
            + w["bw_bytes"].as_f64().unwrap_or(0.0),
        dirty_lines_end: after.dirty_lines,
        resident_lines_end: after.resident_lines,
        duration_ns: (secs * 1e9) as u64,
        ..Default::default()
    };
    m.latency_us.all = all;
    m.latency_us.read = rl;
    m.latency_us.write = wl;
    tiercache_sim::fill_policy_metrics(
        &mut m,
        &tiercache_sim::stats_diff(&before.cache, &after.cache),
    );
    // The record describes the run that was made: settings the engine had to change are
    // recorded as run, and said.
    let mut config = setup.config_json.clone();
    for (key, value) in engine.overrides() {
        crate::print_note(&format!("bench: `{name}` ran with {key} = {value}"));
        set_json_path(&mut config, key, serde_json::Value::String(value.clone()));
    }
    for note in engine.notes() {
        crate::print_note(&format!("bench: {note}"));
    }
    Ok(RunRecord::new(RunKind::Bench, name, seed, config, m))
}

/// Fills the cache before the run (`bench.prewarm`): fio reads the whole footprint once
/// through the server; on a terminal (and not `--quiet`) a bar shows the bytes read so far
/// against the footprint, from the server's own counter.
fn prewarm(uri: &str, footprint: u64, stats: &ServerStats, dir: &Path) -> Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    // fio's messages go to a file, not a pipe: a pipe nobody reads while the bar is drawn
    // could fill and stall fio.
    let log = dir.join("prewarm.log");
    let mut child = Command::new("fio")
        .args([
            "--name=prewarm",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=read",
            "--bs=1m",
            "--iodepth=4",
        ])
        .arg(format!("--size={footprint}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let start = stats.bytes_read.load(Relaxed);
    let bar = crate::show_progress().then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(footprint),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40.cyan/blue}] {bytes}/{total_bytes} filling the cache ({bytes_per_sec})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some(bar) = &bar {
            bar.set_position(stats.bytes_read.load(Relaxed).saturating_sub(start));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !status.success() {
        bail!(
            "fio prewarm: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_workload::BlockSize;

    #[test]
    fn settings_the_engine_changed_are_recorded_as_run() {
        let mut c = serde_json::json!({"cache": {"dirty_full": "evict-then-write", "capacity": 1}});
        set_json_path(&mut c, "cache.dirty_full", "bypass".into());
        set_json_path(&mut c, "engine.remote.x", 3.into());
        assert_eq!(c["cache"]["dirty_full"], "bypass");
        assert_eq!(c["cache"]["capacity"], 1);
        assert_eq!(c["engine"]["remote"]["x"], 3);
    }

    #[test]
    fn workloads_map_to_fio_options_or_name_what_cannot() {
        let w = WorkloadSpec {
            jobs: 2,
            iodepth: Some(16),
            read_fraction: 0.7,
            footprint: 1 << 30,
            distribution: AddressDist::Zipf {
                theta: 1.1,
                scramble: true,
            },
            block_sizes: vec![
                BlockSize {
                    size: 4096,
                    weight: 3.0,
                },
                BlockSize {
                    size: 65536,
                    weight: 1.0,
                },
            ],
            ..WorkloadSpec::default()
        };
        let o = fio_options(&w, 1 << 30).unwrap();
        for want in [
            "--rw=randrw",
            "--rwmixread=70",
            "--random_distribution=zipf:1.1",
            "--bssplit=4096/75:65536/25",
            "--iodepth=16",
            "--size=1073741824",
        ] {
            assert!(o.iter().any(|x| x == want), "{want} missing from {o:?}");
        }
        // Each job its own seed: clones sharing one would issue the same offsets.
        let jobs = fio_jobs(&w);
        assert_eq!(jobs.iter().filter(|a| a.starts_with("--name=")).count(), 2);
        let seeds: Vec<_> = jobs
            .iter()
            .filter(|a| a.starts_with("--randseed="))
            .collect();
        assert_eq!(seeds.len(), 2);
        assert_ne!(seeds[0], seeds[1]);
        let seq = WorkloadSpec {
            distribution: AddressDist::Sequential,
            read_fraction: 1.0,
            ..WorkloadSpec::default()
        };
        assert!(fio_options(&seq, 1 << 40)
            .unwrap()
            .contains(&"--rw=read".to_string()));
        let too_big = WorkloadSpec {
            footprint: 2 << 30,
            ..w.clone()
        };
        assert!(fio_options(&too_big, 1 << 30)
            .unwrap_err()
            .contains("workload.footprint"));
        let trims = WorkloadSpec {
            trim_fraction: 0.1,
            ..w.clone()
        };
        assert!(fio_options(&trims, 1 << 30)
            .unwrap_err()
            .contains("workload.trim_fraction"));
        let normal = WorkloadSpec {
            distribution: AddressDist::Normal {
                mean_fraction: 0.5,
                stddev_fraction: 0.1,
            },
            ..w
        };
        assert!(fio_options(&normal, 1 << 30)
            .unwrap_err()
            .contains("workload.distribution"));
    }
}
