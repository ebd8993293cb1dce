//! The whole OPT miss-ratio curve in one pass: Mattson's priority stack (Mattson, Gecsei,
//! Slutz and Traiger, 1970).
//!
//! OPT is a stack algorithm: with the right tie-breaking, the OPT cache of `c` lines holds the
//! top `c` entries of one stack ordered by priority (earlier next use first), so an access hits
//! in every cache at least as deep as its line's stack position (its OPT stack distance). On an
//! access at depth `d` (or a miss, `d` = the stack's size), the accessed line goes on top and
//! the lines above `d` are re-sorted by one downward sweep: a *carry* starts as the old top;
//! at each position the entry with the earlier next use stays and the other becomes the carry,
//! which finally fills position `d`. Only the positions where the carry changes move, and they
//! are the positions whose next use exceeds every one above: a max-segment-tree over stack
//! positions finds each in O(log F), F the footprint, so an access costs O((moves + 1) log F)
//! instead of O(d).
//!
//! The moves depend on the trace. Lines never used again stop a sweep (nothing comes after
//! them), but they sink to the bottom, and the live lines above tend to sort by next use, every
//! one a move: on a trace with many long-lived lines and many misses an access can cost
//! O(live lines). On the cloudphysics fixture (1.1 M line accesses over 269 K lines) this takes
//! minutes where [`crate::opt_misses_at`] at twenty sizes takes about a second, so `analyze`
//! uses the latter; this one is the all-sizes reference the tests hold the others to.

use crate::{FutureIndex, OptimalError, NEVER};

const NONE: u32 = u32::MAX;

/// OPT stack distances of a trace's line accesses, as a histogram: the OPT miss count at every
/// cache size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptCurve {
    accesses: u64,
    cold: u64,
    /// `hits_upto[c]`: accesses that hit in an OPT cache of `c` lines (`hits_upto[0] = 0`).
    hits_upto: Vec<u64>,
}

impl OptCurve {
    /// Line accesses.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// First accesses to a line (misses at every size).
    pub fn cold_misses(&self) -> u64 {
        self.cold
    }

    /// Distinct lines (beyond this size every non-cold access hits).
    pub fn footprint(&self) -> u64 {
        (self.hits_upto.len() - 1) as u64
    }

    /// Misses of Belady's MIN with a cache of `lines` lines.
    pub fn misses(&self, lines: u64) -> u64 {
        let c = lines.min(self.footprint()) as usize;
        self.accesses - self.hits_upto[c]
    }

    /// Miss ratio at `lines` lines (0 for an empty trace).
    pub fn miss_ratio(&self, lines: u64) -> f64 {
        if self.accesses == 0 {
            0.0
        } else {
            self.misses(lines) as f64 / self.accesses as f64
        }
    }
}

/// A max-segment-tree over stack positions: each leaf the next use of the line there.
struct MaxTree {
    size: usize,
    t: Vec<u64>,
}

impl MaxTree {
    fn new(n: usize) -> Self {
        let size = n.next_power_of_two().max(1);
        Self {
            size,
            t: vec![0; 2 * size],
        }
    }

    #[inline]
    fn set(&mut self, i: usize, v: u64) {
        let mut n = self.size + i;
        self.t[n] = v;
        while n > 1 {
            n /= 2;
            let m = self.t[2 * n].max(self.t[2 * n + 1]);
            if self.t[n] == m {
                break;
            }
            self.t[n] = m;
        }
    }

    /// The first position in `lo..hi` whose value exceeds `v`.
    fn first_greater(&self, lo: usize, hi: usize, v: u64) -> Option<usize> {
        if lo >= hi || v == NEVER {
            return None;
        }
        self.descend(1, 0, self.size, lo, hi, v)
    }

    fn descend(
        &self,
        node: usize,
        nlo: usize,
        nhi: usize,
        lo: usize,
        hi: usize,
        v: u64,
    ) -> Option<usize> {
        if nhi <= lo || nlo >= hi || self.t[node] <= v {
            return None;
        }
        if nhi - nlo == 1 {
            return Some(nlo);
        }
        let mid = (nlo + nhi) / 2;
        self.descend(2 * node, nlo, mid, lo, hi, v)
            .or_else(|| self.descend(2 * node + 1, mid, nhi, lo, hi, v))
    }
}

/// The OPT curve of every access of `index`, in one pass over it. Memory: about 24 bytes per
/// distinct line (the stack, each line's position and next use, the tree) plus 8 for the
/// histogram.
pub fn opt_curve(index: &FutureIndex) -> Result<OptCurve, OptimalError> {
    let f = index.distinct() as usize;
    let mut stack: Vec<u32> = Vec::with_capacity(f);
    let mut pos = vec![NONE; f];
    let mut next = vec![NEVER; f];
    let mut tree = MaxTree::new(f);
    // hist[d]: accesses found at depth d (0-based), that is hits from d + 1 lines up.
    let mut hist = vec![0u64; f + 1];
    let (mut accesses, mut cold) = (0u64, 0u64);
    let mut reader = index.reader()?;
    while let Some(a) = reader.next_future()? {
        accesses += 1;
        let x = a.id;
        let d = match pos[x as usize] {
            NONE => {
                cold += 1;
                stack.push(x);
                stack.len() - 1
            }
            d => {
                hist[d as usize] += 1;
                d as usize
            }
        };
        if d > 0 {
            let mut carry = stack[0];
            let mut i = 0;
            while let Some(j) = tree.first_greater(i + 1, d, next[carry as usize]) {
                let passed = stack[j];
                stack[j] = carry;
                pos[carry as usize] = j as u32;
                tree.set(j, next[carry as usize]);
                carry = passed;
                i = j;
            }
            stack[d] = carry;
            pos[carry as usize] = d as u32;
            tree.set(d, next[carry as usize]);
        }
        stack[0] = x;
        pos[x as usize] = 0;
        next[x as usize] = a.next;
        tree.set(0, a.next);
    }
    let mut hits_upto = Vec::with_capacity(f + 1);
    let mut sum = 0;
    hits_upto.push(0);
    for h in &hist[..f] {
        sum += h;
        hits_upto.push(sum);
    }
    Ok(OptCurve {
        accesses,
        cold,
        hits_upto,
    })
}
