//! Exact LRU stack distances in O(log M) per access (M = distinct lines live in the window).
//!
//! Each line remembers the time of its latest access; a Fenwick tree over times marks which
//! times are some line's latest access. The stack distance of an access is one plus the number
//! of marks after the line's previous access: the distinct lines touched since, itself
//! included. When times run past the tree, live marks are renumbered densely (compaction),
//! so memory stays proportional to the distinct lines, not the trace length.

use rustc_hash::FxHashMap;

/// Fenwick (binary indexed) tree of 0/1 marks.
#[derive(Debug, Clone)]
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }
    fn len(&self) -> usize {
        self.tree.len() - 1
    }
    fn add(&mut self, i: usize, delta: i32) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = (self.tree[i] as i32 + delta) as u32;
            i += i & i.wrapping_neg();
        }
    }
    /// Marks at positions `0..=i`.
    fn prefix(&self, i: usize) -> u64 {
        let mut i = i + 1;
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// Streaming exact stack-distance computer over `u64` keys.
#[derive(Debug, Clone)]
pub struct StackDistance {
    /// Per key: time of its latest access and a caller's flag from that access.
    last: FxHashMap<u64, (u32, bool)>,
    marks: Fenwick,
    now: u32,
    live: u64,
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
            marks: Fenwick::new(1 << 16),
            now: 0,
            live: 0,
        }
    }

    /// Distinct keys seen.
    pub fn distinct(&self) -> u64 {
        self.live
    }

    /// Records an access to `key`; returns its stack distance (1 = the most recently used key
    /// again), or `None` for a first access.
    pub fn access(&mut self, key: u64) -> Option<u64> {
        self.access_flagged(key, false).0
    }

    /// As [`access`](Self::access), also storing `flag` with the key and returning the flag of
    /// its previous access (one hash lookup serves both, e.g. for read/write reuse types).
    pub fn access_flagged(&mut self, key: u64, flag: bool) -> (Option<u64>, Option<bool>) {
        if self.now as usize >= self.marks.len() {
            self.compact();
        }
        let t = self.now;
        self.now += 1;
        let prev = self.last.insert(key, (t, flag));
        let d = prev.map(|(p, _)| {
            let after = self.live - self.marks.prefix(p as usize);
            self.marks.add(p as usize, -1);
            after + 1
        });
        if prev.is_none() {
            self.live += 1;
        }
        self.marks.add(t as usize, 1);
        (d, prev.map(|(_, f)| f))
    }

    /// Forgets `key` (its next access is a first access again).
    pub fn remove(&mut self, key: u64) {
        if let Some((p, _)) = self.last.remove(&key) {
            self.marks.add(p as usize, -1);
            self.live -= 1;
        }
    }

    /// Renumbers live times densely into a tree with room to grow.
    fn compact(&mut self) {
        let mut order: Vec<(u32, u64, bool)> =
            self.last.iter().map(|(&k, &(t, f))| (t, k, f)).collect();
        order.sort_unstable();
        let size = (order.len() * 2).max(1 << 16);
        self.marks = Fenwick::new(size);
        for (i, &(_, k, f)) in order.iter().enumerate() {
            self.last.insert(k, (i as u32, f));
            self.marks.add(i, 1);
        }
        self.now = order.len() as u32;
    }

    /// Heap bytes (approximate: map entries and tree).
    pub fn memory_bytes(&self) -> usize {
        self.last.capacity() * 24 + self.marks.tree.capacity() * 4
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
}
