//! The simulator runner: one resolved experiment run in virtual time (or hit ratios only) into
//! its result record, and the choice of runs a config's variants make.

use crate::experiment::{Experiment, RunMode, Workload};
use crate::volumes::VolumeWorkload;
use anyhow::{Context, Result};
use tiercache_metrics::{RunKind, RunMetrics, RunRecord};
use tiercache_policy::{Cache, PolicyCore, ShardedCache};

/// Result of one experiment.
pub struct Outcome {
    /// The record (configuration, seed, metrics).
    pub record: RunRecord,
    /// Per-interval rows (timed runs with `run.timeline_interval_ns`).
    pub timeline: Vec<tiercache_metrics::TimelineRow>,
}

/// Runs a hit-ratio-only trace replay on the batched path, when the cache and trace allow it:
/// `None` when they do not (the general runner then runs it from the start).
fn run_batched(e: &Experiment, cache: &Cache) -> Result<Option<RunMetrics>> {
    if e.mode != RunMode::HitRatio || tiercache_sim::batched_supports(&e.cache).is_err() {
        return Ok(None);
    }
    let Some(mut batches) = e.trace_batches()? else {
        return Ok(None);
    };
    let out = tiercache_sim::hit_ratio_batched(cache, &mut batches, &e.sim.run)
        .with_context(|| format!("run `{}`", e.name))?;
    match out {
        tiercache_sim::BatchedOutcome::Done(m) => {
            if let Some(err) = batches.take_error() {
                return Err(anyhow::anyhow!(err)).with_context(|| format!("run `{}`", e.name));
            }
            for note in batches.input_notes() {
                crate::print_note(&format!("run `{}`: {note}", e.name));
            }
            Ok(Some(*m))
        }
        tiercache_sim::BatchedOutcome::Unsupported { .. } => Ok(None),
    }
}

/// Runs one resolved experiment. What its input left out (skipped records) is said on stderr
/// as notes, as the command says it.
pub fn run_experiment(e: &Experiment) -> crate::Result<Outcome> {
    run_any(e).map_err(crate::RunError::from)
}

/// Runs Belady's MIN (`cache.eviction = "belady"`): a hit-ratio replay of a trace, read twice
/// (once to learn each line's next use, once to simulate), docs/design.md §12.
fn run_belady(e: &Experiment) -> Result<Outcome> {
    // The conditions were checked when the config was resolved (experiment.rs).
    let (Some(mut first), Some(mut second)) = (e.trace_batches()?, e.trace_batches()?) else {
        anyhow::bail!(
            "run `{}`: cache.eviction = \"belady\" needs a trace workload (workload.trace): it reads the requests twice",
            e.name
        );
    };
    let metrics = tiercache_sim::hit_ratio_belady(&e.cache, &mut first, &mut second, &e.sim.run)
        .with_context(|| format!("run `{}`", e.name))?;
    for batches in [&mut first, &mut second] {
        if let Some(err) = batches.take_error() {
            return Err(anyhow::anyhow!(err)).with_context(|| format!("run `{}`", e.name));
        }
    }
    for note in first.input_notes() {
        crate::print_note(&format!("run `{}`: {note}", e.name));
    }
    finish(e, metrics, Vec::new())
}

