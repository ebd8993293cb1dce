//! The file-level cache on the policy core ([`FileCache`]) against the reference model (the
//! file-level core as it was before, `reference_model/`): random streams of reads, writes
//! with and without fill, deletes, truncates, discards and flushes, on small caches, in all
//! four variants, must get the same decisions (docs/design.md §4.9).
//!
//! Compared after every call: hit or miss; the ops in order by kind and block (written back,
//! filled, discarded, cache and store reads and writes, with `fresh`, `dirty` and
//! `was_dirty`); the counters (`CoreStats`); dirty and resident block counts; and, for every
//! block, whether it is cached and dirty. Slot numbers are compared apart from the keys: the
//! two hand out free slots in the same order (never-used lowest first, then last freed
//! first), and the test checks that they agree, but the equivalence claimed is on keys.
//! Conservation: every block written back was dirty, and a discard says so exactly when it was.

mod reference_model;

use std::collections::BTreeSet;

use proptest::prelude::*;
use reference_model::RefCache;
use tiercache_filecache::{BlockKey, DevOp, FileCache, Variant};

const FILES: u64 = 4;
const BLOCKS: u64 = 6;

#[derive(Debug, Clone)]
enum Call {
    Read(BlockKey),
    Write(BlockKey, bool),
    Delete(u64),
    Truncate(u64, u64),
    Discard(BlockKey),
    Flush(Option<u64>),
}

fn key() -> impl Strategy<Value = BlockKey> {
    (0..FILES, 0..BLOCKS).prop_map(|(f, b)| BlockKey::new(f, b))
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        6 => key().prop_map(Call::Read),
        6 => (key(), any::<bool>()).prop_map(|(k, fill)| Call::Write(k, fill)),
        1 => (0..FILES).prop_map(Call::Delete),
        1 => (0..FILES, 0..=BLOCKS).prop_map(|(f, n)| Call::Truncate(f, n)),
        1 => key().prop_map(Call::Discard),
        1 => prop::option::of(0..FILES).prop_map(Call::Flush),
    ]
}

/// An op without its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyed {
    WriteBack(BlockKey),
    Discard(BlockKey, bool),
    Fill(BlockKey),
    CacheRead(BlockKey),
    CacheWrite(BlockKey, bool, bool),
    StoreWrite(BlockKey),
    StoreRead(BlockKey),
}

fn keyed(op: &DevOp) -> Keyed {
    match *op {
        DevOp::WriteBack { key, .. } => Keyed::WriteBack(key),
        DevOp::Discard { key, was_dirty, .. } => Keyed::Discard(key, was_dirty),
        DevOp::Fill { key, .. } => Keyed::Fill(key),
        DevOp::CacheRead { key, .. } => Keyed::CacheRead(key),
        DevOp::CacheWrite {
            key, fresh, dirty, ..
        } => Keyed::CacheWrite(key, fresh, dirty),
        DevOp::StoreWrite { key } => Keyed::StoreWrite(key),
        DevOp::StoreRead { key } => Keyed::StoreRead(key),
    }
}

fn variant() -> impl Strategy<Value = Variant> {
    prop::sample::select(Variant::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_core_decides_as_the_reference_model(
        variant in variant(),
        capacity in 0u32..6,
        calls in prop::collection::vec(call(), 1..120),
    ) {
        let mut new = FileCache::new(capacity, variant);
        let mut old = RefCache::new(capacity, variant);
        // Blocks dirty per the ops so far (conservation).
        let mut dirty: BTreeSet<BlockKey> = BTreeSet::new();
        for (i, c) in calls.iter().enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (hit_new, hit_old) = match *c {
                Call::Read(k) => (Some(new.read(k, &mut a).unwrap()), Some(old.read(k, &mut b))),
                Call::Write(k, fill) => {
                    (Some(new.write(k, fill, &mut a).unwrap()), Some(old.write(k, fill, &mut b)))
                }
                Call::Delete(f) => {
                    new.delete_file(f, &mut a);
                    old.delete_file(f, &mut b);
                    (None, None)
                }
                Call::Truncate(f, n) => {
                    new.truncate(f, n, &mut a);
                    old.truncate(f, n, &mut b);
                    (None, None)
                }
                Call::Discard(k) => {
                    new.discard(k, &mut a);
                    old.discard(k, &mut b);
                    (None, None)
                }
                Call::Flush(f) => {
                    new.flush(f, &mut a);
                    old.flush(f, &mut b);
                    (None, None)
                }
            };
            prop_assert_eq!(hit_new, hit_old, "call {} {:?}: hit", i, c);
            let ka: Vec<Keyed> = a.iter().map(keyed).collect();
            let kb: Vec<Keyed> = b.iter().map(keyed).collect();
            prop_assert_eq!(&ka, &kb, "call {} {:?}: ops by key", i, c);
            prop_assert_eq!(&a, &b, "call {} {:?}: slots", i, c);
            prop_assert_eq!(new.stats(), old.stats(), "call {} {:?}: counters", i, c);
            prop_assert_eq!(new.dirty_blocks(), old.dirty_blocks(), "call {}: dirty", i);
            prop_assert_eq!(new.len(), old.len(), "call {}: resident", i);
            for f in 0..FILES {
                for blk in 0..BLOCKS {
                    let k = BlockKey::new(f, blk);
                    prop_assert_eq!(
                        new.lookup(k).map(|(_, d)| d),
                        old.lookup(k).map(|(_, d)| d),
                        "call {}: block {:?}", i, k
                    );
                }
                prop_assert_eq!(
                    new.dirty_of_file(f).into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
                    old.dirty_of_file(f).into_iter().map(|(k, _)| k).collect::<Vec<_>>()
                );
            }
            for op in &ka {
                match *op {
                    Keyed::CacheWrite(k, _, true) => {
                        dirty.insert(k);
                    }
                    Keyed::WriteBack(k) => {
                        prop_assert!(dirty.remove(&k), "call {}: {:?} written back clean", i, k)
                    }
                    Keyed::Discard(k, was_dirty) => {
                        prop_assert_eq!(dirty.remove(&k), was_dirty, "call {}: discard {:?}", i, k)
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(dirty.len() as u64, new.dirty_blocks(), "call {}: conservation", i);
            if let Some(core) = new.policy() {
                core.audit();
            }
        }
    }
}
