//! Line splitting over a (possibly decompressing) byte stream, reusing one buffer.

use std::io::{self, Read};

/// Yields the lines of a stream as byte slices into an internal buffer (no allocation per line),
/// with their 1-based numbers. A trailing `\r` is removed; a last line without `\n` is returned.
pub(crate) struct LineSource {
    inner: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    line_no: u64,
}

const CHUNK: usize = 1 << 18;

impl LineSource {
    pub(crate) fn new(inner: Box<dyn Read + Send>) -> Self {
        Self {
            inner,
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            eof: false,
            line_no: 0,
        }
    }

    /// Number of the line last returned.
    pub(crate) fn line_no(&self) -> u64 {
        self.line_no
    }

    /// Next line, or `None` at the end of the stream.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some(pos) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                let e = s + pos;
                self.start = e + 1;
                self.line_no += 1;
                let line = strip_cr(&self.buf[s..e]);
                // A UTF-8 byte-order mark before the first line is not data.
                if self.line_no == 1 {
                    return Ok(Some(line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)));
                }
                return Ok(Some(line));
            }
            if self.eof {
                if self.start < self.end {
                    let s = self.start;
                    let e = self.end;
                    self.start = e;
                    self.line_no += 1;
                    let line = strip_cr(&self.buf[s..e]);
                    if self.line_no == 1 {
                        return Ok(Some(line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)));
                    }
                    return Ok(Some(line));
                }
                return Ok(None);
            }
            self.refill()?;
        }
    }

    fn refill(&mut self) -> io::Result<()> {
        // Move the partial line to the front, grow only if one line fills the whole buffer.
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let n = self.buf.len() * 2;
            self.buf.resize(n, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[inline]
fn strip_cr(l: &[u8]) -> &[u8] {
    match l {
        [rest @ .., b'\r'] => rest,
        _ => l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader returning one byte per call, to exercise lines split across refills.
    struct Trickle(Vec<u8>, usize);
    impl Read for Trickle {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            if self.1 >= self.0.len() || b.is_empty() {
                return Ok(0);
            }
            b[0] = self.0[self.1];
            self.1 += 1;
            Ok(1)
        }
    }

    fn collect(src: &mut LineSource) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(l) = src.next_line().unwrap() {
            v.push(l.to_vec());
        }
        v
    }

    #[test]
    fn lines_with_crlf_and_no_final_newline() {
        let mut s = LineSource::new(Box::new(Trickle(b"\xEF\xBB\xBFa,b\r\n\nlast".to_vec(), 0)));
        assert_eq!(
            collect(&mut s),
            vec![b"a,b".to_vec(), vec![], b"last".to_vec()]
        );
        assert_eq!(s.line_no(), 3);
    }

    #[test]
    fn long_lines_grow_the_buffer() {
        let long = vec![b'x'; CHUNK * 3 + 5];
        let mut data = long.clone();
        data.extend_from_slice(b"\nshort\n");
        let mut s = LineSource::new(Box::new(io::Cursor::new(data)));
        assert_eq!(collect(&mut s), vec![long, b"short".to_vec()]);
    }
}
