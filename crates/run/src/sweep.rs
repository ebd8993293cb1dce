//! The sweep runner: a sweep spec's points run through the simulator (locally in parallel, or
//! one Ray task per point), resumably, into tidy result records; and one point on its own.
//!
//! The options are `tiercache_sweep`'s plain [`SweepOptions`] (loading and running points is
//! that crate's); this adds the backends (the simulator, or Ray) and the summary a person reads.
//! The command converts its arguments into them, the Python package builds them from keywords.

use crate::experiment::Experiment;
use crate::hierarchy::HierarchyRun;
use crate::sim::run_experiment;
use anyhow::{Context, Result};
use tiercache_sweep::{PointSpec, RunSummary};

pub use tiercache_sweep::{load_points, SweepOptions};

/// Runs one sweep point in the simulator and returns its result record, with the timeline
/// when the point's config asks for one; a failure is the message the results record. A point
/// whose document has a `[hierarchy]` runs the hierarchy runner instead (its record has
/// `kind = "hierarchy"`, see [`hierarchy_point_name`] for its name); one with a `[file_level]`
/// runs the file-level simulator (`kind = "file_level"`, [`crate::file_level`]).
pub fn simulate_point(p: &PointSpec) -> std::result::Result<serde_json::Value, String> {
    if p.doc.value.get("hierarchy").is_some() {
        return hierarchy_point(p);
    }
    if p.doc.value.get("file_level").is_some() {
        return crate::file_level::file_level_record(&p.name, &p.doc)
            .map_err(|e| format!("{:#}", e.into_anyhow()));
    }
    let e = Experiment::from_document(&p.name, &p.doc, &p.base_dir).map_err(|e| e.to_string())?;
    // What `sim` says of a config (an unbounded run, a cache larger than its data), a sweep
    // says of its point.
    for n in &e.notes {
        crate::print_note(&format!(
            "point {} ({} / {}): {n}",
            p.id, p.workload, p.name
        ));
    }
    let out = run_experiment(&e).map_err(|e| format!("{:#}", e.into_anyhow()))?;
    let mut v = serde_json::to_value(&out.record).map_err(|e| e.to_string())?;
    // Every design against the optimum, where there is one (docs/design.md §9, §12); the
    // design's own result stands if the optimum cannot be computed.
    match crate::opt_gap::gap_to_opt(&e, &out.record.metrics) {
        Ok(Ok(gap)) => {
            v["metrics"]["opt"] = serde_json::to_value(&gap).map_err(|e| e.to_string())?;
        }
        Ok(Err(_)) => {}
        Err(err) => eprintln!(
            "tiercache: note: point {} ({} / {}): no gap to OPT: {err:#}",
            p.id, p.workload, p.name
        ),
    }
    if !out.timeline.is_empty() {
        v["timeline"] = serde_json::to_value(&out.timeline).map_err(|e| e.to_string())?;
    }
    Ok(v)
}

/// The name of a hierarchy point's record: the workload, then each axis's value label, joined
/// by `/` (`zipf/1G/LRU-MRU-demote`): the record names its setting and design on its own
/// (`table.py` scripts read it), where a sweep line carries them as workload and labels.
pub fn hierarchy_point_name(p: &PointSpec) -> String {
    let labels = p.axes.iter().map(|a| a.label.as_str());
    let design: Vec<&str> = if p.axes.is_empty() {
        vec![&p.name]
    } else {
        labels.collect()
    };
    std::iter::once(p.workload.as_str())
        .chain(design)
        .collect::<Vec<_>>()
        .join("/")
}

/// One hierarchy point: the point's resolved document is one run (a spec drops the `[[variant]]`
/// tables of its base, docs/design.md §9: the axes are the designs).
fn hierarchy_point(p: &PointSpec) -> std::result::Result<serde_json::Value, String> {
    let run = HierarchyRun::new(hierarchy_point_name(p), p.doc.clone(), p.base_dir.clone());
    let record = run.run().map_err(|e| format!("{:#}", e.into_anyhow()))?;
    serde_json::to_value(&record).map_err(|e| e.to_string())
}

