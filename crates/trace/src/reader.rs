//! The reader abstraction: every format yields [`Request`]s in file order, in bytes and ns, with
//! a [`VolumeMap`] and [`ReadCounters`].

use crate::binary::{FixedRecordReader, OracleDecoder, VscsiDecoder};
use crate::compress::{open_decompressed, Compression};
use crate::csv::{CsvParser, CsvSpec};
use crate::error::TraceError;
use crate::format::{detect, format_from_name, Format, NATIVE_MAGIC};
use crate::lines::LineSource;
use crate::native::NativeReader;
use crate::text::{BlkAction, BlkparseParser, FioParser, FiuParser};
use crate::volume::VolumeMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use tiercache_core::{Op, Request, VolumeId, MAX_VOLUMES};

/// A stream of requests decoded from one trace file.
///
/// Requests come in file order with `time_ns` relative to the first record (see
/// [`TraceMeta::epoch_unix_ns`]). After an `Err` the reader yields nothing more. Records whose
/// time is earlier than the first record's are clamped to 0 and counted in
/// [`ReadCounters::clamped_times`].
pub trait TraceReader: Iterator<Item = Result<Request, TraceError>> + Send {
    /// File, format and time origin.
    fn meta(&self) -> &TraceMeta;
    /// Volumes seen so far (all of them once the reader is exhausted; all from the start for
    /// native traces).
    fn volumes(&self) -> &VolumeMap;
    /// Counts of records, skipped lines and unknown opcodes so far.
    fn counters(&self) -> &ReadCounters;

    /// Appends up to `max` requests to `out`, the ones [`Iterator::next`] would yield next, and
    /// returns how many (0 at the end). An error ends the stream as it does for `next`; it is
    /// returned after the requests read before it were appended to `out`, which are valid: use
    /// them, then the error. Readers of fixed-size records override this with a loop over their
    /// buffer, one call per batch instead of one per request.
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let start = out.len();
        while out.len() - start < max {
            match self.next() {
                Some(Ok(r)) => out.push(r),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(out.len() - start)
    }
}

/// How to read a trace (serde: every field optional, kebab-case names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReadOptions {
    /// Count and skip malformed records instead of failing on the first.
    pub skip_bad: bool,
    /// blkparse: the one action kept per I/O (each I/O appears as several lines).
    pub blkparse_action: BlkAction,
    /// oracleGeneral: bytes per object id. Object ids are read as tiercache line keys (volume in
    /// the top 16 bits, line index below), the way [`crate::writer::OracleGeneralWriter`]
    /// writes them, so the offset is `index * oracle_line_size`.
    pub oracle_line_size: u64,
    /// Column mapping for [`Format::Csv`] (required for it, ignored otherwise).
    pub csv: Option<CsvSpec>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            skip_bad: false,
            blkparse_action: BlkAction::Queue,
            oracle_line_size: 4096,
            csv: None,
        }
    }
}

/// What a reader knows about its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// Path as given.
    pub path: String,
    /// Format being read.
    pub format: Format,
    /// Compression found by magic bytes.
    pub compression: Compression,
    /// Unix time (ns) of time 0, i.e. of the first record, when the format carries absolute
    /// times (MSR, Tencent, Alibaba, SYSTOR, native files that recorded it); known once the
    /// first record is read.
    pub epoch_unix_ns: Option<i64>,
}

/// Most distinct unknown opcodes whose names are kept (all are counted).
const MAX_UNKNOWN_NAMES: usize = 32;
/// Most skipped-record messages kept as samples (all are counted).
const MAX_BAD_SAMPLES: usize = 10;

/// Counters a reader keeps while reading.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCounters {
    /// Requests yielded.
    pub records: u64,
    /// Text lines read (0 for binary formats).
    pub lines: u64,
    /// Lines that carry no request by design: headers, blank lines, comments, blkparse actions
    /// other than the one kept and its summary, fio file-management and wait lines.
    pub skipped_lines: u64,
    /// Malformed records skipped under `skip_bad`.
    pub skipped_bad: u64,
    /// Records with an opcode this reader does not know (not yielded, always counted).
    pub unknown_ops: u64,
    /// Counts per unknown opcode (the first few distinct ones).
    pub unknown_op_names: BTreeMap<String, u64>,
    /// The first few skipped-record errors, as messages.
    pub bad_samples: Vec<String>,
    /// Records whose time preceded the first record's and was clamped to 0.
    pub clamped_times: u64,
    /// oracleGeneral: objects larger than the line size they are read at
    /// (`oracle_line_size`), so each overlaps the next ones' bytes: a sign that the line size
    /// is not the one the file was written with.
    #[serde(default)]
    pub objects_over_line: u64,
}

