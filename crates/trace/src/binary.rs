//! Fixed-size binary record formats read as streams: CloudPhysics vSCSI and libCacheSim
//! oracleGeneral.

use crate::error::TraceError;
use crate::reader::{
    check_len, check_range, Clock, FieldError, KeyError, Parsed, ReadCounters, TraceMeta,
    TraceReader, VolumeInterner,
};
use crate::volume::VolumeMap;
use std::io::{self, Read, Write as _};
use tiercache_core::{LineKey, Op, Request, VolumeId};

/// Decodes one fixed-size record.
pub(crate) trait RecordDecoder: Send {
    /// Bytes per record.
    fn record_size(&self) -> usize;
    /// Decodes `rec` (exactly `record_size` bytes), writing the volume key (or the unknown opcode)
    /// into `key`.
    fn decode(&mut self, rec: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError>;
    /// The longest read or write a record may hold: a block request's limit by default.
    fn max_data_len(&self) -> u64 {
        crate::reader::MAX_DATA_REQUEST_LEN
    }
    /// Records are objects each read as one line of this size: a larger one overlaps the next
    /// objects' bytes (counted, and noted). `None`: not an object format.
    fn line_size(&self) -> Option<u64> {
        None
    }
    /// `rec` decoded with its volume as a number, when the key [`RecordDecoder::decode`] would
    /// write is that number in decimal and the record is well formed; `None`: decode it with
    /// `decode`. A batch whose records keep one volume then skips the key bytes and their
    /// lookup (docs/design.md §4.4, the replay's common path).
    #[inline(always)]
    fn decode_plain(&self, _rec: &[u8]) -> Option<PlainRecord> {
        None
    }
}

/// A well-formed record whose volume key is a number ([`RecordDecoder::decode_plain`]).
pub(crate) struct PlainRecord {
    /// Absolute time in ns.
    time: u64,
    op: Op,
    offset: u64,
    len: u64,
    /// The volume's number (its key is this number in decimal).
    volume: u32,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// CloudPhysics vSCSI, version 1 (32 bytes) or 2 (40 bytes). One volume, named `0`.
pub(crate) struct VscsiDecoder {
    version: u8,
}

impl VscsiDecoder {
    /// Picks the version from the first record's `ver` field.
    pub(crate) fn from_head(path: &str, head: &[u8]) -> Result<Self, TraceError> {
        if head.is_empty() {
            return Ok(Self { version: 1 });
        }
        if head.len() >= 16 && u16_at(head, 14) >> 8 == 1 {
            return Ok(Self { version: 1 });
        }
        if head.len() >= 4 && u16_at(head, 2) >> 8 == 2 {
            return Ok(Self { version: 2 });
        }
        Err(TraceError::BadHeader {
            path: path.to_string(),
            msg: "first record is neither vSCSI v1 (ver >> 8 == 1 at byte 14) nor v2 (at byte 2)"
                .into(),
        })
    }
}

impl RecordDecoder for VscsiDecoder {
    fn record_size(&self) -> usize {
        if self.version == 1 {
            32
        } else {
            40
        }
    }

    #[inline(always)]
    fn decode(&mut self, r: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        // v1: u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts.
        // v2: u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt.
        let (len, cmd, ver, lbn, ts) = if self.version == 1 {
            (
                u32_at(r, 4),
                u16_at(r, 12),
                u16_at(r, 14),
                u64_at(r, 16),
                u64_at(r, 24),
            )
        } else {
            (
                u32_at(r, 8),
                u16_at(r, 0),
                u16_at(r, 2),
                u64_at(r, 16),
                u64_at(r, 24),
            )
        };
        if ver >> 8 != self.version as u16 {
            return Err(FieldError::new(
                "ver",
                format!("{ver:#06x}: not version {}", self.version),
            ));
        }
        let op = match cmd {
            0x08 | 0x28 | 0x88 | 0xA8 => Op::Read,
            0x0A | 0x2A | 0x8A | 0xAA => Op::Write,
            _ => {
                let _ = write!(key, "{cmd:#04x}");
                return Ok(Parsed::UnknownOp);
            }
        };
        let offset = lbn
            .checked_mul(512)
            .ok_or_else(|| FieldError::new("lbn", format!("{lbn}: out of range")))?;
        let time = ts
            .checked_mul(1000)
            .ok_or_else(|| FieldError::new("ts", format!("{ts}: out of range")))?;
        key.push(b'0');
        Ok(Parsed::Record {
            time,
            op,
            offset,
            len: len as u64,
        })
    }
}

/// libCacheSim oracleGeneral: `u32 clock_time (s), u64 obj_id, u32 obj_size, i64
/// next_access_vtime`. Object ids are read as tiercache line keys.
pub(crate) struct OracleDecoder {
    line_size: u64,
    /// The last volume number and its decimal key: formatting it anew for every record cost a
    /// fifth of a hit-ratio-only replay.
    last_volume: Option<u32>,
    last_key: Vec<u8>,
}

impl OracleDecoder {
    pub(crate) fn new(path: &str, line_size: u64) -> Result<Self, TraceError> {
        if line_size == 0 {
            return Err(TraceError::Unsupported(format!(
                "{path}: oracleGeneral line size must be positive"
            )));
        }
        Ok(Self {
            line_size,
            last_volume: None,
            last_key: Vec::new(),
        })
    }
}

impl RecordDecoder for OracleDecoder {
    fn record_size(&self) -> usize {
        24
    }