/// Runs every point of the sweep not already done, in the simulator (or, with `ray`, one Ray
/// task per point on that cluster: `auto`, `local`, `HOST:PORT`), and returns what it did.
/// Prints a one-line summary on stderr. Fails with [`tiercache_sweep::SweepError::PointsFailed`]
/// (after every point ran) when any point failed, now or in an earlier run not retried; the
/// failures are in the results.
pub fn run_sweep(opts: &SweepOptions, ray: Option<&str>) -> crate::Result<RunSummary> {
    run_any(opts, ray).map_err(crate::RunError::from)
}

/// Runs every point of the sweep not already done on the real engine under fio, one at a time
/// (two engines and their fio clients sharing the cores would measure each other: `jobs` is 1,
/// and a note says so), into `results/NAME-bench` (`NAME-ci-bench` with `ci`) unless `out`
/// names a directory. A directory holding another backend's results is refused: the point ids
/// are the same, so its points would be skipped as done. As [`run_sweep`] otherwise.
#[cfg(feature = "engine")]
pub fn run_bench_sweep(opts: &SweepOptions) -> crate::Result<RunSummary> {
    let run = || -> Result<RunSummary> {
        crate::bench::check_fio()?;
        let mut set = opts.set.iter().filter_map(|o| o.split_once('='));
        if let Some((key, _)) = set.find(|(k, _)| !crate::bench::bench_reads(k)) {
            anyhow::bail!("--set {}: not read by --backend bench (it runs [cache], [engine], [serve], [workload] and [bench]); sweep it with --backend sim", key.trim());
        }
        let (spec, points) = load_points(opts)?;
        // Running other than asked (--jobs) is said even under --quiet; the plain note is not.
        let overridden = opts.jobs.filter(|j| *j != 1);
        let note = format!(
            "--backend bench runs one point at a time (jobs = 1{}): concurrent engines and fio clients would measure each other",
            overridden.map_or(String::new(), |j| format!(", not --jobs {j}"))
        );
        if overridden.is_some() {
            eprintln!("tiercache: note: {note}");
        } else {
            crate::print_note(&note);
        }
        let ci = if opts.ci { "-ci" } else { "" };
        let out = opts.out.clone().unwrap_or_else(|| {
            tiercache_sweep::default_out_dir(&format!("{}{ci}-bench", spec.name))
        });
        let old = tiercache_sweep::read_results(&out.join(tiercache_sweep::RESULTS_JSONL))?;
        if let Some(kind) = old
            .lines
            .iter()
            .filter_map(|l| l.record.get("kind").and_then(|k| k.as_str()))
            .find(|k| *k != "bench")
        {
            anyhow::bail!(
                "{}: holds `{kind}` results of the same points; give --backend bench another directory (--out)",
                out.display()
            );
        }
        let opts = SweepOptions {
            jobs: Some(1),
            out: Some(out),
            ..opts.clone()
        };
        let summary =
            tiercache_sweep::run_sweep(&opts, &spec, &points, &crate::bench::bench_point)?;
        finish(&spec, summary)
    };
    run().map_err(crate::RunError::from)
}

fn run_any(opts: &SweepOptions, ray: Option<&str>) -> Result<RunSummary> {
    let (spec, points) = load_points(opts)?;
    let summary = match ray {
        Some(address) => {
            let driver = crate::python::module(
                "tiercache.ray_driver",
                &["--address".to_string(), address.to_string()],
            );
            let backend = tiercache_sweep::ray::RayBackend::start(driver)
                .with_context(|| format!("--ray {address}: {}", crate::python::INSTALL_HINT))?;
            let opts = SweepOptions {
                jobs: Some(opts.jobs.unwrap_or(backend.cluster_cpus())),
                ..opts.clone()
            };
            tiercache_sweep::run_sweep(&opts, &spec, &points, &backend)?
        }
        None => {
            let backend = |p: &PointSpec| simulate_point(p);
            tiercache_sweep::run_sweep(opts, &spec, &points, &backend)?
        }
    };
    finish(&spec, summary)
}

/// Says what a sweep did on stderr (one line, the first errors) and fails when a point failed.
fn finish(spec: &tiercache_sweep::SweepSpec, summary: RunSummary) -> Result<RunSummary> {
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
    Ok(summary)
}
