//! Streaming writers (native, libCacheSim oracleGeneral, fio iolog v3) and trace conversion.

use crate::error::TraceError;
use crate::format::Format;
use crate::native::NativeWriter;
use crate::reader::{open, ReadCounters, ReadOptions, TraceMeta};
use crate::volume::VolumeMap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use tiercache_core::{LineGeometry, LineKey, Op, Request, VolumeId};

/// A format tiercache writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// The native binary format ([`crate::native`]): lossless.
    Native,
    /// libCacheSim oracleGeneral: one record per line-sized block touched by a read or write.
    OracleGeneral,
    /// fio iolog version 3 (fio 3.31+), replayable with `read_iolog=`.
    FioIolog,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Format {
        match f {
            OutputFormat::Native => Format::Native,
            OutputFormat::OracleGeneral => Format::OracleGeneral,
            OutputFormat::FioIolog => Format::FioIolog,
        }
    }
}

/// What a writer produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSummary {
    /// File written.
    pub path: String,
    /// Format written.
    pub format: Format,
    /// Requests given to the writer.
    pub requests_in: u64,
    /// Records written.
    pub records_out: u64,
    /// Requests the format cannot carry and that were left out (oracleGeneral: trims, flushes
    /// and zero-length requests).
    pub dropped: u64,
    /// oracleGeneral: distinct objects (lines) written.
    pub objects: Option<u64>,
}

/// A streaming trace writer.
pub trait TraceWriter {
    /// Writes one request; `volumes` names at least every volume seen so far.
    fn write(&mut self, req: &Request, volumes: &VolumeMap) -> Result<(), TraceError>;
    /// Completes the file.
    fn finish(
        self: Box<Self>,
        volumes: &VolumeMap,
        epoch_unix_ns: Option<i64>,
    ) -> Result<WriteSummary, TraceError>;
}

impl TraceWriter for NativeWriter<BufWriter<File>> {
    fn write(&mut self, req: &Request, _: &VolumeMap) -> Result<(), TraceError> {
        NativeWriter::write(self, req)
    }
    fn finish(
        self: Box<Self>,
        volumes: &VolumeMap,
        epoch: Option<i64>,
    ) -> Result<WriteSummary, TraceError> {
        let count = self.count();
        let path = self.path().to_string();
        NativeWriter::finish(*self, volumes, epoch)?;
        Ok(WriteSummary {
            path,
            format: Format::Native,
            requests_in: count,
            records_out: count,
            dropped: 0,
            objects: None,
        })
    }
}

/// Writes fio iolog v3: `fio version 3 iolog`, then per volume (file) an `add` and `open` line
/// at its first request, one line per request `USEC FILE read|write|trim|sync OFFSET LENGTH`,
/// and `close` lines at the end. Times are truncated to µs; the volume name is the file name.
pub struct FioIologWriter {
    out: BufWriter<File>,
    path: String,
    opened: Vec<bool>,
    last_us: u64,
    count: u64,
}

impl FioIologWriter {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &str) -> Result<Self, TraceError> {
        let f = File::create(path).map_err(|e| TraceError::io(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(b"fio version 3 iolog\n")
            .map_err(|e| TraceError::io(path, e))?;
        Ok(Self {
            out,
            path: path.to_string(),
            opened: Vec::new(),
            last_us: 0,
            count: 0,
        })
    }

    fn name<'a>(&self, volumes: &'a VolumeMap, v: VolumeId) -> Result<&'a str, TraceError> {
        let name = volumes.name(v).ok_or_else(|| TraceError::Unrepresentable {
            path: self.path.clone(),
            index: self.count,
            msg: format!("volume id {} has no name", v.0),
        })?;
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(TraceError::Unrepresentable {
                path: self.path.clone(),
                index: self.count,
                msg: format!(
                    "volume name `{name}` is empty or has whitespace: not a fio file name"
                ),
            });
        }
        Ok(name)
    }
}

