//! Every policy against its plain reference model (tests/common/models.rs) on random access
//! streams with removals and pinned lines: same hits, same victims, same sizes, step by step.

mod common;

use common::models::ModelHarness;
use common::{Harness, Outcome};
use proptest::prelude::*;
use std::collections::HashSet;
use tiercache_eviction::EvictionKind;

#[derive(Debug, Clone)]
enum Op {
    Access(u64),
    Remove(u64),
    Pin(u64),
    Unpin(u64),
}

fn ops(keys: u64, with_pins: bool) -> impl Strategy<Value = Vec<Op>> {
    let pin_weight = if with_pins { 2 } else { 0 };
    proptest::collection::vec(
        prop_oneof![
            40 => (0..keys).prop_map(Op::Access),
            2 => (0..keys).prop_map(Op::Remove),
            pin_weight => (0..keys).prop_map(Op::Pin),
            pin_weight => (0..keys).prop_map(Op::Unpin),
        ],
        0..400,
    )
}

fn check(kind: EvictionKind, capacity: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut real = Harness::new(kind, capacity);
    let mut model = ModelHarness::new(kind, capacity);
    let mut pinned = HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Access(k) => {
                let got = real.access(k, &pinned);
                let want = model.access(k, &pinned);
                prop_assert_eq!(got, want, "step {} access {}", i, k);
                if let Outcome::Miss { victim: Some(v) } = got {
                    prop_assert!(!pinned.contains(&v));
                }
            }
            Op::Remove(k) => {
                prop_assert_eq!(real.remove(k), model.remove(k), "step {} remove {}", i, k);
            }
            Op::Pin(k) => {
                pinned.insert(k);
            }
            Op::Unpin(k) => {
                pinned.remove(&k);
            }
        }
        prop_assert_eq!(real.policy.len(), real.resident_count());
        prop_assert_eq!(model.model.len(), real.resident_count());
        prop_assert!(real.resident_count() <= capacity);
    }
    Ok(())
}

