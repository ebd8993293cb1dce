//! The lines a trace touches, with whether each was read and written, for its footprint.
//!
//! A set of line keys in a hash map costs a cache miss per access once it outgrows the caches
//! (a 10M-record trace over a million lines spent 80% of `trace stats` probing one). Traces
//! touch lines in runs and hot regions, so the lines are kept in chunks of 64 neighbouring
//! lines: one map entry holds a chunk's read bits and written bits. A dense trace then needs a
//! map 64 times smaller, which stays in the caches; a trace whose lines are all far apart costs
//! one entry per line, as before (24 bytes instead of 16).

use rustc_hash::FxHashMap;

/// Lines per chunk (one bit each in a `u64`).
const CHUNK: u64 = 64;

/// Read and written bits of chunks of neighbouring line keys.
#[derive(Debug, Default, Clone)]
pub struct LineBits {
    /// Chunk number (line key / 64) → (read bits, written bits).
    chunks: FxHashMap<u64, (u64, u64)>,
}

impl LineBits {
    /// Marks the consecutive keys `first..=last` (one request's lines) read or written, a chunk
    /// at a time.
    pub fn mark_range(&mut self, first: u64, last: u64, write: bool) {
        let mut k = first;
        while k <= last {
            let chunk = k / CHUNK;
            let hi = last.min(chunk * CHUNK + (CHUNK - 1));
            let (lo_bit, hi_bit) = (k % CHUNK, hi % CHUNK);
            let mask = (u64::MAX >> (CHUNK - 1 - hi_bit)) & (u64::MAX << lo_bit);
            let e = self.chunks.entry(chunk).or_insert((0, 0));
            if write {
                e.1 |= mask;
            } else {
                e.0 |= mask;
            }
            if hi == u64::MAX {
                break;
            }
            k = hi + 1;
        }
    }

    /// Lines touched per chunk: `(first key of the chunk, lines touched in it)`, no order. A
    /// chunk never spans two volumes (a volume's keys start at a multiple of 2^48).
    pub fn chunk_counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.chunks
            .iter()
            .map(|(&chunk, &(r, w))| (chunk * CHUNK, u64::from((r | w).count_ones())))
    }

    /// Every line touched with its `(read, written)` flags, chunk by chunk (no order).
    #[cfg(test)]
    fn lines(&self) -> impl Iterator<Item = (u64, bool, bool)> + '_ {
        self.chunks.iter().flat_map(|(&chunk, &(r, w))| {
            let mut any = r | w;
            std::iter::from_fn(move || {
                if any == 0 {
                    return None;
                }
                let b = any.trailing_zeros() as u64;
                any &= any - 1;
                Some((chunk * CHUNK + b, r >> b & 1 == 1, w >> b & 1 == 1))
            })
        })
    }

    /// Distinct lines touched, read, and written.
    pub fn counts(&self) -> (u64, u64, u64) {
        self.chunks
            .values()
            .fold((0, 0, 0), |(all, rd, wr), &(r, w)| {
                (
                    all + u64::from((r | w).count_ones()),
                    rd + u64::from(r.count_ones()),
                    wr + u64::from(w.count_ones()),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a plain map of key → (read, written) on random ranges, dense and sparse,
        /// across chunk edges and up to the end of the key space.
        #[test]
        fn agrees_with_a_plain_map(
            ops in proptest::collection::vec(
                (prop_oneof![0u64..300, (u64::MAX - 200)..=u64::MAX, any::<u64>()], 0u64..140, any::<bool>()),
                0..200,
            )
        ) {
            let mut bits = LineBits::default();
            let mut model: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
            for (first, len, write) in ops {
                let last = first.saturating_add(len);
                bits.mark_range(first, last, write);
                for k in first..=last {
                    let e = model.entry(k).or_default();
                    if write { e.1 = true } else { e.0 = true }
                }
            }
            let mut got: Vec<(u64, bool, bool)> = bits.lines().collect();
            got.sort_unstable();
            let want: Vec<(u64, bool, bool)> =
                model.iter().map(|(&k, &(r, w))| (k, r, w)).collect();
            prop_assert_eq!(&got, &want);
            let (all, rd, wr) = bits.counts();
            prop_assert_eq!(all, want.len() as u64);
            // Per chunk, the lines of the model that fall in it.
            for (first, n) in bits.chunk_counts() {
                let inside = want.iter().filter(|x| x.0 / CHUNK == first / CHUNK).count();
                prop_assert_eq!(n, inside as u64);
            }
            prop_assert_eq!(rd, want.iter().filter(|x| x.1).count() as u64);
            prop_assert_eq!(wr, want.iter().filter(|x| x.2).count() as u64);
        }
    }
}
