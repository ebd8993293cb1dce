//! Classic access patterns that tell the policies apart.

mod common;

use common::{count_hits, Harness, Outcome};
use std::collections::HashSet;
use tiercache_eviction::EvictionKind::{self, *};

/// Victims chosen by each policy on one short sequence (3 lines; A B C, hit A, then D E F):
/// - LRU protects the re-used A and evicts B, C, then A;
/// - FIFO ignores the hit: A, B, C;
/// - CLOCK gives A a second chance by moving it to the front: B, C, then A;
/// - SIEVE also spares A but leaves it in place behind the hand, so the newer D goes first;
/// - MRU evicts what was used last: A, then each newcomer.
#[test]
fn victims_on_a_second_chance_sequence() {
    let cases: [(EvictionKind, [u64; 3]); 5] = [
        (Lru, [2, 3, 1]),
        (Fifo, [1, 2, 3]),
        (Clock, [2, 3, 1]),
        (Sieve, [2, 3, 4]),
        (Mru, [1, 4, 5]),
    ];
    let none = HashSet::new();
    for (kind, want) in cases {
        let mut h = Harness::new(kind, 3);
        for k in [1, 2, 3] {
            assert_eq!(h.access(k, &none), Outcome::Miss { victim: None });
        }
        assert_eq!(h.access(1, &none), Outcome::Hit);
        let victims: Vec<u64> = [4, 5, 6]
            .into_iter()
            .map(|k| match h.access(k, &none) {
                Outcome::Miss { victim: Some(v) } => v,
                other => panic!("{kind}: {other:?}"),
            })
            .collect();
        assert_eq!(victims, want, "{kind}");
    }
}

/// CLOCK's single reference bit cannot rank lines that were all referenced: after hits on
/// A, B, C and A again, LRU evicts B but CLOCK clears every bit and evicts A.
#[test]
fn clock_loses_recency_order_when_all_bits_are_set() {
    let none = HashSet::new();
    for (kind, want) in [(Lru, 2), (Clock, 1)] {
        let mut h = Harness::new(kind, 3);
        for k in [1, 2, 3, 1, 2, 3, 1] {
            h.access(k, &none);
        }
        assert_eq!(
            h.access(4, &none),
            Outcome::Miss { victim: Some(want) },
            "{kind}"
        );
    }
}

/// A loop one line larger than the cache: LRU, FIFO and CLOCK always evict the line needed
/// next and never hit; MRU keeps most of the loop.
#[test]
fn mru_wins_on_a_loop_slightly_larger_than_the_cache() {
    let capacity = 50;
    let loop_keys = || (0..20).flat_map(|_| 0..capacity as u64 + 1);
    let accesses = 20 * (capacity + 1);
    for kind in [Lru, Fifo, Clock] {
        assert_eq!(count_hits(kind, capacity, loop_keys()), 0, "{kind}");
    }
    let mru = count_hits(Mru, capacity, loop_keys());
    assert!(mru * 10 > accesses * 8, "MRU hit only {mru} of {accesses}");
}

/// A hot set that fits the cache, then a long one-time scan interleaved with the hot set.
/// The scan pushes the hot lines out of LRU, FIFO and CLOCK; ARC keeps them in T2 and
/// S3-FIFO in its main queue (scan lines go through the small queue to the ghost), SIEVE
/// spares them as visited lines.
#[test]
fn arc_s3fifo_and_sieve_resist_a_scan_that_flushes_lru() {
    let capacity = 100;
    let hot: Vec<u64> = (0..50).collect();
    let mut keys: Vec<u64> = Vec::new();
    for _ in 0..3 {
        keys.extend(&hot);
    }
    let warmup = keys.len();
    let mut scan = 1_000_000u64..;
    for i in 0..3000 {
        keys.push(scan.next().unwrap());
        keys.push(scan.next().unwrap());
        keys.push(hot[i % hot.len()]);
    }
    let hot_hits_during_scan = |kind: EvictionKind| {
        let mut h = Harness::new(kind, capacity);
        let none = HashSet::new();
        keys.iter()
            .enumerate()
            .filter(|&(i, &k)| h.access(k, &none) == Outcome::Hit && i >= warmup && k < 50)
            .count() as f64
            / 3000.0
    };
    for kind in [Lru, Fifo, Clock] {
        let r = hot_hits_during_scan(kind);
        assert!(r < 0.05, "{kind} kept {r} of the hot set");
    }
    for kind in [Arc, S3Fifo, Sieve] {
        let r = hot_hits_during_scan(kind);
        assert!(r > 0.9, "{kind} kept only {r} of the hot set");
    }
}

/// Every policy is a cache: a working set that fits is served from the cache after the
/// first pass, whatever the order, and nothing is evicted.
#[test]
fn working_set_that_fits_always_hits() {
    for kind in EvictionKind::ALL {
        let keys = (0..10).flat_map(|r| (0..30u64).map(move |k| (k * 7 + r) % 30));
        assert_eq!(count_hits(kind, 30, keys), 9 * 30, "{kind}");
    }
}
