//! `tiercache sim`: run a config (and each of its variants) through the simulator.

use crate::experiment::{self, Experiment, RunMode};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use tiercache_metrics::{RunKind, RunMetrics, RunRecord};
use tiercache_policy::{Cache, PolicyCore, ShardedCache};

/// Arguments of `tiercache sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Experiment config (TOML). Without it, the embedded examples/default.toml runs.
    pub config: Option<PathBuf>,
    /// Override a config key: `--set cache.line_size=32KiB` (repeatable). It applies to every
    /// variant after the variant's own `set`: the command line wins.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Print one JSON result record per run (JSON lines) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the per-interval timeline of every run as CSV (the run name is added to the file
    /// name when the config has several variants). A run whose tenancy mode made decisions
    /// also gets its per-volume, per-interval records (allocation, write policy, hits, cache
    /// writes, latency) beside it, in the same name with `-volumes` added.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Run only the variants whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Trace workloads: skip and count malformed records instead of stopping at the first
    /// (the same as `workload.skip_bad = true`).
    #[arg(long)]
    pub skip_bad: bool,
}

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
                eprintln!("tiercache: note: run `{}`: {note}", e.name);
            }
            Ok(Some(*m))
        }
        tiercache_sim::BatchedOutcome::Unsupported { .. } => Ok(None),
    }
}

/// Runs one resolved experiment.
pub fn run_experiment(e: &Experiment) -> Result<Outcome> {
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
        eprintln!("tiercache: note: run `{}`: {note}", e.name);
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
                crate::experiment::Workload::Trace(t) => t.skip_bad = true,
                crate::experiment::Workload::Synthetic(_) => anyhow::bail!(
                    "--skip-bad: run `{}` has a synthetic workload, not a trace",
                    e.name
                ),
                crate::experiment::Workload::Volumes(parts) => {
                    let mut any = false;
                    for p in parts {
                        if let crate::volumes::VolumeWorkload::Trace(t) = &mut p.workload {
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

/// Entry point of `tiercache sim`.
pub fn run(args: SimArgs) -> Result<()> {
    // A config with a `[hierarchy]` section describes several levels: it runs as
    // `tiercache hierarchy` does (per-level table, or one record per run with the levels).
    if let Some(path) = &args.config {
        if crate::hierarchy_cmd::has_hierarchy(path)? {
            return crate::hierarchy_cmd::run(crate::hierarchy_cmd::HierarchyArgs {
                config: path.clone(),
                overrides: args.overrides,
                json: args.json,
                only: args.only,
            });
        }
    }
    let runs = select_runs(
        experiment::load(args.config.as_deref(), &args.overrides)?,
        args.only.as_deref(),
        args.skip_bad,
    )?;
    let several = runs.len() > 1;
    let mut rows = Vec::new();
    let stdout = std::io::stdout();
    // Every timeline file is created before anything runs, so a bad path fails at once instead
    // of losing a long run's results at the end. (A multi-tenant run's `-volumes` file beside
    // it is created once the run shows per-volume intervals: its directory is checked by then.)
    let mut timelines = Vec::new();
    if let Some(path) = &args.timeline {
        let paths: Vec<PathBuf> = runs
            .iter()
            .map(|e| {
                if several {
                    with_suffix(path, &e.name)
                } else {
                    path.clone()
                }
            })
            .collect();
        check_distinct_timelines(&runs, &paths)?;
        for path in paths {
            let f = std::fs::File::create(&path)
                .with_context(|| format!("--timeline {}", path.display()))?;
            timelines.push((f, path));
        }
    }
    let mut timelines = timelines.into_iter();
    for e in &runs {
        for n in &e.notes {
            eprintln!("tiercache: note: run `{}`: {n}", e.name);
        }
        let out = run_experiment(e)?;
        if let Some((mut f, path)) = timelines.next() {
            tiercache_metrics::write_timeline_csv(&out.timeline, &mut f)?;
            if let Some(t) = out
                .record
                .metrics
                .tenancy
                .as_ref()
                .filter(|t| !t.intervals.is_empty())
            {
                let path = with_suffix(&path, "volumes");
                let mut f = std::fs::File::create(&path)
                    .with_context(|| format!("--timeline {}", path.display()))?;
                tiercache_metrics::write_tenancy_csv(&t.intervals, &mut f)?;
            }
        }
        if args.json {
            let mut lock = stdout.lock();
            writeln!(lock, "{}", out.record.to_json_line()?)?;
        } else {
            rows.push((e.name.clone(), out.record.metrics));
        }
    }
    if !args.json {
        write!(stdout.lock(), "{}", tiercache_metrics::render_table(&rows))?;
    }
    Ok(())
}

/// Fails, naming both runs, when two runs' timeline files (`paths`, one per run, or the
/// `-volumes` file beside one) are the same file: variant names that differ only in characters
/// a file name cannot hold would overwrite each other's results.
fn check_distinct_timelines(runs: &[Experiment], paths: &[PathBuf]) -> Result<()> {
    let mut owners: Vec<(PathBuf, String)> = Vec::new();
    for (e, path) in runs.iter().zip(paths) {
        let files = [
            (path.clone(), format!("`{}`", e.name)),
            (
                with_suffix(path, "volumes"),
                format!("`{}` (its -volumes file)", e.name),
            ),
        ];
        for (file, what) in files {
            if let Some((_, other)) = owners.iter().find(|(f, _)| *f == file) {
                anyhow::bail!(
                    "--timeline: runs {other} and {what} would both write {}: give the variants names that differ in letters, digits, '-' or '_'",
                    file.display()
                );
            }
            owners.push((file, what));
        }
    }
    Ok(())
}

/// `path` with `-NAME` added to its file stem (NAME made file-name safe).
pub fn with_suffix(path: &std::path::Path, name: &str) -> PathBuf {
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
