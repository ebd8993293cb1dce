//! The one fast CSV engine: MSR, Tencent, Alibaba, SYSTOR and SPC are presets of a
//! [`CsvSpec`], and any other CSV trace can be read with a user mapping.

use crate::error::TraceError;
use crate::parse::{parse_scaled, parse_u64, show, split_delim, trim};
use crate::reader::{FieldError, LineParser, Parsed};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use tiercache_core::Op;

/// Unit of a time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeUnit {
    /// Seconds (a fraction is allowed).
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
    /// Windows FILETIME: 100 ns ticks since 1601-01-01 UTC (always absolute).
    Filetime,
}

impl TimeUnit {
    /// Nanoseconds per unit.
    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
            TimeUnit::Filetime => 100,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TimeUnit::S => "s",
            TimeUnit::Ms => "ms",
            TimeUnit::Us => "us",
            TimeUnit::Ns => "ns",
            TimeUnit::Filetime => "filetime",
        }
    }
}

/// ns from 1601-01-01 to 1970-01-01.
const FILETIME_UNIX_OFFSET_NS: i128 = 11_644_473_600 * 1_000_000_000;

/// Where each request field is and in which unit. Columns are 0-based. Serialised as its
/// mapping string (see the `FromStr` impl), so configs write `csv = "offset=1,len=2,..."`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CsvSpec {
    /// Field separator.
    pub delimiter: u8,
    /// Whether the first line is a header to skip.
    pub header: bool,
    /// Time column and unit; without one every request is at time 0.
    pub time: Option<(usize, TimeUnit)>,
    /// Whether times count from the unix epoch (FILETIME always counts from 1601).
    pub unix_time: bool,
    /// Columns naming the volume, joined with `_` (MSR host `hm` and disk `0` make `hm_0`);
    /// empty means one volume named `0`.
    pub volume: Vec<usize>,
    /// Opcode column; without one every request is a read.
    pub op: Option<usize>,
    /// Opcode texts per operation (compared ignoring ASCII case).
    pub op_names: OpNames,
    /// Offset column and bytes per unit (1 for bytes, 512 for sectors).
    pub offset: (usize, u64),
    /// Length column and bytes per unit.
    pub len: (usize, u64),
    /// Columns every line has exactly (`columns=N`); `None`: at least up to the highest
    /// mapped column, more allowed. The presets fix it, so a line holding two records (a lost
    /// line end, or CR line ends) or a missing column is an error, not a misread record.
    pub columns: Option<usize>,
}

/// The highest column number a mapping may name: columns past it are a mistake, and the
/// parser keeps a slot per column up to the highest mapped.
pub const MAX_COLUMN: usize = 1023;

/// Opcode texts of each operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpNames {
    /// Texts meaning read.
    pub read: Vec<String>,
    /// Texts meaning write.
    pub write: Vec<String>,
    /// Texts meaning trim.
    pub trim: Vec<String>,
    /// Texts meaning flush.
    pub flush: Vec<String>,
}

impl Default for OpNames {
    fn default() -> Self {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        Self {
            read: v(&["r", "read", "rs"]),
            write: v(&["w", "write", "ws"]),
            trim: v(&["t", "d", "trim", "discard"]),
            flush: v(&["f", "flush", "sync"]),
        }
    }
}

impl OpNames {
    /// Flat (text, op) table for the parser.
    fn table(&self) -> Vec<(Vec<u8>, Op)> {
        let mut t = Vec::new();
        for (list, op) in [
            (&self.read, Op::Read),
            (&self.write, Op::Write),
            (&self.trim, Op::Trim),
            (&self.flush, Op::Flush),
        ] {
            t.extend(list.iter().map(|n| (n.as_bytes().to_vec(), op)));
        }
        t
    }
}

impl CsvSpec {
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    pub fn msr() -> Self {
        Self {
            delimiter: b',',
            header: false,
            time: Some((0, TimeUnit::Filetime)),
            unix_time: true,
            volume: vec![1, 2],
            op: Some(3),
            op_names: OpNames::default(),
            offset: (4, 1),
            len: (5, 1),
            columns: Some(7),
        }
    }

