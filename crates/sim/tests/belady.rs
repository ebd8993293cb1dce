//! `eviction = "belady"` in hit-ratio mode (docs/design.md §12): on every fixture trace, reads
//! and writes, its line misses are MIN's over the same line accesses and no online policy run by the general core
//! has fewer; on reads only it counts requests and bytes as the batched path does; a trace that
//! changes between its two passes is an error, not a wrong count.

use tiercache_core::{LineGeometry, Op, Request};
use tiercache_optimal::{line_accesses, opt_misses_at, FutureIndex};
use tiercache_policy::{Cache, CacheConfig, EvictionKind};
use tiercache_sim::{
    hit_ratio_batched, hit_ratio_belady, hit_ratio_only_iter, BatchedOutcome, IterBatches,
    RunLimits, SimError,
};

mod common;
use common::{footprint_lines, FIXTURES, LINE};

/// The fixture's reads and writes with data (trims drop lines in the core and reference none
/// here: left out of both).
fn fixture(name: &str) -> Vec<Request> {
    common::fixture(name)
        .into_iter()
        .filter(|r| matches!(r.op, Op::Read | Op::Write) && r.len > 0)
        .collect()
}

fn belady(cfg: &CacheConfig, reqs: &[Request], run: &RunLimits) -> tiercache_metrics::RunMetrics {
    hit_ratio_belady(
        cfg,
        &mut IterBatches(reqs.iter().copied()),
        &mut IterBatches(reqs.iter().copied()),
        run,
    )
    .unwrap()
}

fn config(lines: u64, eviction: EvictionKind) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        eviction,
        ..Default::default()
    }
}

#[test]
fn belady_is_min_and_no_online_policy_misses_less() {
    let geo = LineGeometry::new(LINE).unwrap();
    for name in FIXTURES {
        let reqs = fixture(name);
        let footprint = footprint_lines(&reqs);
        let mut split = Vec::new();
        let mut b = FutureIndex::builder().unwrap();
        for (i, r) in reqs.iter().enumerate() {
            split.clear();
            line_accesses(r, &geo, i as u64, &mut split).unwrap();
            for a in &split {
                b.push(*a).unwrap();
            }
        }
        let index = b.finish().unwrap();
        let sizes: Vec<u64> = [1, 10, 30]
            .iter()
            .map(|p| (footprint * p / 100).max(1))
            .collect();
        let opt = opt_misses_at(&index, &sizes).unwrap();
        for (i, percent) in [1, 10, 30].into_iter().enumerate() {
            let lines = sizes[i];
            let m = belady(
                &config(lines, EvictionKind::Belady),
                &reqs,
                &RunLimits::default(),
            );
            let accesses = index.len() as f64;
            let opt_misses = ((1.0 - m.hit_ratio) * accesses).round() as u64;
            assert_eq!(opt_misses, opt[i], "{name} {percent}%");
            assert!(m.evictions > 0, "{name} {percent}%: never full");
            assert_eq!(m.requests, reqs.len() as u64);
            // The general core at one size (the slow part of this test).
            for kind in EvictionKind::ALL.into_iter().filter(|_| percent == 10) {
                let mut cache = Cache::new(&config(lines, kind)).unwrap();
                let core =
                    hit_ratio_only_iter(&mut cache, reqs.iter().copied(), &RunLimits::default())
                        .unwrap();
                assert!(
                    core.hit_ratio <= m.hit_ratio + 1e-12,
                    "{name} {percent}% {kind}: {} above belady's {}",
                    core.hit_ratio,
                    m.hit_ratio
                );
            }
        }
    }
}

#[test]
fn on_reads_belady_counts_requests_and_bytes_as_the_batched_path() {
    let reqs: Vec<Request> = fixture("msr-hm0-sample.csv")
        .into_iter()
        .filter(|r| r.op == Op::Read)
        .collect();
    let lines = (footprint_lines(&reqs) / 10).max(1);
    let run = RunLimits {
        warmup_requests: reqs.len() as u64 / 10,
        ..Default::default()
    };
    let opt = belady(&config(lines, EvictionKind::Belady), &reqs, &run);
    let BatchedOutcome::Done(lru) = hit_ratio_batched(
        &Cache::new(&config(lines, EvictionKind::Lru)).unwrap(),
        &mut IterBatches(reqs.iter().copied()),
        &run,
    )
    .unwrap() else {
        panic!("batched path refused reads")
    };
    assert_eq!(opt.requests, lru.requests);
    assert_eq!(opt.read_requests, lru.read_requests);
    assert_eq!(opt.bytes, lru.bytes);
    assert!(opt.hit_ratio >= lru.hit_ratio);
    // Misses cost a line each from the backend and a promotion.
    assert_eq!(opt.backend_bytes_read, opt.promotions * LINE);
    assert_eq!(lru.backend_bytes_read, lru.promotions * LINE);
    assert!(opt.promotions <= lru.promotions);
    assert_eq!(opt.dirty_evictions, 0);
}

#[test]
fn a_trace_that_changes_between_the_passes_is_an_error() {
    let reqs = fixture("msr-hm0-sample.csv");
    let shorter = &reqs[..reqs.len() - 1];
    let err = hit_ratio_belady(
        &config(64, EvictionKind::Belady),
        &mut IterBatches(reqs.iter().copied()),
        &mut IterBatches(shorter.iter().copied()),
        &RunLimits::default(),
    )
    .unwrap_err();
    assert!(matches!(&err, SimError::Config { .. }), "{err}");
    assert!(err.to_string().contains("changed"), "{err}");
}

#[test]
fn run_limits_apply_to_both_passes() {
    let reqs = fixture("msr-hm0-sample.csv");
    let run = RunLimits {
        warmup_requests: 100,
        requests: Some(300),
        ..Default::default()
    };
    let m = belady(&config(64, EvictionKind::Belady), &reqs, &run);
    assert_eq!(m.requests, 300);
    assert_eq!(m.read_requests + m.write_requests, 300);
}