impl ReadCounters {
    pub(crate) fn note_unknown(&mut self, name: &[u8]) {
        self.unknown_ops += 1;
        let name = String::from_utf8_lossy(name);
        if let Some(n) = self.unknown_op_names.get_mut(name.as_ref()) {
            *n += 1;
        } else if self.unknown_op_names.len() < MAX_UNKNOWN_NAMES {
            self.unknown_op_names.insert(name.into_owned(), 1);
        }
    }

    pub(crate) fn note_bad(&mut self, err: &TraceError) {
        self.skipped_bad += 1;
        if self.bad_samples.len() < MAX_BAD_SAMPLES {
            self.bad_samples.push(err.to_string());
        }
    }
}

/// Makes absolute times relative to the first record.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    origin: Option<u64>,
}

impl Clock {
    /// Relative time of `abs` and whether it had to be clamped.
    #[inline]
    pub(crate) fn relative(&mut self, abs: u64, counters: &mut ReadCounters) -> u64 {
        let origin = *self.origin.get_or_insert(abs);
        match abs.checked_sub(origin) {
            Some(t) => t,
            None => {
                counters.clamped_times += 1;
                0
            }
        }
    }

    pub(crate) fn origin(&self) -> Option<u64> {
        self.origin
    }
}

/// Result of decoding one text line.
pub(crate) enum Parsed {
    /// A request; its volume key was written to the key buffer.
    Record {
        /// Absolute time in the parser's ns time base.
        time: u64,
        op: Op,
        offset: u64,
        len: u64,
    },
    /// A line that carries no request.
    Skip,
    /// A record with an unknown opcode, whose text was written to the key buffer.
    UnknownOp,
}

/// A field that did not decode.
#[derive(Debug)]
pub(crate) struct FieldError {
    pub(crate) field: &'static str,
    pub(crate) msg: String,
}

impl FieldError {
    pub(crate) fn new(field: &'static str, msg: impl Into<String>) -> Self {
        Self {
            field,
            msg: msg.into(),
        }
    }
}

/// Largest request length accepted: Linux bios carry their size in 32 bits, so no single block
/// request is larger, and the native format stores lengths in 32 bits.
pub const MAX_REQUEST_LEN: u64 = u32::MAX as u64;

/// Largest read or write accepted. Block devices take far smaller ones (a Linux request is
/// capped by its queue's `max_hw_sectors_kb`, a few MiB to a few tens of MiB), and wherever
/// lines are counted (footprints, reuse analysis, a cache) each line of a request costs memory:
/// this bounds what one record can cost. Trims, which discard whole devices, keep
/// [`MAX_REQUEST_LEN`].
pub const MAX_DATA_REQUEST_LEN: u64 = 256 << 20;

/// Rejects decoded requests no device issues (and whose line count would be absurd): reads
/// and writes longer than `data_max` (a block request's [`MAX_DATA_REQUEST_LEN`], or an
/// object format's own), other requests longer than [`MAX_REQUEST_LEN`], and ranges past 2^64.
#[inline]
pub(crate) fn check_range(
    p: Result<Parsed, FieldError>,
    data_max: u64,
) -> Result<Parsed, FieldError> {
    if let Ok(Parsed::Record {
        offset, len, op, ..
    }) = &p
    {
        check_len(*op, *offset, *len, data_max)?;
    }
    p
}

/// The checks of [`check_range`] on one request's fields.
#[inline]
pub(crate) fn check_len(op: Op, offset: u64, len: u64, data_max: u64) -> Result<(), FieldError> {
    let max = match op {
        Op::Read | Op::Write => data_max,
        Op::Trim | Op::Flush => MAX_REQUEST_LEN,
    };
    if len > max {
        return Err(len_error(op, len, max));
    }
    if offset.checked_add(len).is_none() {
        return Err(FieldError::new(
            "offset",
            format!("{offset} + {len} overflows"),
        ));
    }
    Ok(())
}

#[cold]
fn len_error(op: Op, len: u64, max: u64) -> FieldError {
    FieldError::new(
        "length",
        format!("{len} bytes exceeds {max}, the largest {op:?} this format's records hold"),
    )
}

