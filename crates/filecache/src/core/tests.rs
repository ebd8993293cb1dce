//! Unit tests of the file-level cache: its API on small caches, the key space's limits,
//! extents and restore (the equivalence with the old core is `tests/equivalence.rs`).

use super::*;

fn k(file: u64, block: u64) -> BlockKey {
    BlockKey::new(file, block)
}

#[test]
fn variants_parse_by_name() {
    for v in Variant::ALL {
        assert_eq!(v.name().parse::<Variant>().unwrap(), v);
    }
    assert!("wx".parse::<Variant>().is_err());
}

#[test]
fn read_miss_admits_then_hits() {
    let mut c = FileCache::new(2, Variant::WB);
    let mut ops = Vec::new();
    assert!(!c.read(k(1, 0), &mut ops).unwrap());
    assert_eq!(
        ops,
        vec![
            DevOp::Fill {
                slot: 0,
                key: k(1, 0)
            },
            DevOp::CacheRead {
                slot: 0,
                key: k(1, 0)
            }
        ]
    );
    ops.clear();
    assert!(c.read(k(1, 0), &mut ops).unwrap());
    assert_eq!(
        ops,
        vec![DevOp::CacheRead {
            slot: 0,
            key: k(1, 0)
        }]
    );
}

#[test]
fn the_four_variants_on_a_write_miss() {
    for v in Variant::ALL {
        let mut c = FileCache::new(4, v);
        let mut ops = Vec::new();
        c.write(k(1, 0), false, &mut ops).unwrap();
        let to_store = ops.iter().any(|o| matches!(o, DevOp::StoreWrite { .. }));
        let to_cache = ops.iter().any(|o| matches!(o, DevOp::CacheWrite { .. }));
        match v.name() {
            "wb" => assert!(to_cache && !to_store && c.dirty_blocks() == 1),
            "wb-around" | "wt-around" => assert!(!to_cache && to_store && c.is_empty()),
            "wt" => assert!(to_cache && to_store && c.dirty_blocks() == 0),
            _ => unreachable!(),
        }
    }
}

#[test]
fn delete_frees_blocks_and_cancels_write_back() {
    let mut c = FileCache::new(4, Variant::WB);
    let mut ops = Vec::new();
    for b in 0..3 {
        c.write(k(7, b), false, &mut ops).unwrap();
    }
    ops.clear();
    c.delete_file(7, &mut ops);
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|o| matches!(
        o,
        DevOp::Discard {
            was_dirty: true,
            ..
        }
    )));
    assert!(c.is_empty());
    assert_eq!(c.dirty_blocks(), 0);
    ops.clear();
    c.flush(None, &mut ops);
    assert!(ops.is_empty(), "nothing of a deleted file is written back");
}

#[test]
fn eviction_writes_back_dirty_victim_in_lru_order() {
    let mut c = FileCache::new(2, Variant::WB);
    let mut ops = Vec::new();
    c.write(k(1, 0), false, &mut ops).unwrap();
    c.read(k(1, 1), &mut ops).unwrap();
    c.read(k(1, 0), &mut ops).unwrap(); // 1/1 is now least recent
    ops.clear();
    c.write(k(2, 0), false, &mut ops).unwrap();
    assert!(!ops.iter().any(|o| matches!(o, DevOp::WriteBack { .. })));
    ops.clear();
    c.read(k(3, 0), &mut ops).unwrap(); // victim 1/0, dirty
    assert_eq!(
        ops[0],
        DevOp::WriteBack {
            slot: 0,
            key: k(1, 0)
        }
    );
}

#[test]
fn past_the_limits_a_typed_error_not_a_panic() {
    let mut c = FileCache::new(2, Variant::WB);
    let mut ops = Vec::new();
    let far = k(1, MAX_BLOCKS_PER_FILE);
    assert_eq!(
        c.write(far, false, &mut ops),
        Err(FileCacheError::BlockOutOfRange {
            file: 1,
            block: MAX_BLOCKS_PER_FILE
        })
    );
    assert!(c.read(far, &mut ops).is_err());
    assert!(ops.is_empty());
    assert_eq!(c.lookup(k(1, u64::MAX)), None);
    c.truncate(1, u64::MAX, &mut ops);
    c.discard(far, &mut ops);
    assert!(ops.is_empty() && c.is_empty());
    assert_eq!(c.max_files(), 1 << 32);
    assert!(FileCache::with_block_size(4, Variant::WB, 3000).is_err());
    assert!(FileCache::with_block_size(0, Variant::WB, 3000).is_err());
}

#[test]
fn a_file_keeps_its_extent_while_it_has_cached_blocks() {
    let mut c = FileCache::new(1, Variant::WT_AROUND);
    let mut ops = Vec::new();
    c.write(k(1, 0), false, &mut ops).unwrap(); // around the cache: nothing mapped
    assert!(c.extents.get(1).is_none());
    c.read(k(1, 0), &mut ops).unwrap();
    assert!(c.extents.get(1).is_some());
    c.read(k(2, 0), &mut ops).unwrap(); // evicts 1/0
    assert!(c.extents.get(1).is_none());
    assert_eq!(c.slot_state(0), Some((k(2, 0), false)));
    c.delete_file(2, &mut ops);
    assert!(c.extents.get(2).is_none() && c.is_empty());
}

