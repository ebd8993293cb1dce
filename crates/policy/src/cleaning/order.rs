//! The order a flush batch writes back in (docs/design.md §4.6).

use serde::{Deserialize, Serialize};
use tiercache_core::LineKey;

/// Which dirty lines a flush batch takes and the order it writes them to the backend.
///
/// The kernel caches write back in ascending backend address: bcache's writeback thread
/// walks its dirty keys in key order from where the last pass stopped, and dm-cache and
/// EnhanceIO sort what they flush, so a disk behind them sees short seeks and runs of
/// adjacent blocks instead of a stream of random writes. `written` keeps the order this
/// project used before (least recently written first) for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleaningOrder {
    /// The least recently written lines, written back in that order.
    #[default]
    Written,
    /// The least recently written lines (the same batch as `written`), written back in
    /// ascending backend address (volume, then offset).
    Address,
    /// bcache's sweep: the dirty lines at or after a cursor in backend-address order
    /// (wrapping to the lowest), in ascending address; the cursor moves past the batch.
    Sweep,
}

/// Sorts a batch's lines into ascending backend address (volume, then line index: a
/// [`LineKey`] packs them so that its integer order is that order). Stable and total, so the
/// result depends only on the set of keys.
pub fn sort_by_address<T>(batch: &mut [T], key: impl Fn(&T) -> LineKey) {
    batch.sort_by_key(|t| key(t).0);
}

/// bcache's sweep over `dirty` (keys in any order): up to `n` keys at or after `cursor` in
/// ascending order, then, if fewer than `n` lie there, the lowest keys from the start (the
/// sweep wraps). Returns the batch in ascending order from the cursor, each key once. Memory
/// is bounded by `n`, time by `|dirty| × log n`.
pub fn sweep_batch(dirty: impl Iterator<Item = LineKey>, cursor: u64, n: usize) -> Vec<LineKey> {
    use std::collections::BinaryHeap;
    if n == 0 {
        return Vec::new();
    }
    // Two bounded max-heaps keep the `n` smallest keys at/after the cursor and before it.
    let (mut after, mut before) = (BinaryHeap::new(), BinaryHeap::new());
    let push = |heap: &mut BinaryHeap<u64>, k: u64| {
        if heap.len() < n {
            heap.push(k);
        } else if heap.peek().is_some_and(|&top| k < top) {
            heap.pop();
            heap.push(k);
        }
    };
    for k in dirty {
        if k.0 >= cursor {
            push(&mut after, k.0);
        } else {
            push(&mut before, k.0);
        }
    }
    let mut out = after.into_sorted_vec();
    if out.len() < n {
        let wrap = before.into_sorted_vec();
        let room = n - out.len();
        out.extend(wrap.into_iter().take(room));
    }
    out.into_iter().map(LineKey).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plainest sweep: sort everything, rotate to the cursor, take `n`.
    fn reference(dirty: &[u64], cursor: u64, n: usize) -> Vec<u64> {
        let mut all = dirty.to_vec();
        all.sort_unstable();
        all.dedup();
        let split = all.partition_point(|&k| k < cursor);
        all.rotate_left(split);
        all.truncate(n);
        all
    }

    proptest! {
        /// The bounded-heap sweep takes what sorting everything and rotating takes.
        #[test]
        fn sweep_matches_a_full_sort(
            keys in proptest::collection::hash_set(0u64..10_000, 0..300),
            cursor in 0u64..11_000,
            n in 0usize..64,
        ) {
            let keys: Vec<u64> = keys.into_iter().collect();
            let got: Vec<u64> = sweep_batch(keys.iter().map(|&k| LineKey(k)), cursor, n)
                .into_iter().map(|k| k.0).collect();
            prop_assert_eq!(got, reference(&keys, cursor, n));
        }
    }

    #[test]
    fn address_order_is_ascending_by_volume_then_index() {
        use tiercache_core::VolumeId;
        let mut keys = vec![
            LineKey::new(VolumeId(1), 3),
            LineKey::new(VolumeId(0), 9),
            LineKey::new(VolumeId(1), 0),
            LineKey::new(VolumeId(0), 2),
        ];
        sort_by_address(&mut keys, |&k| k);
        assert_eq!(
            keys,
            vec![
                LineKey::new(VolumeId(0), 2),
                LineKey::new(VolumeId(0), 9),
                LineKey::new(VolumeId(1), 0),
                LineKey::new(VolumeId(1), 3),
            ]
        );
    }
}
