//! A sweep as `tiercache sweep` and the Python package run it: a spec file, its `[ci]`
//! profile, `--set` overrides, and where the results go. No printing here: the callers say
//! what happened.

use crate::runner::{default_out_dir, run_points, Backend, RunOptions, RunSummary};
use crate::spec::{PointSpec, SweepSpec};
use crate::SweepError;
use std::path::PathBuf;

/// What to sweep and how (the options of `tiercache sweep`, without the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepOptions {
    /// Sweep spec (TOML): base config, `[[axis]]`, `[[workload]]`, repetitions.
    pub spec: PathBuf,
    /// Output directory (default: `results/NAME`, or `results/NAME-ci` with `ci`).
    pub out: Option<PathBuf>,
    /// Points run in parallel (default: one per core).
    pub jobs: Option<usize>,
    /// Rerun points that failed in an earlier run.
    pub retry_failed: bool,
    /// Apply the spec's `[ci]` profile.
    pub ci: bool,
    /// Overrides of the base configuration, `KEY=VALUE`.
    pub set: Vec<String>,
    /// Show a progress bar.
    pub progress: bool,
}

impl SweepOptions {
    /// The options of `tiercache sweep SPEC` without flags.
    pub fn new(spec: impl Into<PathBuf>) -> Self {
        Self {
            spec: spec.into(),
            out: None,
            jobs: None,
            retry_failed: true,
            ci: false,
            set: Vec::new(),
            progress: true,
        }
    }
}

/// Loads the spec, applies the `[ci]` profile and the overrides, and expands it.
pub fn load_points(opts: &SweepOptions) -> Result<(SweepSpec, Vec<PointSpec>), SweepError> {
    let mut spec = SweepSpec::load(&opts.spec)?;
    if opts.ci {
        spec.apply_ci()?;
    }
    spec.apply_overrides(&opts.set)?;
    let points = spec.expand()?;
    Ok((spec, points))
}

/// Runs `points` (of `spec`, from [`load_points`]) with `backend` into the output directory the
/// options name. Failed points are in the summary ([`RunSummary::failure`]), not an error.
pub fn run_sweep(
    opts: &SweepOptions,
    spec: &SweepSpec,
    points: &[PointSpec],
    backend: &dyn Backend,
) -> Result<RunSummary, SweepError> {
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
        jobs: opts.jobs.unwrap_or(0),
        retry_failed: opts.retry_failed,
        progress: opts.progress,
        sweep_name: spec.name.clone(),
        sweep_description: spec.description.clone(),
    };
    run_points(points, backend, &run)
}

impl RunSummary {
    /// [`SweepError::PointsFailed`] when any point failed, now or in an earlier run that was
    /// not retried: a sweep with failures fails (after every point ran), its failures being in
    /// the results with their errors.
    pub fn failure(&self) -> Option<SweepError> {
        (self.failed + self.not_retried > 0).then(|| SweepError::PointsFailed {
            failed: self.failed + self.not_retried,
            not_retried: self.not_retried,
            total: self.total,
            results: self.results_jsonl.clone(),
        })
    }
}