impl TraceWriter for FioIologWriter {
    fn write(&mut self, r: &Request, volumes: &VolumeMap) -> Result<(), TraceError> {
        let name = self.name(volumes, r.volume)?;
        let us = r.time_ns / 1000;
        self.last_us = self.last_us.max(us);
        let v = r.volume.0 as usize;
        if self.opened.len() <= v {
            self.opened.resize(v + 1, false);
        }
        let io = |e| TraceError::io(&self.path, e);
        if !self.opened[v] {
            self.opened[v] = true;
            write!(self.out, "{us} {name} add\n{us} {name} open\n").map_err(io)?;
        }
        let action = match r.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "sync",
        };
        writeln!(self.out, "{us} {name} {action} {} {}", r.offset, r.len).map_err(io)?;
        self.count += 1;
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        volumes: &VolumeMap,
        _: Option<i64>,
    ) -> Result<WriteSummary, TraceError> {
        for (v, &open) in self.opened.iter().enumerate() {
            if open {
                let name = volumes.name(VolumeId(v as u32)).unwrap_or("?");
                writeln!(self.out, "{} {name} close", self.last_us)
                    .map_err(|e| TraceError::io(&self.path, e))?;
            }
        }
        self.out
            .flush()
            .map_err(|e| TraceError::io(&self.path, e))?;
        Ok(WriteSummary {
            path: self.path.clone(),
            format: Format::FioIolog,
            requests_in: self.count,
            records_out: self.count,
            dropped: 0,
            objects: None,
        })
    }
}

/// oracleGeneral record bytes.
const OG_LEN: usize = 24;

/// Writes libCacheSim oracleGeneral: each read or write becomes one record per line it touches
/// (lines `floor(off/line) ..= floor((off+len-1)/line)`), with `obj_id` the tiercache
/// [`LineKey`] (volume in the top 16 bits, line index below), `obj_size` the line size and
/// `clock_time` whole seconds since the first record. `next_access_vtime` is the 1-based index
/// of the next record with the same `obj_id` (libCacheSim's convention), -1 if none; it is filled
/// in by a backward pass over the written file at [`TraceWriter::finish`], so memory stays
/// proportional to the distinct lines, not the records.
pub struct OracleGeneralWriter {
    out: BufWriter<File>,
    path: String,
    geo: LineGeometry,
    requests: u64,
    records: u64,
    dropped: u64,
}

impl OracleGeneralWriter {
    /// Creates (truncates) `path`; `line_size` must be a valid tiercache line size.
    pub fn create(path: &str, line_size: u64) -> Result<Self, TraceError> {
        let geo = LineGeometry::new(line_size)
            .map_err(|e| TraceError::Unsupported(format!("{path}: {e}")))?;
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| TraceError::io(path, e))?;
        Ok(Self {
            out: BufWriter::with_capacity(1 << 20, f),
            path: path.to_string(),
            geo,
            requests: 0,
            records: 0,
            dropped: 0,
        })
    }
}

impl TraceWriter for OracleGeneralWriter {
    fn write(&mut self, r: &Request, _: &VolumeMap) -> Result<(), TraceError> {
        self.requests += 1;
        if !matches!(r.op, Op::Read | Op::Write) || r.len == 0 {
            self.dropped += 1;
            return Ok(());
        }
        let bad = |msg: String| TraceError::Unrepresentable {
            path: self.path.clone(),
            index: self.requests - 1,
            msg,
        };
        self.geo
            .check_request(r.volume, r.offset, r.len)
            .map_err(|e| bad(e.to_string()))?;
        let secs = u32::try_from(r.time_ns / 1_000_000_000).map_err(|_| {
            bad(format!(
                "time {} ns exceeds the u32 seconds of clock_time",
                r.time_ns
            ))
        })?;
        let size = self.geo.line_size() as u32;
        let first = self.geo.line_of(r.offset);
        let last = self.geo.line_of(r.offset + r.len - 1);
        let mut rec = [0u8; OG_LEN];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[12..16].copy_from_slice(&size.to_le_bytes());
        rec[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        for index in first..=last {
            rec[4..12].copy_from_slice(&LineKey::new(r.volume, index).0.to_le_bytes());
            self.out
                .write_all(&rec)
                .map_err(|e| TraceError::io(&self.path, e))?;
            self.records += 1;
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _: &VolumeMap, _: Option<i64>) -> Result<WriteSummary, TraceError> {
        let path = self.path.clone();
        let io = |e| TraceError::io(&path, e);
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        let objects = fill_next_access(&file, self.records).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(WriteSummary {
            path: self.path,
            format: Format::OracleGeneral,
            requests_in: self.requests,
            records_out: self.records,
            dropped: self.dropped,
            objects: Some(objects),
        })
    }
}

/// Backward pass over an oracleGeneral file setting each `next_access_vtime`; returns the number
/// of distinct objects.
fn fill_next_access(file: &File, records: u64) -> std::io::Result<u64> {
    const CHUNK: u64 = 1 << 15;
    let mut next: FxHashMap<u64, u64> = FxHashMap::default();
    let mut buf = vec![0u8; CHUNK as usize * OG_LEN];
    let mut end = records;
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let bytes = &mut buf[..((end - start) as usize * OG_LEN)];
        file.read_exact_at(bytes, start * OG_LEN as u64)?;
        for (k, rec) in bytes.chunks_exact_mut(OG_LEN).enumerate().rev() {
            let index = start + k as u64;
            let obj = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
            let vtime = next.insert(obj, index + 1).map_or(-1, |n| n as i64);
            rec[16..24].copy_from_slice(&vtime.to_le_bytes());
        }
        file.write_all_at(bytes, start * OG_LEN as u64)?;
        end = start;
    }
    Ok(next.len() as u64)
}

/// Creates a writer for `format` at `path`. `line_size` is used by oracleGeneral.
pub fn create_writer(
    path: &str,
    format: OutputFormat,
    line_size: u64,
) -> Result<Box<dyn TraceWriter>, TraceError> {
    Ok(match format {
        OutputFormat::Native => Box::new(NativeWriter::create(path)?),
        OutputFormat::OracleGeneral => Box::new(OracleGeneralWriter::create(path, line_size)?),
        OutputFormat::FioIolog => Box::new(FioIologWriter::create(path)?),
    })
}

/// Outcome of [`convert`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvertSummary {
    /// The input as read.
    pub input: TraceMeta,
    /// Reader counters (records, skipped, unknown opcodes).
    pub counters: ReadCounters,
    /// Volumes in the input.
    pub volumes: usize,
    /// What was written.
    pub output: WriteSummary,
}