    /// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID`, sectors, IOType 0 read / 1 write.
    pub fn tencent() -> Self {
        Self {
            delimiter: b',',
            header: false,
            time: Some((0, TimeUnit::S)),
            unix_time: true,
            volume: vec![4],
            op: Some(3),
            op_names: OpNames {
                read: vec!["0".into()],
                write: vec!["1".into()],
                trim: vec![],
                flush: vec![],
            },
            offset: (1, 512),
            len: (2, 512),
            columns: Some(5),
        }
    }

    /// Alibaba 2020: `device_id,opcode,offset,length,timestamp` (bytes, µs since the epoch).
    pub fn alibaba() -> Self {
        Self {
            delimiter: b',',
            header: false,
            time: Some((4, TimeUnit::Us)),
            unix_time: true,
            volume: vec![0],
            op: Some(1),
            op_names: OpNames::default(),
            offset: (2, 1),
            len: (3, 1),
            columns: Some(5),
        }
    }

    /// SYSTOR'17: header, `Timestamp,Response,IOType,LUN,Offset,Size` (s, bytes).
    pub fn systor() -> Self {
        Self {
            delimiter: b',',
            header: true,
            time: Some((0, TimeUnit::S)),
            unix_time: true,
            volume: vec![3],
            op: Some(2),
            op_names: OpNames::default(),
            offset: (4, 1),
            len: (5, 1),
            columns: Some(6),
        }
    }

    /// SPC / UMass: `ASU,LBA,Size,Opcode,Timestamp[,...]` (LBA in 512 B blocks, size in bytes,
    /// seconds from trace start).
    pub fn spc() -> Self {
        Self {
            delimiter: b',',
            header: false,
            time: Some((4, TimeUnit::S)),
            unix_time: false,
            volume: vec![0],
            op: Some(3),
            op_names: OpNames::default(),
            offset: (1, 512),
            len: (2, 1),
            columns: None,
        }
    }

    fn max_col(&self) -> usize {
        let mut m = self.offset.0.max(self.len.0);
        if let Some((c, _)) = self.time {
            m = m.max(c);
        }
        if let Some(c) = self.op {
            m = m.max(c);
        }
        self.volume.iter().fold(m, |m, &c| m.max(c))
    }
}

fn bad_spec(spec: &str, msg: impl Into<String>) -> TraceError {
    TraceError::CsvSpec {
        spec: spec.to_string(),
        msg: msg.into(),
    }
}

fn col(spec: &str, v: &str) -> Result<usize, TraceError> {
    let c: usize = v
        .parse()
        .map_err(|_| bad_spec(spec, format!("`{v}` is not a column number")))?;
    if c > MAX_COLUMN {
        return Err(bad_spec(
            spec,
            format!("column {c} is past the last a mapping may name ({MAX_COLUMN})"),
        ));
    }
    Ok(c)
}

/// Opcode texts separated by `|`; none for an empty value.
fn op_texts(v: &str) -> Vec<String> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.split('|').map(String::from).collect()
    }
}

fn byte_unit(spec: &str, u: Option<&str>) -> Result<u64, TraceError> {
    match u.unwrap_or("b") {
        "b" | "bytes" => Ok(1),
        "sector" | "sectors" | "512" => Ok(512),
        "kib" | "k" => Ok(1024),
        "4k" | "4kib" | "page" => Ok(4096),
        other => other.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
            bad_spec(
                spec,
                format!("unknown byte unit `{other}` (b, sector, kib, 4k or a number)"),
            )
        }),
    }
}