fn run_any(e: &Experiment) -> Result<Outcome> {
    if e.cache.eviction == tiercache_policy::EvictionKind::Belady {
        return run_belady(e);
    }
    // One core, or the shards of `cache.shards`, as the engine runs them. Each is its own
    // type on the hit-ratio path, which is monomorphised for speed.
    enum Core {
        One(Box<Cache>),
        Sharded(Box<ShardedCache>),
    }
    let mut cache = if e.cache.shards > 1 {
        Core::Sharded(Box::new(ShardedCache::new(&e.cache).context("cache")?))
    } else {
        Core::One(Box::new(Cache::new(&e.cache).context("cache")?))
    };
    // Hit-ratio-only replays of read-only traces take the batched path (same metrics).
    if let Core::One(c) = &cache {
        if let Some(metrics) = run_batched(e, c)? {
            return finish(e, metrics, Vec::new());
        }
    }
    let mut source = e.source()?;
    let limits = &e.sim.run;
    let expected = limits.requests.map(|n| n + limits.warmup_requests);
    let (metrics, timeline): (RunMetrics, _) =
        crate::progress::with_progress(&e.name, expected, source.as_mut(), |source| {
            anyhow::Ok(match e.mode {
                RunMode::Timed => {
                    let core: &mut dyn PolicyCore = match &mut cache {
                        Core::One(c) => c.as_mut(),
                        Core::Sharded(c) => c.as_mut(),
                    };
                    let out = tiercache_sim::simulate(core, source, &e.sim)
                        .with_context(|| format!("run `{}`", e.name))?;
                    (out.metrics, out.timeline)
                }
                RunMode::HitRatio => {
                    let out = match &mut cache {
                        Core::One(c) => {
                            tiercache_sim::hit_ratio_only(c.as_mut(), source, &e.sim.run)
                        }
                        Core::Sharded(c) => {
                            tiercache_sim::hit_ratio_only(c.as_mut(), source, &e.sim.run)
                        }
                    }
                    .with_context(|| format!("run `{}`", e.name))?;
                    (out, Vec::new())
                }
            })
        })?;
    // A trace that could not be read to its end fails the run: its figures would describe
    // only part of the input.
    if let Some(err) = source.take_error() {
        return Err(anyhow::anyhow!(err)).with_context(|| format!("run `{}`", e.name));
    }
    for note in source.input_notes() {
        crate::print_note(&format!("run `{}`: {note}", e.name));
    }
    finish(e, metrics, timeline)
}

/// The outcome of a run that measured `metrics` (an error when it measured nothing).
fn finish(
    e: &Experiment,
    metrics: RunMetrics,
    timeline: Vec<tiercache_metrics::TimelineRow>,
) -> Result<Outcome> {
    let limits = &e.sim.run;
    if metrics.requests == 0 {
        anyhow::bail!(
            "run `{}` measured no request: the workload ended during the warm-up (run.warmup_requests = {}, run.warmup_ns = {})",
            e.name,
            limits.warmup_requests,
            limits.warmup_ns
        );
    }
    let record = RunRecord::new(
        RunKind::Sim,
        e.name.clone(),
        e.seed,
        e.config_json.clone(),
        metrics,
    );
    Ok(Outcome { record, timeline })
}

/// The runs `tiercache sim` makes of a config: every variant, kept to those whose name contains
/// `only`, with `skip_bad` set on their trace workloads. The Python package runs configs
/// through this too, so both say the same about a bad `--only` or `--skip-bad`.
pub fn select_runs(
    runs: Vec<Experiment>,
    only: Option<&str>,
    skip_bad: bool,
) -> crate::Result<Vec<Experiment>> {
    select_any(runs, only, skip_bad).map_err(crate::RunError::from)
}

fn select_any(
    mut runs: Vec<Experiment>,
    only: Option<&str>,
    skip_bad: bool,
) -> Result<Vec<Experiment>> {
    if let Some(only) = only {
        runs.retain(|e| e.name.contains(only));
        if runs.is_empty() {
            anyhow::bail!("--only {only}: no run's name contains it");
        }
    }
    if skip_bad {
        for e in &mut runs {
            match &mut e.workload {
                Workload::Trace(t) => t.skip_bad = true,
                Workload::Synthetic(_) => anyhow::bail!(
                    "--skip-bad: run `{}` has a synthetic workload, not a trace",
                    e.name
                ),
                Workload::Volumes(parts) => {
                    let mut any = false;
                    for p in parts {
                        if let VolumeWorkload::Trace(t) = &mut p.workload {
                            t.skip_bad = true;
                            any = true;
                        }
                    }
                    if !any {
                        anyhow::bail!("--skip-bad: run `{}` has no trace workload", e.name);
                    }
                }
            }
        }
    }
    Ok(runs)
}

/// `path` with `-NAME` added to its file stem (NAME made file-name safe): the file of one of
/// several variants (timelines, fio's output).
pub fn with_suffix(path: &std::path::Path, name: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("timeline");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("csv");
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    path.with_file_name(format!("{stem}-{safe}.{ext}"))
}
