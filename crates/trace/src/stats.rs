//! Trace statistics: mix, sizes, footprint, duration and IOPS over time.

use crate::compress::Compression;
use crate::error::TraceError;
use crate::footprint::LineBits;
use crate::format::Format;
use crate::reader::{open, ReadCounters, ReadOptions, TraceReader};
use serde::{Deserialize, Serialize};
use std::fmt;
use tiercache_core::{LineGeometry, LineKey, Op};

/// How to compute statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsOptions {
    /// Line size for the footprint (a tiercache line size: power of two, 512 B ..= 1 MiB).
    pub line_size: u64,
    /// Initial width of an IOPS interval.
    pub iops_interval_ns: u64,
    /// Most IOPS intervals kept; the width doubles (merging neighbours) to stay under it.
    pub max_iops_points: usize,
}

impl Default for StatsOptions {
    fn default() -> Self {
        Self {
            line_size: 4096,
            iops_interval_ns: 1_000_000_000,
            max_iops_points: 4096,
        }
    }
}

/// Counts and bytes per operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMix {
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Trims.
    pub trims: u64,
    /// Flushes.
    pub flushes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Bytes trimmed.
    pub trim_bytes: u64,
}

impl OpMix {
    fn add(&mut self, op: Op, len: u64) {
        match op {
            Op::Read => {
                self.reads += 1;
                self.read_bytes += len;
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += len;
            }
            Op::Trim => {
                self.trims += 1;
                self.trim_bytes += len;
            }
            Op::Flush => self.flushes += 1,
        }
    }

    /// Fraction of reads among reads and writes, by count.
    pub fn read_fraction(&self) -> f64 {
        ratio(self.reads, self.reads + self.writes)
    }

    /// Fraction of read bytes among read and written bytes.
    pub fn read_byte_fraction(&self) -> f64 {
        ratio(self.read_bytes, self.read_bytes + self.write_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Per-volume statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeStats {
    /// Original volume key.
    pub name: String,
    /// Requests.
    pub records: u64,
    /// Mix of this volume.
    pub ops: OpMix,
    /// Distinct lines read or written.
    pub footprint_lines: u64,
}

/// One request-size bucket: lengths in `(previous max, max_bytes]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeBucket {
    /// Largest length in the bucket (a power of two, or 0 for zero-length requests).
    pub max_bytes: u64,
    /// Requests in it.
    pub count: u64,
}

/// Requests per interval over the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IopsSeries {
    /// Interval width.
    pub interval_ns: u64,
    /// Requests arriving in each interval, from time 0.
    pub counts: Vec<u64>,
}

/// Statistics of one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// File.
    pub path: String,
    /// Format read.
    pub format: Format,
    /// Compression found.
    pub compression: Compression,
    /// Requests.
    pub records: u64,
    /// Per volume, in id order.
    pub volumes: Vec<VolumeStats>,
    /// Mix of all requests.
    pub ops: OpMix,
    /// Request sizes (reads, writes and trims), power-of-two buckets, empty buckets omitted.
    pub size_histogram: Vec<SizeBucket>,
    /// Line size of the footprint.
    pub line_size: u64,
    /// Distinct (volume, line) pairs read or written.
    pub footprint_lines: u64,
    /// `footprint_lines * line_size`.
    pub footprint_bytes: u64,
    /// Distinct lines read.
    pub read_footprint_lines: u64,
    /// Distinct lines written.
    pub write_footprint_lines: u64,
    /// Time of the first request (ns since time 0).
    pub first_time_ns: u64,
    /// Latest request time.
    pub last_time_ns: u64,
    /// Latest minus earliest request time.
    pub duration_ns: u64,
    /// Requests earlier than their predecessor (the trace is not sorted by time).
    pub time_regressions: u64,
    /// Unix ns of time 0, when known.
    pub epoch_unix_ns: Option<i64>,
    /// Requests per second over the whole duration.
    pub mean_iops: f64,
    /// Busiest interval's requests per second.
    pub peak_iops: f64,
    /// IOPS over time.
    pub iops: IopsSeries,
    /// Reader counters: skipped lines, bad records, unknown opcodes, clamped times.
    pub counters: ReadCounters,
}

/// Reads `path` to its end and computes its statistics.
pub fn stats(
    path: &str,
    format: Option<Format>,
    read: &ReadOptions,
    opts: &StatsOptions,
) -> Result<TraceStats, TraceError> {
    let mut r = open(path, format, read)?;
    stats_of(r.as_mut(), opts)
}

/// Requests per reader call in [`stats_of`].
const STATS_BATCH: usize = 4096;

