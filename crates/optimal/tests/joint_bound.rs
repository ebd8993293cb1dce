//! The joint write-back bounds (flow and time-aggregated) against the exact optimum on small
//! traces, against every policy on larger ones, on a trace where they beat the sum of minima,
//! and run twice.

use proptest::prelude::*;
use tiercache_core::LineKey;
use tiercache_eviction::{build, EvictionKind};
use tiercache_optimal::writeback::{
    aggregated_bound, belady_cost, best_bound, exact_optimum, joint_bound, lower_bound,
    policy_cost, BoundKind, CostWeights,
};
use tiercache_optimal::{FutureIndex, LineAccess, OptimalError};

fn accesses(raw: &[(u8, bool)]) -> Vec<LineAccess> {
    raw.iter()
        .map(|&(k, write)| LineAccess {
            key: LineKey(k as u64),
            write,
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_bound_is_below_the_exact_optimum(
        raw in proptest::collection::vec((0u8..5, any::<bool>()), 0..16),
        lines in 0usize..4,
        read in 0u32..6,
        write in 0u32..6,
    ) {
        let acc = accesses(&raw);
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        // Halves, so that shares of a write's reward are not all integers.
        let w = CostWeights { read: read as f64 / 2.0, write: write as f64 / 2.0 };
        let exact = exact_optimum(&acc, lines, w).unwrap();
        let b = best_bound(&index, lines as u64, w).unwrap();
        let flow = b.joint_flow.expect("small enough for the flow");
        let sum = b.sum_of_minima.cost(w);
        prop_assert!(sum <= exact + 1e-9, "sum of minima {} > optimum {}", sum, exact);
        prop_assert!(flow <= exact + 1e-9, "flow {} > optimum {}", flow, exact);
        // Aggregating the capacity relaxes the flow's problem further.
        prop_assert!(b.joint_aggregated <= flow + 1e-9, "aggregated {} > flow {}", b.joint_aggregated, flow);
        prop_assert!(b.cost <= exact + 1e-9);
        prop_assert!(b.cost + 1e-12 >= sum.max(flow).max(b.joint_aggregated));
        prop_assert_eq!(flow, joint_bound(&index, lines as u64, w).unwrap());
        prop_assert_eq!(b.joint_aggregated, aggregated_bound(&index, lines as u64, w).unwrap());
        // Without a write weight every reward is a read's, on one gap: the relaxation is the
        // model, and the flow its optimum.
        if write == 0 {
            prop_assert!(close(flow, exact), "write 0: flow {} != optimum {}", flow, exact);
        }
        // Without a read weight the sum of minima's write term is the optimum, so the best is.
        if read == 0 {
            prop_assert!(close(b.cost, exact), "read 0: best {} != optimum {}", b.cost, exact);
        }
    }

    #[test]
    fn every_policy_pays_at_least_the_joint_bounds_on_larger_traces(
        raw in proptest::collection::vec((0u8..60, any::<bool>()), 0..500),
        lines in 1u64..30,
        read in 0u32..4,
        write in 0u32..4,
    ) {
        let acc = accesses(&raw);
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let w = CostWeights { read: read as f64, write: write as f64 };
        let b = best_bound(&index, lines, w).unwrap();
        let flow = b.joint_flow.expect("small enough for the flow");
        prop_assert!(b.joint_aggregated <= flow + 1e-9);
        // Without a write weight both the flow and the reads' greedy are exact: they agree
        // (equal rewards, so many shortest paths a round).
        if write == 0 {
            let reads = w.read * b.sum_of_minima.reads as f64;
            prop_assert!(close(flow, reads), "write 0: flow {} != read minimum {}", flow, reads);
        }
        let paid = belady_cost(&index, lines).unwrap().cost(w);
        prop_assert!(paid + 1e-9 >= b.cost, "belady {} < bound {:?}", paid, b);
        for kind in EvictionKind::ALL {
            let mut p = build(kind, lines as usize, lines as usize);
            let paid = policy_cost(&index, lines, p.as_mut()).unwrap().cost(w);
            prop_assert!(paid + 1e-9 >= b.cost, "{} paid {} < bound {:?}", kind, paid, b);
        }
    }
}

/// One line, two writes three accesses apart, and another line read twice in between, in a
/// cache of one line. Alone, the reads hold `b` over its gap and the writes hold `a` over its
/// span, both with the whole cache: the sum of minima is `b`'s first read. Jointly, `a`'s span
/// covers `b`'s gap and one slot holds one line: either `a`'s first write or `b`'s second read
/// is paid too.
#[test]
fn the_joint_bounds_beat_the_sum_of_minima_when_reads_and_dirty_data_compete() {
    let acc = accesses(&[(0, true), (1, false), (1, false), (0, true)]);
    let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
    let w = CostWeights {
        read: 1.0,
        write: 1.0,
    };
    let exact = exact_optimum(&acc, 1, w).unwrap();
    assert_eq!(exact, 2.0);
    let sum = lower_bound(&index, 1).unwrap().cost(w);
    assert_eq!(sum, 1.0);
    let b = best_bound(&index, 1, w).unwrap();
    assert!(close(b.joint_flow.unwrap(), 2.0), "{b:?}");
    assert_eq!(b.binding, BoundKind::JointFlow);
    assert_eq!(b.binding.name(), "joint-flow");
    assert!(close(b.cost, exact));
    // Aggregated: 4 line-points of capacity; `b`'s gap and `a`'s tail (density 1) are taken,
    // then 2 of the 3 points of `a`'s first span (density 1/3): earned 8/3 of 4.
    assert!(close(b.joint_aggregated, 4.0 / 3.0), "{b:?}");
    assert!(sum < b.joint_aggregated);
}

/// A trace from a fixed xorshift: a hot set and a cold tail, a write in four.
fn generated(n: usize, lines: u64) -> Vec<LineAccess> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let key = if s.is_multiple_of(3) {
                s % lines
            } else {
                s % (lines / 8)
            };
            LineAccess {
                key: LineKey(key),
                write: (s >> 32).is_multiple_of(4),
            }
        })
        .collect()
}

