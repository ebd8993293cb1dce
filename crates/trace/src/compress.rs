//! Compression detected by magic bytes: gzip, bzip2, xz and zstd.

use crate::error::TraceError;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};

/// Compression of a trace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    /// Plain bytes.
    None,
    /// gzip (`1f 8b`), including concatenated members.
    Gzip,
    /// bzip2 (`BZh`), including concatenated streams.
    Bzip2,
    /// xz (`fd 37 7a 58 5a 00`).
    Xz,
    /// zstd (`28 b5 2f fd`).
    Zstd,
}

impl Compression {
    /// Recognises compression from a file's first bytes.
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Opens `path` and returns its decompressed content as a stream, with the compression found.
pub fn open_decompressed(path: &str) -> Result<(Box<dyn Read + Send>, Compression), TraceError> {
    let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut buf = BufReader::with_capacity(1 << 16, file);
    let head = buf.fill_buf().map_err(|e| TraceError::io(path, e))?;
    let c = Compression::detect(head);
    let stream: Box<dyn Read + Send> = match c {
        Compression::None => Box::new(buf),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buf)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(buf)),
        Compression::Xz => Box::new(xz2::bufread::XzDecoder::new_multi_decoder(buf)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(buf).map_err(|e| TraceError::io(path, e))?,
        ),
    };
    Ok((stream, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes() {
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(Compression::detect(b"BZh91AY"), Compression::Bzip2);
        assert_eq!(
            Compression::detect(&[0xfd, b'7', b'z', b'X', b'Z', 0]),
            Compression::Xz
        );
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
        assert_eq!(Compression::detect(b"1281663852"), Compression::None);
        assert_eq!(Compression::detect(b""), Compression::None);
    }
}
