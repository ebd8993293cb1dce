//! tiercache's native trace format: a fixed header, fixed-size little-endian records, a volume
//! table at the end; read by memory mapping.
//!
//! ```text
//! header (64 bytes)
//!   0  8  magic "TCTRACE\0"
//!   8  4  u32 version (1)
//!  12  4  u32 record size (24)
//!  16  8  u64 record count (u64::MAX until the writer finishes)
//!  24  8  u64 volume table offset (= 64 + 24 * record count)
//!  32  8  u64 volume table length in bytes
//!  40  4  u32 volume count
//!  44  4  u32 flags (bit 0: epoch known)
//!  48  8  i64 unix ns of time 0 (the first record), valid if flag bit 0
//!  56  4  u32 CRC-32 of the volume table
//!  60  4  u32 CRC-32 of header bytes 0..60
//! records (24 bytes each)
//!   0  8  u64 time_ns since the first record
//!   8  8  u64 offset (bytes)
//!  16  4  u32 length (bytes)
//!  20  2  u16 volume id
//!  22  1  u8 op: 0 read, 1 write, 2 trim, 3 flush
//!  23  1  u8 reserved, 0
//! volume table: per volume in id order, u16 name length + UTF-8 name
//! ```
//! The volume table is last so that a writer can stream records before it knows every volume.

use crate::compress::Compression;
use crate::error::TraceError;
use crate::format::{Format, NATIVE_MAGIC};
use crate::reader::{ReadCounters, TraceMeta, TraceReader};
use crate::volume::VolumeMap;
use memmap2::Mmap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use tiercache_core::{Op, Request, VolumeId, MAX_VOLUMES};

/// Header bytes.
pub const HEADER_LEN: usize = 64;
/// Record bytes.
pub const RECORD_LEN: usize = 24;
/// Format version written and accepted.
pub const VERSION: u32 = 1;
const UNFINISHED: u64 = u64::MAX;

fn op_code(op: Op) -> u8 {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Trim => 2,
        Op::Flush => 3,
    }
}

/// Encodes one record.
#[inline]
pub fn encode_record(r: &Request) -> [u8; RECORD_LEN] {
    let mut b = [0u8; RECORD_LEN];
    b[0..8].copy_from_slice(&r.time_ns.to_le_bytes());
    b[8..16].copy_from_slice(&r.offset.to_le_bytes());
    b[16..20].copy_from_slice(&(r.len as u32).to_le_bytes());
    b[20..22].copy_from_slice(&(r.volume.0 as u16).to_le_bytes());
    b[22] = op_code(r.op);
    b
}

/// Streaming writer of a native trace.
pub struct NativeWriter<W: Write + Seek> {
    out: W,
    path: String,
    count: u64,
    max_volume: Option<u32>,
}

impl NativeWriter<BufWriter<File>> {
    /// Creates (truncates) `path`.
    pub fn create(path: &str) -> Result<Self, TraceError> {
        let f = File::create(path).map_err(|e| TraceError::io(path, e))?;
        Self::new(BufWriter::with_capacity(1 << 20, f), path)
    }
}

impl<W: Write + Seek> NativeWriter<W> {
    /// Starts a trace on `out` (at its current position 0); `path` names it in errors.
    pub fn new(mut out: W, path: &str) -> Result<Self, TraceError> {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(NATIVE_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(RECORD_LEN as u32).to_le_bytes());
        h[16..24].copy_from_slice(&UNFINISHED.to_le_bytes());
        out.write_all(&h).map_err(|e| TraceError::io(path, e))?;
        Ok(Self {
            out,
            path: path.to_string(),
            count: 0,
            max_volume: None,
        })
    }