#[test]
fn the_bounds_are_deterministic() {
    let acc = generated(3000, 400);
    let w = CostWeights {
        read: 1.0,
        write: 2.5,
    };
    for lines in [1, 10, 40, 120, 400] {
        let one = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let two = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let a = best_bound(&one, lines, w).unwrap();
        let b = best_bound(&two, lines, w).unwrap();
        assert_eq!(a, b, "{lines} lines");
        assert_eq!(
            a.joint_flow.unwrap().to_bits(),
            b.joint_flow.unwrap().to_bits()
        );
        assert_eq!(a.joint_aggregated.to_bits(), b.joint_aggregated.to_bits());
        assert_eq!(
            a,
            best_bound(&one, lines, w).unwrap(),
            "{lines} lines, again"
        );
    }
}

#[test]
fn the_flow_refuses_too_much_work_and_the_best_bound_goes_on_without_it() {
    // A loop twice over 40,000 lines read: 40,000 gaps all covering one point, so a cache one
    // line short needs 39,999 rounds over them.
    let n = 40_000u64;
    let acc: Vec<LineAccess> = (0..2)
        .flat_map(|_| 0..n)
        .map(|k| LineAccess {
            key: LineKey(k),
            write: false,
        })
        .collect();
    let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
    let w = CostWeights {
        read: 1.0,
        write: 1.0,
    };
    let err = joint_bound(&index, n - 1, w).unwrap_err();
    assert!(
        matches!(err, OptimalError::TooLarge { .. }),
        "{err}: not TooLarge"
    );
    assert!(err.to_string().contains("flow"), "{err}");
    let b = best_bound(&index, n - 1, w).unwrap();
    assert_eq!(b.joint_flow, None);
    // The reads' minimum is exact here: n cold misses and one more.
    assert_eq!(b.sum_of_minima.reads, n + 1);
    assert!(b.cost >= b.joint_aggregated);
}
