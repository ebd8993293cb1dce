//! `tiercache._native`: the compiled half of the tiercache Python package. Every function calls
//! the library functions the `tiercache` command calls (config resolution and `sim`'s runs,
//! the trace readers, `analyze`, the sweep runner), so Python and the command give the same
//! records and the same error messages. The Python half (`python/tiercache`) turns what these
//! return (JSON text and column buffers) into dicts, pandas DataFrames and Arrow record batches.

#![warn(missing_docs)]

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::{Path, PathBuf};
use tiercache_run::experiment;
use tiercache_trace::{Format, ReadOptions, TraceReader};

create_exception!(
    _native,
    TiercacheError,
    PyException,
    "An error of tiercache: the message is the one the `tiercache` command prints."
);
create_exception!(
    _native,
    InputError,
    TiercacheError,
    "Bad input (a config, an argument, a trace, a spec): the errors for which the command exits with code 2."
);

/// The Python exception of an error: its message as the command renders it, the class by the
/// command's exit code.
fn to_py(e: anyhow::Error) -> PyErr {
    let text = tiercache_run::errors::render(&e);
    let input = e.chain().any(|c| {
        tiercache_run::errors::is_input_cause(c)
            || c.downcast_ref::<tiercache_analyze::AnalyzeError>()
                .is_some_and(tiercache_analyze::AnalyzeError::is_input_error)
    });
    if input {
        InputError::new_err(text)
    } else {
        TiercacheError::new_err(text)
    }
}

fn input_err(text: impl Into<String>) -> PyErr {
    InputError::new_err(text.into())
}

fn parse_format(format: Option<&str>) -> PyResult<Option<Format>> {
    format
        .map(|f| {
            f.parse::<Format>()
                .map_err(|e| input_err(format!("format `{f}`: {e}")))
        })
        .transpose()
}

/// Resolves a config into the runs `tiercache sim` makes of it and runs each, returning one
/// JSON record per run (what `tiercache sim --json` prints). `path` loads a file (relative
/// trace paths resolve against its directory); otherwise `text` is the TOML, named `source` in
/// errors, with relative paths against `base_dir`. The GIL is released while runs execute.
// The arguments are the Python function's keywords, one per option of `tiercache sim`.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (text, source, path=None, base_dir=None, overrides=Vec::new(), only=None, skip_bad=false))]
fn run_config(
    py: Python<'_>,
    text: Option<String>,
    source: String,
    path: Option<PathBuf>,
    base_dir: Option<PathBuf>,
    overrides: Vec<String>,
    only: Option<String>,
    skip_bad: bool,
) -> PyResult<Vec<String>> {
    py.allow_threads(move || -> anyhow::Result<Vec<String>> {
        let runs = match (&path, &text) {
            (Some(p), _) => experiment::load(Some(p.as_path()), &overrides)?,
            (None, Some(t)) => experiment::load_str_in(
                t,
                &source,
                base_dir.as_deref().unwrap_or(Path::new(".")),
                &overrides,
            )?,
            (None, None) => experiment::load(None, &overrides)?,
        };
        let runs = tiercache_run::sim::select_runs(runs, only.as_deref(), skip_bad)?;
        let mut out = Vec::with_capacity(runs.len());
        for e in &runs {
            for n in &e.notes {
                eprintln!("tiercache: note: run `{}`: {n}", e.name);
            }
            let o = tiercache_run::sim::run_experiment(e)?;
            out.push(o.record.to_json_line()?);
        }
        Ok(out)
    })
    .map_err(to_py)
}

/// TOML text of a JSON tree (a config given as a Python dict): the library reads configs as
/// TOML, so a dict takes the same path as a file, errors included.
#[pyfunction]
fn toml_from_json(json: &str) -> PyResult<String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| input_err(format!("config: {e}")))?;
    toml_text(&v)
}

fn toml_text(v: &serde_json::Value) -> PyResult<String> {
    let t = toml::Value::try_from(v).map_err(|e| input_err(format!("config: {e}")))?;
    toml::to_string(&t).map_err(|e| input_err(format!("config: {e}")))
}

/// The default config `tiercache sim` runs without one (examples/default.toml).
#[pyfunction]
fn default_config() -> &'static str {
    experiment::DEFAULT_CONFIG
}

/// Reads a trace in batches of columns. Each `next()` gives `(count, time_ns, volume, op,
/// offset, length, volume_names)`: five little-endian column buffers (`bytes`: u64, u16, u8,
/// u64, u64) of `count` records and the names of every volume seen so far by dense id. The
/// reader runs without the GIL.
#[pyclass(module = "tiercache._native")]
struct TraceBatches {
    // A pyclass must be Sync; the reader is only Send. `&mut self` methods reach it with
    // `get_mut` (no locking); `&self` ones lock.
    reader: std::sync::Mutex<Box<dyn TraceReader>>,
    batch: usize,
    done: bool,
    /// Column buffers reused from batch to batch (fresh ones would fault their pages in anew).
    cols: Columns,
}

