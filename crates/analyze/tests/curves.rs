//! The exact curve equals the policy core's hit-ratio-only LRU; SHARDS stays close to it with
//! bounded memory; useful demand never exceeds traditional demand.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use tiercache_analyze::shards::Shards;
use tiercache_analyze::{Analyzer, Options};
use tiercache_core::{Op, Request, VolumeId};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, EvictionKind, PromotionConfig};

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces");

fn core_lru_miss_ratio(reqs: &[Request], lines: u64) -> f64 {
    let cfg = CacheConfig {
        capacity: lines * 4096,
        line_size: 4096,
        eviction: EvictionKind::Lru,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let mut cache = Cache::new(&cfg).unwrap();
    for r in reqs {
        cache.access(r, None).unwrap();
    }
    // The curve counts an access as a hit when its line is resident; the core also reports
    // partial hits (resident line, some sub-blocks not valid yet) apart.
    let s = cache.stats();
    1.0 - (s.line_hits + s.line_partial_hits) as f64 / s.line_accesses as f64
}

fn zipf_requests(n: usize, blocks: u64, seed: u64) -> Vec<Request> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let zipf = Zipf::new(blocks, 0.9).unwrap();
    (0..n)
        .map(|i| {
            let b = (zipf.sample(&mut rng) as u64 - 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                % (blocks * 4);
            if i % 4 == 0 {
                Request::write(b * 4096, 4096)
            } else {
                Request::read(b * 4096, 4096)
            }
        })
        .collect()
}

fn exact_curve(reqs: &[Request], sizes: &[u64]) -> Vec<f64> {
    let mut a = Analyzer::new(Options {
        sizes: sizes.to_vec(),
        ..Options::default()
    })
    .unwrap();
    reqs.iter().for_each(|r| a.add(r));
    a.finish(&|v| v.0.to_string())
        .curve
        .iter()
        .map(|p| p.miss_ratio)
        .collect()
}

#[test]
fn exact_curve_equals_the_policy_core_on_fixtures_and_zipf() {
    let mut traces: Vec<Vec<Request>> = Vec::new();
    for f in [
        "msr-hm0-sample.csv",
        "systor17-sample.csv.gz",
        "tencent-cbs-sample.csv.bz2",
    ] {
        let reader =
            tiercache_trace::open(&format!("{SHARED}/{f}"), None, &Default::default()).unwrap();
        traces.push(
            reader
                .map(|r| r.unwrap())
                .filter(|r| matches!(r.op, Op::Read | Op::Write))
                .collect(),
        );
    }
    traces.push(zipf_requests(200_000, 20_000, 1));
    let sizes = [1u64, 7, 64, 500, 3000, 20_000];
    for reqs in &traces {
        let curve = exact_curve(reqs, &sizes);
        for (&lines, &mine) in sizes.iter().zip(&curve) {
            let core = core_lru_miss_ratio(reqs, lines);
            assert!(
                (mine - core).abs() < 1e-9,
                "{lines} lines: curve {mine} vs core {core}"
            );
        }
    }
}

/// SHARDS at 1% and fixed-size SHARDS against the exact curve at every power of two from one
/// line to the footprint, on skewed Zipf traces (hot lines and cold tails both matter).
#[test]
fn shards_stays_within_0_01_of_exact_at_every_power_of_two() {
    for (exponent, blocks, seed) in [(0.9, 200_000, 2), (1.0, 1_000_000, 5)] {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let zipf = Zipf::new(blocks, exponent).unwrap();
        let reqs: Vec<Request> = (0..1_500_000)
            .map(|_| {
                let b = (zipf.sample(&mut rng) as u64 - 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    % (blocks * 4);
                Request::read(b * 4096, 4096)
            })
            .collect();
        let mut a = Analyzer::new(Options::default()).unwrap();
        reqs.iter().for_each(|r| a.add(r));
        let exact = a.finish(&|v| v.0.to_string()).curve;
        assert!(exact.len() > 15, "powers of two up to the footprint");
        let max_entries = 4_000;
        for (mut shards, bound) in [
            (Shards::fixed_rate(0.01), None),
            (Shards::fixed_size(max_entries), Some(max_entries)),
        ] {
            for r in &reqs {
                shards.access(tiercache_core::LineKey::new(VolumeId(0), r.offset / 4096).0);
            }
            let mae: f64 = exact
                .iter()
                .map(|p| (shards.miss_ratio(p.lines) - p.miss_ratio).abs())
                .sum::<f64>()
                / exact.len() as f64;
            assert!(
                mae < 0.01,
                "Zipf({exponent}): mean absolute error {mae} (rate {})",
                shards.rate()
            );
            if let Some(max) = bound {
                assert!(
                    shards.peak_entries() <= max,
                    "tracked {} lines, bound {max}",
                    shards.peak_entries()
                );
            }
        }
    }
}

#[test]
fn fixed_size_shards_memory_is_bounded() {
    let mut s = Shards::fixed_size(1_000);
    for k in 0..2_000_000u64 {
        s.access(k.wrapping_mul(2654435761));
    }
    assert!(s.peak_entries() <= 1_000, "tracked {}", s.peak_entries());
    assert!(
        s.rate() < 0.01,
        "the rate fell as the sample filled: {}",
        s.rate()
    );
}

proptest! {
    /// Useful (read) reuses are a subset of all reuses: URD demand never exceeds TRD demand.
    #[test]
    fn urd_demand_never_exceeds_trd_demand(seq in proptest::collection::vec((any::<bool>(), 0u64..40), 1..400)) {
        let mut a = Analyzer::new(Options::default()).unwrap();
        for (w, k) in seq {
            let r = if w { Request::write(k * 4096, 4096) } else { Request::read(k * 4096, 4096) };
            a.add(&r);
        }
        let an = a.finish(&|v| v.0.to_string());
        for v in &an.volumes {
            prop_assert!(v.advice.urd_demand_lines <= v.advice.trd_demand_lines);
            prop_assert!(v.advice.max_urd <= v.advice.max_trd);
            prop_assert!(v.advice.urd_knee_lines <= v.advice.urd_demand_lines);
        }
    }
}

/// Several volumes sharing one cache: the shared curve is the core's LRU over all of them, and
/// each volume's own curve is the core's LRU over that volume alone.
#[test]
fn multi_volume_curves_match_the_core() {
    let mut reqs = zipf_requests(60_000, 5_000, 3);
    for (i, r) in reqs.iter_mut().enumerate() {
        // The first 10,000 requests see only volume 0, then three volumes interleave.
        if i >= 10_000 {
            r.volume = VolumeId((i % 3) as u32);
        }
    }
    let sizes = [16u64, 256, 4096];
    let mut a = Analyzer::new(Options {
        sizes: sizes.to_vec(),
        ..Options::default()
    })
    .unwrap();
    reqs.iter().for_each(|r| a.add(r));
    let an = a.finish(&|v| v.0.to_string());
    for (p, &lines) in an.curve.iter().zip(&sizes) {
        assert!((p.miss_ratio - core_lru_miss_ratio(&reqs, lines)).abs() < 1e-9);
    }
    for v in &an.volumes {
        let id: u32 = v.name.parse().unwrap();
        let own: Vec<Request> = reqs.iter().filter(|r| r.volume.0 == id).copied().collect();
        for (p, &lines) in v.curve.iter().zip(&sizes) {
            assert!(
                (p.miss_ratio - core_lru_miss_ratio(&own, lines)).abs() < 1e-9,
                "volume {id} at {lines}"
            );
        }
    }
}

/// The plots are well-formed SVG with one drawn line per curve, and the reuse CDFs end at 1.
#[test]
fn plots_are_svg_with_a_line_per_curve() {
    let mut a = Analyzer::new(Options {
        shards_rate: Some(0.5),
        interval_ns: 1_000_000,
        ..Options::default()
    })
    .unwrap();
    for i in 0..20_000u64 {
        let line = (i * 7919) % 500 + if i % 3 == 0 { 0 } else { 1000 };
        let op = if i % 4 == 0 {
            tiercache_core::Op::Write
        } else {
            tiercache_core::Op::Read
        };
        a.add(&tiercache_core::Request {
            time_ns: i * 1000,
            volume: tiercache_core::VolumeId(0),
            op,
            offset: line * 4096,
            len: 4096,
        });
    }
    let an = a.finish(&|v| v.0.to_string());
    let last = an.reuse_cdf.last().unwrap();
    assert!(
        (last.1 - 1.0).abs() < 1e-12 && (last.2 - 1.0).abs() < 1e-12,
        "{last:?}"
    );
    assert!(an
        .reuse_cdf
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1 && w[0].2 <= w[1].2));
    assert_eq!(an.characterisation.intervals.len(), 20);
    assert!(an
        .characterisation
        .intervals
        .iter()
        .all(|r| r.requests == 1000));
    let plots = tiercache_analyze::plots::render(&an);
    let lines = |svg: &str| svg.matches("<path d=\"M").count();
    let names: Vec<_> = plots.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        ["mrc.svg", "reuse_cdf.svg", "iops.svg", "working_set.svg"]
    );
    assert_eq!(lines(&plots[0].1), 4, "exact all/reads/writes and SHARDS");
    for (name, svg) in &plots {
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
        assert_eq!(
            svg.matches("<svg").count(),
            svg.matches("</svg>").count(),
            "{name}"
        );
        assert!(lines(svg) >= 2, "{name}");
    }
}
