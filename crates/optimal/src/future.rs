//! The next use of every line access, by a backward pass over a spilled index.
//!
//! Forward, each access is numbered (its position in the trace's line-access order) and its
//! line given a dense id; the ids go to an anonymous temporary file, 4 bytes an access. Then
//! the file is read backwards in fixed-size chunks, keeping per line only the position of its
//! latest-seen (that is, next) access and next write, and each access's next uses are written at
//! its place in a second file, 16 bytes an access. Memory: the key-to-id map while numbering,
//! then two `u64` per distinct line, and the chunk buffers; the trace's length is on disk only.

use crate::{LineAccess, OptimalError, NEVER};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use tiercache_core::LineKey;

/// Accesses a chunk of the backward pass holds.
const CHUNK: usize = 1 << 16;
/// Ids are below this (the top bit of a spilled id marks a write).
const MAX_DISTINCT: u64 = 1 << 31;
const WRITE_BIT: u32 = 1 << 31;
/// Bytes of one access's next uses in the spill.
const NEXT_BYTES: usize = 16;

/// One line access with its future: what an offline policy knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Future {
    /// Dense id of the line (0 .. [`FutureIndex::distinct`]), in order of first access.
    pub id: u32,
    /// Whether this access writes the line.
    pub write: bool,
    /// Position of the next access to the line, or [`NEVER`].
    pub next: u64,
    /// Position of the next write to the line, or [`NEVER`].
    pub next_write: u64,
}

impl Future {
    /// Whether the next access to the line is a read (so holding the line until then saves a
    /// backend read).
    pub fn next_is_read(&self) -> bool {
        self.next != NEVER && self.next != self.next_write
    }
}

/// Numbers line accesses as they come (see [`FutureIndex::builder`]).
pub struct FutureIndexBuilder {
    ids: FxHashMap<LineKey, u32>,
    out: BufWriter<File>,
    len: u64,
}

impl FutureIndexBuilder {
    /// Appends the next line access.
    pub fn push(&mut self, a: LineAccess) -> Result<(), OptimalError> {
        let next_id = self.ids.len() as u64;
        let id = match self.ids.get(&a.key) {
            Some(&id) => id,
            None if next_id >= MAX_DISTINCT => return Err(OptimalError::Footprint(MAX_DISTINCT)),
            None => {
                self.ids.insert(a.key, next_id as u32);
                next_id as u32
            }
        };
        let word = id | if a.write { WRITE_BIT } else { 0 };
        self.out.write_all(&word.to_le_bytes())?;
        self.len += 1;
        Ok(())
    }

    /// Line accesses pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs the backward pass: the index of every access pushed.
    pub fn finish(self) -> Result<FutureIndex, OptimalError> {
        let distinct = self.ids.len();
        drop(self.ids);
        let ids = self.out.into_inner().map_err(|e| e.into_error())?;
        let nexts = tempfile::tempfile()?;
        nexts.set_len(self.len * NEXT_BYTES as u64)?;
        let mut last = vec![NEVER; distinct];
        let mut last_write = vec![NEVER; distinct];
        let mut words = vec![0u8; CHUNK * 4];
        let mut out = vec![0u8; CHUNK * NEXT_BYTES];
        let mut end = self.len;
        while end > 0 {
            let start = end.saturating_sub(CHUNK as u64);
            let n = (end - start) as usize;
            ids.read_exact_at(&mut words[..n * 4], start * 4)?;
            for i in (0..n).rev() {
                let word = u32::from_le_bytes(words[i * 4..i * 4 + 4].try_into().unwrap());
                let id = (word & !WRITE_BIT) as usize;
                let at = start + i as u64;
                let rec = &mut out[i * NEXT_BYTES..(i + 1) * NEXT_BYTES];
                rec[..8].copy_from_slice(&last[id].to_le_bytes());
                rec[8..].copy_from_slice(&last_write[id].to_le_bytes());
                last[id] = at;
                if word & WRITE_BIT != 0 {
                    last_write[id] = at;
                }
            }
            nexts.write_all_at(&out[..n * NEXT_BYTES], start * NEXT_BYTES as u64)?;
            end = start;
        }
        Ok(FutureIndex {
            ids,
            nexts,
            len: self.len,
            distinct: distinct as u32,
        })
    }
}

/// Every line access of a trace with its next uses, spilled to two anonymous temporary files
/// (deleted when this is dropped).
pub struct FutureIndex {
    ids: File,
    nexts: File,
    len: u64,
    distinct: u32,
}