/// Parses a mapping such as
/// `time=0:us:unix,volume=4,op=3,offset=1:sector,len=2:sector,read=0,write=1,header,delim=;`.
///
/// Keys: `time=COL[:s|ms|us|ns|filetime][:unix]`, `volume=COL[+COL...]`, `op=COL`,
/// `offset=COL[:UNIT]`, `len=COL[:UNIT]` (UNIT: `b`, `sector`, `kib`, `4k` or a number of bytes),
/// `read=`/`write=`/`trim=`/`flush=` opcode texts separated by `|` (an empty value: none), `header`,
/// `columns=N` (every line has exactly N), `delim=,|tab|space|;|CHAR`. `offset` and `len` are
/// required; columns count from 0, up to [`MAX_COLUMN`].
impl FromStr for CsvSpec {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        let mut spec = CsvSpec {
            delimiter: b',',
            header: false,
            time: None,
            unix_time: false,
            volume: vec![],
            op: None,
            op_names: OpNames::default(),
            offset: (usize::MAX, 1),
            len: (usize::MAX, 1),
            columns: None,
        };
        // `delim=,` contains the separator itself; split on commas not directly after `delim=`.
        let mut items = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("delim=") {
                let mut chars = r.chars();
                let first = chars.next().ok_or_else(|| bad_spec(s, "empty delim"))?;
                let word_end = r.find(',').filter(|&i| i > 0).unwrap_or(r.len());
                let (val, tail) = if first == ',' {
                    (",", &r[1..])
                } else {
                    (&r[..word_end], &r[word_end..])
                };
                items.push(("delim", val));
                rest = tail.strip_prefix(',').unwrap_or(tail);
                continue;
            }
            let end = rest.find(',').unwrap_or(rest.len());
            let item = &rest[..end];
            rest = rest[end..].strip_prefix(',').unwrap_or("");
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            items.push((k, v));
        }
        for (k, v) in items {
            let mut parts = v.split(':');
            let first = parts.next().unwrap_or("");
            match k.trim() {
                "time" => {
                    let c = col(s, first)?;
                    let mut unit = TimeUnit::S;
                    for p in parts {
                        match p {
                            "s" => unit = TimeUnit::S,
                            "ms" => unit = TimeUnit::Ms,
                            "us" => unit = TimeUnit::Us,
                            "ns" => unit = TimeUnit::Ns,
                            "filetime" => unit = TimeUnit::Filetime,
                            "unix" => spec.unix_time = true,
                            other => {
                                return Err(bad_spec(s, format!("unknown time unit `{other}`")))
                            }
                        }
                    }
                    spec.time = Some((c, unit));
                }
                "volume" => {
                    spec.volume = v.split('+').map(|c| col(s, c)).collect::<Result<_, _>>()?
                }
                "op" => spec.op = Some(col(s, first)?),
                "offset" => spec.offset = (col(s, first)?, byte_unit(s, parts.next())?),
                "len" | "size" | "length" => {
                    spec.len = (col(s, first)?, byte_unit(s, parts.next())?)
                }
                "read" => spec.op_names.read = op_texts(v),
                "write" => spec.op_names.write = op_texts(v),
                "trim" => spec.op_names.trim = op_texts(v),
                "flush" => spec.op_names.flush = op_texts(v),
                "header" => spec.header = true,
                "columns" => {
                    let n: usize = v.parse().map_err(|_| {
                        bad_spec(s, format!("`columns={v}`: not a number of columns"))
                    })?;
                    if n == 0 || n > MAX_COLUMN + 1 {
                        return Err(bad_spec(
                            s,
                            format!("`columns={v}`: 1 to {} columns", MAX_COLUMN + 1),
                        ));
                    }
                    spec.columns = Some(n);
                }
                "delim" => {
                    spec.delimiter = match v {
                        "tab" => b'\t',
                        "space" => b' ',
                        "comma" => b',',
                        "semicolon" => b';',
                        _ if v.len() == 1 => v.as_bytes()[0],
                        _ => return Err(bad_spec(s, format!("delimiter `{v}` must be one byte"))),
                    }
                }
                "" => {}
                other => return Err(bad_spec(s, format!("unknown key `{other}`"))),
            }
        }
        if spec.offset.0 == usize::MAX || spec.len.0 == usize::MAX {
            return Err(bad_spec(s, "`offset=COL` and `len=COL` are required"));
        }
        if let Some(n) = spec.columns {
            if n <= spec.max_col() {
                return Err(bad_spec(
                    s,
                    format!(
                        "`columns={n}` leaves out mapped column {} (columns count from 0)",
                        spec.max_col()
                    ),
                ));
            }
        }
        Ok(spec)
    }
}

impl TryFrom<String> for CsvSpec {
    type Error = TraceError;
    fn try_from(s: String) -> Result<Self, TraceError> {
        s.parse()
    }
}

impl From<CsvSpec> for String {
    fn from(s: CsvSpec) -> String {
        s.to_string()
    }
}