/// Decodes the lines of one text format.
pub(crate) trait LineParser: Send {
    /// Decodes `line`, writing the volume key (or unknown opcode) into `key`.
    fn parse(&mut self, line: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError>;
    /// Unix ns of the parser's time 0, when its times are absolute.
    fn unix_base_ns(&self) -> Option<i128>;
}

/// Why a volume key has no id.
pub(crate) enum KeyError {
    /// The input cannot go on (too many volumes).
    Fatal(TraceError),
    /// This record is bad (a key that is not text); the next may be fine.
    Bad(FieldError),
}

/// Maps volume keys to ids, remembering the last key so runs of one volume skip the hash map.
pub(crate) struct VolumeInterner {
    pub(crate) map: VolumeMap,
    last_key: Vec<u8>,
    last_id: Option<VolumeId>,
}

impl VolumeInterner {
    pub(crate) fn new() -> Self {
        Self {
            map: VolumeMap::new(),
            last_key: Vec::new(),
            last_id: None,
        }
    }

    #[inline(always)]
    pub(crate) fn id(&mut self, key: &[u8], path: &str) -> Result<VolumeId, KeyError> {
        if let Some(id) = self.last_id {
            // Keys are a few bytes: compared inline (slice equality calls memcmp, which cost
            // a twentieth of a batched oracleGeneral replay).
            if key.len() == self.last_key.len()
                && key.iter().zip(&self.last_key).all(|(a, b)| a == b)
            {
                return Ok(id);
            }
        }
        self.id_slow(key, path)
    }

    /// A key other than the last one: the map.
    #[inline(never)]
    fn id_slow(&mut self, key: &[u8], path: &str) -> Result<VolumeId, KeyError> {
        if !key.is_ascii() && self.map.id_of(key).is_none() && std::str::from_utf8(key).is_err() {
            // Names are text: replacing the bytes would give distinct keys one name (two
            // volumes merged, or a native file whose volume table names one twice).
            return Err(KeyError::Bad(FieldError::new(
                "volume",
                format!("`{}` is not UTF-8 text", crate::parse::show(key)),
            )));
        }
        let id = self.map.intern(key).ok_or_else(|| {
            KeyError::Fatal(TraceError::TooManyVolumes {
                path: path.to_string(),
                limit: MAX_VOLUMES,
                key: String::from_utf8_lossy(key).into_owned(),
            })
        })?;
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_id = Some(id);
        Ok(id)
    }
}

/// The reader of every line-oriented format.
pub(crate) struct TextReader<P> {
    lines: LineSource,
    parser: P,
    meta: TraceMeta,
    volumes: VolumeInterner,
    counters: ReadCounters,
    clock: Clock,
    skip_bad: bool,
    key: Vec<u8>,
    done: bool,
}

impl<P: LineParser> TextReader<P> {
    pub(crate) fn new(
        stream: Box<dyn Read + Send>,
        parser: P,
        meta: TraceMeta,
        skip_bad: bool,
    ) -> Self {
        Self {
            lines: LineSource::new(stream),
            parser,
            meta,
            volumes: VolumeInterner::new(),
            counters: ReadCounters::default(),
            clock: Clock::default(),
            skip_bad,
            key: Vec::with_capacity(64),
            done: false,
        }
    }

    /// A malformed line: counted under `skip_bad` (`None`), else its error.
    fn bad_line(&mut self, fe: FieldError) -> Option<TraceError> {
        let e = TraceError::Parse {
            path: self.meta.path.clone(),
            line: self.lines.line_no(),
            field: fe.field,
            msg: fe.msg,
        };
        if self.skip_bad {
            self.counters.note_bad(&e);
            return None;
        }
        Some(e)
    }

    fn fail(&mut self, e: TraceError) -> Option<Result<Request, TraceError>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<P: LineParser> Iterator for TextReader<P> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let line = match self.lines.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    let e = TraceError::io(&self.meta.path, e);
                    return self.fail(e);
                }
            };
            self.counters.lines += 1;
            self.key.clear();
            match check_range(self.parser.parse(line, &mut self.key), MAX_DATA_REQUEST_LEN) {
                Ok(Parsed::Record {
                    time,
                    op,
                    offset,
                    len,
                }) => {
                    let volume = match self.volumes.id(&self.key, &self.meta.path) {
                        Ok(v) => v,
                        Err(KeyError::Fatal(e)) => return self.fail(e),
                        Err(KeyError::Bad(fe)) => match self.bad_line(fe) {
                            Some(e) => return self.fail(e),
                            None => continue,
                        },
                    };
                    let first = self.clock.origin().is_none();
                    let time_ns = self.clock.relative(time, &mut self.counters);
                    if first {
                        self.meta.epoch_unix_ns = self.parser.unix_base_ns().map(|base| {
                            (base + time as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
                        });
                    }
                    self.counters.records += 1;
                    return Some(Ok(Request {
                        time_ns,
                        volume,
                        op,
                        offset,
                        len,
                    }));
                }
                Ok(Parsed::Skip) => self.counters.skipped_lines += 1,
                Ok(Parsed::UnknownOp) => self.counters.note_unknown(&self.key),
                Err(fe) => {
                    if let Some(e) = self.bad_line(fe) {
                        return self.fail(e);
                    }
                }
            }
        }
    }
}

