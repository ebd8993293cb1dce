//! Nanoseconds per request of each policy, driven by an array-based stand-in for the core
//! (no hashing, so the figure is the policy's own cost plus a few array reads).
//!
//! `cargo bench -p tiercache-eviction --bench eviction`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tiercache_core::LineKey;
use tiercache_eviction::{build, EvictionKind, Slot};

const CAPACITY: usize = 1 << 16;
const KEYS: u64 = 1 << 18;
const REQUESTS: usize = 1 << 20;

/// A skewed stream: 80% of requests to 10% of the keys (xorshift, fixed seed).
fn stream() -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..REQUESTS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 10 < 8 {
                (x >> 8) % (KEYS / 10)
            } else {
                (x >> 8) % KEYS
            }
        })
        .collect()
}

/// Replays `keys` through a fresh cache; returns the hit count.
fn replay(kind: EvictionKind, keys: &[u64]) -> usize {
    let mut policy = build(kind, CAPACITY, CAPACITY);
    let mut slot_of = vec![u32::MAX; KEYS as usize];
    let mut key_of = vec![0u64; CAPACITY];
    let mut used = 0usize;
    let mut hits = 0;
    let unpinned = |_: Slot| false;
    for &key in keys {
        let slot = slot_of[key as usize];
        if slot != u32::MAX {
            policy.hit(slot);
            hits += 1;
            continue;
        }
        let s = if used < CAPACITY {
            used += 1;
            (used - 1) as Slot
        } else {
            let v = policy.evict(LineKey(key), &unpinned).expect("a victim");
            slot_of[key_of[v as usize] as usize] = u32::MAX;
            v
        };
        slot_of[key as usize] = s;
        key_of[s as usize] = key;
        policy.insert(s, LineKey(key));
    }
    hits
}

fn bench(c: &mut Criterion) {
    let keys = stream();
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(REQUESTS as u64));
    group.sample_size(10);
    for kind in EvictionKind::ALL {
        group.bench_function(kind.as_str(), |b| b.iter(|| replay(kind, black_box(&keys))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
