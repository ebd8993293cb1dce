//! Exact LRU stack distances in O(log M) per access (M = distinct lines live in the window).
//!
//! Each line remembers the time of its latest access; a bitmap over times marks which times
//! are some line's latest access. The stack distance of an access is one plus the number of
//! marks after the line's previous access: the distinct lines touched since, itself included.
//!
//! Layout, chosen so that everything but the per-line map stays in the CPU caches:
//! - one bit per time, 64 times to a word (a million live lines need 256 KiB of bitmap);
//! - a Fenwick tree of `u32` counts over *words*, 64 times smaller than a tree over times;
//! - the words from the current one back to the last [`OPEN_WORDS`] boundary are "open": not
//!   yet added to the tree, so setting the newest mark costs one `or`, and distances that end
//!   there (the hot lines' reuses) are counted with a few popcounts, without the tree.
//!
//! When times run past the bitmap, live marks are renumbered densely by rank (compaction, in
//! place over the map, no sort), into a bitmap twice the live lines, so memory stays
//! proportional to the distinct lines, not the trace length.

use rustc_hash::FxHashMap;

/// Words appended after the committed prefix before they are added to the tree in one go.
const OPEN_WORDS: usize = 8;
/// Smallest bitmap, in words (tiny in unit tests, so that they compact often).
const MIN_WORDS: usize = if cfg!(test) { 4 } else { 1 << 10 };

/// Fenwick (binary indexed) tree of `u32` counts.
#[derive(Debug, Clone)]
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    /// A tree over `counts`, built in O(n).
    fn from_counts(counts: impl Iterator<Item = u32>, n: usize) -> Self {
        let mut tree = vec![0u32; n + 1];
        for (i, c) in counts.enumerate().take(n) {
            tree[i + 1] = c;
        }
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                tree[j] = tree[j].wrapping_add(tree[i]);
            }
        }
        Self { tree }
    }

    #[inline]
    fn add(&mut self, i: usize, delta: u32) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of counts at positions `0..i`.
    #[inline]
    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
    }
}

/// Bits of a word strictly above bit `b`.
#[inline]
fn above(b: usize) -> u64 {
    // `2 << 63` is 0: nothing above the top bit.
    !((2u64 << b).wrapping_sub(1))
}

/// Streaming exact stack-distance computer over `u64` keys.
#[derive(Debug, Clone)]
pub struct StackDistance {
    /// Per key: time of its latest access and a caller's flag from that access.
    last: FxHashMap<u64, (u32, bool)>,
    /// One bit per time: set when it is some key's latest access.
    bits: Vec<u64>,
    /// Counts of set bits per word, for words `< committed`.
    words: Fenwick,
    /// Words below this are counted in `words`; the rest are open.
    committed: usize,
    now: u32,
    live: u64,
    /// Start of the current epoch (see [`StackDistance::take_epoch`]).
    epoch: u32,
}

impl Default for StackDistance {
    fn default() -> Self {
        Self::new()
    }
}

impl StackDistance {
    /// An empty stack.
    pub fn new() -> Self {
        Self {
            last: FxHashMap::default(),
            bits: vec![0; MIN_WORDS],
            words: Fenwick::from_counts(std::iter::empty(), MIN_WORDS),
            committed: 0,
            now: 0,
            live: 0,
            epoch: 0,
        }
    }

    /// Distinct keys seen (and not removed).
    pub fn distinct(&self) -> u64 {
        self.live
    }

    /// Records an access to `key`; returns its stack distance (1 = the most recently used key
    /// again), or `None` for a first access.
    #[inline]
    pub fn access(&mut self, key: u64) -> Option<u64> {
        self.access_flagged(key, false).0
    }

    /// Marks at times `0..=p` (`p` below `now`).
    #[inline]
    fn marks_through(&self, p: usize) -> u64 {
        let w = p / 64;
        let in_word = (self.bits[w] & !above(p % 64)).count_ones() as u64;
        if w <= self.committed {
            self.words.prefix(w) + in_word
        } else {
            // The committed words plus the open ones before `w`.
            let open: u64 = self.bits[self.committed..w]
                .iter()
                .map(|x| x.count_ones() as u64)
                .sum();
            self.words.prefix(self.committed) + open + in_word
        }
    }

    /// Marks at times after `p` (`p` below `now`).
    #[inline]
    fn marks_after(&self, p: usize) -> u64 {
        let (w, last) = (p / 64, self.now as usize / 64);
        if last - w <= OPEN_WORDS {
            // A short reuse: count the words up to the newest directly.
            let mut n = (self.bits[w] & above(p % 64)).count_ones() as u64;
            for x in &self.bits[w + 1..=last.min(self.bits.len() - 1)] {
                n += x.count_ones() as u64;
            }
            n
        } else {
            self.live - self.marks_through(p)
        }
    }

