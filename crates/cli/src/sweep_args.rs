//! `tiercache sweep SPEC`: the argument struct (clap derive) and the run around the sweep
//! library, printing the point list and the summary; [`crate::sweep_cmd`] supplies the backend
//! that runs one point.

use std::path::PathBuf;
use tiercache_sweep::{Backend, RunSummary, SweepOptions};

/// `tiercache sweep SPEC`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Sweep spec (TOML): base config, `[[axis]]`, `[[workload]]`, repetitions.
    pub spec: PathBuf,
    /// Output directory for results.jsonl and results.csv (default: results/NAME, or
    /// results/NAME-ci with --ci, NAME being the sweep's name).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Points run in parallel (default: one per core).
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Do not rerun points that failed in an earlier run.
    #[arg(long)]
    pub no_retry_failed: bool,
    /// Apply the spec's `[ci]` profile (smaller runs, fewer repetitions and designs).
    #[arg(long)]
    pub ci: bool,
    /// Override a key of the base configuration (repeatable), e.g. `--set run.requests=50000`.
    /// A key that an axis, a workload's `set` or the spec's `seed` sets is refused: those are
    /// applied over the base for every point.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// List the points (id, workload, rep, design) without running them.
    #[arg(long)]
    pub list: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// What runs each point.
    #[arg(long, value_enum, default_value_t = BackendKind::Sim)]
    pub backend: BackendKind,
    /// Run each point as a task on a Ray cluster (needs the tiercache Python package and Ray):
    /// ADDRESS as `ray.init` takes it (`auto`, the default: the cluster `ray start` made on this
    /// machine; `local`: start one for this sweep; `HOST:PORT`; `ray://HOST:10001`). Points in
    /// flight: --jobs, or the cluster's CPUs.
    #[arg(long, value_name = "ADDRESS", num_args = 0..=1, default_missing_value = "auto")]
    pub ray: Option<String>,
}

/// The executor of sweep points (the binary maps each to a [`Backend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The discrete-event simulator (virtual time).
    Sim,
    /// The real engine measured with a benchmark: not available for sweeps yet (the command
    /// says so and stops); `tiercache bench CONFIG` runs one config on the engine.
    Bench,
}

impl SweepArgs {
    /// The sweep library's options these arguments describe.
    pub fn options(&self) -> SweepOptions {
        SweepOptions {
            spec: self.spec.clone(),
            out: self.out.clone(),
            jobs: self.jobs,
            retry_failed: !self.no_retry_failed,
            ci: self.ci,
            set: self.set.clone(),
            progress: !self.no_progress,
        }
    }
}

/// Runs `tiercache sweep` with the given backend. Prints a one-line summary on stderr. Returns
/// [`tiercache_sweep::SweepError::PointsFailed`] (after every point ran) when any point failed,
/// now or in an earlier run that `--no-retry-failed` did not retry, so the command exits
/// non-zero; the failures are in the results with their errors.
pub fn run(args: &SweepArgs, backend: &dyn Backend) -> anyhow::Result<Option<RunSummary>> {
    let opts = args.options();
    let (spec, points) = tiercache_sweep::load_points(&opts)?;
    if args.list {
        println!(
            "{:>5}  {:16}  {:20}  {:>3}  design",
            "index", "point", "workload", "rep"
        );
        for p in &points {
            let mark = if p.is_default { " (default)" } else { "" };
            println!(
                "{:>5}  {:16}  {:20}  {:>3}  {}{mark}",
                p.index, p.id, p.workload, p.rep, p.name
            );
        }
        println!(
            "{} points: {} workloads x {} designs x {} repetitions",
            points.len(),
            spec.workloads.len(),
            points.len() / (spec.workloads.len() * spec.repetitions as usize).max(1),
            spec.repetitions
        );
        return Ok(None);
    }
    let summary = tiercache_sweep::run_sweep(&opts, &spec, &points, backend)?;
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
    if let Some(failure) = summary.failure() {
        return Err(failure.into());
    }
    Ok(Some(summary))
}
