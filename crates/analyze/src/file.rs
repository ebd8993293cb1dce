//! Analysing a trace file: what `tiercache analyze` and the Python package's `analyze` share
//! (checking the options, reading in batches on a second thread, the notes on what was left
//! out, refusing a trace with nothing to analyse).

use crate::{Analysis, Analyzer, EvictionKind, Options};
use tiercache_core::{GeometryError, Op};
use tiercache_trace::read_ahead::{for_each_batch, BatchError};
use tiercache_trace::{CounterNotes, InputOptions, TraceError};

/// Requests read per reader call: large batches cross between the reading and the analysing
/// thread less often (2 MiB each, at most six in memory). On a sampled analysis 16,384 took
/// 15 % more CPU than this, and 2,048 another 11 % more.
const READ_BATCH: usize = 65536;
/// Requests ahead of the one being added whose sampler entries are hinted.
const PREFETCH_AHEAD: usize = 8;

/// What to analyse and how: the options of `tiercache analyze`, the output ones aside.
#[derive(Debug, Clone, PartialEq)]
pub struct FileOptions {
    /// Trace file.
    pub file: String,
    /// How to read it.
    pub input: InputOptions,
    /// Line size in bytes.
    pub line_size: u64,
    /// Cache sizes (lines) for the curves; empty (and no `footprint_fractions`): powers of two.
    pub sizes: Vec<u64>,
    /// More cache sizes, as fractions of the trace's footprint (0.01 is 1 %: the lines a
    /// first pass over the trace finds its reads and writes touching, rounded up).
    pub footprint_fractions: Vec<f64>,
    /// Fixed-rate SHARDS at this sampling rate, in (0, 1].
    pub shards_rate: Option<f64>,
    /// Fixed-size SHARDS tracking at most this many lines (at least 1).
    pub shards_max_entries: Option<usize>,
    /// With SHARDS, keep the exact analysis too.
    pub exact: bool,
    /// Replacement policies whose curves to estimate by sampled mini-simulation.
    pub policies: Vec<EvictionKind>,
    /// Sampling rate of the mini-simulations, in (0, 1].
    pub minisim_rate: f64,
    /// WAR+WAW share of reuses above which the advice disables cache writes, in [0, 1].
    pub write_reuse_threshold: f64,
    /// Interval of trace time for the timelines (`1s`, `100ms`, ...).
    pub interval: String,
    /// An interval is in a burst when its IOPS exceed this factor × the median's (positive).
    pub burst_factor: f64,
    /// Belady's OPT curve beside LRU's (docs/design.md §12).
    pub opt: bool,
    /// With it, the write-back cost bound and the policies' costs at these weights (positive
    /// and finite).
    pub writeback: Option<tiercache_optimal::writeback::CostWeights>,
}

impl FileOptions {
    /// The defaults of `tiercache analyze FILE`.
    pub fn new(file: impl Into<String>) -> Self {
        let d = Options::default();
        Self {
            file: file.into(),
            input: InputOptions::default(),
            line_size: d.line_size,
            sizes: Vec::new(),
            footprint_fractions: Vec::new(),
            shards_rate: None,
            shards_max_entries: None,
            exact: false,
            policies: Vec::new(),
            minisim_rate: d.minisim_rate,
            write_reuse_threshold: d.write_reuse_threshold,
            interval: "1s".into(),
            burst_factor: d.burst_factor,
            opt: false,
            writeback: None,
        }
    }
}

/// Why a trace file was not analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// An option out of its range (named as on the command line).
    #[error("{0}")]
    BadArgument(String),
    /// The trace could not be opened or read.
    #[error("{0}")]
    Trace(#[from] TraceError),
    /// A request beyond what line keys address.
    #[error("{file}: request {index} ({op:?} of {len} bytes at offset {offset}) cannot be addressed: {source}")]
    Unaddressable {
        /// The trace file.
        file: String,
        /// The request's index in the trace.
        index: u64,
        /// Its operation.
        op: Op,
        /// Its length in bytes.
        len: u64,
        /// Its offset in bytes.
        offset: u64,
        /// Why it cannot be addressed.
        source: GeometryError,
    },
    /// No read or write was analysed: every miss ratio would be undefined.
    #[error("{file}: no read or write was analysed ({requests} requests read): there is nothing to compute a miss ratio over")]
    NothingAnalysed {
        /// The trace file.
        file: String,
        /// Requests read.
        requests: u64,
    },
}

impl AnalyzeError {
    /// Whether the user's input is at fault (an option or the trace): the command's exit code
    /// 2, the Python package's `InputError`.
    pub fn is_input_error(&self) -> bool {
        matches!(self, AnalyzeError::BadArgument(_) | AnalyzeError::Trace(_))
    }
}

fn bad(text: String) -> AnalyzeError {
    AnalyzeError::BadArgument(text)
}

/// How far [`analyze_file_with_progress`] has got, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Reading the trace: this many requests analysed so far (reported once per batch).
    Reading {
        /// Requests analysed so far.
        requests: u64,
    },
    /// The trace is read; the curves, distances and advice are being computed (with `opt`,
    /// the OPT pass over the spilled accesses, the longest part).
    Finishing,
}