#[test]
fn restored_blocks_are_cached_and_dirty_ones_written_back() {
    let mut c = FileCache::new(4, Variant::WB);
    c.restore(1, k(5, 3), true).unwrap();
    c.restore(2, k(5, 4), false).unwrap();
    assert!(c.restore(2, k(6, 0), false).is_err(), "slot taken");
    assert_eq!(c.lookup(k(5, 3)), Some((1, true)));
    assert_eq!(c.dirty_of_file(5), vec![(k(5, 3), 1)]);
    let mut ops = Vec::new();
    assert!(c.read(k(5, 4), &mut ops).unwrap());
    ops.clear();
    c.flush(None, &mut ops);
    assert_eq!(
        ops,
        vec![DevOp::WriteBack {
            slot: 1,
            key: k(5, 3)
        }]
    );
    assert_eq!(c.dirty_blocks(), 0);
}

/// The blocks a cleaning pass writes back, in order.
fn written_back(ops: &[DevOp]) -> Vec<BlockKey> {
    ops.iter()
        .filter_map(|op| match op {
            DevOp::WriteBack { key, .. } => Some(*key),
            _ => None,
        })
        .collect()
}

#[test]
fn cleaning_follows_the_cores_policy_least_recently_written_first() {
    let threshold = CleaningConfig::Threshold {
        high: 0.5,
        low: 0.25,
        batch: 2,
    };
    let mut c = FileCache::with_cleaning(16, Variant::WB, 4096, threshold).unwrap();
    let mut ops = Vec::new();
    for b in 0..6 {
        c.write(k(1, b), false, &mut ops).unwrap();
    }
    ops.clear();
    // 6 of 16 dirty: under the high watermark, nothing to clean.
    c.clean(0, 0, &mut ops);
    assert!(written_back(&ops).is_empty());
    for b in 6..10 {
        c.write(k(1, b), false, &mut ops).unwrap();
    }
    ops.clear();
    // 10 of 16: batches until 4 (the low watermark) are left, oldest writes first.
    let mut cleaned = Vec::new();
    for _ in 0..10 {
        c.clean(0, 0, &mut ops);
        cleaned.extend(written_back(&ops));
        ops.clear();
    }
    assert_eq!(cleaned, (0..6).map(|b| k(1, b)).collect::<Vec<_>>());
    assert_eq!(c.dirty_blocks(), 4);
    // The cleaned blocks stay cached, clean.
    assert_eq!(c.lookup(k(1, 0)).map(|(_, dirty)| dirty), Some(false));

    // Lazy: nothing while the mount is busy, everything once it has been idle long enough.
    let lazy = CleaningConfig::Lazy {
        idle_ns: 1_000,
        batch: 3,
    };
    let mut c = FileCache::with_cleaning(16, Variant::WB, 4096, lazy).unwrap();
    for b in 0..5 {
        c.write(k(2, b), false, &mut ops).unwrap();
    }
    ops.clear();
    assert!(c.clean(10_000, 10, &mut ops).is_some());
    assert!(written_back(&ops).is_empty());
    c.clean(10_000, 5_000, &mut ops);
    c.clean(10_000, 5_000, &mut ops);
    assert_eq!(written_back(&ops).len(), 5);
    assert_eq!(c.dirty_blocks(), 0);
    // Without a policy (the simulator's): never.
    let mut c = FileCache::new(16, Variant::WB);
    c.write(k(3, 0), false, &mut ops).unwrap();
    ops.clear();
    c.clean(10_000, 1 << 40, &mut ops);
    assert!(written_back(&ops).is_empty());
}

/// A file's content version changes with its cached content and only then: writes, blocks
/// admitted or evicted; not hits, not write-backs (a kept passthrough image stays valid across
/// a flush); no version without a cached block.
#[test]
fn content_versions_change_with_the_content_only() {
    let mut c = FileCache::new(2, Variant::WB);
    let mut ops = Vec::new();
    assert_eq!(c.content_version(1), None);
    c.write(k(1, 0), false, &mut ops).unwrap();
    let v1 = c.content_version(1).expect("a cached block, a version");
    c.read(k(1, 0), &mut ops).unwrap();
    assert_eq!(c.content_version(1), Some(v1), "a hit changes nothing");
    ops.clear();
    c.flush(Some(1), &mut ops);
    assert!(ops.iter().any(|o| matches!(o, DevOp::WriteBack { .. })));
    assert_eq!(
        c.content_version(1),
        Some(v1),
        "a write-back keeps the version"
    );
    c.read(k(1, 1), &mut ops).unwrap();
    let v2 = c.content_version(1).unwrap();
    assert!(v2 > v1, "a block admitted: a new version");
    c.write(k(1, 1), false, &mut ops).unwrap();
    let v3 = c.content_version(1).unwrap();
    assert!(v3 > v2, "a write: a new version");
    c.read(k(2, 0), &mut ops).unwrap();
    let v4 = c.content_version(1).unwrap();
    assert!(v4 > v3, "a block evicted: a new version");
    c.read(k(2, 1), &mut ops).unwrap();
    assert_eq!(c.content_version(1), None, "no cached block, no version");
    c.read(k(1, 0), &mut ops).unwrap();
    assert!(
        c.content_version(1).unwrap() > v4,
        "never a value given before"
    );
}

