//! Exact LRU stack distances in O(log M) per access (M = distinct lines live in the window).
//!
//! Each line remembers the time of its latest access; marks over times (`Marks`) say which
//! times are some line's latest access. The stack distance of an access is one plus the number
//! of marks after the line's previous access: the distinct lines touched since, itself
//! included.
//!
//! Layout, chosen so that everything but the per-line map stays in the CPU caches:
//! - one bit per time, 64 times to a word (a million live lines need 256 KiB of bitmap);
//! - a count of marks per word, and a Fenwick tree of them (`u32`), 64 times smaller than a
//!   tree over times;
//! - the words from the current one back to [`Layout::open_words`] (32) before it are "open": not yet
//!   added to the tree, so setting the newest mark costs an `or` and an increment, and
//!   distances that start there (the hot lines' reuses) are counted by summing a few word
//!   counts, without the tree.
//!
//! When times run past the bitmap, live marks are renumbered densely by rank (compaction, in
//! place over the map, no sort), into a bitmap twice the live lines, so memory stays
//! proportional to the distinct lines, not the trace length.
//!
//! [`StackDistance`] is the stack over `u64` keys; [`Marks`] the time axis under it, with
//! several planes of marks, for callers keeping their own per-key times (SHARDS keeps sampled
//! lines and a class of them). The crate has no dependencies: the policy core's multi-tenant
//! analysis uses it without the trace analysis around it (`docs/design.md §4.10`).

#![warn(missing_docs)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Bitmap sizes of a [`Marks`] (and of a [`StackDistance`]). Results do not depend on them:
/// [`Layout::TINY`] only makes compaction frequent, for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Smallest bitmap, in words of 64 times.
    pub min_words: usize,
    /// Words appended after the committed prefix before they are added to the tree.
    pub open_words: usize,
}

impl Layout {
    /// The sizes for real use: 1024 words at least, 32 open.
    pub const DEFAULT: Layout = Layout {
        min_words: 1 << 10,
        open_words: 32,
    };
    /// Tiny bitmaps (4 words, 2 open), so that tests compact every few hundred accesses.
    /// A caller's unit tests select it with `cfg!(test)`, which does not reach this crate.
    pub const TINY: Layout = Layout {
        min_words: 4,
        open_words: 2,
    };
}

impl Default for Layout {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// FxHash of a `u64` key, as `rustc-hash` 2 computes it (a multiply, then a rotation so that
/// the table's bucket bits get the high bits): the map is `rustc-hash`'s `FxHashMap` as before
/// (the std map with this hasher), without the dependency. The per-key map is the hottest
/// structure; SipHash would cost more per access.
#[derive(Debug, Clone, Copy, Default)]
struct FxHasher64 {
    hash: u64,
}

impl Hasher for FxHasher64 {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; other writes are folded in 8 bytes at a time.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.hash = self
            .hash
            .wrapping_add(i)
            .wrapping_mul(0xf135_7aea_2e62_a9c5);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

/// A map keyed by `u64` with [`FxHasher64`].
type FxHashMap64<V> = HashMap<u64, V, BuildHasherDefault<FxHasher64>>;

/// Bits of a word strictly above bit `b`.
#[inline]
fn above(b: usize) -> u64 {
    // `2 << 63` is 0: nothing above the top bit.
    !((2u64 << b).wrapping_sub(1))
}

/// Marks on a time axis, in `C` planes: plane 0 holds every mark, plane `k > 0` a subset (a
/// class of marks). Times are `u32`, appended in order.
#[derive(Debug, Clone)]
pub struct Marks<const C: usize> {
    layout: Layout,
    bits: Vec<[u64; C]>,
    /// Marks per word.
    counts: Vec<[u32; C]>,
    /// Fenwick tree (1-based) of per-word counts, for words `< committed`.
    tree: Vec<[u32; C]>,
    /// Words below this are counted in `tree`; the rest are open.
    committed: usize,
    /// Marks in the committed words.
    committed_marks: [u64; C],
    now: u32,
    live: [u64; C],
}

impl<const C: usize> Default for Marks<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const C: usize> Marks<C> {
    /// An empty axis with the [`Layout::DEFAULT`] sizes.
    pub fn new() -> Self {
        Self::with_layout(Layout::DEFAULT)
    }

    /// An empty axis with the given bitmap sizes.
    pub fn with_layout(layout: Layout) -> Self {
        let min_words = layout.min_words.max(1);
        Self {
            layout,
            bits: vec![[0; C]; min_words],
            counts: vec![[0; C]; min_words],
            tree: vec![[0; C]; min_words + 1],
            committed: 0,
            committed_marks: [0; C],
            now: 0,
            live: [0; C],
        }
    }