fn kinds() -> impl Strategy<Value = EvictionKind> {
    proptest::sample::select(EvictionKind::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Small caches, keys from a range about twice the cache: plenty of hits and evictions.
    #[test]
    fn policies_match_models(kind in kinds(), capacity in 1usize..14, seed_ops in ops(28, false)) {
        let keys = 2 * capacity as u64 + 3;
        let ops: Vec<Op> = seed_ops.into_iter().map(|op| match op {
            Op::Access(k) => Op::Access(k % keys),
            Op::Remove(k) => Op::Remove(k % keys),
            other => other,
        }).collect();
        check(kind, capacity, &ops)?;
    }

    /// Same with lines pinned and unpinned at random (evictions skip them; a cache whose lines
    /// are all pinned bypasses).
    #[test]
    fn policies_match_models_with_pinned_lines(kind in kinds(), capacity in 1usize..10, ops in ops(16, true)) {
        check(kind, capacity, &ops)?;
    }

    /// Larger caches (S3-FIFO's small queue and ARC's adaptation only act from ~10 lines).
    #[test]
    fn policies_match_models_larger(kind in kinds(), capacity in 20usize..60, hot in 5u64..40, ops in ops(160, false)) {
        // Skew: half the accesses go to a hot subset.
        let ops: Vec<Op> = ops.into_iter().enumerate().map(|(i, op)| match op {
            Op::Access(k) if i % 2 == 0 => Op::Access(k % hot),
            other => other,
        }).collect();
        check(kind, capacity, &ops)?;
    }
}

/// Removals as frequent as a third of the accesses, over a key range close to the cache:
/// the same slot leaves and returns many times between two passes of a hand (CAR's rings
/// keep a removed line's entry as a stale one and purge when a slot has three, ring.rs).
fn removal_heavy_ops(keys: u64) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            30 => (0..keys).prop_map(Op::Access),
            10 => (0..keys).prop_map(Op::Remove),
            2 => (0..keys).prop_map(Op::Pin),
            2 => (0..keys).prop_map(Op::Unpin),
        ],
        0..600,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The clock policies against their models on removal-heavy streams.
    #[test]
    fn clock_policies_match_models_with_many_removals(
        kind in proptest::sample::select(vec![EvictionKind::Car, EvictionKind::ClockPro, EvictionKind::Clock]),
        capacity in 1usize..12,
        ops in removal_heavy_ops(20),
    ) {
        check(kind, capacity, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// S3-FIFO as in libCacheSim before December 2024 (small fills up before the first
    /// eviction) against the model with the same switch.
    #[test]
    fn s3fifo_without_early_main_fill_matches_model(capacity in 10usize..40, ops in ops(80, true)) {
        use tiercache_eviction::{S3Fifo, S3FifoConfig};
        let config = S3FifoConfig { fill_main_before_first_eviction: false, ..S3FifoConfig::default() };
        let slot_limit = capacity + 3;
        let mut real = Harness::with_policy(Box::new(S3Fifo::with_config(capacity, slot_limit, config)), capacity, slot_limit);
        let mut model = ModelHarness::with_model(Box::new(common::models::S3FifoModel::new(capacity, false)), capacity);
        let mut pinned = HashSet::new();
        for op in ops {
            match op {
                Op::Access(k) => prop_assert_eq!(real.access(k, &pinned), model.access(k, &pinned)),
                Op::Remove(k) => prop_assert_eq!(real.remove(k), model.remove(k)),
                Op::Pin(k) => { pinned.insert(k); }
                Op::Unpin(k) => { pinned.remove(&k); }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum ResizeOp {
    Access(u64),
    AccessCold(u64),
    Remove(u64),
    Pin(u64),
    Unpin(u64),
    SetCapacity(usize),
}

fn resize_ops(keys: u64, max_capacity: usize) -> impl Strategy<Value = Vec<ResizeOp>> {
    proptest::collection::vec(
        prop_oneof![
            30 => (0..keys).prop_map(ResizeOp::Access),
            8 => (0..keys).prop_map(ResizeOp::AccessCold),
            2 => (0..keys).prop_map(ResizeOp::Remove),
            1 => (0..keys).prop_map(ResizeOp::Pin),
            2 => (0..keys).prop_map(ResizeOp::Unpin),
            2 => (0..=max_capacity).prop_map(ResizeOp::SetCapacity),
        ],
        0..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Capacity changes (with the caller evicting the excess) and cold inserts: every policy
    /// still equals its model step by step: same hits, victims, shrink victims and sizes; the
    /// policy reports the capacity it was given.
    #[test]
    fn policies_match_models_with_resizes_and_cold_inserts(
        kind in kinds(),
        max_capacity in 1usize..40,
        start in 0usize..40,
        ops in resize_ops(90, 40),
    ) {
        check_resizes(kind, max_capacity, start, ops)?;
    }
}

/// Replays `ops` on the policy, the same policy grown slot by slot, and its model; all three
/// must agree step by step.
fn check_resizes(
    kind: EvictionKind,
    max_capacity: usize,
    start: usize,
    ops: Vec<ResizeOp>,
) -> Result<(), TestCaseError> {
    {
        let capacity = start.min(max_capacity);
        let mut real = Harness::with_slot_limit(kind, capacity, max_capacity);
        // The same policy built with the smallest slot limit and grown as slots need: the
        // same decisions (`Eviction::grow_slots`).
        let mut grown = Harness::growing(kind, capacity, max_capacity);
        let mut model = ModelHarness::new(kind, capacity);
        let keys = 2 * max_capacity as u64 + 3;
        let mut pinned = HashSet::new();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                ResizeOp::Access(k) => {
                    let k = k % keys;
                    let got = real.access(k, &pinned);
                    prop_assert_eq!(
                        grown.access(k, &pinned),
                        got,
                        "step {} grown access {}",
                        i,
                        k
                    );
                    prop_assert_eq!(got, model.access(k, &pinned), "step {} access {}", i, k);
                }
                ResizeOp::AccessCold(k) => {
                    let k = k % keys;
                    let got = real.access_cold(k, &pinned);
                    prop_assert_eq!(
                        grown.access_cold(k, &pinned),
                        got,
                        "step {} grown cold access {}",
                        i,
                        k
                    );
                    prop_assert_eq!(
                        got,
                        model.access_cold(k, &pinned),
                        "step {} cold access {}",
                        i,
                        k
                    );
                }
                ResizeOp::Remove(k) => {
                    let got = real.remove(k % keys);
                    prop_assert_eq!(grown.remove(k % keys), got);
                    prop_assert_eq!(got, model.remove(k % keys));
                }
                ResizeOp::Pin(k) => {
                    pinned.insert(k % keys);
                }
                ResizeOp::Unpin(k) => {
                    pinned.remove(&(k % keys));
                }
                ResizeOp::SetCapacity(c) => {
                    let cap = c.min(max_capacity);
                    let got = real.set_capacity(cap, &pinned);
                    prop_assert_eq!(
                        &grown.set_capacity(cap, &pinned),
                        &got,
                        "step {} grown capacity {}",
                        i,
                        cap
                    );
                    prop_assert_eq!(grown.policy.capacity(), cap);
                    let want = model.set_capacity(cap, &pinned);
                    prop_assert_eq!(&got, &want, "step {} capacity {}", i, cap);
                    prop_assert_eq!(real.policy.capacity(), cap);
                    // The shrink stops early only when every resident line is pinned.
                    if real.resident_count() > cap {
                        prop_assert!(real.resident_count() <= cap + pinned.len());
                    }
                }
            }
            prop_assert_eq!(real.policy.len(), real.resident_count());
            prop_assert_eq!(grown.policy.len(), real.resident_count());
            prop_assert_eq!(model.model.len(), real.resident_count());
        }
    }
    Ok(())
}

/// LIRS: a cold-inserted line hit while the LIR set is empty enters `S` as resident HIR;
/// the first LIR line must then prune it from `S`'s bottom (the bottom is always LIR), so
/// its next hit keeps it HIR (at `Q`'s end) instead of making it LIR. Before the fix the
/// policy kept the entry below the LIR bottom and evicted 14 at the last step, the model
/// (pruning only at a later LIR hit) 12.
#[test]
fn lirs_prunes_below_first_lir_line() {
    use ResizeOp::{Access, AccessCold};
    let ops = vec![
        AccessCold(12), // cold: resident HIR at Q's front, not in S
        Access(12),     // hit, not in S: into S (top), stays HIR
        Access(3),      // first LIR line: 12's entry below it is pruned
        Access(3),
        Access(6),
        Access(8),
        AccessCold(12), // a hit: 12 is not in S, so it stays HIR, at Q's end
        Access(10),
        Access(13),
        Access(15),
        Access(16),
        Access(13),
        Access(11),
        Access(9),
        Access(0),
        Access(1),
        Access(17),
        Access(21),
        Access(2),
        Access(4),
        Access(14),     // the LIR set (16 of 17) is full: 14 enters HIR behind 12
        AccessCold(22), // full: Q's front, 12, is the victim
    ];
    check_resizes(EvictionKind::Lirs, 17, 17, ops.clone()).unwrap();
    let mut real = Harness::with_slot_limit(EvictionKind::Lirs, 17, 17);
    let none = HashSet::new();
    let mut last = None;
    for op in ops {
        last = Some(match op {
            Access(k) => real.access(k, &none),
            AccessCold(k) => real.access_cold(k, &none),
            _ => unreachable!(),
        });
    }
    assert_eq!(last, Some(Outcome::Miss { victim: Some(12) }));
}
