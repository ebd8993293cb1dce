//! The sweep runner: a sweep spec's points run through the simulator (locally in parallel, or
//! one Ray task per point), resumably, into tidy result records; and one point on its own.
//!
//! The options are a plain struct, not the command's arguments: the command converts its
//! arguments, the Python package builds them from keywords.

use crate::experiment::Experiment;
use crate::sim::run_experiment;
use anyhow::{Context, Result};
use std::path::PathBuf;
use tiercache_sweep::{default_out_dir, run_points, PointSpec, RunOptions, RunSummary};
use tiercache_sweep::{SweepError, SweepSpec};

/// How to run a sweep.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// The sweep spec (TOML).
    pub spec: PathBuf,
    /// Output directory (default: `results/NAME`, or `results/NAME-ci` with `ci`).
    pub out: Option<PathBuf>,
    /// Points run in parallel (default: one per core, or the Ray cluster's CPUs).
    pub jobs: Option<usize>,
    /// Rerun points that failed in an earlier run.
    pub retry_failed: bool,
    /// Apply the spec's `[ci]` profile.
    pub ci: bool,
    /// Overrides of the base configuration (`KEY=VALUE`).
    pub set: Vec<String>,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
    /// Run each point as a task on this Ray cluster (`auto`, `local`, `HOST:PORT`, …).
    pub ray: Option<String>,
}

/// Loads the spec, applies the `[ci]` profile (when `ci`) and the overrides `set`, and expands
/// it into its points.
pub fn load_points(
    spec: &std::path::Path,
    ci: bool,
    set: &[String],
) -> Result<(SweepSpec, Vec<PointSpec>), SweepError> {
    let mut s = SweepSpec::load(spec)?;
    if ci {
        s.apply_ci()?;
    }
    s.apply_overrides(set)?;
    let points = s.expand()?;
    Ok((s, points))
}

/// Runs one sweep point in the simulator and returns its result record, with the timeline
/// when the point's config asks for one; a failure is the message the results record.
pub fn simulate_point(p: &PointSpec) -> std::result::Result<serde_json::Value, String> {
    let e = Experiment::from_document(&p.name, &p.doc, &p.base_dir).map_err(|e| e.to_string())?;
    // What `sim` says of a config (an unbounded run, a cache larger than its data), a sweep
    // says of its point.
    for n in &e.notes {
        eprintln!(
            "tiercache: note: point {} ({} / {}): {n}",
            p.id, p.workload, p.name
        );
    }
    let out = run_experiment(&e).map_err(|e| format!("{:#}", e.into_anyhow()))?;
    let mut v = serde_json::to_value(&out.record).map_err(|e| e.to_string())?;
    if !out.timeline.is_empty() {
        v["timeline"] = serde_json::to_value(&out.timeline).map_err(|e| e.to_string())?;
    }
    Ok(v)
}

/// Runs every point of the sweep not already done and returns what it did. Prints a one-line
/// summary on stderr. Fails with [`SweepError::PointsFailed`] (after every point ran) when any
/// point failed, now or in an earlier run not retried; the failures are in the results.
pub fn run_sweep(opts: &SweepOptions) -> crate::Result<RunSummary> {
    run_any(opts).map_err(crate::RunError::from)
}

fn run_any(opts: &SweepOptions) -> Result<RunSummary> {
    match &opts.ray {
        Some(address) => {
            let driver = crate::python::module(
                "tiercache.ray_driver",
                &["--address".to_string(), address.clone()],
            );
            let backend = tiercache_sweep::ray::RayBackend::start(driver)
                .with_context(|| format!("--ray {address}: {}", crate::python::INSTALL_HINT))?;
            let jobs = opts.jobs.unwrap_or(backend.cluster_cpus());
            run_with(opts, jobs, &backend)
        }
        None => {
            let backend = |p: &PointSpec| simulate_point(p);
            run_with(opts, opts.jobs.unwrap_or(0), &backend)
        }
    }
}

/// Runs the sweep's points on `backend`, `jobs` at a time (0: one per core).
fn run_with(
    opts: &SweepOptions,
    jobs: usize,
    backend: &dyn tiercache_sweep::Backend,
) -> Result<RunSummary> {
    let (spec, points) = load_points(&opts.spec, opts.ci, &opts.set)?;
    // A CI run resolves to other points than the full one: keep its results apart.
    let out_dir = opts.out.clone().unwrap_or_else(|| {
        default_out_dir(&if opts.ci {
            format!("{}-ci", spec.name)
        } else {
            spec.name.clone()
        })
    });
    let run = RunOptions {
        out_dir,
        jobs,
        retry_failed: opts.retry_failed,
        progress: opts.progress,
        sweep_name: spec.name.clone(),
        sweep_description: spec.description.clone(),
    };
    let summary = run_points(&points, backend, &run)?;
    let not_retried = if summary.not_retried > 0 {
        format!(
            ", {} failed before and not retried (--no-retry-failed)",
            summary.not_retried
        )
    } else {
        String::new()
    };
    eprintln!(
        "sweep {}: {} points, {} already done{not_retried}, {} ok, {} failed{}; results in {}",
        spec.name,
        summary.total,
        summary.skipped,
        summary.ok,
        summary.failed,
        if summary.malformed_lines > 0 {
            format!(
                " ({} malformed lines in the old results ignored)",
                summary.malformed_lines
            )
        } else {
            String::new()
        },
        summary.results_jsonl.display()
    );
    if summary.other_lines > 0 {
        eprintln!(
            "  {} lines of results.jsonl are for points not in this sweep (an earlier spec or other --set values): kept there, left out of results.csv and results.parquet",
            summary.other_lines
        );
    }
    for (point, error) in &summary.first_errors {
        eprintln!("  point {point} failed: {error}");
    }
    if summary.failed + summary.not_retried > 0 {
        return Err(SweepError::PointsFailed {
            failed: summary.failed + summary.not_retried,
            not_retried: summary.not_retried,
            total: summary.total,
            results: summary.results_jsonl.clone(),
        }
        .into());
    }
    Ok(summary)
}