impl fmt::Display for CsvSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = match self.delimiter {
            b'\t' => "tab".to_string(),
            b' ' => "space".to_string(),
            c => (c as char).to_string(),
        };
        write!(
            f,
            "offset={}:{},len={}:{}",
            self.offset.0, self.offset.1, self.len.0, self.len.1
        )?;
        if let Some((c, u)) = self.time {
            write!(
                f,
                ",time={c}:{}{}",
                u.name(),
                if self.unix_time { ":unix" } else { "" }
            )?;
        }
        if !self.volume.is_empty() {
            let cols: Vec<String> = self.volume.iter().map(|c| c.to_string()).collect();
            write!(f, ",volume={}", cols.join("+"))?;
        }
        if let Some(c) = self.op {
            write!(f, ",op={c}")?;
            let n = &self.op_names;
            for (k, list) in [
                ("read", &n.read),
                ("write", &n.write),
                ("trim", &n.trim),
                ("flush", &n.flush),
            ] {
                // An empty list prints as `k=` (none), so it does not read back as the default.
                write!(f, ",{k}={}", list.join("|"))?;
            }
        }
        if self.header {
            write!(f, ",header")?;
        }
        if let Some(n) = self.columns {
            write!(f, ",columns={n}")?;
        }
        write!(f, ",delim={d}")
    }
}

/// Parser for one [`CsvSpec`].
pub(crate) struct CsvParser {
    spec: CsvSpec,
    ops: Vec<(Vec<u8>, Op)>,
    fields: Vec<(usize, usize)>,
    /// Columns up to the highest mapped.
    need: usize,
    /// Columns to split: `need`, or the exact count plus one (to see a line with more).
    split: usize,
    header_pending: bool,
}

impl CsvParser {
    /// A parser of `spec`, whose columns are at most [`MAX_COLUMN`] (as parsing a mapping
    /// checks).
    pub(crate) fn new(spec: CsvSpec) -> Self {
        debug_assert!(spec.max_col() <= MAX_COLUMN);
        let need = spec.max_col() + 1;
        let split = spec.columns.map_or(need, |n| (n + 1).max(need));
        let header_pending = spec.header;
        let ops = spec.op_names.table();
        Self {
            spec,
            ops,
            fields: Vec::new(),
            need,
            split,
            header_pending,
        }
    }

    /// The first line of a mapping with a header: skipped, unless the mapping fixes its
    /// columns (the presets, whose headers are words) and the line holds a record. A mapping
    /// of the user's may have a header of numbers (`0,1,2,...`, as pandas writes one).
    #[cold]
    fn header(&mut self, line: &[u8]) -> Result<Parsed, FieldError> {
        self.header_pending = false;
        if self.spec.columns.is_some() && self.is_record(line) {
            // Skipping it would drop a request unseen (a file cut from a larger one, say).
            return Err(FieldError::new(
                "header",
                "the first line should be the header, but its offset and length are \
                 numbers: a record (a file without its header?)",
            ));
        }
        Ok(Parsed::Skip)
    }

    /// What is wrong with a line split into the wrong number of columns.
    #[cold]
    fn column_error(&self, line: &[u8]) -> FieldError {
        let n = self.fields.len();
        if memchr::memchr(b'\r', line).is_some() {
            return carriage_return();
        }
        match self.spec.columns {
            Some(exact) if n > exact => FieldError::new(
                "columns",
                format!("more than {exact} columns, expected exactly {exact}"),
            ),
            Some(exact) => {
                FieldError::new("columns", format!("{n} columns, expected exactly {exact}"))
            }
            None => FieldError::new(
                "columns",
                format!("{n} columns, need at least {}", self.need),
            ),
        }
    }

    /// Whether `line`, due to be the header, holds a record instead: its offset and length
    /// columns are numbers.
    fn is_record(&mut self, line: &[u8]) -> bool {
        split_delim(line, self.spec.delimiter, self.split, &mut self.fields);
        let number = |c: usize| {
            self.fields
                .get(c)
                .is_some_and(|&(s, e)| parse_u64(trim(&line[s..e])).is_ok())
        };
        number(self.spec.offset.0) && number(self.spec.len.0)
    }
}

#[cold]
fn carriage_return() -> FieldError {
    FieldError::new(
        "line",
        "a carriage return inside the line (CR line ends? convert them to LF)",
    )
}

#[inline]
fn num(field: &'static str, b: &[u8], unit: u64) -> Result<u64, FieldError> {
    let v = parse_u64(b).map_err(|m| FieldError::new(field, format!("`{}`: {m}", show(b))))?;
    v.checked_mul(unit)
        .ok_or_else(|| FieldError::new(field, format!("`{}`: out of range", show(b))))
}

