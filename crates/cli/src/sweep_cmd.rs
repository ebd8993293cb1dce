//! `tiercache sweep`: run every point of a sweep spec through the simulator (the default
//! backend), in parallel and resumably, into tidy result records; locally or, with `--ray`, as
//! one Ray task per point.

use crate::experiment::Experiment;
use crate::sim_cmd::run_experiment;
use crate::sweep_args::{BackendKind, SweepArgs};
use anyhow::{bail, Context, Result};
use tiercache_sweep::{PointSpec, RunSummary};

/// Runs one sweep point in the simulator and returns its result record, with the timeline
/// when the point's config asks for one.
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
    let out = run_experiment(&e).map_err(|e| format!("{e:#}"))?;
    let mut v = serde_json::to_value(&out.record).map_err(|e| e.to_string())?;
    if !out.timeline.is_empty() {
        v["timeline"] = serde_json::to_value(&out.timeline).map_err(|e| e.to_string())?;
    }
    Ok(v)
}

/// Entry point of `tiercache sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    run_sweep(args).map(|_| ())
}

/// Runs `tiercache sweep` and returns what it did (`None` for `--list`); the Python package's
/// `sweep` calls this too.
pub fn run_sweep(mut args: SweepArgs) -> Result<Option<RunSummary>> {
    if matches!(args.backend, BackendKind::Bench) {
        bail!("--backend bench: sweeps run in the simulator only so far; run a config on the real engine with `tiercache bench CONFIG`");
    }
    match args.ray.clone() {
        Some(address) if !args.list => {
            let driver = crate::python::module(
                "tiercache.ray_driver",
                &["--address".to_string(), address.clone()],
            );
            let backend = tiercache_sweep::ray::RayBackend::start(driver)
                .with_context(|| format!("--ray {address}: {}", crate::python::INSTALL_HINT))?;
            args.jobs = Some(args.jobs.unwrap_or(backend.cluster_cpus()));
            crate::sweep_args::run(&args, &backend)
        }
        _ => {
            let backend = |p: &PointSpec| simulate_point(p);
            crate::sweep_args::run(&args, &backend)
        }
    }
}