    /// Appends one request. Lengths must fit 32 bits and volume ids 16 bits.
    #[inline]
    pub fn write(&mut self, r: &Request) -> Result<(), TraceError> {
        if r.len > u32::MAX as u64 {
            return Err(self.unrepresentable(format!("length {} exceeds 4 GiB - 1", r.len)));
        }
        if r.volume.0 >= MAX_VOLUMES {
            return Err(self.unrepresentable(format!("volume id {} exceeds 65535", r.volume.0)));
        }
        self.max_volume = self.max_volume.max(Some(r.volume.0));
        self.out
            .write_all(&encode_record(r))
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.count += 1;
        Ok(())
    }

    #[cold]
    fn unrepresentable(&self, msg: String) -> TraceError {
        TraceError::Unrepresentable {
            path: self.path.clone(),
            index: self.count,
            msg,
        }
    }

    /// File name given at creation.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Requests written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the volume table, completes the header and flushes. `volumes` must name every
    /// volume id written.
    pub fn finish(
        mut self,
        volumes: &VolumeMap,
        epoch_unix_ns: Option<i64>,
    ) -> Result<W, TraceError> {
        if let Some(m) = self.max_volume {
            if m as usize >= volumes.len() {
                return Err(TraceError::Unrepresentable {
                    path: self.path.clone(),
                    index: self.count,
                    msg: format!(
                        "volume id {m} used but only {} volumes named",
                        volumes.len()
                    ),
                });
            }
        }
        let mut table = Vec::new();
        for name in volumes.names() {
            let n = name.as_bytes();
            let len = u16::try_from(n.len()).map_err(|_| TraceError::Unrepresentable {
                path: self.path.clone(),
                index: self.count,
                msg: format!("volume name of {} bytes exceeds 65535", n.len()),
            })?;
            table.extend_from_slice(&len.to_le_bytes());
            table.extend_from_slice(n);
        }
        let io = |e| TraceError::io(&self.path, e);
        self.out.write_all(&table).map_err(io)?;
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(NATIVE_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(RECORD_LEN as u32).to_le_bytes());
        h[16..24].copy_from_slice(&self.count.to_le_bytes());
        let vt_off = HEADER_LEN as u64 + self.count * RECORD_LEN as u64;
        h[24..32].copy_from_slice(&vt_off.to_le_bytes());
        h[32..40].copy_from_slice(&(table.len() as u64).to_le_bytes());
        h[40..44].copy_from_slice(&(volumes.len() as u32).to_le_bytes());
        h[44..48].copy_from_slice(&(epoch_unix_ns.is_some() as u32).to_le_bytes());
        h[48..56].copy_from_slice(&epoch_unix_ns.unwrap_or(0).to_le_bytes());
        h[56..60].copy_from_slice(&crc32fast::hash(&table).to_le_bytes());
        let crc = crc32fast::hash(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        let io = |e| TraceError::io(&self.path, e);
        self.out.seek(SeekFrom::Start(0)).map_err(io)?;
        self.out.write_all(&h).map_err(io)?;
        self.out.seek(SeekFrom::End(0)).map_err(io)?;
        self.out.flush().map_err(io)?;
        Ok(self.out)
    }
}

/// A native trace mapped into memory, validated at open.
pub struct NativeTrace {
    map: Mmap,
    path: String,
    count: u64,
    volumes: VolumeMap,
    epoch_unix_ns: Option<i64>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

impl NativeTrace {
    /// Maps and validates `path`: magic, version, checksums, and that the file holds exactly the
    /// records and volume table its header promises (a truncated file is an error naming the
    /// byte offset where data is missing).
    pub fn open(path: &str) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let file_len = file.metadata().map_err(|e| TraceError::io(path, e))?.len();
        let bad = |msg: String| TraceError::BadHeader {
            path: path.to_string(),
            msg,
        };
        if file_len < HEADER_LEN as u64 {
            return Err(TraceError::Truncated {
                path: path.to_string(),
                offset: file_len,
                msg: format!("the {HEADER_LEN}-byte header is incomplete"),
            });
        }
        // SAFETY: `Mmap::map` is unsafe because another process could modify or truncate the
        // file while it is mapped, which would change bytes under our shared slices (or raise
        // SIGBUS). tiercache never writes a trace it reads, and trace files are inputs that
        // are not modified during a run; every access below goes through bounds-checked slices
        // of the mapping and only copies plain integers out, so no invariant of ours depends on
        // the content. The length is non-zero (checked above), which mapping requires.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| TraceError::io(path, e))?;
        let h = &map[..HEADER_LEN];
        if &h[0..8] != NATIVE_MAGIC {
            return Err(bad("not a tiercache native trace (bad magic)".into()));
        }
        let version = u32_at(h, 8);
        if version != VERSION {
            return Err(bad(format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let rs = u32_at(h, 12);
        if rs as usize != RECORD_LEN {
            return Err(bad(format!("record size {rs}, expected {RECORD_LEN}")));
        }
        let count = u64_at(h, 16);
        if count == UNFINISHED {
            return Err(bad(
                "incomplete: the writer did not finish (no record count)".into(),
            ));
        }
        if crc32fast::hash(&h[..60]) != u32_at(h, 60) {
            return Err(bad("header checksum mismatch".into()));
        }
        let records_end = count
            .checked_mul(RECORD_LEN as u64)
            .and_then(|b| b.checked_add(HEADER_LEN as u64))
            .ok_or_else(|| bad(format!("record count {count} out of range")))?;
        let vt_off = u64_at(h, 24);
        let vt_len = u64_at(h, 32);
        let nvol = u32_at(h, 40);
        if vt_off != records_end {
            return Err(bad(format!(
                "volume table offset {vt_off}, expected {records_end}"
            )));
        }
        if file_len < records_end {
            let whole = (file_len - HEADER_LEN as u64) / RECORD_LEN as u64;
            return Err(TraceError::Truncated {
                path: path.to_string(),
                offset: HEADER_LEN as u64 + whole * RECORD_LEN as u64,
                msg: format!("header promises {count} records (to byte {records_end}) but the file has {whole} whole records ({file_len} bytes)"),
            });
        }
        let vt_end = records_end
            .checked_add(vt_len)
            .ok_or_else(|| bad("volume table length out of range".into()))?;
        if file_len < vt_end {
            return Err(TraceError::Truncated {
                path: path.to_string(),
                offset: file_len,
                msg: format!("volume table should end at byte {vt_end}"),
            });
        }
        if file_len > vt_end {
            return Err(bad(format!(
                "{} unexpected bytes after the volume table at byte {vt_end}",
                file_len - vt_end
            )));
        }
        let table = &map[records_end as usize..vt_end as usize];
        if crc32fast::hash(table) != u32_at(h, 56) {
            return Err(bad("volume table checksum mismatch".into()));
        }
        let mut volumes = VolumeMap::new();
        let mut p = 0usize;
        for i in 0..nvol {
            let at = records_end + p as u64;
            if p + 2 > table.len() {
                return Err(bad(format!(
                    "volume table ends before volume {i} (byte {at})"
                )));
            }
            let n = u16::from_le_bytes([table[p], table[p + 1]]) as usize;
            let name = table
                .get(p + 2..p + 2 + n)
                .ok_or_else(|| bad(format!("volume {i} name overruns the table (byte {at})")))?;
            if volumes.intern(name) != Some(VolumeId(i)) {
                return Err(bad(format!(
                    "volume {i} name duplicated or beyond the limit (byte {at})"
                )));
            }
            p += 2 + n;
        }
        if p != table.len() {
            return Err(bad(format!(
                "{} stray bytes at the end of the volume table",
                table.len() - p
            )));
        }
        let epoch_unix_ns = (u32_at(h, 44) & 1 == 1).then(|| u64_at(h, 48) as i64);
        Ok(Self {
            map,
            path: path.to_string(),
            count,
            volumes,
            epoch_unix_ns,
        })
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Volume names.
    pub fn volumes(&self) -> &VolumeMap {
        &self.volumes
    }

    /// Unix ns of time 0, if recorded.
    pub fn epoch_unix_ns(&self) -> Option<i64> {
        self.epoch_unix_ns
    }

    /// Record `i` (`i < len()`), validated.
    #[inline]
    pub fn get(&self, i: u64) -> Result<Request, TraceError> {
        let at = HEADER_LEN + i as usize * RECORD_LEN;
        let b: &[u8; RECORD_LEN] = self.map[at..at + RECORD_LEN].try_into().expect("24 bytes");
        decode(b, self.volumes.len() as u32).map_err(|(field, msg)| TraceError::BadRecord {
            path: self.path.clone(),
            offset: at as u64,
            field,
            msg,
        })
    }

    /// All records in order.
    pub fn iter(&self) -> impl Iterator<Item = Result<Request, TraceError>> + '_ {
        (0..self.count).map(|i| self.get(i))
    }
}

#[inline]
fn decode(b: &[u8; RECORD_LEN], nvol: u32) -> Result<Request, (&'static str, String)> {
    let time_ns = u64::from_le_bytes(b[0..8].try_into().expect("8"));
    let offset = u64::from_le_bytes(b[8..16].try_into().expect("8"));
    let len = u32::from_le_bytes(b[16..20].try_into().expect("4")) as u64;
    let volume = u16::from_le_bytes([b[20], b[21]]) as u32;
    let op = match b[22] {
        0 => Op::Read,
        1 => Op::Write,
        2 => Op::Trim,
        3 => Op::Flush,
        c => return Err(("op", format!("unknown op code {c}"))),
    };
    if b[23] != 0 {
        return Err(("reserved", format!("{} (must be 0)", b[23])));
    }
    if volume >= nvol {
        return Err((
            "volume",
            format!("id {volume} beyond the {nvol} named volumes"),
        ));
    }
    // As every other reader checks: a request ending past 2^64, or longer than any a block
    // device takes.
    crate::reader::check_len(op, offset, len, crate::reader::MAX_DATA_REQUEST_LEN)
        .map_err(|e| (e.field, e.msg))?;
    Ok(Request {
        time_ns,
        volume: VolumeId(volume),
        op,
        offset,
        len,
    })
}

/// [`TraceReader`] over a [`NativeTrace`].
pub struct NativeReader {
    trace: NativeTrace,
    next: u64,
    meta: TraceMeta,
    counters: ReadCounters,
    skip_bad: bool,
    done: bool,
}

impl NativeReader {
    /// Opens and validates `path` (see [`NativeTrace::open`]); a bad record ends reading with
    /// an error.
    pub fn open(path: &str) -> Result<Self, TraceError> {
        Self::open_with(path, false)
    }

    /// As [`NativeReader::open`]; with `skip_bad`, bad records are counted and skipped.
    pub fn open_with(path: &str, skip_bad: bool) -> Result<Self, TraceError> {
        let trace = NativeTrace::open(path)?;
        let meta = TraceMeta {
            path: path.to_string(),
            format: Format::Native,
            compression: Compression::None,
            epoch_unix_ns: trace.epoch_unix_ns,
        };
        Ok(Self {
            trace,
            next: 0,
            meta,
            counters: ReadCounters::default(),
            skip_bad,
            done: false,
        })
    }

    /// The mapped trace.
    pub fn trace(&self) -> &NativeTrace {
        &self.trace
    }
}

impl Iterator for NativeReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.next < self.trace.count {
            let r = self.trace.get(self.next);
            self.next += 1;
            match r {
                Ok(req) => {
                    self.counters.records += 1;
                    return Some(Ok(req));
                }
                Err(e) if self.skip_bad => self.counters.note_bad(&e),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.trace.count - self.next.min(self.trace.count)) as usize;
        (0, Some(left))
    }
}

impl TraceReader for NativeReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn volumes(&self) -> &VolumeMap {
        &self.trace.volumes
    }
    fn counters(&self) -> &ReadCounters {
        &self.counters
    }
}
