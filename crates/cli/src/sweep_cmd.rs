//! `tiercache sweep`: run every point of a sweep spec through the simulator (the default
//! backend; or the real engine under fio with `--backend bench`), in parallel and resumably, into tidy result records; locally or, with `--ray`, as
//! one Ray task per point. The runner is `tiercache_run::sweep`'s; this holds the arguments,
//! converts them and prints `--list`.

use anyhow::{bail, Result};
use std::path::PathBuf;
use tiercache_sweep::{load_points, RunSummary, SweepOptions};

/// Entry point of `tiercache sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    let json = args.output.json;
    if let Some(s) = run_sweep(args)? {
        if json {
            println!("{}", summary_json(&s));
        }
    }
    Ok(())
}

/// What a sweep did, as `--json` prints it.
fn summary_json(s: &RunSummary) -> serde_json::Value {
    serde_json::json!({
        "points": s.total,
        "already_done": s.skipped,
        "not_retried": s.not_retried,
        "ok": s.ok,
        "failed": s.failed,
        "malformed_lines": s.malformed_lines,
        "other_lines": s.other_lines,
        "first_errors": s.first_errors.iter().map(|(point, error)| {
            serde_json::json!({"point": point, "error": error})
        }).collect::<Vec<_>>(),
        "results_jsonl": s.results_jsonl,
        "results_csv": s.results_csv,
        "results_parquet": s.results_parquet,
    })
}

/// Runs `tiercache sweep` and returns what it did (`None` for `--list`).
pub fn run_sweep(args: SweepArgs) -> Result<Option<RunSummary>> {
    if args.list {
        list(&args)?;
        return Ok(None);
    }
    Ok(Some(match args.backend {
        BackendKind::Bench => {
            if args.ray.is_some() {
                bail!("--backend bench with --ray: bench points run one at a time on this machine; drop --ray");
            }
            tiercache_run::sweep::run_bench_sweep(&args.options())?
        }
        BackendKind::Sim => tiercache_run::sweep::run_sweep(&args.options(), args.ray.as_deref())?,
    }))
}

/// `--list`: the points (id, workload, rep, design) without running them.
fn list(args: &SweepArgs) -> Result<()> {
    let (spec, points) = load_points(&args.options())?;
    if args.output.json {
        let points: Vec<_> = points
            .iter()
            .map(|p| {
                serde_json::json!({
                    "index": p.index, "point": p.id, "workload": p.workload, "rep": p.rep,
                    "design": p.name, "default": p.is_default,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"sweep": spec.name, "points": points})
        );
        return Ok(());
    }
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
    Ok(())
}

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
    /// `--quiet` (`-q`): no progress bar and no notes; `--json`: the summary (or with
    /// `--list`, the points) as one JSON document on stdout.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
    /// No progress bar; notes (what each point's config means, what ran other than asked)
    /// are still printed, unlike `--quiet`.
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
    /// The real engine under fio, as `tiercache bench` runs a config: one point at a time
    /// (`--jobs` is 1), into `results/NAME-bench`; a point that varies a key bench does not read
    /// fails naming it.
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
            progress: !self.output.quiet && !self.no_progress,
        }
    }
}
