//! Whitespace-separated text formats: FIU, blkparse output and fio iologs.

use crate::parse::{parse_scaled, parse_u64, show, split_ws};
use crate::reader::{FieldError, LineParser, Parsed};
use serde::{Deserialize, Serialize};
use tiercache_core::Op;

const SECTOR: u64 = 512;

fn int(field: &'static str, b: &[u8]) -> Result<u64, FieldError> {
    parse_u64(b).map_err(|m| FieldError::new(field, format!("`{}`: {m}", show(b))))
}

fn sectors(field: &'static str, b: &[u8]) -> Result<u64, FieldError> {
    int(field, b)?
        .checked_mul(SECTOR)
        .ok_or_else(|| FieldError::new(field, format!("`{}`: out of range", show(b))))
}

/// FIU: `ts_ns pid process lba size op major minor md5`; lba and size in sectors. The process
/// name may contain spaces, so fields after it are taken from the end of the line.
#[derive(Default)]
pub(crate) struct FiuParser {
    tokens: Vec<(usize, usize)>,
}

fn ws_ranges(line: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut start = None;
    for (i, &c) in line.iter().enumerate() {
        let sep = c == b' ' || c == b'\t';
        match (start, sep) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, line.len()));
    }
}

impl LineParser for FiuParser {
    fn parse(&mut self, line: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        ws_ranges(line, &mut self.tokens);
        let n = self.tokens.len();
        if n == 0 {
            return Ok(Parsed::Skip);
        }
        if n < 9 {
            return Err(FieldError::new(
                "fields",
                format!("{n} fields, need 9 (ts pid process lba size op major minor md5)"),
            ));
        }
        let t = |i: usize| &line[self.tokens[i].0..self.tokens[i].1];
        let time = int("ts", t(0))?;
        int("pid", t(1))?;
        let op = match t(n - 4) {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            other => {
                key.extend_from_slice(other);
                return Ok(Parsed::UnknownOp);
            }
        };
        let offset = sectors("lba", t(n - 6))?;
        let len = sectors("size", t(n - 5))?;
        int("major", t(n - 3))?;
        int("minor", t(n - 2))?;
        key.extend_from_slice(t(n - 3));
        key.push(b':');
        key.extend_from_slice(t(n - 2));
        Ok(Parsed::Record {
            time,
            op,
            offset,
            len,
        })
    }

    fn unix_base_ns(&self) -> Option<i128> {
        None
    }
}

/// The blkparse action kept: each I/O appears once per stage it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlkAction {
    /// `Q`: the I/O arrives at the block layer (the application's view).
    Queue,
    /// `D`: issued to the driver (after merging and scheduling).
    Issue,
    /// `C`: completed.
    Complete,
}

impl BlkAction {
    fn code(self) -> &'static [u8] {
        match self {
            BlkAction::Queue => b"Q",
            BlkAction::Issue => b"D",
            BlkAction::Complete => b"C",
        }
    }
}

/// blkparse default output: `maj,min cpu seq sec.nsec pid action RWBS sector + nsectors [comm]`.
pub(crate) struct BlkparseParser {
    action: BlkAction,
    in_summary: bool,
    tokens: Vec<(usize, usize)>,
}

impl BlkparseParser {
    pub(crate) fn new(action: BlkAction) -> Self {
        Self {
            action,
            in_summary: false,
            tokens: Vec::new(),
        }
    }
}