    /// The time the next mark gets.
    #[inline]
    pub fn now(&self) -> u32 {
        self.now
    }

    /// Whether times ran past the bitmap: [`compact`](Self::compact) before the next push.
    #[inline]
    pub fn full(&self) -> bool {
        self.now as usize >= self.bits.len() * 64
    }

    /// Live marks per plane.
    #[inline]
    pub fn live(&self) -> [u64; C] {
        self.live
    }

    #[inline(always)]
    fn tree_add(&mut self, w: usize, delta: [u32; C]) {
        let mut i = w + 1;
        while i < self.tree.len() {
            for (t, d) in self.tree[i].iter_mut().zip(delta) {
                *t = t.wrapping_add(d);
            }
            i += i & i.wrapping_neg();
        }
    }

    /// Counts of words `0..i`.
    #[inline(always)]
    fn tree_prefix(&self, mut i: usize) -> [u64; C] {
        let mut s = [0u64; C];
        while i > 0 {
            for (s, &t) in s.iter_mut().zip(&self.tree[i]) {
                *s += t as u64;
            }
            i &= i - 1;
        }
        s
    }

    /// Changes the counts of the mark's word `w` by `delta` (per plane, wrapping).
    #[inline(always)]
    fn count(&mut self, w: usize, delta: [u32; C]) {
        for (c, d) in self.counts[w].iter_mut().zip(delta) {
            *c = c.wrapping_add(d);
        }
        if w < self.committed {
            for (m, d) in self.committed_marks.iter_mut().zip(delta) {
                *m = m.wrapping_add(d as i32 as i64 as u64);
            }
            self.tree_add(w, delta);
        }
    }

    /// Appends a mark in plane 0 and in each plane `k` with bit `k` of `planes` set; returns
    /// its time.
    #[inline(always)]
    pub fn push(&mut self, planes: u32) -> u32 {
        debug_assert!(!self.full());
        let t = self.now as usize;
        let w = t / 64;
        if t & 63 == 0 {
            // A new word: add the open words more than `open_words` behind it to the tree.
            while self.committed + self.layout.open_words < w {
                let c = self.counts[self.committed];
                self.tree_add(self.committed, c);
                for (m, c) in self.committed_marks.iter_mut().zip(c) {
                    *m += c as u64;
                }
                self.committed += 1;
            }
        }
        let mut delta = [0u32; C];
        for (k, ((x, live), d)) in self.bits[w]
            .iter_mut()
            .zip(&mut self.live)
            .zip(&mut delta)
            .enumerate()
        {
            if k == 0 || planes & (1 << k) != 0 {
                *x |= 1 << (t % 64);
                *live += 1;
                *d = 1;
            }
        }
        self.count(w, delta);
        self.now += 1;
        t as u32
    }

    /// Removes the mark at `p` from every plane.
    #[inline(always)]
    pub fn clear(&mut self, p: u32) {
        let (w, bit) = (p as usize / 64, 1u64 << (p % 64));
        let mut delta = [0u32; C];
        for ((x, d), live) in self.bits[w].iter_mut().zip(&mut delta).zip(&mut self.live) {
            if *x & bit != 0 {
                *x &= !bit;
                *d = u32::MAX; // −1
                *live -= 1;
            }
        }
        self.count(w, delta);
    }

    /// Adds the existing mark at `p` to plane `k`.
    pub fn set_plane(&mut self, p: u32, k: usize) {
        let (w, bit) = (p as usize / 64, 1u64 << (p % 64));
        debug_assert!(self.bits[w][0] & bit != 0);
        if self.bits[w][k] & bit == 0 {
            self.bits[w][k] |= bit;
            self.live[k] += 1;
            let mut delta = [0u32; C];
            delta[k] = 1;
            self.count(w, delta);
        }
    }

    /// Marks per plane at times `0..=p` (`p` below `now`).
    #[inline(always)]
    pub fn through(&self, p: u32) -> [u64; C] {
        let (w, b) = (p as usize / 64, p as usize % 64);
        let mut s = if w < self.committed {
            self.tree_prefix(w)
        } else {
            // The committed marks, then the open words before `w` by their counts.
            let mut s = self.committed_marks;
            for c in &self.counts[self.committed..w] {
                for (s, &c) in s.iter_mut().zip(c) {
                    *s += c as u64;
                }
            }
            s
        };
        for (s, &x) in s.iter_mut().zip(&self.bits[w]) {
            *s += (x & !above(b)).count_ones() as u64;
        }
        s
    }

