//! Trace formats and their detection from the file name and content.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A trace format tiercache reads (and, for some, writes). Names are kebab-case in configs and on
/// the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// MSR Cambridge CSV (SNIA IOTTA 388).
    Msr,
    /// CloudPhysics vSCSI binary, version 1 or 2.
    Vscsi,
    /// SPC / UMass (Financial, WebSearch) CSV.
    Spc,
    /// FIU (homes, mail, web-vm) whitespace text.
    Fiu,
    /// Tencent CBS CSV.
    Tencent,
    /// Alibaba cloud block trace (2020) CSV.
    Alibaba,
    /// SYSTOR'17 VDI CSV with header.
    Systor,
    /// blkparse default text output.
    Blkparse,
    /// fio iolog version 2 or 3.
    FioIolog,
    /// libCacheSim oracleGeneral binary (24-byte records).
    OracleGeneral,
    /// tiercache's native binary format (memory mapped).
    Native,
    /// Generic CSV with a column and unit mapping (`--csv-map`, or `csv` in a config).
    Csv,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 12] = [
        Format::Msr,
        Format::Vscsi,
        Format::Spc,
        Format::Fiu,
        Format::Tencent,
        Format::Alibaba,
        Format::Systor,
        Format::Blkparse,
        Format::FioIolog,
        Format::OracleGeneral,
        Format::Native,
        Format::Csv,
    ];

    /// Kebab-case name, as in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Msr => "msr",
            Format::Vscsi => "vscsi",
            Format::Spc => "spc",
            Format::Fiu => "fiu",
            Format::Tencent => "tencent",
            Format::Alibaba => "alibaba",
            Format::Systor => "systor",
            Format::Blkparse => "blkparse",
            Format::FioIolog => "fio-iolog",
            Format::OracleGeneral => "oracle-general",
            Format::Native => "native",
            Format::Csv => "csv",
        }
    }

    /// Whether [`crate::writer`] can write this format.
    pub fn writable(self) -> bool {
        matches!(
            self,
            Format::Native | Format::OracleGeneral | Format::FioIolog
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("unknown trace format `{s}` (known: {})", names.join(", "))
            })
    }
}

/// Magic bytes opening a native trace.
pub const NATIVE_MAGIC: &[u8; 8] = b"TCTRACE\0";

/// Format suggested by a file name alone (compression suffixes are ignored). Only names that are
/// unambiguous are recognised: `.tctrace`, `.vscsi`, `oracleGeneral`, `.iolog`, `.blkparse`.
pub fn format_from_name(path: &str) -> Option<Format> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let mut stem = name.as_str();
    for ext in [".gz", ".bz2", ".xz", ".zst", ".zstd"] {
        if let Some(s) = stem.strip_suffix(ext) {
            stem = s;
            break;
        }
    }
    if stem.ends_with(".tctrace") {
        Some(Format::Native)
    } else if stem.ends_with(".vscsi") {
        Some(Format::Vscsi)
    } else if stem.contains("oraclegeneral") || stem.contains("oracle-general") {
        Some(Format::OracleGeneral)
    } else if stem.ends_with(".iolog") {
        Some(Format::FioIolog)
    } else if stem.ends_with(".blkparse") {
        Some(Format::Blkparse)
    } else {
        None
    }
}

/// Format recognised from the first bytes of the (decompressed) content, then from the name.
///
/// Content wins for self-describing starts (native magic, fio iolog header, SYSTOR header); the
/// name decides next; the shape of the first data line decides last.
pub fn detect(path: &str, head: &[u8]) -> Option<Format> {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if head.starts_with(NATIVE_MAGIC) {
        return Some(Format::Native);
    }
    if head.starts_with(b"fio version 2 iolog") || head.starts_with(b"fio version 3 iolog") {
        return Some(Format::FioIolog);
    }
    if head.starts_with(b"Timestamp,Response,IOType,LUN,Offset,Size") {
        return Some(Format::Systor);
    }
    if let Some(f) = format_from_name(path) {
        return Some(f);
    }
    if looks_binary(head) {
        return sniff_binary(head);
    }
    // The first line may itself be odd (an unknown opcode, a comment): try the first few.
    head.split(|&c| c == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(|c| c.is_ascii_whitespace()))
        .take(16)
        .find_map(sniff_text_line)
}

fn looks_binary(head: &[u8]) -> bool {
    head.iter()
        .take(512)
        .any(|&c| c == 0 || (c < 0x20 && !matches!(c, b'\n' | b'\r' | b'\t')))
}