impl LineParser for CsvParser {
    #[inline]
    fn parse(&mut self, line: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        if self.header_pending {
            return self.header(line);
        }
        if line.is_empty() || line[0] == b'#' || trim(line).is_empty() {
            return Ok(Parsed::Skip);
        }
        // Line ends are `\n` or `\r\n`; a `\r` within a line joins records (a file with CR line
        // ends reads as one line). A fixed column count catches that as a wrong count; a
        // mapping without one looks for the `\r`.
        if self.spec.columns.is_none() && memchr::memchr(b'\r', line).is_some() {
            return Err(carriage_return());
        }
        split_delim(line, self.spec.delimiter, self.split, &mut self.fields);
        let n = self.fields.len();
        if self.spec.columns.is_some_and(|exact| n != exact) || n < self.need {
            return Err(self.column_error(line));
        }
        let f = |c: usize| {
            let (s, e) = self.fields[c];
            trim(&line[s..e])
        };
        let op = match self.spec.op {
            None => Op::Read,
            Some(c) => match self
                .ops
                .iter()
                .find(|(n, _)| n.len() == f(c).len() && n.eq_ignore_ascii_case(f(c)))
            {
                Some(&(_, op)) => op,
                None => {
                    key.extend_from_slice(f(c));
                    return Ok(Parsed::UnknownOp);
                }
            },
        };
        let time = match self.spec.time {
            None => 0,
            Some((c, u)) => parse_scaled(f(c), u.ns())
                .map_err(|m| FieldError::new("time", format!("`{}`: {m}", show(f(c)))))?,
        };
        let offset = num("offset", f(self.spec.offset.0), self.spec.offset.1)?;
        let len = num("length", f(self.spec.len.0), self.spec.len.1)?;
        if self.spec.volume.is_empty() {
            key.push(b'0');
        }
        for (i, &c) in self.spec.volume.iter().enumerate() {
            if i > 0 {
                key.push(b'_');
            }
            key.extend_from_slice(f(c));
        }
        if key.is_empty() {
            return Err(FieldError::new("volume", "empty"));
        }
        Ok(Parsed::Record {
            time,
            op,
            offset,
            len,
        })
    }

    fn unix_base_ns(&self) -> Option<i128> {
        match self.spec.time {
            Some((_, TimeUnit::Filetime)) => Some(-FILETIME_UNIX_OFFSET_NS),
            Some(_) if self.spec.unix_time => Some(0),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_and_prints_back() {
        let s: CsvSpec = "time=0:us:unix,volume=4+5,op=3,offset=1:sector,len=2:4k,read=0,write=1|2,header,delim=;"
            .parse()
            .unwrap();
        assert_eq!(s.time, Some((0, TimeUnit::Us)));
        assert!(s.unix_time && s.header);
        assert_eq!(s.volume, vec![4, 5]);
        assert_eq!(s.offset, (1, 512));
        assert_eq!(s.len, (2, 4096));
        assert_eq!(s.delimiter, b';');
        assert_eq!(s.op_names.write, vec!["1", "2"]);
        let again: CsvSpec = s.to_string().parse().unwrap();
        assert_eq!(again, s);
        let comma: CsvSpec = "offset=0,len=1,delim=,,header".parse().unwrap();
        assert_eq!(comma.delimiter, b',');
        assert!(comma.header);
        assert_eq!(
            CsvSpec::msr().to_string().parse::<CsvSpec>().unwrap(),
            CsvSpec::msr()
        );
    }

    #[test]
    fn spec_errors_name_the_problem() {
        let e = "offset=0".parse::<CsvSpec>().unwrap_err().to_string();
        assert!(e.contains("required"), "{e}");
        let e = "offset=x,len=1".parse::<CsvSpec>().unwrap_err().to_string();
        assert!(e.contains("`x` is not a column"), "{e}");
        let e = "offset=0,len=1:parsec"
            .parse::<CsvSpec>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("parsec"), "{e}");
    }

    #[test]
    fn mappings_name_columns_within_bounds_and_their_count() {
        for big in ["1024", "100000000000000", "18446744073709551615"] {
            let e = format!("offset=0,len=1,time={big}")
                .parse::<CsvSpec>()
                .unwrap_err()
                .to_string();
            assert!(e.contains(big) && e.contains("1023"), "{e}");
        }
        let s: CsvSpec = "offset=0,len=1,columns=3".parse().unwrap();
        assert_eq!(s.columns, Some(3));
        assert_eq!(s.to_string().parse::<CsvSpec>().unwrap(), s);
        let e = "offset=0,len=4,columns=3"
            .parse::<CsvSpec>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("columns=3") && e.contains('4'), "{e}");
        for preset in [
            CsvSpec::msr(),
            CsvSpec::tencent(),
            CsvSpec::alibaba(),
            CsvSpec::systor(),
            CsvSpec::spc(),
        ] {
            assert_eq!(preset.to_string().parse::<CsvSpec>().unwrap(), preset);
        }
    }