/// Statistics of the rest of a reader's stream.
pub fn stats_of(r: &mut dyn TraceReader, opts: &StatsOptions) -> Result<TraceStats, TraceError> {
    let geo = LineGeometry::new(opts.line_size)
        .map_err(|e| TraceError::Unsupported(format!("--line-size: {e}")))?;
    let mut interval = opts.iops_interval_ns.max(1);
    let max_points = opts.max_iops_points.max(2);
    let mut iops: Vec<u64> = Vec::new();
    let mut vols: Vec<VolumeStats> = Vec::new();
    let mut ops = OpMix::default();
    let mut hist = [0u64; 66];
    let mut lines = LineBits::default();
    let (mut records, mut regressions) = (0u64, 0u64);
    let (mut first, mut min_t, mut max_t, mut prev) = (None, u64::MAX, 0u64, 0u64);
    // One reader call per batch: a dynamic call per request cost a sixth of the run.
    let mut batch = Vec::with_capacity(STATS_BATCH);
    loop {
        batch.clear();
        let read = r.next_batch(&mut batch, STATS_BATCH);
        for &req in &batch {
            records += 1;
            first.get_or_insert(req.time_ns);
            if req.time_ns < prev {
                regressions += 1;
            }
            prev = req.time_ns;
            min_t = min_t.min(req.time_ns);
            max_t = max_t.max(req.time_ns);
            let v = req.volume.0 as usize;
            if vols.len() <= v {
                vols.resize(v + 1, VolumeStats::default());
            }
            vols[v].records += 1;
            vols[v].ops.add(req.op, req.len);
            ops.add(req.op, req.len);
            if req.op != Op::Flush {
                let b = if req.len == 0 {
                    0
                } else {
                    64 - (req.len - 1).leading_zeros() as usize + 1
                };
                hist[b] += 1;
            }
            let mut slot = (req.time_ns / interval) as usize;
            while slot >= max_points {
                // Halve the resolution: merge neighbouring intervals.
                iops = iops.chunks(2).map(|c| c.iter().sum()).collect();
                interval *= 2;
                slot = (req.time_ns / interval) as usize;
            }
            if iops.len() <= slot {
                iops.resize(slot + 1, 0);
            }
            iops[slot] += 1;
            if matches!(req.op, Op::Read | Op::Write) && req.len > 0 {
                geo.check_request(req.volume, req.offset, req.len)
                    .map_err(|e| {
                        TraceError::Unsupported(format!(
                            "{}: request {} cannot be addressed: {e}",
                            r.meta().path,
                            records - 1
                        ))
                    })?;
                let first = LineKey::new(req.volume, geo.line_of(req.offset)).0;
                let last = LineKey::new(req.volume, geo.line_of(req.offset + req.len - 1)).0;
                lines.mark_range(first, last, req.op == Op::Write);
            }
        }
        // The requests before a read error count (as they did one by one): then the error.
        if read? == 0 {
            break;
        }
    }
    let (footprint_lines, read_lines, write_lines) = lines.counts();
    for (first, n) in lines.chunk_counts() {
        if let Some(v) = vols.get_mut(LineKey(first).volume().0 as usize) {
            v.footprint_lines += n;
        }
    }
    for (i, v) in vols.iter_mut().enumerate() {
        v.name = r
            .volumes()
            .names()
            .get(i)
            .cloned()
            .unwrap_or_else(|| i.to_string());
    }
    let size_histogram = hist
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(b, &count)| SizeBucket {
            max_bytes: if b == 0 {
                0
            } else {
                1u64.checked_shl(b as u32 - 1).unwrap_or(u64::MAX)
            },
            count,
        })
        .collect();
    let duration_ns = if records == 0 { 0 } else { max_t - min_t };
    let secs = duration_ns as f64 / 1e9;
    let meta = r.meta();
    Ok(TraceStats {
        path: meta.path.clone(),
        format: meta.format,
        compression: meta.compression,
        records,
        volumes: vols,
        ops,
        size_histogram,
        line_size: geo.line_size(),
        footprint_lines,
        footprint_bytes: footprint_lines * geo.line_size(),
        read_footprint_lines: read_lines,
        write_footprint_lines: write_lines,
        first_time_ns: first.unwrap_or(0),
        last_time_ns: max_t,
        duration_ns,
        time_regressions: regressions,
        epoch_unix_ns: meta.epoch_unix_ns,
        mean_iops: if secs > 0.0 {
            records as f64 / secs
        } else {
            0.0
        },
        peak_iops: iops.iter().copied().max().unwrap_or(0) as f64 / (interval as f64 / 1e9),
        iops: IopsSeries {
            interval_ns: interval,
            counts: iops,
        },
        counters: r.counters().clone(),
    })
}