    /// Objects, not block requests: an object cache's traces hold objects of gigabytes (a
    /// block trace converted to it holds lines). The 32-bit size field is the limit.
    fn max_data_len(&self) -> u64 {
        crate::reader::MAX_REQUEST_LEN
    }

    fn line_size(&self) -> Option<u64> {
        Some(self.line_size)
    }

    /// What `decode` gives for a well-formed record, its key being the volume number.
    #[inline(always)]
    fn decode_plain(&self, r: &[u8]) -> Option<PlainRecord> {
        let obj = LineKey(u64_at(r, 4));
        if (u64_at(r, 16) as i64) < -1 {
            return None;
        }
        Some(PlainRecord {
            time: u32_at(r, 0) as u64 * 1_000_000_000,
            op: Op::Read,
            offset: obj.index().checked_mul(self.line_size)?,
            len: u32_at(r, 12) as u64,
            volume: obj.volume().0,
        })
    }

    #[inline(always)]
    fn decode(&mut self, r: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        let clock = u32_at(r, 0) as u64;
        let obj = LineKey(u64_at(r, 4));
        let size = u32_at(r, 12) as u64;
        let next = u64_at(r, 16) as i64;
        if next < -1 {
            return Err(FieldError::new(
                "next_access_vtime",
                format!("{next}: negative"),
            ));
        }
        let offset = obj.index().checked_mul(self.line_size).ok_or_else(|| {
            FieldError::new("obj_id", format!("{}: line index out of range", obj.0))
        })?;
        let volume = obj.volume().0;
        if self.last_volume != Some(volume) {
            self.last_key.clear();
            let _ = write!(self.last_key, "{volume}");
            self.last_volume = Some(volume);
        }
        key.extend_from_slice(&self.last_key);
        Ok(Parsed::Record {
            time: clock * 1_000_000_000,
            op: Op::Read,
            offset,
            len: size,
        })
    }
}

/// Streaming reader of fixed-size records, one chunk buffer reused.
pub(crate) struct FixedRecordReader<D> {
    inner: Box<dyn Read + Send>,
    dec: D,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Stream offset of `buf[0]`.
    base: u64,
    meta: TraceMeta,
    volumes: VolumeInterner,
    counters: ReadCounters,
    clock: Clock,
    skip_bad: bool,
    key: Vec<u8>,
    done: bool,
    /// The decoder's object line size, asked once ([`RecordDecoder::line_size`]); `u64::MAX`
    /// for a format without one.
    object_line: u64,
    /// The volume number of the last record decoded in full and its id, for
    /// [`RecordDecoder::decode_plain`]'s records of the same volume.
    plain_volume: Option<(u32, VolumeId)>,
}

impl<D: RecordDecoder> FixedRecordReader<D> {
    pub(crate) fn new(
        inner: Box<dyn Read + Send>,
        dec: D,
        meta: TraceMeta,
        skip_bad: bool,
    ) -> Self {
        let rs = dec.record_size();
        let object_line = dec.line_size().unwrap_or(u64::MAX);
        Self {
            inner,
            buf: vec![0; rs * 4096],
            dec,
            pos: 0,
            end: 0,
            eof: false,
            base: 0,
            meta,
            volumes: VolumeInterner::new(),
            counters: ReadCounters::default(),
            clock: Clock::default(),
            skip_bad,
            key: Vec::with_capacity(16),
            done: false,
            object_line,
            plain_volume: None,
        }
    }

    /// Makes at least one whole record available; false at a clean end of stream.
    fn fill(&mut self) -> io::Result<bool> {
        let rs = self.dec.record_size();
        if self.end - self.pos >= rs {
            return Ok(true);
        }
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        while !self.eof && self.end < self.buf.len() {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end >= rs)
    }
}

impl<D: RecordDecoder> Iterator for FixedRecordReader<D> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rs = self.dec.record_size();
        while !self.done {
            match self.fill() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    if self.end == 0 {
                        return None;
                    }
                    // A truncated tail is never decoded: it is an error, or under skip_bad a
                    // counted bad record.
                    let e = TraceError::Truncated {
                        path: self.meta.path.clone(),
                        offset: self.base,
                        msg: format!("incomplete {rs}-byte record ({} bytes left)", self.end),
                    };
                    if self.skip_bad {
                        self.counters.note_bad(&e);
                        return None;
                    }
                    return Some(Err(e));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::io(&self.meta.path, e)));
                }
            }
            let at = self.pos;
            self.pos += rs;
            if let Some(r) = self.record_at(at) {
                return Some(r);
            }
        }
        None
    }
}