fn is_device(b: &[u8]) -> bool {
    let mut parts = b.split(|&c| c == b',');
    let ok =
        |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

impl LineParser for BlkparseParser {
    fn parse(&mut self, line: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        let Some(first) = split_ws(line).next() else {
            return Ok(Parsed::Skip);
        };
        if self.in_summary {
            if !is_device(first) {
                return Ok(Parsed::Skip);
            }
            // Events again (blkparse outputs joined end to end): no summary line starts with
            // `major,minor`.
            self.in_summary = false;
        }
        if !is_device(first) {
            // blkparse closes with per-CPU and total summaries: their lines are skipped up to
            // the next event, if any.
            if [&b"CPU"[..], b"Total", b"Throughput", b"Events", b"Skips"]
                .iter()
                .any(|p| first.starts_with(p))
            {
                self.in_summary = true;
                return Ok(Parsed::Skip);
            }
            return Err(FieldError::new(
                "device",
                format!("`{}` is not major,minor", show(first)),
            ));
        }
        ws_ranges(line, &mut self.tokens);
        if self.tokens.len() < 6 {
            return Err(FieldError::new(
                "fields",
                format!("{} fields, need at least 6", self.tokens.len()),
            ));
        }
        let t = |i: usize| &line[self.tokens[i].0..self.tokens[i].1];
        if t(5) != self.action.code() {
            return Ok(Parsed::Skip);
        }
        if self.tokens.len() < 7 {
            return Err(FieldError::new("rwbs", "missing"));
        }
        let time = parse_scaled(t(3), 1_000_000_000)
            .map_err(|m| FieldError::new("time", format!("`{}`: {m}", show(t(3)))))?;
        let rwbs = t(6);
        let has = |c: u8| rwbs.contains(&c);
        // Flushes and some barriers carry no `sector + nsectors`.
        let range = if self.tokens.len() >= 10 && t(8) == b"+" {
            Some((sectors("sector", t(7))?, sectors("nsectors", t(9))?))
        } else {
            None
        };
        // A leading F is a pre-flush: with no data (`FWS` alone, or 0 sectors) it is a flush.
        let empty = !matches!(range, Some((_, len)) if len > 0);
        let op = if rwbs.first() == Some(&b'F') && empty {
            Op::Flush
        } else if has(b'D') {
            Op::Trim
        } else if has(b'W') {
            Op::Write
        } else if has(b'R') {
            Op::Read
        } else {
            key.extend_from_slice(rwbs);
            return Ok(Parsed::UnknownOp);
        };
        let (offset, len) = match range {
            Some(r) => r,
            None if op == Op::Flush => (0, 0),
            None => return Err(FieldError::new("sector", "missing `sector + nsectors`")),
        };
        key.extend_from_slice(t(0));
        Ok(Parsed::Record {
            time,
            op,
            offset,
            len,
        })
    }

    fn unix_base_ns(&self) -> Option<i128> {
        None
    }
}

/// fio iolog v2 (`FILE action [OFFSET LENGTH]`, `FILE wait USEC`) and v3 (each line prefixed
/// with µs since job start). The file name is the volume key.
#[derive(Default)]
pub(crate) struct FioParser {
    version: Option<u8>,
    /// v2: accumulated `wait` time in ns.
    clock_ns: u64,
}

impl LineParser for FioParser {
    fn parse(&mut self, line: &[u8], key: &mut Vec<u8>) -> Result<Parsed, FieldError> {
        let Some(version) = self.version else {
            self.version = Some(match line {
                b"fio version 2 iolog" => 2,
                b"fio version 3 iolog" => 3,
                _ => {
                    return Err(FieldError::new(
                        "header",
                        format!("`{}` is not `fio version 2|3 iolog`", show(line)),
                    ))
                }
            });
            return Ok(Parsed::Skip);
        };
        let mut tok = split_ws(line);
        let Some(first) = tok.next() else {
            return Ok(Parsed::Skip);
        };
        let (time, file) = if version == 3 {
            let us = int("timestamp", first)?;
            let t = us
                .checked_mul(1000)
                .ok_or_else(|| FieldError::new("timestamp", "out of range"))?;
            (
                t,
                tok.next()
                    .ok_or_else(|| FieldError::new("file", "missing"))?,
            )
        } else {
            (self.clock_ns, first)
        };
        let action = tok
            .next()
            .ok_or_else(|| FieldError::new("action", "missing"))?;
        let op = match action {
            b"read" => Op::Read,
            b"write" => Op::Write,
            b"trim" => Op::Trim,
            b"sync" | b"datasync" | b"sync_file_range" => Op::Flush,
            b"add" | b"open" | b"close" => return Ok(Parsed::Skip),
            b"wait" => {
                let us = int(
                    "usec",
                    tok.next()
                        .ok_or_else(|| FieldError::new("usec", "missing"))?,
                )?;
                if version == 2 {
                    self.clock_ns = self.clock_ns.saturating_add(us.saturating_mul(1000));
                }
                return Ok(Parsed::Skip);
            }
            other => {
                key.extend_from_slice(other);
                return Ok(Parsed::UnknownOp);
            }
        };
        let (offset, len) = match (tok.next(), tok.next()) {
            (Some(o), Some(l)) => (int("offset", o)?, int("length", l)?),
            (None, _) if op == Op::Flush => (0, 0),
            _ => return Err(FieldError::new("offset", "missing `OFFSET LENGTH`")),
        };
        key.extend_from_slice(file);
        Ok(Parsed::Record {
            time,
            op,
            offset,
            len,
        })
    }

    fn unix_base_ns(&self) -> Option<i128> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded line: the record (if any) and the key buffer.
    type Decoded = Result<(Option<(u64, Op, u64, u64)>, String), FieldError>;

    fn parse(p: &mut dyn LineParser, line: &str) -> Decoded {
        let mut key = Vec::new();
        let r = p.parse(line.as_bytes(), &mut key)?;
        let rec = match r {
            Parsed::Record {
                time,
                op,
                offset,
                len,
            } => Some((time, op, offset, len)),
            Parsed::Skip | Parsed::UnknownOp => None,
        };
        Ok((rec, String::from_utf8(key).unwrap()))
    }

    fn field_of(r: Decoded) -> &'static str {
        match r {
            Err(e) => e.field,
            Ok(x) => panic!("parsed {x:?}"),
        }
    }

    #[test]
    fn fiu_errors_name_fields() {
        let mut p = FiuParser::default();
        assert_eq!(field_of(parse(&mut p, "1 2 proc 3 4 R 6")), "fields");
        assert_eq!(field_of(parse(&mut p, "x 2 proc 3 4 R 6 0 md5")), "ts");
        assert_eq!(field_of(parse(&mut p, "1 2 proc 3z 4 R 6 0 md5")), "lba");
        assert_eq!(field_of(parse(&mut p, "1 2 proc 3 4 R 6 q md5")), "minor");
        assert_eq!(parse(&mut p, "   ").unwrap(), (None, String::new()));
    }

    #[test]
    fn blkparse_errors_and_summary() {
        let mut p = BlkparseParser::new(BlkAction::Queue);
        assert_eq!(
            field_of(parse(&mut p, "sda 3 1 0.1 697 Q W 1 + 8 [x]")),
            "device"
        );
        assert_eq!(
            field_of(parse(&mut p, "8,0 3 1 0.x 697 Q W 1 + 8 [x]")),
            "time"
        );
        assert_eq!(
            field_of(parse(&mut p, "8,0 3 1 0.1 697 Q W 1 8 [x]")),
            "sector"
        );
        assert_eq!(
            field_of(parse(&mut p, "8,0 3 1 0.1 697 Q W 1 + n [x]")),
            "nsectors"
        );
        let (rec, key) = parse(&mut p, "259,0 3 1 1.5 697 Q FWFS 8 + 8 [x]").unwrap();
        assert_eq!(rec, Some((1_500_000_000, Op::Write, 4096, 4096)));
        assert_eq!(key, "259,0");
        assert_eq!(parse(&mut p, "Total (8,0):").unwrap().0, None);
        // Summary lines of any shape are skipped; an event after them (a second blkparse
        // output joined on) is read, not dropped.
        for line in [
            " Reads Queued:   2,   8KiB",
            "Throughput (R/W): 0KiB/s / 8KiB/s",
            "",
        ] {
            assert_eq!(parse(&mut p, line).unwrap().0, None, "{line}");
        }
        assert_eq!(
            parse(&mut p, "8,0 3 1 0.1 697 Q W 1 + 8 [x]").unwrap().0,
            Some((100_000_000, Op::Write, 512, 4096))
        );
        assert_eq!(
            field_of(parse(&mut p, " Reads Queued:   2,   8KiB")),
            "device",
            "out of the summary again"
        );
    }

    #[test]
    fn fio_errors_name_fields() {
        let mut p = FioParser::default();
        assert_eq!(field_of(parse(&mut p, "fio version 9 iolog")), "header");
        let mut p = FioParser::default();
        parse(&mut p, "fio version 3 iolog").unwrap();
        assert_eq!(
            field_of(parse(&mut p, "abc /dev/sda read 0 1")),
            "timestamp"
        );
        assert_eq!(field_of(parse(&mut p, "5 /dev/sda")), "action");
        assert_eq!(field_of(parse(&mut p, "5 /dev/sda read 0")), "offset");
        assert_eq!(field_of(parse(&mut p, "5 /dev/sda read 0 -1")), "length");
        assert_eq!(
            parse(&mut p, "5 /dev/sda sync").unwrap(),
            (Some((5000, Op::Flush, 0, 0)), "/dev/sda".into())
        );
        let mut p = FioParser::default();
        parse(&mut p, "fio version 2 iolog").unwrap();
        assert_eq!(field_of(parse(&mut p, "/dev/sda wait")), "usec");
        assert_eq!(field_of(parse(&mut p, "/dev/sda wait x")), "usec");
    }
}