/// One operation of the mirror's property test.
#[derive(Debug, Clone)]
enum MirrorOp {
    Read(u64, u64),
    Write(u64, u64, bool),
    Truncate(u64, u64),
    Delete(u64),
    Discard(u64, u64),
    Flush(Option<u64>),
    Clean,
}

fn mirror_op() -> impl proptest::strategy::Strategy<Value = MirrorOp> {
    use proptest::prelude::*;
    let file = 0u64..4;
    let block = 0u64..10;
    prop_oneof![
        4 => (file.clone(), block.clone()).prop_map(|(f, b)| MirrorOp::Read(f, b)),
        4 => (file.clone(), block.clone(), any::<bool>())
            .prop_map(|(f, b, fill)| MirrorOp::Write(f, b, fill)),
        1 => (file.clone(), block.clone()).prop_map(|(f, b)| MirrorOp::Truncate(f, b)),
        1 => file.clone().prop_map(MirrorOp::Delete),
        1 => (file.clone(), block).prop_map(|(f, b)| MirrorOp::Discard(f, b)),
        1 => proptest::option::of(file).prop_map(MirrorOp::Flush),
        1 => Just(MirrorOp::Clean),
    ]
}

proptest::proptest! {
    /// The per-file counts (docs/design.md §14) against a recount after every operation, in
    /// every variant: cached and dirty blocks per file as the core's line states give them,
    /// and `holds_blocks` against asking the core block by block.
    #[test]
    fn per_file_counts_equal_a_recount(
        variant in 0usize..4,
        capacity in 1u32..12,
        ops in proptest::collection::vec(mirror_op(), 1..120),
    ) {
        // Threshold cleaning, so the cleaner's write-backs change dirty states too.
        let cleaning = CleaningConfig::Threshold { high: 0.3, low: 0.1, batch: 2 };
        let mut c = FileCache::with_cleaning(capacity, Variant::ALL[variant], 4096, cleaning)
            .unwrap();
        let mut out = Vec::new();
        for op in ops {
            match op {
                MirrorOp::Read(f, b) => {
                    c.read(k(f, b), &mut out).unwrap();
                }
                MirrorOp::Write(f, b, fill) => {
                    c.write(k(f, b), fill, &mut out).unwrap();
                }
                MirrorOp::Truncate(f, b) => c.truncate(f, b, &mut out),
                MirrorOp::Delete(f) => c.delete_file(f, &mut out),
                MirrorOp::Discard(f, b) => c.discard(k(f, b), &mut out),
                MirrorOp::Flush(f) => c.flush(f, &mut out),
                MirrorOp::Clean => {
                    c.clean(0, 0, &mut out);
                }
            }
            out.clear();
            c.check_mirror();
            for f in 0..4 {
                let states: Vec<_> = (0..10).map(|b| c.lookup(k(f, b))).collect();
                let cached = states.iter().flatten().count() as u64;
                let dirty = states.iter().flatten().filter(|s| s.1).count() as u64;
                proptest::prop_assert_eq!(c.cached_blocks(f), cached);
                proptest::prop_assert_eq!(c.dirty_blocks_of(f), dirty);
                proptest::prop_assert_eq!(c.dirty_of_file(f).len() as u64, dirty);
                for n in 0..=11 {
                    let whole = states.iter().take(n as usize).all(Option::is_some) && n <= 10;
                    proptest::prop_assert_eq!(c.holds_blocks(f, n), whole, "file {} n {}", f, n);
                }
            }
        }
    }
}

#[test]
fn restored_blocks_are_counted() {
    let mut c = FileCache::new(4, Variant::WB);
    c.restore(0, k(5, 0), true).unwrap();
    c.restore(1, k(5, 1), false).unwrap();
    c.restore(3, k(5, 3), true).unwrap();
    c.check_mirror();
    assert_eq!((c.cached_blocks(5), c.dirty_blocks_of(5)), (3, 2));
    assert!(c.holds_blocks(5, 2) && !c.holds_blocks(5, 4) && !c.holds_blocks(5, 3));
    let mut ops = Vec::new();
    c.flush(Some(5), &mut ops);
    assert_eq!(c.dirty_blocks_of(5), 0);
    c.check_mirror();
}