impl<P: LineParser> TraceReader for TextReader<P> {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn volumes(&self) -> &VolumeMap {
        &self.volumes.map
    }
    fn counters(&self) -> &ReadCounters {
        &self.counters
    }
}

/// Bytes of decompressed content used to recognise a format.
const SNIFF_BYTES: usize = 64 * 1024;

/// Opens a trace: detects compression by magic bytes and, unless `format` is given, the format
/// by file name and content (see [`crate::format::detect`]).
pub fn open(
    path: &str,
    format: Option<Format>,
    opts: &ReadOptions,
) -> Result<Box<dyn TraceReader>, TraceError> {
    if format == Some(Format::Native)
        || (format.is_none() && format_from_name(path) == Some(Format::Native))
    {
        return Ok(Box::new(NativeReader::open_with(path, opts.skip_bad)?));
    }
    let (mut stream, compression) = open_decompressed(path)?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut stream)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    let format = match format {
        Some(f) => f,
        None => detect(path, &head).ok_or_else(|| TraceError::UnknownFormat {
            path: path.to_string(),
            msg: format!(
                "first line `{}`",
                crate::parse::show(head.split(|&c| c == b'\n').next().unwrap_or(&[]))
            ),
        })?,
    };
    if format == Format::Native {
        if compression != Compression::None {
            return Err(TraceError::Unsupported(format!(
                "{path}: native traces are memory mapped and must be decompressed first"
            )));
        }
        if !head.starts_with(NATIVE_MAGIC) {
            return Err(TraceError::BadHeader {
                path: path.to_string(),
                msg: "no native magic".into(),
            });
        }
        return Ok(Box::new(NativeReader::open_with(path, opts.skip_bad)?));
    }
    let meta = TraceMeta {
        path: path.to_string(),
        format,
        compression,
        epoch_unix_ns: None,
    };
    let stream: Box<dyn Read + Send> = Box::new(Cursor::new(head.clone()).chain(stream));
    let skip = opts.skip_bad;
    let csv_spec = match format {
        Format::Msr => Some(CsvSpec::msr()),
        Format::Tencent => Some(CsvSpec::tencent()),
        Format::Alibaba => Some(CsvSpec::alibaba()),
        Format::Systor => Some(CsvSpec::systor()),
        Format::Spc => Some(CsvSpec::spc()),
        Format::Csv => Some(opts.csv.clone().ok_or_else(|| {
            TraceError::Unsupported(format!(
                "{path}: format `csv` needs a column mapping (--csv-map, or workload.csv in a \
                 config)"
            ))
        })?),
        _ => None,
    };
    if let Some(spec) = csv_spec {
        return Ok(Box::new(TextReader::new(
            stream,
            CsvParser::new(spec),
            meta,
            skip,
        )));
    }
    Ok(match format {
        Format::Fiu => Box::new(TextReader::new(stream, FiuParser::default(), meta, skip)),
        Format::Blkparse => Box::new(TextReader::new(
            stream,
            BlkparseParser::new(opts.blkparse_action),
            meta,
            skip,
        )),
        Format::FioIolog => Box::new(TextReader::new(stream, FioParser::default(), meta, skip)),
        Format::Vscsi => {
            let dec = VscsiDecoder::from_head(path, &head)?;
            Box::new(FixedRecordReader::new(stream, dec, meta, skip))
        }
        Format::OracleGeneral => {
            let dec = OracleDecoder::new(path, opts.oracle_line_size)?;
            Box::new(FixedRecordReader::new(stream, dec, meta, skip))
        }
        Format::Native
        | Format::Msr
        | Format::Tencent
        | Format::Alibaba
        | Format::Systor
        | Format::Spc
        | Format::Csv => {
            unreachable!("handled above")
        }
    })
}

/// Reads a whole trace into memory: requests, volumes, counters and metadata.
pub fn read_all(
    path: &str,
    format: Option<Format>,
    opts: &ReadOptions,
) -> Result<(Vec<Request>, VolumeMap, ReadCounters, TraceMeta), TraceError> {
    let mut r = open(path, format, opts)?;
    let mut v = Vec::new();
    for req in &mut r {
        v.push(req?);
    }
    Ok((
        v,
        r.volumes().clone(),
        r.counters().clone(),
        r.meta().clone(),
    ))
}
