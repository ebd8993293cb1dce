//! The batched path against the general core: same metrics, bit for bit.

use super::*;
use proptest::prelude::*;
use tiercache_core::VolumeId;
use tiercache_policy::WritePolicy;

fn config(eviction: EvictionKind, lines: u64, line_size: u64) -> CacheConfig {
    CacheConfig {
        capacity: lines * line_size,
        line_size,
        eviction,
        ..Default::default()
    }
}

fn read(time_ns: u64, volume: u32, offset: u64, len: u64) -> Request {
    Request {
        time_ns,
        volume: VolumeId(volume),
        op: Op::Read,
        offset,
        len,
    }
}

/// Both runners on fresh caches built from `cfg`.
fn both(
    cfg: &CacheConfig,
    reqs: &[Request],
    run: &RunLimits,
) -> (Result<RunMetrics, String>, Result<BatchedOutcome, String>) {
    let mut general = Cache::new(cfg).unwrap();
    let a = hit_ratio_only_iter(&mut general, reqs.iter().copied(), run).map_err(|e| e.to_string());
    let fresh = Cache::new(cfg).unwrap();
    // Small, uneven batches so that hints and limits cross batch ends.
    struct Uneven<'a>(&'a [Request], usize);
    impl RequestBatches for Uneven<'_> {
        fn next_batch(&mut self, out: &mut Vec<Request>) {
            out.clear();
            let take = (self.1 % 37 + 1).min(self.0.len());
            self.1 += 11;
            out.extend_from_slice(&self.0[..take]);
            self.0 = &self.0[take..];
        }
    }
    let b = hit_ratio_batched(&fresh, &mut Uneven(reqs, 0), run).map_err(|e| e.to_string());
    (a, b)
}

fn requests() -> impl Strategy<Value = Vec<Request>> {
    // Mostly one-line reads over a few dozen lines of two volumes, some partial, some spanning
    // two or three lines; times increase in small steps.
    proptest::collection::vec(
        (
            0u32..2,
            0u64..48,
            0u64..4096,
            prop_oneof![4 => Just(0u64), 1 => 1u64..3],
        ),
        1..400,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (vol, line, within, extra))| {
                let (offset, len) = if extra == 0 && within % 3 == 0 {
                    (line * 4096, 4096)
                } else if extra == 0 {
                    (line * 4096 + within / 2, 1 + within / 2)
                } else {
                    (line * 4096 + within, extra * 4096)
                };
                read(i as u64 * 10, vol, offset, len)
            })
            .collect()
    })
}

fn limits() -> impl Strategy<Value = RunLimits> {
    // No limit at all (the batched path's loop without per-request checks) a quarter of the
    // time: the ranges below almost never give it.
    prop_oneof![
        1 => Just(RunLimits::default()),
        3 => some_limits(),
    ]
}

fn some_limits() -> impl Strategy<Value = RunLimits> {
    (
        0u64..50,
        prop::option::of(1u64..300),
        0u64..300,
        prop::option::of(1u64..2000),
    )
        .prop_map(
            |(warmup_requests, requests, warmup_ns, duration_ns)| RunLimits {
                warmup_requests,
                requests,
                warmup_ns,
                duration_ns,
                ..Default::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every policy, random reads (whole lines, parts of lines, several lines) over small
    /// caches, random warm-up and limits: the batched path's metrics equal the core's.
    #[test]
    fn batched_metrics_equal_the_core(
        reqs in requests(),
        lines in 1u64..24,
        run in limits(),
        policy in 0usize..EvictionKind::ALL.len(),
        mode in prop_oneof![
            Just(WritePolicy::WriteBack),
            Just(WritePolicy::WriteThrough),
            Just(WritePolicy::WriteAround),
            Just(WritePolicy::ReadOnly),
        ],
    ) {
        let mut cfg = config(EvictionKind::ALL[policy], lines, 4096);
        cfg.write_policy = mode;
        let (general, batched) = both(&cfg, &reqs, &run);
        match (general, batched) {
            (Ok(m), Ok(BatchedOutcome::Done(b))) => prop_assert_eq!(m, *b),
            (g, b) => prop_assert!(false, "general {:?}, batched {:?}", g, b),
        }
    }
}

#[test]
fn stops_at_the_first_request_it_does_not_model() {
    let cfg = config(EvictionKind::Lru, 4, 4096);
    let mut reqs: Vec<Request> = (0..10).map(|i| read(i, 0, i * 4096, 4096)).collect();
    reqs[7].op = Op::Write;
    let (_, b) = both(&cfg, &reqs, &RunLimits::default());
    assert_eq!(
        b,
        Ok(BatchedOutcome::Unsupported {
            index: 7,
            reason: "a request other than a read"
        })
    );
    reqs[7] = read(7, 0, 0, 0);
    let (_, b) = both(&cfg, &reqs, &RunLimits::default());
    assert!(matches!(
        b,
        Ok(BatchedOutcome::Unsupported { index: 7, .. })
    ));
}

#[test]
fn an_unaddressable_request_fails_as_in_the_core() {
    let cfg = config(EvictionKind::S3Fifo, 4, 4096);
    let reqs = vec![read(0, 0, 0, 4096), read(1, 0, u64::MAX - 10, 4096)];
    let (g, b) = both(&cfg, &reqs, &RunLimits::default());
    let g = g.unwrap_err();
    assert!(g.starts_with("request #1"), "{g}");
    assert_eq!(b.unwrap_err(), g);
}

#[test]
fn caches_it_does_not_model_are_refused() {
    let mut cfg = config(EvictionKind::Lru, 4, 4096);
    cfg.promotion = PromotionConfig::Never;
    assert!(batched_supports(&cfg).is_err());
    let cache = Cache::new(&cfg).unwrap();
    let out = hit_ratio_batched(
        &cache,
        &mut IterBatches(std::iter::empty()),
        &RunLimits::default(),
    );
    assert!(matches!(
        out,
        Ok(BatchedOutcome::Unsupported { index: 0, .. })
    ));
    let mut cfg = config(EvictionKind::Lru, 4, 4096);
    cfg.write_policy = WritePolicy::PassThrough;
    assert!(batched_supports(&cfg).is_err());
    cfg.write_policy = WritePolicy::WriteOnly;
    assert!(batched_supports(&cfg).is_err());
}

/// A larger run, every policy, a zipf-like skew through a cache of a few thousand lines (long
/// index probe runs, many evictions): still equal.
#[test]
fn large_skewed_runs_agree() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let reqs: Vec<Request> = (0..60_000u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Squaring a uniform draw skews towards small line numbers.
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            let line = (u * u * 40_000.0) as u64;
            read(i, (x & 1) as u32, line * 4096, 4096)
        })
        .collect();
    let run = RunLimits {
        warmup_requests: 10_000,
        ..Default::default()
    };
    for kind in EvictionKind::ALL {
        let (g, b) = both(&config(kind, 3000, 4096), &reqs, &run);
        let g = g.unwrap();
        assert!(g.hit_ratio > 0.0 && g.evictions > 0, "{kind}");
        assert_eq!(b, Ok(BatchedOutcome::Done(Box::new(g))), "{kind}");
    }
}