impl fmt::Display for ConvertSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counters;
        writeln!(
            f,
            "read    {} ({}, {} records, {} volumes)",
            self.input.path, self.input.format, c.records, self.volumes
        )?;
        writeln!(
            f,
            "wrote   {} ({}, {} records{})",
            self.output.path,
            self.output.format,
            self.output.records_out,
            self.output
                .objects
                .map(|o| format!(", {o} distinct objects"))
                .unwrap_or_default()
        )?;
        if self.output.dropped > 0 {
            writeln!(
                f,
                "dropped {} requests the output format cannot carry",
                self.output.dropped
            )?;
        }
        crate::stats::write_counter_notes(f, c)
    }
}

/// Where [`convert`] writes before the output is whole: a hidden file beside it, unique to
/// this call. `None` for an output that is not a regular file to replace (a device such as
/// /dev/null, a pipe, a symlink): that is written in place, as named.
fn partial_path(output: &str) -> Option<String> {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = std::path::Path::new(output);
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return None,
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    let name = path.file_name()?.to_string_lossy().into_owned();
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let hidden = format!(".{name}.partial-{}-{call}", std::process::id());
    Some(path.with_file_name(hidden).to_string_lossy().into_owned())
}

/// Reads `input` and writes it to `output` in `to`, streaming. A file output appears only
/// when whole: on any error no file is left at `output` (nor a partial one beside it), and an
/// earlier file there is left as it was. An output that is not a file (a device, a pipe) is
/// written as named.
pub fn convert(
    input: &str,
    in_format: Option<Format>,
    output: &str,
    to: OutputFormat,
    line_size: u64,
    opts: &ReadOptions,
) -> Result<ConvertSummary, TraceError> {
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(input), std::fs::canonicalize(output)) {
        if a == b {
            return Err(TraceError::Unsupported(format!(
                "{output}: output would overwrite the input"
            )));
        }
    }
    let mut reader = open(input, in_format, opts)?;
    // A file is written beside the output and renamed onto it once whole: a conversion that
    // fails (an input cut short, say) leaves no output that reads as a clean, shorter trace.
    // Anything else (a device, a pipe) is written as named.
    let partial = partial_path(output);
    let target = partial.as_deref().unwrap_or(output);
    let written = (|| {
        let mut writer = create_writer(target, to, line_size)?;
        while let Some(r) = reader.next() {
            writer.write(&r?, reader.volumes())?;
        }
        writer.finish(reader.volumes(), reader.meta().epoch_unix_ns)
    })()
    .and_then(|mut out| {
        if let Some(partial) = &partial {
            std::fs::rename(partial, output).map_err(|source| TraceError::Io {
                path: output.to_string(),
                source,
            })?;
        }
        out.path = output.to_string();
        Ok(out)
    });
    let out = match written {
        Ok(out) => out,
        Err(e) => {
            if let Some(partial) = &partial {
                let _ = std::fs::remove_file(partial);
            }
            return Err(e);
        }
    };
    let meta = reader.meta().clone();
    Ok(ConvertSummary {
        input: meta,
        counters: reader.counters().clone(),
        volumes: reader.volumes().len(),
        output: out,
    })
}