/// One batch's columns, filled without the GIL.
#[derive(Default)]
struct Columns {
    time: Vec<u8>,
    volume: Vec<u8>,
    op: Vec<u8>,
    offset: Vec<u8>,
    len: Vec<u8>,
    count: usize,
}

fn op_code(op: tiercache_core::Op) -> u8 {
    match op {
        tiercache_core::Op::Read => 0,
        tiercache_core::Op::Write => 1,
        tiercache_core::Op::Trim => 2,
        tiercache_core::Op::Flush => 3,
    }
}

#[pymethods]
impl TraceBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[allow(clippy::type_complexity)]
    fn __next__<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<
        Option<(
            usize,
            Bound<'py, PyBytes>,
            Bound<'py, PyBytes>,
            Bound<'py, PyBytes>,
            Bound<'py, PyBytes>,
            Bound<'py, PyBytes>,
            Vec<String>,
        )>,
    > {
        if self.done {
            return Ok(None);
        }
        let batch = self.batch;
        let TraceBatches { reader, cols, .. } = self;
        let reader = reader.get_mut().unwrap_or_else(|e| e.into_inner());
        let err = py.allow_threads(|| {
            let c = &mut *cols;
            for v in [
                &mut c.time,
                &mut c.volume,
                &mut c.op,
                &mut c.offset,
                &mut c.len,
            ] {
                v.clear();
            }
            c.count = 0;
            c.time.reserve(batch * 8);
            c.volume.reserve(batch * 2);
            c.op.reserve(batch);
            c.offset.reserve(batch * 8);
            c.len.reserve(batch * 8);
            let mut err = None;
            while c.count < batch {
                match reader.next() {
                    Some(Ok(r)) => {
                        c.time.extend_from_slice(&r.time_ns.to_le_bytes());
                        c.volume
                            .extend_from_slice(&(r.volume.0 as u16).to_le_bytes());
                        c.op.push(op_code(r.op));
                        c.offset.extend_from_slice(&r.offset.to_le_bytes());
                        c.len.extend_from_slice(&r.len.to_le_bytes());
                        c.count += 1;
                    }
                    Some(Err(e)) => {
                        err = Some(e);
                        break;
                    }
                    None => break,
                }
            }
            err
        });
        let cols = &self.cols;
        if let Some(e) = err {
            self.done = true;
            return Err(to_py(anyhow::Error::from(e)));
        }
        if cols.count == 0 {
            self.done = true;
            return Ok(None);
        }
        let names = self.volume_names();
        Ok(Some((
            cols.count,
            PyBytes::new(py, &cols.time),
            PyBytes::new(py, &cols.volume),
            PyBytes::new(py, &cols.op),
            PyBytes::new(py, &cols.offset),
            PyBytes::new(py, &cols.len),
            names,
        )))
    }

    /// Names of the volumes seen so far, by dense id.
    fn volume_names(&self) -> Vec<String> {
        let r = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let v = r.volumes();
        (0..v.len())
            .map(|i| {
                v.name(tiercache_core::VolumeId(i as _))
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    /// The reader's counters (records, skipped lines, malformed records skipped, …) as JSON.
    fn counters_json(&self) -> PyResult<String> {
        serde_json::to_string(
            self.reader
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .counters(),
        )
        .map_err(|e| TiercacheError::new_err(e.to_string()))
    }

    /// File, format, compression and time origin as JSON.
    fn meta_json(&self) -> PyResult<String> {
        serde_json::to_string(self.reader.lock().unwrap_or_else(|e| e.into_inner()).meta())
            .map_err(|e| TiercacheError::new_err(e.to_string()))
    }
}

/// Opens a trace as `tiercache trace convert` and every command opens it (format detected
/// unless given; compression by magic bytes).
#[pyfunction]
#[pyo3(signature = (path, format=None, skip_bad=false, batch_size=65536, oracle_line_size=4096, csv_map=None))]
fn open_trace(
    path: &str,
    format: Option<&str>,
    skip_bad: bool,
    batch_size: usize,
    oracle_line_size: u64,
    csv_map: Option<&str>,
) -> PyResult<TraceBatches> {
    if batch_size == 0 {
        return Err(input_err("batch_size: must be at least 1"));
    }
    let csv = csv_map
        .map(|m| {
            m.parse::<tiercache_trace::CsvSpec>()
                .map_err(|e| input_err(format!("csv_map: {e}")))
        })
        .transpose()?;
    let opts = ReadOptions {
        skip_bad,
        oracle_line_size,
        csv,
        ..Default::default()
    };
    let reader = tiercache_trace::open(path, parse_format(format)?, &opts)
        .map_err(|e| to_py(anyhow::Error::from(e)))?;
    Ok(TraceBatches {
        reader: std::sync::Mutex::new(reader),
        batch: batch_size,
        done: false,
        cols: Columns::default(),
    })
}

/// Analyses a trace as `tiercache analyze --json` does and returns that JSON (`opt`: Belady's
/// OPT curve too; `writeback_cost = (read, write)`: the write-back cost bound and policies' costs).
#[pyfunction]
#[pyo3(signature = (path, format=None, skip_bad=false, line_size=4096, sizes=Vec::new(), footprint_fractions=Vec::new(), shards_rate=None, shards_max_entries=None, exact=false, policies=Vec::new(), minisim_rate=0.01, write_reuse_threshold=0.5, interval="1s".to_string(), burst_factor=2.0, oracle_line_size=4096, csv_map=None, opt=false, writeback_cost=None))]
#[allow(clippy::too_many_arguments)]
fn analyze(
    py: Python<'_>,
    path: String,
    format: Option<&str>,
    skip_bad: bool,
    line_size: u64,
    sizes: Vec<u64>,
    footprint_fractions: Vec<f64>,
    shards_rate: Option<f64>,
    shards_max_entries: Option<usize>,
    exact: bool,
    policies: Vec<String>,
    minisim_rate: f64,
    write_reuse_threshold: f64,
    interval: String,
    burst_factor: f64,
    oracle_line_size: u64,
    csv_map: Option<String>,
    opt: bool,
    writeback_cost: Option<(f64, f64)>,
) -> PyResult<String> {
    let format = parse_format(format)?;
    let policies = policies
        .iter()
        .map(|p| {
            p.parse::<tiercache_analyze::EvictionKind>()
                .map_err(|e| input_err(format!("policies: `{p}`: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let opts = tiercache_analyze::FileOptions {
        file: path,
        input: tiercache_trace::InputOptions {
            format,
            skip_bad,
            csv_map,
            blkparse_action: ReadOptions::default().blkparse_action,
            oracle_line_size,
        },
        line_size,
        sizes,
        footprint_fractions,
        shards_rate,
        shards_max_entries,
        exact,
        policies,
        minisim_rate,
        write_reuse_threshold,
        interval,
        burst_factor,
        opt: opt || writeback_cost.is_some(),
        writeback: writeback_cost
            .map(|(read, write)| tiercache_analyze::CostWeights { read, write }),
    };
    py.allow_threads(|| {
        let a = tiercache_analyze::analyze_file(&opts, &mut tiercache_run::print_note)?;
        Ok(serde_json::to_string(&a)?)
    })
    .map_err(to_py)
}

/// Runs a sweep exactly as `tiercache sweep` (with `--ray ADDRESS` when `ray` is given) and
/// returns its summary as JSON.
#[pyfunction]
#[pyo3(signature = (spec, out=None, jobs=None, ci=false, set=Vec::new(), retry_failed=true, progress=true, ray=None))]
#[allow(clippy::too_many_arguments)]
fn run_sweep(
    py: Python<'_>,
    spec: PathBuf,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    ci: bool,
    set: Vec<String>,
    retry_failed: bool,
    progress: bool,
    ray: Option<String>,
) -> PyResult<String> {
    let opts = tiercache_sweep::SweepOptions {
        spec,
        out,
        jobs,
        retry_failed,
        ci,
        set,
        progress,
    };
    py.allow_threads(|| {
        let s = tiercache_run::sweep::run_sweep(&opts, ray.as_deref())?;
        Ok(serde_json::json!({
            "total": s.total,
            "skipped": s.skipped,
            "ok": s.ok,
            "failed": s.failed,
            "not_retried": s.not_retried,
            "malformed_lines": s.malformed_lines,
            "other_lines": s.other_lines,
            "results_jsonl": s.results_jsonl,
            "results_csv": s.results_csv,
            "results_parquet": s.results_parquet,
        })
        .to_string())
    })
    .map_err(to_py)
}

/// The points of a sweep spec (after `--ci` and `--set`), each as the payload a Ray task
/// receives plus its axis settings (`axes`: `[{axis, label}]`, in axis order).
#[pyfunction]
#[pyo3(signature = (spec, ci=false, set=Vec::new()))]
fn sweep_points(spec: PathBuf, ci: bool, set: Vec<String>) -> PyResult<Vec<String>> {
    let opts = tiercache_sweep::SweepOptions {
        ci,
        set,
        progress: false,
        ..tiercache_sweep::SweepOptions::new(spec)
    };
    let (_, points) =
        tiercache_sweep::load_points(&opts).map_err(|e| to_py(anyhow::Error::from(e)))?;
    Ok(points
        .iter()
        .map(|p| tiercache_sweep::ray::point_payload(p).to_string())
        .collect())
}

/// Runs one sweep point (a payload of `sweep_points` or of the Ray executor) in the simulator,
/// as the sweep runner does, and returns its record as JSON. A point that fails raises
/// `TiercacheError` with the message the runner records.
#[pyfunction]
fn simulate_point(py: Python<'_>, payload: &str) -> PyResult<String> {
    let v: serde_json::Value =
        serde_json::from_str(payload).map_err(|e| input_err(format!("point payload: {e}")))?;
    let p =
        tiercache_sweep::ray::point_from_payload(&v).map_err(|e| to_py(anyhow::Error::from(e)))?;
    py.allow_threads(|| tiercache_run::sweep::simulate_point(&p))
        .map(|v| v.to_string())
        .map_err(TiercacheError::new_err)
}

/// The price of a design's cache: the cache device's price per TB (its preset's, or the
/// config's `price_per_tb`) × `cache.capacity`, in dollars (docs/design.md §4: performance per cost
/// is device price × allocated capacity). `config_json` is a record's `config`.
#[pyfunction]
fn cache_cost_dollars(config_json: &str) -> PyResult<f64> {
    let v: serde_json::Value =
        serde_json::from_str(config_json).map_err(|e| input_err(format!("config: {e}")))?;
    let text = toml_text(&v)?;
    let doc =
        tiercache_config::Document::parse(&text, "<record config>").map_err(|e| to_py(e.into()))?;
    let e = experiment::Experiment::from_document("cost", &doc, Path::new("."))
        .map_err(|e| to_py(e.into()))?;
    let dev = e
        .sim
        .cache_device
        .resolve("devices.cache")
        .map_err(|err| input_err(err.to_string()))?;
    Ok(dev.price_per_tb() * e.cache.capacity as f64 / 1e12)
}

/// A sweep's JSON-lines results as the CSV `tiercache sweep` writes beside them.
#[pyfunction]
fn results_csv(path: PathBuf) -> PyResult<String> {
    let existing =
        tiercache_sweep::read_results(&path).map_err(|e| to_py(anyhow::Error::from(e)))?;
    let mut out = Vec::new();
    tiercache_sweep::write_csv(&existing.lines, &mut out)
        .map_err(|e| TiercacheError::new_err(format!("{}: {e}", path.display())))?;
    String::from_utf8(out).map_err(|e| TiercacheError::new_err(e.to_string()))
}

/// Writes a synthetic trace of `records` requests (benchmarks): `native` or `msr` format, the
/// generator `cargo run -p tiercache-trace --example bench_read` measures.
#[pyfunction]
fn write_synthetic_trace(py: Python<'_>, path: &str, records: u64, format: &str) -> PyResult<()> {
    py.allow_threads(|| match format {
        "native" => tiercache_trace::synth::write_synthetic_native(path, records),
        "msr" => tiercache_trace::synth::write_synthetic_msr(path, records),
        other => Err(tiercache_trace::TraceError::Unsupported(format!(
            "synthetic format `{other}`: expected native or msr"
        ))),
    })
    .map_err(|e| to_py(anyhow::Error::from(e)))
}

/// Reads a trace to its end in Rust alone (no Arrow, no Python objects) and returns
/// `(records, seconds)`: the anchor the Arrow reader is measured against.
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn bench_read(py: Python<'_>, path: &str, format: Option<&str>) -> PyResult<(u64, f64)> {
    let format = parse_format(format)?;
    py.allow_threads(|| tiercache_trace::bench_read(path, format))
        .map(|t| (t.records, t.seconds))
        .map_err(|e| to_py(anyhow::Error::from(e)))
}

/// The version of the tiercache library inside.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TiercacheError", m.py().get_type::<TiercacheError>())?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add_class::<TraceBatches>()?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(default_config, m)?)?;
    m.add_function(wrap_pyfunction!(open_trace, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(run_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_point, m)?)?;
    m.add_function(wrap_pyfunction!(cache_cost_dollars, m)?)?;
    m.add_function(wrap_pyfunction!(results_csv, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(toml_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(write_synthetic_trace, m)?)?;
    m.add_function(wrap_pyfunction!(bench_read, m)?)?;
    Ok(())
}