impl<D: RecordDecoder> FixedRecordReader<D> {
    /// Decodes the record at `buf[at..]`: a request, a fatal error, or `None` for a record that
    /// yields nothing (skipped, unknown opcode, or bad under `skip_bad`, each counted).
    #[inline(always)]
    fn record_at(&mut self, at: usize) -> Option<Result<Request, TraceError>> {
        let rs = self.dec.record_size();
        self.key.clear();
        let decoded = self.dec.decode(&self.buf[at..at + rs], &mut self.key);
        match check_range(decoded, self.dec.max_data_len()) {
            Ok(Parsed::Record {
                time,
                op,
                offset,
                len,
            }) => {
                let volume = match self.volumes.id(&self.key, &self.meta.path) {
                    Ok(v) => v,
                    Err(e) => {
                        // Binary keys are numbers this reader wrote: only too many of them.
                        let e = match e {
                            KeyError::Fatal(e) => e,
                            KeyError::Bad(fe) => TraceError::BadRecord {
                                path: self.meta.path.clone(),
                                offset: self.base + at as u64,
                                field: fe.field,
                                msg: fe.msg,
                            },
                        };
                        self.done = true;
                        return Some(Err(e));
                    }
                };
                let time_ns = self.clock.relative(time, &mut self.counters);
                self.counters.records += 1;
                if len > self.object_line {
                    self.counters.objects_over_line += 1;
                }
                Some(Ok(Request {
                    time_ns,
                    volume,
                    op,
                    offset,
                    len,
                }))
            }
            Ok(Parsed::Skip) => {
                self.counters.skipped_lines += 1;
                None
            }
            Ok(Parsed::UnknownOp) => {
                self.counters.note_unknown(&self.key);
                None
            }
            Err(fe) => {
                let e = TraceError::BadRecord {
                    path: self.meta.path.clone(),
                    offset: self.base + at as u64,
                    field: fe.field,
                    msg: fe.msg,
                };
                if self.skip_bad {
                    self.counters.note_bad(&e);
                    None
                } else {
                    self.done = true;
                    Some(Err(e))
                }
            }
        }
    }
}

impl<D: RecordDecoder> FixedRecordReader<D> {
    /// The record at `buf[at..]` as [`FixedRecordReader::record_at`] gives it, counters
    /// included, when it is well formed and of the last fully decoded record's volume (whose
    /// id is known: no key is written or looked up); `None`: decode it in full. Per request
    /// this is most of a hit-ratio replay's reading (docs/design.md §4.4).
    #[inline(always)]
    fn plain_at(&mut self, at: usize) -> Option<Request> {
        let (number, volume) = self.plain_volume?;
        let rs = self.dec.record_size();
        let p = self.dec.decode_plain(&self.buf[at..at + rs])?;
        if p.volume != number {
            return None;
        }
        // The checks `check_range` makes; a record failing them is reported by `record_at`.
        check_len(p.op, p.offset, p.len, self.dec.max_data_len()).ok()?;
        let time_ns = self.clock.relative(p.time, &mut self.counters);
        self.counters.records += 1;
        if p.len > self.object_line {
            self.counters.objects_over_line += 1;
        }
        Some(Request {
            time_ns,
            volume,
            op: p.op,
            offset: p.offset,
            len: p.len,
        })
    }
}

impl<D: RecordDecoder> TraceReader for FixedRecordReader<D> {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn volumes(&self) -> &VolumeMap {
        &self.volumes.map
    }
    fn counters(&self) -> &ReadCounters {
        &self.counters
    }

    /// The records in the buffer are decoded in one loop; refilling, the truncated tail and
    /// read errors go through [`Iterator::next`].
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let start = out.len();
        let rs = self.dec.record_size();
        out.reserve(max);
        while !self.done && out.len() - start < max {
            let whole = (self.end - self.pos) / rs;
            if whole == 0 {
                match self.next() {
                    Some(Ok(r)) => out.push(r),
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
                continue;
            }
            let take = whole.min(max - (out.len() - start));
            for _ in 0..take {
                let at = self.pos;
                self.pos += rs;
                if let Some(r) = self.plain_at(at) {
                    out.push(r);
                    continue;
                }
                match self.record_at(at) {
                    Some(Ok(r)) => {
                        // The volume's number and id, for its next records' plain path.
                        if let Some(p) = self.dec.decode_plain(&self.buf[at..at + rs]) {
                            self.plain_volume = Some((p.volume, r.volume));
                        }
                        out.push(r)
                    }
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
            }
        }
        Ok(out.len() - start)
    }
}
