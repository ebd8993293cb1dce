//! The batched hit-ratio path is an accelerator of the policy core, nothing more: on every
//! trace in the repository's fixtures (`fixtures/traces`), for every replacement policy at
//! several cache sizes, its metrics equal the general core's bit for bit, and it gives up at
//! the first request it does not model (docs/design.md §3: one core; the fast path's contract
//! is this equivalence).

use tiercache_core::{Op, Request};
use tiercache_policy::{Cache, CacheConfig, EvictionKind};
use tiercache_sim::{
    hit_ratio_batched, hit_ratio_only_iter, BatchedOutcome, IterBatches, RunLimits,
};

mod common;
use common::{fixture, footprint_lines, FIXTURES, LINE};

#[test]
fn batched_path_equals_the_core_on_every_fixture_and_policy() {
    for name in FIXTURES {
        let all = fixture(name);
        // The batched path models non-empty reads; on the reads of each trace it must give
        // the core's metrics.
        let reads: Vec<Request> = all
            .iter()
            .copied()
            .filter(|r| r.op == Op::Read && r.len > 0)
            .collect();
        assert!(reads.len() > 100, "{name}: {} reads", reads.len());
        let footprint = footprint_lines(&reads);
        let run = RunLimits {
            warmup_requests: reads.len() as u64 / 10,
            ..Default::default()
        };
        for kind in EvictionKind::ALL {
            for percent in [1, 10, 30] {
                let lines = (footprint * percent / 100).max(1);
                let cfg = CacheConfig {
                    capacity: lines * LINE,
                    line_size: LINE,
                    eviction: kind,
                    ..Default::default()
                };
                let mut general = Cache::new(&cfg).unwrap();
                let core = hit_ratio_only_iter(&mut general, reads.iter().copied(), &run)
                    .unwrap_or_else(|e| panic!("{name} {kind} {percent}%: {e}"));
                assert!(
                    core.evictions > 0,
                    "{name} {kind} {percent}%: the cache never filled, the case checks little"
                );
                let fast = hit_ratio_batched(
                    &Cache::new(&cfg).unwrap(),
                    &mut IterBatches(reads.iter().copied()),
                    &run,
                )
                .unwrap();
                assert_eq!(
                    fast,
                    BatchedOutcome::Done(Box::new(core)),
                    "{name} {kind} {percent}% of {footprint} lines"
                );
            }
        }
        // On the whole trace, writes included, it stops at the first request it does not
        // model, so a caller falls back to the core rather than miscounting.
        let first_other = all.iter().position(|r| r.op != Op::Read || r.len == 0);
        let cfg = CacheConfig {
            capacity: (footprint / 10).max(1) * LINE,
            line_size: LINE,
            ..Default::default()
        };
        let out = hit_ratio_batched(
            &Cache::new(&cfg).unwrap(),
            &mut IterBatches(all.iter().copied()),
            &RunLimits::default(),
        )
        .unwrap();
        match (first_other, out) {
            (Some(i), BatchedOutcome::Unsupported { index, .. }) => {
                assert_eq!(index, i as u64, "{name}: stopped at the first non-read")
            }
            (None, BatchedOutcome::Done(_)) => {}
            (i, o) => panic!("{name}: first non-read {i:?}, batched {o:?}"),
        }
    }
}