    /// Marks per plane at times after `p` (`p` below `now`).
    #[inline(always)]
    pub fn after(&self, p: u32) -> [u64; C] {
        let (w, last) = (p as usize / 64, self.now as usize / 64);
        if w >= self.committed && last - w <= w - self.committed {
            // Near the newest mark: the rest of `p`'s word and the counts of the words after.
            let mut n = [0u64; C];
            for (n, &x) in n.iter_mut().zip(&self.bits[w]) {
                *n = (x & above(p as usize % 64)).count_ones() as u64;
            }
            for c in self.counts.get(w + 1..=last).unwrap_or_default() {
                for (n, &c) in n.iter_mut().zip(c) {
                    *n += c as u64;
                }
            }
            return n;
        }
        let through = self.through(p);
        let mut n = self.live;
        for (n, t) in n.iter_mut().zip(through) {
            *n -= t;
        }
        n
    }

    /// Renumbers live marks densely by rank into a bitmap `growth` times their number (at
    /// least the minimum). `renumber_owners` is handed the old-to-new time map (a time without
    /// a mark maps to the next mark's new time) to apply to the times kept outside.
    pub fn compact(&mut self, growth: usize, renumber_owners: impl FnOnce(&dyn Fn(u32) -> u32)) {
        // rank[w]: marks before word w.
        let mut rank = Vec::with_capacity(self.bits.len());
        let mut acc = 0u32;
        for c in &self.counts {
            rank.push(acc);
            acc += c[0];
        }
        debug_assert_eq!(acc as u64, self.live[0]);
        let bits = &self.bits;
        renumber_owners(&|t: u32| -> u32 {
            let (w, b) = (t as usize / 64, t as usize % 64);
            match bits.get(w) {
                Some(x) => rank[w] + (x[0] & ((1u64 << b) - 1)).count_ones(),
                None => acc,
            }
        });
        let live = acc as usize;
        let n_words = (growth * live)
            .div_ceil(64)
            .max(self.layout.min_words.max(1));
        let mut next = vec![[0u64; C]; n_words];
        for (w, x) in next.iter_mut().enumerate().take(live.div_ceil(64)) {
            let n = (live - w * 64).min(64);
            x[0] = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        }
        if C > 1 {
            // Carry the other planes' bits, mark by mark in order.
            let mut pos = 0usize;
            for word in &self.bits {
                let mut x = word[0];
                while x != 0 {
                    let b = x.trailing_zeros();
                    for k in 1..C {
                        if (word[k] >> b) & 1 != 0 {
                            next[pos / 64][k] |= 1 << (pos % 64);
                        }
                    }
                    pos += 1;
                    x &= x - 1;
                }
            }
        }
        self.bits = next;
        self.counts = self
            .bits
            .iter()
            .map(|x| x.map(|x| x.count_ones()))
            .collect();
        // Commit every full word; the last partial one stays open.
        self.committed = live / 64;
        self.committed_marks = [0; C];
        let mut tree = vec![[0u32; C]; n_words + 1];
        for (w, c) in self.counts[..self.committed].iter().enumerate() {
            tree[w + 1] = *c;
            for (m, &c) in self.committed_marks.iter_mut().zip(c) {
                *m += c as u64;
            }
        }
        for i in 1..=n_words {
            let j = i + (i & i.wrapping_neg());
            if j <= n_words {
                let c = tree[i];
                for (t, c) in tree[j].iter_mut().zip(c) {
                    *t = t.wrapping_add(c);
                }
            }
        }
        self.tree = tree;
        self.now = live as u32;
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.bits.capacity() * 8 + (self.counts.capacity() + self.tree.capacity()) * 4) * C
    }
}

/// Streaming exact stack-distance computer over `u64` keys.
#[derive(Debug, Clone)]
pub struct StackDistance {
    /// Per key: time of its latest access and a caller's flag from that access.
    last: FxHashMap64<(u32, bool)>,
    marks: Marks<1>,
    /// Start of the current epoch (see [`StackDistance::take_epoch`]).
    epoch: u32,
}

impl Default for StackDistance {
    fn default() -> Self {
        Self::new()
    }
}

impl StackDistance {
    /// An empty stack, with the [`Layout::DEFAULT`] sizes.
    pub fn new() -> Self {
        Self::with_layout(Layout::DEFAULT)
    }

    /// An empty stack with the given bitmap sizes (the distances are the same).
    pub fn with_layout(layout: Layout) -> Self {
        Self {
            last: FxHashMap64::default(),
            marks: Marks::with_layout(layout),
            epoch: 0,
        }
    }

    /// Distinct keys seen (and not removed).
    pub fn distinct(&self) -> u64 {
        self.marks.live()[0]
    }

