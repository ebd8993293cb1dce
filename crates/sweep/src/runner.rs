//! The runner: every pending point in parallel, results appended as they finish, resumable.

use crate::canonical::to_json;
use crate::results::{read_results, write_csv_lines, ResultLine, Status};
use crate::spec::PointSpec;
use crate::SweepError;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// What runs a point: the simulator, the real engine, or a test double. It returns the point's
/// result record (any JSON; the simulator's run record) or an error message.
pub trait Backend: Sync {
    /// Runs one point.
    fn run(&self, point: &PointSpec) -> Result<serde_json::Value, String>;
}

impl<F> Backend for F
where
    F: Fn(&PointSpec) -> Result<serde_json::Value, String> + Sync,
{
    fn run(&self, point: &PointSpec) -> Result<serde_json::Value, String> {
        self(point)
    }
}

/// How to run a sweep.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Output directory (created): `results.jsonl`, `results.csv`.
    pub out_dir: PathBuf,
    /// Worker threads; 0 = one per core.
    pub jobs: usize,
    /// Rerun points whose last outcome was a failure (otherwise they are skipped like ok ones).
    pub retry_failed: bool,
    /// Draw a progress bar with ETA on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
    /// Sweep name written into each line.
    pub sweep_name: String,
    /// The sweep's description, kept with its name in `sweep.json` beside the results (a
    /// report's title and introduction).
    pub sweep_description: String,
}

impl RunOptions {
    /// Defaults: all cores, retry failed points, progress bar on.
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            out_dir: out_dir.into(),
            jobs: 0,
            retry_failed: true,
            progress: true,
            sweep_name: String::new(),
            sweep_description: String::new(),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Points in the sweep.
    pub total: usize,
    /// Points skipped because an earlier run finished them with status ok.
    pub skipped: usize,
    /// Points skipped because an earlier run failed them and retries are off
    /// ([`RunOptions::retry_failed`] false): they are failed still.
    pub not_retried: usize,
    /// Points run now that succeeded.
    pub ok: usize,
    /// Points run now that failed.
    pub failed: usize,
    /// Malformed lines found in the existing results (ignored).
    pub malformed_lines: usize,
    /// Lines of results.jsonl for points not in this sweep (an earlier spec or other `--set`
    /// values run into the same directory): kept in the file, left out of the CSV and Parquet.
    pub other_lines: usize,
    /// The first few distinct errors of points that failed now, with a point that had each
    /// (so a sweep whose points all fail says why on the terminal, not only in the results).
    pub first_errors: Vec<(String, String)>,
    /// The JSON-lines results.
    pub results_jsonl: PathBuf,
    /// The CSV rewritten from them.
    pub results_csv: PathBuf,
    /// The same table in Parquet.
    pub results_parquet: PathBuf,
}

/// File name of the sweep's name and description inside the output directory.
pub const SWEEP_JSON: &str = "sweep.json";

/// File name of the JSON-lines results inside the output directory.
pub const RESULTS_JSONL: &str = "results.jsonl";
/// File name of the CSV results inside the output directory.
pub const RESULTS_CSV: &str = "results.csv";

