//! `tiercache sweep`: run every point of a sweep spec through the simulator (the default
//! backend), in parallel and resumably, into tidy result records; locally or, with `--ray`, as
//! one Ray task per point. The runner is `tiercache_run::sweep`'s; this converts the arguments
//! and prints `--list`.

use anyhow::{bail, Result};
use tiercache_run::sweep::{load_points, SweepOptions};
use tiercache_sweep::cli::{BackendKind, SweepArgs};
use tiercache_sweep::RunSummary;

/// Entry point of `tiercache sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    run_sweep(args).map(|_| ())
}

/// The runner's options of the command's arguments.
pub fn options(args: &SweepArgs) -> SweepOptions {
    SweepOptions {
        spec: args.spec.clone(),
        out: args.out.clone(),
        jobs: args.jobs,
        retry_failed: !args.no_retry_failed,
        ci: args.ci,
        set: args.set.clone(),
        progress: !args.no_progress,
        ray: args.ray.clone(),
    }
}

/// Runs `tiercache sweep` and returns what it did (`None` for `--list`).
pub fn run_sweep(args: SweepArgs) -> Result<Option<RunSummary>> {
    if matches!(args.backend, BackendKind::Bench) {
        bail!("--backend bench: sweeps run in the simulator only so far; run a config on the real engine with `tiercache bench CONFIG`");
    }
    if args.list {
        list(&args)?;
        return Ok(None);
    }
    Ok(Some(tiercache_run::sweep::run_sweep(&options(&args))?))
}

/// `--list`: the points (id, workload, rep, design) without running them.
fn list(args: &SweepArgs) -> Result<()> {
    let (spec, points) = load_points(&args.spec, args.ci, &args.set)?;
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