impl FutureIndex {
    /// An empty builder; push the accesses in trace order, then [`FutureIndexBuilder::finish`].
    pub fn builder() -> Result<FutureIndexBuilder, OptimalError> {
        Ok(FutureIndexBuilder {
            ids: FxHashMap::default(),
            out: BufWriter::with_capacity(1 << 16, tempfile::tempfile()?),
            len: 0,
        })
    }

    /// The index of `accesses` (tests, small inputs).
    pub fn from_accesses(
        accesses: impl IntoIterator<Item = LineAccess>,
    ) -> Result<Self, OptimalError> {
        let mut b = Self::builder()?;
        for a in accesses {
            b.push(a)?;
        }
        b.finish()
    }

    /// Line accesses indexed.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no access was indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Distinct lines accessed (the footprint, in lines).
    pub fn distinct(&self) -> u32 {
        self.distinct
    }

    /// Reads the accesses in order, from the start (any number of readers, one after another
    /// or at once).
    pub fn reader(&self) -> Result<FutureReader, OptimalError> {
        let ids = self.ids.try_clone()?;
        let nexts = self.nexts.try_clone()?;
        Ok(FutureReader {
            ids: BufReader::with_capacity(1 << 16, ReadAt::new(ids)),
            nexts: BufReader::with_capacity(1 << 18, ReadAt::new(nexts)),
            left: self.len,
        })
    }

    /// Every access, in memory (tests).
    pub fn to_vec(&self) -> Result<Vec<Future>, OptimalError> {
        let mut r = self.reader()?;
        let mut v = Vec::with_capacity(self.len as usize);
        while let Some(f) = r.next_future()? {
            v.push(f);
        }
        Ok(v)
    }
}

/// A file read sequentially by position, so that several readers of one file (clones share
/// a cursor) do not disturb each other.
struct ReadAt {
    file: File,
    at: u64,
}

impl ReadAt {
    fn new(file: File) -> Self {
        Self { file, at: 0 }
    }
}

impl Read for ReadAt {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The accesses of a [`FutureIndex`] in trace order.
pub struct FutureReader {
    ids: BufReader<ReadAt>,
    nexts: BufReader<ReadAt>,
    left: u64,
}

impl FutureReader {
    /// The next access, `None` after the last.
    #[inline]
    pub fn next_future(&mut self) -> Result<Option<Future>, OptimalError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let mut w = [0u8; 4];
        self.ids.read_exact(&mut w)?;
        let mut n = [0u8; NEXT_BYTES];
        self.nexts.read_exact(&mut n)?;
        let word = u32::from_le_bytes(w);
        Ok(Some(Future {
            id: word & !WRITE_BIT,
            write: word & WRITE_BIT != 0,
            next: u64::from_le_bytes(n[..8].try_into().unwrap()),
            next_write: u64::from_le_bytes(n[8..].try_into().unwrap()),
        }))
    }

    /// Accesses not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(k: u64, write: bool) -> LineAccess {
        LineAccess {
            key: LineKey(k),
            write,
        }
    }

    #[test]
    fn next_uses_match_a_forward_scan_across_chunks() {
        // Longer than one chunk so the backward pass crosses chunk boundaries.
        let n = CHUNK * 2 + 123;
        let trace: Vec<LineAccess> = (0..n)
            .map(|i| acc((i as u64 * 7919) % 1001, i % 5 == 0))
            .collect();
        let idx = FutureIndex::from_accesses(trace.iter().copied()).unwrap();
        assert_eq!(idx.len(), n as u64);
        assert_eq!(idx.distinct(), 1001);
        let got = idx.to_vec().unwrap();
        for (i, f) in got.iter().enumerate().step_by(97) {
            let next = (i + 1..n).find(|&j| trace[j].key == trace[i].key);
            let next_write = (i + 1..n).find(|&j| trace[j].key == trace[i].key && trace[j].write);
            assert_eq!(f.next, next.map_or(NEVER, |j| j as u64), "access {i}");
            assert_eq!(f.next_write, next_write.map_or(NEVER, |j| j as u64));
            assert_eq!(f.write, trace[i].write);
        }
        // Ids are dense, in order of first access.
        assert_eq!(got[0].id, 0);
        assert!(got.iter().all(|f| f.id < 1001));
    }

    #[test]
    fn two_readers_at_once_each_see_the_whole_index() {
        let idx = FutureIndex::from_accesses([acc(1, false), acc(2, true), acc(1, true)]).unwrap();
        let mut a = idx.reader().unwrap();
        let mut b = idx.reader().unwrap();
        let fa = a.next_future().unwrap().unwrap();
        let fb = b.next_future().unwrap().unwrap();
        assert_eq!(fa, fb);
        assert_eq!(fa.next, 2);
        assert_eq!(fa.next_write, 2);
        assert!(!fa.next_is_read());
        assert_eq!(a.remaining(), 2);
    }
}