/// Runs every point not finished by an earlier run, in parallel, appending one line per point to
/// `out_dir/results.jsonl` as it finishes (flushed, so an interrupted run keeps what it did), then
/// rewrites `out_dir/results.csv`. A point whose backend fails or panics is recorded as failed and
/// does not stop the others. Errors are only those of the output files.
pub fn run_points(
    points: &[PointSpec],
    backend: &dyn Backend,
    opts: &RunOptions,
) -> Result<RunSummary, SweepError> {
    let dir = &opts.out_dir;
    std::fs::create_dir_all(dir).map_err(|source| SweepError::Io {
        path: dir.clone(),
        source,
    })?;
    let jsonl = dir.join(RESULTS_JSONL);
    let csv = dir.join(RESULTS_CSV);
    let about = dir.join(SWEEP_JSON);
    // The points of this spec, so a report of the directory leaves out lines of other specs
    // run into it before (they stay in results.jsonl).
    let text = serde_json::json!({
        "name": opts.sweep_name,
        "description": opts.sweep_description,
        "points": points.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
    })
    .to_string();
    std::fs::write(&about, text).map_err(|source| SweepError::Io {
        path: about.clone(),
        source,
    })?;
    let existing = read_results(&jsonl)?;
    let done = if opts.retry_failed {
        existing.ok_ids()
    } else {
        existing.seen_ids()
    };
    let pending: Vec<&PointSpec> = points
        .iter()
        .filter(|p| !done.contains(p.id.as_str()))
        .collect();
    // Without retries, a point whose earlier runs all failed is skipped but still failed.
    let ok_before = existing.ok_ids();
    let not_retried = points
        .iter()
        .filter(|p| done.contains(p.id.as_str()) && !ok_before.contains(p.id.as_str()))
        .count();
    let skipped = points.len() - pending.len() - not_retried;

    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&jsonl)
        .map_err(|source| SweepError::Io {
            path: jsonl.clone(),
            source,
        })?;
    if existing.missing_final_newline {
        // Terminate the partial line an interrupted run left, so ours start on their own line.
        file.write_all(b"\n").map_err(|source| SweepError::Io {
            path: jsonl.clone(),
            source,
        })?;
    }
    let writer = Mutex::new(Writer { file, error: None });

    let bar = if opts.progress && !pending.is_empty() {
        ProgressBar::with_draw_target(Some(pending.len() as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} points, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let counts = Mutex::new((0usize, 0usize));
    let errors: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    // Off a terminal the bar draws nothing: say how far the sweep is in plain lines instead,
    // about ten over the run.
    let plain_every =
        (opts.progress && !std::io::stderr().is_terminal()).then(|| (pending.len() / 10).max(1));

    let work = || {
        pending.par_iter().for_each(|p| {
            let line = run_one(p, backend, &opts.sweep_name);
            let failed = line.status == Status::Failed;
            if let (Some(e), Ok(mut seen)) = (&line.error, errors.lock()) {
                if seen.len() < MAX_ERRORS_SHOWN && !seen.iter().any(|(_, m)| m == e) {
                    seen.push((line.point.clone(), e.clone()));
                }
            }
            if let Ok(mut w) = writer.lock() {
                w.append(&line);
            }
            if let Ok(mut c) = counts.lock() {
                if failed {
                    c.1 += 1;
                } else {
                    c.0 += 1;
                }
                if c.1 > 0 {
                    bar.set_message(format!("({} failed)", c.1));
                }
                let done = c.0 + c.1;
                if plain_every.is_some_and(|n| done % n == 0 || done == pending.len()) {
                    eprintln!(
                        "sweep {}: {done}/{} points run ({} failed)",
                        opts.sweep_name,
                        pending.len(),
                        c.1
                    );
                }
            }
            bar.inc(1);
        })
    };
    if opts.jobs == 0 {
        work();
    } else {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.jobs)
            .build()
            .map_err(|e| SweepError::Io {
                path: jsonl.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        pool.install(work);
    }
    bar.finish_and_clear();

    let w = writer.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(source) = w.error {
        return Err(SweepError::Io {
            path: jsonl,
            source,
        });
    }
    drop(w.file);
    // The tables hold this spec's points only: a directory reused for another spec (or other
    // `--set` values) keeps those lines in results.jsonl, never in the tables.
    let ids: BTreeSet<&str> = points.iter().map(|p| p.id.as_str()).collect();
    let (current, other): (Vec<ResultLine>, Vec<ResultLine>) = read_results(&jsonl)?
        .lines
        .into_iter()
        .partition(|l| ids.contains(l.point.as_str()));
    write_csv_lines(&current, &csv)?;
    let parquet = jsonl.with_file_name("results.parquet");
    crate::parquet_out::write_parquet(&current, &parquet)?;
    let (ok, failed) = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(RunSummary {
        total: points.len(),
        skipped,
        ok,
        failed,
        malformed_lines: existing.malformed.len(),
        other_lines: other.len(),
        not_retried,
        first_errors: errors.into_inner().unwrap_or_else(|e| e.into_inner()),
        results_jsonl: jsonl,
        results_csv: csv,
        results_parquet: parquet,
    })
}

struct Writer {
    file: File,
    error: Option<std::io::Error>,
}

impl Writer {
    /// Appends one line in a single write, so parallel workers never interleave within a line.
    fn append(&mut self, line: &ResultLine) {
        if self.error.is_some() {
            return;
        }
        let mut text = match serde_json::to_string(line) {
            Ok(t) => t,
            Err(e) => {
                self.error = Some(std::io::Error::other(e.to_string()));
                return;
            }
        };
        text.push('\n');
        if let Err(e) = self
            .file
            .write_all(text.as_bytes())
            .and_then(|_| self.file.flush())
        {
            self.error = Some(e);
        }
    }
}

/// Distinct point errors kept for the terminal summary.
const MAX_ERRORS_SHOWN: usize = 3;

/// Runs one point, turning an error or a panic into a failed line.
fn run_one(p: &PointSpec, backend: &dyn Backend, sweep: &str) -> ResultLine {
    let start = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backend.run(p)));
    let elapsed_s = start.elapsed().as_secs_f64();
    let (status, error, record) = match outcome {
        Ok(Ok(record)) => (Status::Ok, None, record),
        Ok(Err(e)) => (Status::Failed, Some(e), serde_json::Value::Null),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            (
                Status::Failed,
                Some(format!("panicked: {msg}")),
                serde_json::Value::Null,
            )
        }
    };
    let mut axes = serde_json::Map::new();
    for s in &p.axes {
        for (k, v) in &s.values {
            axes.insert(k.clone(), to_json(v));
        }
    }
    ResultLine {
        point: p.id.clone(),
        sweep: sweep.to_string(),
        name: p.name.clone(),
        workload: p.workload.clone(),
        rep: p.rep,
        seed: p.seed,
        index: p.index,
        default: p.is_default,
        axes,
        labels: p
            .axes
            .iter()
            .map(|s| (s.axis.clone(), s.label.clone()))
            .collect(),
        status,
        error,
        elapsed_s,
        record,
    }
}

/// The default output directory of a sweep: `results/<sweep name>` under the working directory.
pub fn default_out_dir(sweep_name: &str) -> PathBuf {
    let safe: String = sweep_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("results").join(if safe.is_empty() {
        "sweep".to_string()
    } else {
        safe
    })
}
