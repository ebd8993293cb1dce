//! Belady, the OPT stack and the write-back bound against exhaustive search on small traces,
//! and against each other and every online policy on larger random ones.

use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use tiercache_core::LineKey;
use tiercache_eviction::{build, EvictionKind};
use tiercache_optimal::writeback::{
    belady_cost, exact_optimum, lower_bound, policy_cost, CostWeights,
};
use tiercache_optimal::{opt_curve, opt_misses_at, Belady, FutureIndex, LineAccess};

fn accesses(raw: &[(u8, bool)]) -> Vec<LineAccess> {
    raw.iter()
        .map(|&(k, write)| LineAccess {
            key: LineKey(k as u64),
            write,
        })
        .collect()
}

/// The fewest misses of any demand-paging schedule (every miss cached), by trying every
/// victim.
fn brute_force_misses(trace: &[u64], lines: usize) -> u64 {
    let mut states: HashMap<BTreeSet<u64>, u64> = HashMap::from([(BTreeSet::new(), 0)]);
    for &k in trace {
        let mut next: HashMap<BTreeSet<u64>, u64> = HashMap::new();
        let mut offer = |s: BTreeSet<u64>, c: u64| {
            let e = next.entry(s).or_insert(u64::MAX);
            *e = (*e).min(c);
        };
        for (s, &c) in &states {
            if s.contains(&k) {
                offer(s.clone(), c);
            } else if lines == 0 {
                offer(s.clone(), c + 1);
            } else if s.len() < lines {
                let mut t = s.clone();
                t.insert(k);
                offer(t, c + 1);
            } else {
                for v in s {
                    let mut t = s.clone();
                    t.remove(v);
                    t.insert(k);
                    offer(t, c + 1);
                }
            }
        }
        states = next;
    }
    states.into_values().min().unwrap_or(0)
}

fn belady_misses(index: &FutureIndex, lines: u64) -> u64 {
    let mut b = Belady::new(lines, index.distinct());
    let mut r = index.reader().unwrap();
    let mut misses = 0;
    while let Some(f) = r.next_future().unwrap() {
        misses += !b.access(&f) as u64;
    }
    misses
}

fn online_kinds() -> Vec<EvictionKind> {
    EvictionKind::ALL.to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn belady_and_the_opt_stack_equal_exhaustive_search(
        raw in proptest::collection::vec((0u8..6, any::<bool>()), 0..14),
    ) {
        let acc = accesses(&raw);
        let keys: Vec<u64> = acc.iter().map(|a| a.key.0).collect();
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let curve = opt_curve(&index).unwrap();
        for lines in 0..=5 {
            let best = brute_force_misses(&keys, lines);
            prop_assert_eq!(belady_misses(&index, lines as u64), best, "{} lines", lines);
            prop_assert_eq!(curve.misses(lines as u64), best, "curve at {} lines", lines);
        }
    }

    #[test]
    fn the_opt_stack_equals_belady_at_every_size(
        raw in proptest::collection::vec((0u8..40, any::<bool>()), 0..400),
    ) {
        let acc = accesses(&raw);
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let curve = opt_curve(&index).unwrap();
        prop_assert_eq!(curve.accesses(), acc.len() as u64);
        let sizes: Vec<u64> = (0..=index.distinct() as u64 + 1).collect();
        let side_by_side = opt_misses_at(&index, &sizes).unwrap();
        for &lines in &sizes {
            prop_assert_eq!(curve.misses(lines), belady_misses(&index, lines), "{} lines", lines);
            prop_assert_eq!(side_by_side[lines as usize], curve.misses(lines));
        }
    }

    #[test]
    fn the_write_back_bound_is_below_the_exact_optimum_and_exact_for_one_weight(
        raw in proptest::collection::vec((0u8..5, any::<bool>()), 0..16),
        lines in 0usize..4,
        read in 1u32..5,
        write in 1u32..5,
    ) {
        let acc = accesses(&raw);
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let bound = lower_bound(&index, lines as u64).unwrap();
        let w = CostWeights { read: read as f64, write: write as f64 };
        let exact = exact_optimum(&acc, lines, w).unwrap();
        prop_assert!(bound.cost(w) <= exact + 1e-9, "bound {} > optimum {}", bound.cost(w), exact);
        // Each term is itself an exact minimum.
        let reads_only = CostWeights { read: 1.0, write: 0.0 };
        prop_assert_eq!(exact_optimum(&acc, lines, reads_only).unwrap(), bound.reads as f64);
        let writes_only = CostWeights { read: 0.0, write: 1.0 };
        prop_assert_eq!(exact_optimum(&acc, lines, writes_only).unwrap(), bound.writes as f64);
        // Every schedule a policy makes is one of the model's.
        for kind in online_kinds() {
            let mut p = build(kind, lines, lines);
            let paid = policy_cost(&index, lines as u64, p.as_mut()).unwrap().cost(w);
            prop_assert!(paid + 1e-9 >= exact, "{} paid {} < optimum {}", kind, paid, exact);
        }
        let paid = belady_cost(&index, lines as u64).unwrap().cost(w);
        prop_assert!(paid + 1e-9 >= exact, "belady paid {} < optimum {}", paid, exact);
    }

    #[test]
    fn every_policy_pays_at_least_the_bound_on_larger_traces(
        raw in proptest::collection::vec((0u8..60, any::<bool>()), 0..600),
        lines in 1u64..30,
    ) {
        let acc = accesses(&raw);
        let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
        let bound = lower_bound(&index, lines).unwrap();
        let b = belady_cost(&index, lines).unwrap();
        // MIN's misses are the fewest of demand paging; the bound allows bypassing, so fewer.
        prop_assert!(bound.reads <= b.reads);
        for kind in online_kinds() {
            let mut p = build(kind, lines as usize, lines as usize);
            let paid = policy_cost(&index, lines, p.as_mut()).unwrap();
            prop_assert!(paid.reads >= bound.reads, "{}: {:?} < {:?}", kind, paid, bound);
            prop_assert!(paid.writes >= bound.writes, "{}: {:?} < {:?}", kind, paid, bound);
        }
    }
}

#[test]
fn belady_beats_lru_on_a_loop_one_line_too_big() {
    // A loop over c + 1 lines: LRU misses every access, MIN only one in c after the first pass.
    let c = 10u64;
    let acc: Vec<LineAccess> = (0..20)
        .flat_map(|_| 0..=c)
        .map(|k| LineAccess {
            key: LineKey(k),
            write: false,
        })
        .collect();
    let index = FutureIndex::from_accesses(acc.iter().copied()).unwrap();
    let mut lru = build(EvictionKind::Lru, c as usize, c as usize);
    let lru_misses = policy_cost(&index, c, lru.as_mut()).unwrap().reads;
    assert_eq!(lru_misses, acc.len() as u64);
    let opt = opt_curve(&index).unwrap().misses(c);
    assert_eq!(opt, belady_misses(&index, c));
    let keys: Vec<u64> = acc.iter().map(|a| a.key.0).collect();
    assert_eq!(opt, brute_force_misses(&keys, c as usize));
    // After the cold misses, about one miss in c accesses.
    assert!(opt < lru_misses / 5, "OPT {opt}, LRU {lru_misses}");
}

#[test]
fn exhaustive_search_refuses_inputs_too_large() {
    let acc = accesses(&[(1, false); 65]);
    let w = CostWeights {
        read: 1.0,
        write: 1.0,
    };
    let err = exact_optimum(&acc, 2, w).unwrap_err();
    assert!(err.to_string().contains("accesses"), "{err}");
}