fn sniff_binary(head: &[u8]) -> Option<Format> {
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let v1 = head.chunks_exact(32).take(8).collect::<Vec<_>>();
    if !v1.is_empty() && v1.iter().all(|r| u16_at(r, 14) >> 8 == 1) {
        return Some(Format::Vscsi);
    }
    let v2 = head.chunks_exact(40).take(8).collect::<Vec<_>>();
    if !v2.is_empty() && v2.iter().all(|r| u16_at(r, 2) >> 8 == 2) {
        return Some(Format::Vscsi);
    }
    // oracleGeneral: next_access_vtime is -1 or a 1-based index beyond the record's own.
    let og = head.chunks_exact(24).take(64).collect::<Vec<_>>();
    let plausible = og.iter().enumerate().all(|(i, r)| {
        let next = i64::from_le_bytes(r[16..24].try_into().expect("8 bytes"));
        next == -1 || next > i as i64 + 1
    });
    if !og.is_empty() && plausible {
        return Some(Format::OracleGeneral);
    }
    None
}

fn is_int(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

fn is_decimal(b: &[u8]) -> bool {
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_digit() || *c == b'.')
        && b.iter().any(u8::is_ascii_digit)
}

fn sniff_text_line(line: &[u8]) -> Option<Format> {
    let ws: Vec<&[u8]> = crate::parse::split_ws(line).collect();
    if let Some(dev) = ws.first() {
        let mut parts = dev.split(|&c| c == b',');
        if ws.len() >= 7
            && parts.next().is_some_and(is_int)
            && parts.next().is_some_and(is_int)
            && parts.next().is_none()
        {
            return Some(Format::Blkparse);
        }
    }
    if ws.len() >= 9 && is_int(ws[0]) && is_int(ws[1]) && matches!(ws[ws.len() - 4], b"R" | b"W") {
        return Some(Format::Fiu);
    }
    let f: Vec<&[u8]> = line.split(|&c| c == b',').map(crate::parse::trim).collect();
    if f.len() == 7 && matches!(f[3], b"Read" | b"Write") && is_int(f[0]) {
        return Some(Format::Msr);
    }
    if f.len() == 5 && matches!(f[1], b"R" | b"W") && is_int(f[2]) && is_int(f[3]) && is_int(f[4]) {
        return Some(Format::Alibaba);
    }
    if f.len() == 5 && f.iter().all(|x| is_int(x)) && matches!(f[3], b"0" | b"1") {
        return Some(Format::Tencent);
    }
    if f.len() >= 5
        && is_int(f[0])
        && is_int(f[1])
        && is_int(f[2])
        && matches!(f[3], b"r" | b"R" | b"w" | b"W")
        && is_decimal(f[4])
    {
        return Some(Format::Spc);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
        assert!("nope".parse::<Format>().is_err());
    }

    #[test]
    fn detects_text_lines() {
        let cases: [(&[u8], Format); 7] = [
            (
                b"128166385295514663,hm,0,Write,9056014336,2048,2833\n",
                Format::Msr,
            ),
            (b"1538323200,4247200,128,1,1058\n", Format::Tencent),
            (b"419,W,1801400320,4096,1577808000000061\n", Format::Alibaba),
            (b"0,20941264,8192,W,0.551706\n", Format::Spc),
            (
                b"89966527833596 4655 syslogd 21367904 8 W 6 0 531cd7d8f8e3f5a0e92e5a2e8e2e0fd8\n",
                Format::Fiu,
            ),
            (
                b"  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n",
                Format::Blkparse,
            ),
            (b"fio version 3 iolog\n0 /dev/sdb add\n", Format::FioIolog),
        ];
        for (text, want) in cases {
            assert_eq!(
                detect("x", text),
                Some(want),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        assert_eq!(detect("x", b"hello world\n"), None);
    }

    #[test]
    fn names_hint_formats() {
        assert_eq!(format_from_name("/a/b/w.vscsi"), Some(Format::Vscsi));
        assert_eq!(
            format_from_name("t.oracleGeneral.bin.zst"),
            Some(Format::OracleGeneral)
        );
        assert_eq!(format_from_name("x.tctrace"), Some(Format::Native));
        assert_eq!(format_from_name("x.iolog.gz"), Some(Format::FioIolog));
        assert_eq!(format_from_name("x.csv"), None);
    }
}