/// Checks the options, reads the trace and analyses it. What was left out of the analysis (the
/// reader's skipped records, the analysis's notes) goes to `note`, one line each, before a
/// trace with no read or write is refused.
pub fn analyze_file(
    opts: &FileOptions,
    note: &mut dyn FnMut(&str),
) -> Result<Analysis, AnalyzeError> {
    analyze_file_with_progress(opts, note, &mut |_| {})
}

/// [`analyze_file`], telling `progress` how far it has got (a few times per million requests,
/// never per request).
pub fn analyze_file_with_progress(
    opts: &FileOptions,
    note: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(Progress),
) -> Result<Analysis, AnalyzeError> {
    if let Some(r) = opts.shards_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(bad(format!("--shards-rate {r}: must be in (0, 1]")));
        }
    }
    if !(opts.minisim_rate > 0.0 && opts.minisim_rate <= 1.0) {
        return Err(bad(format!(
            "--minisim-rate {}: must be in (0, 1]",
            opts.minisim_rate
        )));
    }
    if !(0.0..=1.0).contains(&opts.write_reuse_threshold) {
        return Err(bad(format!(
            "--write-reuse-threshold {}: a share of reuses, in [0, 1]",
            opts.write_reuse_threshold
        )));
    }
    if let Some(w) = opts.writeback {
        if !(w.read >= 0.0 && w.write >= 0.0 && w.read.is_finite() && w.write.is_finite()) {
            return Err(bad(format!(
                "--writeback-cost {},{}: two non-negative finite weights (read, write)",
                w.read, w.write
            )));
        }
    }
    if opts.shards_max_entries == Some(0) {
        return Err(bad("--shards-max-entries 0: must be at least 1".into()));
    }
    let read = opts.input.read_options()?;
    let interval_ns = tiercache_core::units::parse_nanos(&opts.interval)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            bad(format!(
                "--interval {}: a positive duration such as 1s or 100ms",
                opts.interval
            ))
        })?;
    if !(opts.burst_factor > 0.0 && opts.burst_factor.is_finite()) {
        return Err(bad(format!(
            "--burst-factor {}: must be positive",
            opts.burst_factor
        )));
    }
    if let Some(f) = opts
        .footprint_fractions
        .iter()
        .find(|f| !(**f > 0.0 && **f <= 1.0))
    {
        return Err(bad(format!(
            "--sizes {}%: a share of the footprint must be in (0, 100]",
            f * 100.0
        )));
    }
    let mut sizes = opts.sizes.clone();
    if !opts.footprint_fractions.is_empty() {
        // A first pass for the footprint: the sizes must be known before the curves start.
        let stats = tiercache_trace::stats::stats(
            &opts.file,
            opts.input.format,
            &read,
            &tiercache_trace::stats::StatsOptions {
                line_size: opts.line_size,
                ..Default::default()
            },
        )?;
        let footprint = stats.footprint_lines;
        sizes.extend(
            opts.footprint_fractions
                .iter()
                .map(|f| ((footprint as f64 * f).ceil() as u64).max(1)),
        );
        sizes.sort_unstable();
        sizes.dedup();
    }
    let mut reader = tiercache_trace::open(&opts.file, opts.input.format, &read)?;
    let mut analyzer = Analyzer::new(Options {
        line_size: opts.line_size,
        sizes,
        shards_rate: opts.shards_rate,
        shards_max_entries: opts.shards_max_entries,
        write_reuse_threshold: opts.write_reuse_threshold,
        interval_ns,
        burst_factor: opts.burst_factor,
        policies: opts.policies.clone(),
        minisim_rate: opts.minisim_rate,
        exact: opts.exact || (opts.shards_rate.is_none() && opts.shards_max_entries.is_none()),
        opt: opts.opt,
        writeback: opts.writeback,
    })
    .map_err(|e| bad(format!("--line-size: {e}")))?;
    // Batches: one reader call per few thousand requests, not one dynamic call per request,
    // decoded on a second thread while this one analyses the previous ones.
    let mut index = 0u64;
    let read = for_each_batch(&mut *reader, READ_BATCH, |batch| {
        for (i, r) in batch.iter().enumerate() {
            if let Some(ahead) = batch.get(i + PREFETCH_AHEAD) {
                analyzer.prefetch(ahead);
            }
            analyzer
                .add(r)
                .map_err(|source| AnalyzeError::Unaddressable {
                    file: opts.file.clone(),
                    index,
                    op: r.op,
                    len: r.len,
                    offset: r.offset,
                    source,
                })?;
            index += 1;
        }
        progress(Progress::Reading { requests: index });
        Ok::<(), AnalyzeError>(())
    });
    read.map_err(|e| match e {
        BatchError::Read(e) => e.into(),
        BatchError::Consume(e) => e,
    })?;
    // What was left out of the analysis is said, as every command says it.
    for line in CounterNotes(reader.counters()).to_string().lines() {
        note(line);
    }
    let volumes = reader.volumes();
    progress(Progress::Finishing);
    let analysis = analyzer.finish(&|v| volumes.name(v).unwrap_or("?").to_string());
    for line in &analysis.notes {
        note(line);
    }
    if analysis.read_requests + analysis.write_requests == 0 {
        // Every miss ratio would be undefined: a run that measured nothing says so.
        return Err(AnalyzeError::NothingAnalysed {
            file: opts.file.clone(),
            requests: analysis.requests,
        });
    }
    Ok(analysis)
}