    #[inline]
    fn clear(&mut self, p: usize) {
        let w = p / 64;
        self.bits[w] &= !(1u64 << (p % 64));
        if w < self.committed {
            self.words.add(w, u32::MAX); // −1
        }
    }

    /// As [`access`](Self::access), also storing `flag` with the key and returning the flag of
    /// its previous access (one hash lookup serves both, e.g. for read/write reuse types).
    #[inline]
    pub fn access_flagged(&mut self, key: u64, flag: bool) -> (Option<u64>, Option<bool>) {
        if self.now as usize >= self.bits.len() * 64 {
            self.compact();
        }
        let t = self.now as usize;
        if t & 63 == 0 {
            self.commit(t / 64);
        }
        let prev = self.last.insert(key, (t as u32, flag));
        let d = match prev {
            Some((p, _)) => {
                let after = self.marks_after(p as usize);
                self.clear(p as usize);
                Some(after + 1)
            }
            None => {
                self.live += 1;
                None
            }
        };
        self.bits[t / 64] |= 1 << (t % 64);
        self.now += 1;
        (d, prev.map(|(_, f)| f))
    }

    /// Adds the open words more than [`OPEN_WORDS`] behind word `current` to the tree.
    #[inline]
    fn commit(&mut self, current: usize) {
        while self.committed + OPEN_WORDS < current {
            let c = self.bits[self.committed].count_ones();
            self.words.add(self.committed, c);
            self.committed += 1;
        }
    }

    /// Forgets `key` (its next access is a first access again).
    pub fn remove(&mut self, key: u64) {
        if let Some((p, _)) = self.last.remove(&key) {
            self.clear(p as usize);
            self.live -= 1;
        }
    }

    /// Distinct keys accessed since the previous call (or the start), and starts a new epoch:
    /// e.g. the working set of an interval of trace time.
    pub fn take_epoch(&mut self) -> u64 {
        let n = if self.epoch == 0 {
            self.live
        } else {
            self.live - self.marks_through(self.epoch as usize - 1)
        };
        self.epoch = self.now;
        n
    }

    /// Renumbers live times densely (by rank) into a bitmap twice the live keys.
    fn compact(&mut self) {
        // rank[w]: marks before word w.
        let mut rank = Vec::with_capacity(self.bits.len() + 1);
        let mut acc = 0u32;
        for &x in &self.bits {
            rank.push(acc);
            acc += x.count_ones();
        }
        rank.push(acc);
        debug_assert_eq!(acc as u64, self.live);
        let renumber = |t: u32| -> u32 {
            let (w, b) = (t as usize / 64, t as usize % 64);
            match self.bits.get(w) {
                Some(&x) => rank[w] + (x & ((1u64 << b) - 1)).count_ones(),
                None => acc,
            }
        };
        self.epoch = renumber(self.epoch);
        for v in self.last.values_mut() {
            v.0 = renumber(v.0);
        }
        let live = self.live as usize;
        let n_words = (2 * live).div_ceil(64).max(MIN_WORDS);
        self.bits = vec![0; n_words];
        for (w, x) in self.bits.iter_mut().enumerate().take(live.div_ceil(64)) {
            let n = (live - w * 64).min(64);
            *x = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        }
        // Commit every full word; the last partial one stays open.
        self.committed = live / 64;
        self.words = Fenwick::from_counts(
            self.bits[..self.committed].iter().map(|x| x.count_ones()),
            n_words,
        );
        self.now = live as u32;
    }

    /// Heap bytes (approximate: map entries and control bytes, bitmap, tree).
    pub fn memory_bytes(&self) -> usize {
        self.last.capacity() * 17 + self.bits.capacity() * 8 + self.words.tree.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            let mut s = StackDistance::new();
            let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
            prop_assert_eq!(got, naive(&keys));
        }
    }

    #[test]
    fn survives_compaction() {
        let keys: Vec<u64> = (0..200_000u64).map(|i| (i * 7919) % 1000).collect();
        let mut s = StackDistance::new();
        let got: Vec<_> = keys.iter().map(|&k| s.access(k)).collect();
        // A cyclic pattern over 1000 keys: every reuse has distance 1000.
        assert!(got[1000..].iter().all(|&d| d == Some(1000)));
        assert_eq!(s.distinct(), 1000);
        assert!(s.memory_bytes() < 4 << 20);
    }

    #[test]
    fn removed_keys_restart_cold_and_leave_the_distances() {
        let mut s = StackDistance::new();
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
        let mut s = StackDistance::new();
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