    #[test]
    fn a_line_holding_more_or_less_than_a_record_is_an_error() {
        let mut p = CsvParser::new(CsvSpec::msr());
        let err = |p: &mut CsvParser, line: &[u8]| p.parse(line, &mut Vec::new()).err().unwrap();
        // Two records on one line (a lost line end): not one record with a long last column.
        let e = err(&mut p, b"1,hm,0,Read,0,512,2,3,hm,0,Write,4096,512,2");
        assert_eq!(e.field, "columns");
        assert!(e.msg.contains("more than 7"), "{}", e.msg);
        let e = err(&mut p, b"1,hm,0,Read,0,512");
        assert!(e.msg.contains("6 columns, expected exactly 7"), "{}", e.msg);
        // CR line ends: the whole file is one line.
        let e = err(&mut p, b"1,hm,0,Read,0,512,2\r3,hm,0,Write,4096,512,2");
        assert_eq!(e.field, "line");
        // A mapping without a column count takes extra columns.
        let mut g = CsvParser::new("offset=0,len=1".parse().unwrap());
        assert!(matches!(
            g.parse(b"4096,512,extra,more", &mut Vec::new()),
            Ok(Parsed::Record {
                offset: 4096,
                len: 512,
                ..
            })
        ));
    }

    #[test]
    fn a_header_of_numbers_is_a_header_in_a_mapping_without_a_column_count() {
        let mut p = CsvParser::new("offset=0,len=1,header".parse().unwrap());
        let mut key = Vec::new();
        assert!(matches!(p.parse(b"0,1", &mut key), Ok(Parsed::Skip)));
        assert!(matches!(
            p.parse(b"4096,512", &mut key),
            Ok(Parsed::Record { offset: 4096, .. })
        ));
    }

    #[test]
    fn a_header_line_holding_a_record_is_an_error_not_skipped() {
        let mut p = CsvParser::new(CsvSpec::systor());
        let mut key = Vec::new();
        let e = p
            .parse(
                b"1456095145.133076000,0.000806000,R,0,899056122368,131072",
                &mut key,
            )
            .err()
            .unwrap();
        assert_eq!(e.field, "header");
        let mut p = CsvParser::new(CsvSpec::systor());
        assert!(matches!(
            p.parse(b"Timestamp,Response,IOType,LUN,Offset,Size", &mut key),
            Ok(Parsed::Skip)
        ));
        assert!(matches!(
            p.parse(
                b"1456095145.133076000,0.000806000,R,0,899056122368,131072",
                &mut key
            ),
            Ok(Parsed::Record { len: 131072, .. })
        ));
    }

    #[test]
    fn msr_line_decodes_units() {
        let mut p = CsvParser::new(CsvSpec::msr());
        let mut key = Vec::new();
        match p.parse(
            b"128166385295514663,hm,0,Write,9056014336,2048,2833",
            &mut key,
        ) {
            Ok(Parsed::Record {
                time,
                op,
                offset,
                len,
            }) => {
                assert_eq!(time, 128166385295514663 * 100);
                assert_eq!((op, offset, len), (Op::Write, 9056014336, 2048));
                assert_eq!(key, b"hm_0");
            }
            _ => panic!("not a record"),
        }
        let mut key = Vec::new();
        assert!(matches!(
            p.parse(b"1,hm,0,Erase,0,1,2", &mut key),
            Ok(Parsed::UnknownOp)
        ));
        assert_eq!(key, b"Erase");
        let e = p
            .parse(b"1,hm,0,Read,12x,1,2", &mut Vec::new())
            .err()
            .unwrap();
        assert_eq!(e.field, "offset");
        assert!(e.msg.contains("12x"));
        let e = p.parse(b"1,hm,0,Read", &mut Vec::new()).err().unwrap();
        assert_eq!(e.field, "columns");
    }
}