/// Human-readable byte count.
fn bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.2} {}", UNITS[u])
    }
}

/// Notes about skipped, bad, unknown and clamped records, shared by stats and convert output.
/// A reader's counters as the notes every command prints after reading a trace: malformed
/// records skipped (with the first messages), unknown opcodes, clamped times; empty when the
/// trace was read as it is.
pub struct CounterNotes<'a>(pub &'a ReadCounters);

impl fmt::Display for CounterNotes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_counter_notes(f, self.0)
    }
}

pub(crate) fn write_counter_notes(f: &mut fmt::Formatter<'_>, c: &ReadCounters) -> fmt::Result {
    if c.skipped_bad > 0 {
        writeln!(
            f,
            "skipped {} malformed records; first ones:",
            c.skipped_bad
        )?;
        for s in &c.bad_samples {
            writeln!(f, "  {s}")?;
        }
    }
    if c.unknown_ops > 0 {
        let names: Vec<String> = c
            .unknown_op_names
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect();
        writeln!(
            f,
            "unknown opcodes: {} records not replayed ({})",
            c.unknown_ops,
            names.join(", ")
        )?;
    }
    if c.clamped_times > 0 {
        writeln!(
            f,
            "{} records earlier than the first record were clamped to time 0",
            c.clamped_times
        )?;
    }
    if c.objects_over_line > 0 {
        writeln!(
            f,
            "{} objects are larger than the oracleGeneral line size they were read at, so \
             each overlaps the next objects' bytes: was the file written with another line \
             size (--oracle-line-size, workload.oracle_line_size)?",
            c.objects_over_line
        )?;
    }
    Ok(())
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.ops;
        writeln!(
            f,
            "trace       {} ({}, compression {:?})",
            self.path, self.format, self.compression
        )?;
        writeln!(f, "records     {}", self.records)?;
        writeln!(f, "volumes     {}", self.volumes.len())?;
        writeln!(
            f,
            "reads       {} ({:.1}% of r+w), {} ({:.1}% of r+w bytes)",
            o.reads,
            100.0 * o.read_fraction(),
            bytes(o.read_bytes),
            100.0 * o.read_byte_fraction()
        )?;
        writeln!(f, "writes      {}, {}", o.writes, bytes(o.write_bytes))?;
        if o.trims + o.flushes > 0 {
            writeln!(
                f,
                "trims       {}, {}; flushes {}",
                o.trims,
                bytes(o.trim_bytes),
                o.flushes
            )?;
        }
        writeln!(
            f,
            "footprint   {} lines of {} = {} (read {}, written {})",
            self.footprint_lines,
            bytes(self.line_size),
            bytes(self.footprint_bytes),
            self.read_footprint_lines,
            self.write_footprint_lines
        )?;
        writeln!(
            f,
            "duration    {:.3} s ({} time regressions)",
            self.duration_ns as f64 / 1e9,
            self.time_regressions
        )?;
        if let Some(e) = self.epoch_unix_ns {
            writeln!(f, "starts at   unix {:.3} s", e as f64 / 1e9)?;
        }
        if self.duration_ns > 0 {
            writeln!(
                f,
                "IOPS        mean {:.1}, peak {:.1} (per {:.3} s interval)",
                self.mean_iops,
                self.peak_iops,
                self.iops.interval_ns as f64 / 1e9
            )?;
        } else {
            writeln!(f, "IOPS        n/a (all requests at one instant)")?;
        }
        writeln!(f, "sizes")?;
        let total: u64 = self.size_histogram.iter().map(|b| b.count).sum();
        for b in &self.size_histogram {
            writeln!(
                f,
                "  <= {:>10}  {:>10}  {:5.1}%",
                bytes(b.max_bytes),
                b.count,
                100.0 * ratio(b.count, total)
            )?;
        }
        if self.volumes.len() > 1 {
            // The busiest volumes first; ties in id order.
            let mut busiest: Vec<&VolumeStats> = self.volumes.iter().collect();
            busiest.sort_by_key(|v| std::cmp::Reverse(v.records));
            let shown = busiest.len().min(20);
            writeln!(f, "busiest volumes ({shown} of {})", busiest.len())?;
            for v in &busiest[..shown] {
                writeln!(
                    f,
                    "  {:<16} {:>10} req  r {:>9} w {:>9}  footprint {}",
                    v.name,
                    v.records,
                    v.ops.reads,
                    v.ops.writes,
                    bytes(v.footprint_lines * self.line_size)
                )?;
            }
        }
        write_counter_notes(f, &self.counters)
    }
}