    /// Records an access to `key`; returns its stack distance (1 = the most recently used key
    /// again), or `None` for a first access.
    #[inline]
    pub fn access(&mut self, key: u64) -> Option<u64> {
        self.access_flagged(key, false).0
    }

    /// As [`access`](Self::access), also storing `flag` with the key and returning the flag of
    /// its previous access (one hash lookup serves both, e.g. for read/write reuse types).
    #[inline]
    pub fn access_flagged(&mut self, key: u64, flag: bool) -> (Option<u64>, Option<bool>) {
        if self.marks.full() {
            self.compact();
        }
        let prev = self.last.insert(key, (self.marks.now(), flag));
        let d = prev.map(|(p, _)| {
            let after = self.marks.after(p)[0];
            self.marks.clear(p);
            after + 1
        });
        self.marks.push(0);
        (d, prev.map(|(_, f)| f))
    }

    /// Forgets `key` (its next access is a first access again).
    pub fn remove(&mut self, key: u64) {
        if let Some((p, _)) = self.last.remove(&key) {
            self.marks.clear(p);
        }
    }

    /// Distinct keys accessed since the previous call (or the start), and starts a new epoch:
    /// e.g. the working set of an interval of trace time.
    pub fn take_epoch(&mut self) -> u64 {
        let live = self.marks.live()[0];
        let n = if self.epoch == 0 {
            live
        } else {
            live - self.marks.through(self.epoch - 1)[0]
        };
        self.epoch = self.marks.now();
        n
    }

    fn compact(&mut self) {
        let (last, epoch) = (&mut self.last, &mut self.epoch);
        self.marks.compact(2, |renumber| {
            *epoch = renumber(*epoch);
            for v in last.values_mut() {
                v.0 = renumber(v.0);
            }
        });
    }

    /// Heap bytes (approximate: map entries and control bytes, bitmap, tree).
    pub fn memory_bytes(&self) -> usize {
        self.last.capacity() * 17 + self.marks.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Tiny bitmaps, so that the tests go through many compactions.
    fn tiny() -> StackDistance {
        StackDistance::with_layout(Layout::TINY)
    }

    /// Naive reference: a vector as the LRU stack.
    fn naive(keys: &[u64]) -> Vec<Option<u64>> {
        let mut stack: Vec<u64> = Vec::new();
        keys.iter()
            .map(|&k| {
                let d = stack
                    .iter()
                    .rev()
                    .position(|&x| x == k)
                    .map(|p| p as u64 + 1);
                stack.retain(|&x| x != k);
                stack.push(k);
                d
            })
            .collect()
    }

    proptest! {
        #[test]
        fn matches_a_naive_stack(keys in proptest::collection::vec(0u64..50, 0..2000)) {
            let mut s = tiny();
            let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
            prop_assert_eq!(got, naive(&keys));
            // The default sizes give the same distances.
            let mut s = StackDistance::new();
            let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
            prop_assert_eq!(got, naive(&keys));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Hot and cold keys mixed: reuses both within the open words and through the tree,
        /// across many compactions.
        #[test]
        fn matches_a_naive_stack_with_long_distances(
            keys in proptest::collection::vec(
                prop_oneof![0u64..8, 0u64..1500],
                5_000..20_000,
            ),
        ) {
            let mut s = tiny();
            let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
            prop_assert_eq!(got, naive(&keys));
        }
    }

    #[test]
    fn survives_compaction() {
        let keys: Vec<u64> = (0..200_000u64).map(|i| (i * 7919) % 1000).collect();
        let mut s = tiny();
        let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
        // A cyclic pattern over 1000 keys: every reuse has distance 1000.
        assert!(got[1000..].iter().all(|&d| d == Some(1000)));
        assert_eq!(s.distinct(), 1000);
        assert!(s.memory_bytes() < 4 << 20);
    }

    #[test]
    fn removed_keys_restart_cold_and_leave_the_distances() {
        let mut s = tiny();
        for k in 0..10 {
            s.access(k);
        }
        s.remove(5);
        assert_eq!(s.distinct(), 9);
        assert_eq!(s.access(0), Some(9), "1..=9 without 5, and 0 itself");
        assert_eq!(s.access(5), None);
    }

    #[test]
    fn epochs_count_distinct_keys_across_compactions() {
        let mut s = tiny();
        assert_eq!(s.take_epoch(), 0);
        for round in 0..50u64 {
            // 3000 accesses over 1000 keys, 200 of them new each round.
            for i in 0..3000u64 {
                s.access(round * 200 + i % 1000);
            }
            assert_eq!(s.take_epoch(), 1000, "round {round}");
        }
        assert_eq!(s.take_epoch(), 0);
        assert_eq!(s.distinct(), 49 * 200 + 1000);
    }
}
