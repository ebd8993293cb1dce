//! The exact curve equals the policy core's hit-ratio-only LRU; SHARDS stays close to it with
//! bounded memory; useful demand never exceeds traditional demand.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use tiercache_analyze::shards::Shards;
use tiercache_analyze::{Analyzer, EvictionKind, Options};
use tiercache_core::{Op, Request, VolumeId};
use tiercache_policy::{Cache, CacheConfig, CleaningConfig, PromotionConfig};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");

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
    reqs.iter().for_each(|r| a.add(r).unwrap());
    a.finish(&|v| v.0.to_string())
        .curve
        .iter()
        .map(|p| p.miss_ratio.unwrap())
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
            tiercache_trace::open(&format!("{TRACES}/{f}"), None, &Default::default()).unwrap();
        traces.push(
            reader
                .map(|r| r.unwrap())
                .filter(|r| r.op != Op::Flush)
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
        reqs.iter().for_each(|r| a.add(r).unwrap());
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
                .map(|p| (shards.miss_ratio(p.lines) - p.miss_ratio.unwrap()).abs())
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
            a.add(&r).unwrap();
        }
        let an = a.finish(&|v| v.0.to_string());
        for v in an.volumes.as_ref().unwrap() {
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
    reqs.iter().for_each(|r| a.add(r).unwrap());
    let an = a.finish(&|v| v.0.to_string());
    for (p, &lines) in an.curve.iter().zip(&sizes) {
        assert!((p.miss_ratio.unwrap() - core_lru_miss_ratio(&reqs, lines)).abs() < 1e-9);
    }
    for v in an.volumes.as_ref().unwrap() {
        let id: u32 = v.name.parse().unwrap();
        let own: Vec<Request> = reqs.iter().filter(|r| r.volume.0 == id).copied().collect();
        for (p, &lines) in v.curve.iter().zip(&sizes) {
            assert!(
                (p.miss_ratio.unwrap() - core_lru_miss_ratio(&own, lines)).abs() < 1e-9,
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
        policies: vec![EvictionKind::Fifo, EvictionKind::Sieve],
        minisim_rate: 0.5,
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
        })
        .unwrap();
    }
    let an = a.finish(&|v| v.0.to_string());
    let last = an.reuse_cdf.as_ref().unwrap().last().unwrap();
    assert!(
        (last.1 - 1.0).abs() < 1e-12 && (last.2 - 1.0).abs() < 1e-12,
        "{last:?}"
    );
    assert!(an
        .reuse_cdf
        .as_ref()
        .unwrap()
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
    assert_eq!(
        lines(&plots[0].1),
        6,
        "exact all/reads/writes, SHARDS, FIFO and SIEVE"
    );
    let json = serde_json::to_value(&an).unwrap();
    let curves = &json["minisim"]["curves"];
    assert_eq!(curves[0]["policy"], "fifo");
    assert_eq!(curves[1]["policy"], "sieve");
    assert_eq!(
        curves[1]["points"].as_array().unwrap().len(),
        an.curve.len()
    );
    let text = an.to_string();
    assert!(text.contains("other policies by mini-simulation"), "{text}");
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

fn analyse(reqs: &[Request], opts: Options) -> tiercache_analyze::Analysis {
    let mut a = Analyzer::new(opts).unwrap();
    reqs.iter().for_each(|r| a.add(r).unwrap());
    a.finish(&|v| v.0.to_string())
}

fn policy_curve(an: &tiercache_analyze::Analysis, policy: &str) -> Vec<(u64, f64)> {
    let m = an.minisim.as_ref().expect("mini-simulation asked for");
    m.curves
        .iter()
        .find(|c| c.policy == policy)
        .unwrap_or_else(|| panic!("no {policy} curve"))
        .points
        .clone()
}

/// At rate 1 the mini-simulated LRU is the exact curve, on the default grid (sizes started as
/// the footprint grows) and on sizes given.
#[test]
fn minisim_lru_at_rate_one_is_the_exact_curve() {
    let reqs = zipf_requests(100_000, 20_000, 7);
    for sizes in [vec![], vec![3, 50, 700, 4096, 12_345, 1 << 20]] {
        let an = analyse(
            &reqs,
            Options {
                sizes,
                policies: vec![EvictionKind::Lru, EvictionKind::Fifo],
                minisim_rate: 1.0,
                ..Options::default()
            },
        );
        let lru = policy_curve(&an, "lru");
        assert_eq!(lru.len(), an.curve.len());
        for (p, &(lines, m)) in an.curve.iter().zip(&lru) {
            assert_eq!(lines, p.lines);
            assert_eq!(Some(m), p.miss_ratio, "{lines} lines");
        }
    }
}

/// FIFO by hand: a queue of resident lines, oldest evicted first; hits change nothing.
fn fifo_reference(keys: &[u64], capacity: usize) -> f64 {
    let mut queue = std::collections::VecDeque::new();
    let mut resident = std::collections::HashSet::new();
    let mut misses = 0;
    for &k in keys {
        if resident.contains(&k) {
            continue;
        }
        misses += 1;
        if queue.len() == capacity {
            resident.remove(&queue.pop_front().unwrap());
        }
        queue.push_back(k);
        resident.insert(k);
    }
    misses as f64 / keys.len() as f64
}

#[test]
fn minisim_fifo_at_rate_one_equals_a_hand_written_fifo() {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
    let reqs: Vec<Request> = (0..50_000)
        .map(|_| {
            let line = if rand::Rng::gen_bool(&mut rng, 0.3) {
                rand::Rng::gen_range(&mut rng, 0..50u64)
            } else {
                rand::Rng::gen_range(&mut rng, 0..5_000u64)
            };
            Request::read(line * 4096, 4096)
        })
        .collect();
    let sizes = vec![1u64, 10, 49, 200, 1000, 4000, 4999, 6000];
    let an = analyse(
        &reqs,
        Options {
            sizes: sizes.clone(),
            policies: vec![EvictionKind::Fifo],
            minisim_rate: 1.0,
            ..Options::default()
        },
    );
    let keys: Vec<u64> = reqs.iter().map(|r| r.offset / 4096).collect();
    for (&lines, &(l, m)) in sizes.iter().zip(&policy_curve(&an, "fifo")) {
        assert_eq!(l, lines);
        assert_eq!(m, fifo_reference(&keys, lines as usize), "{lines} lines");
    }
}

#[test]
fn minisim_lru_at_ten_percent_stays_within_0_02_of_exact() {
    let reqs = zipf_requests(1_000_000, 200_000, 8);
    let an = analyse(
        &reqs,
        Options {
            policies: vec![EvictionKind::Lru, EvictionKind::S3Fifo],
            minisim_rate: 0.1,
            ..Options::default()
        },
    );
    let lru = policy_curve(&an, "lru");
    let mae = an
        .curve
        .iter()
        .zip(&lru)
        .map(|(p, &(_, m))| (m - p.miss_ratio.unwrap()).abs())
        .sum::<f64>()
        / lru.len() as f64;
    assert!(mae < 0.02, "mean absolute error {mae}");
    let m = an.minisim.as_ref().unwrap();
    assert!((m.rate - 0.1).abs() < 1e-6);
    assert!(m.simulated_accesses > 100_000 && m.hot_lines > 0);
    // Every curve falls with the cache size (sampled simulations of growing caches).
    for c in &m.curves {
        assert!(
            c.points.windows(2).all(|w| w[1].1 <= w[0].1 + 0.02),
            "{}: {:?}",
            c.policy,
            c.points
        );
    }
}

/// A trace file analysed as `tiercache analyze` does, with mini-simulations, and plotted.
#[test]
fn a_file_is_analysed_with_policies_and_plotted() {
    use tiercache_analyze::{analyze_file, EvictionKind, FileOptions};
    let dir = std::env::temp_dir().join(format!("analyze-plots-{}", std::process::id()));
    let opts = FileOptions {
        policies: vec![EvictionKind::Lru, EvictionKind::Fifo, EvictionKind::S3Fifo],
        minisim_rate: 0.5,
        ..FileOptions::new(format!("{TRACES}/msr-hm0-sample.csv"))
    };
    let analysis = analyze_file(&opts, &mut |note| eprintln!("note: {note}")).unwrap();
    tiercache_analyze::plots::write(&analysis, &dir).unwrap();
    let mrc = std::fs::read_to_string(dir.join("mrc.svg")).unwrap();
    assert!(mrc.contains("s3-fifo (mini-sim, 50.00%)"), "{mrc}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Per-interval reuse on a hand-built trace: docs/design.md §4.10's W1 W2 R1 R3 R5 R6 R2 in the
/// first second, nothing in the second, then W5 R7 R1 W9 W9 W3 in the third.
#[test]
fn reuse_per_interval_counts_the_reuses_ending_in_each_interval() {
    let second = 1_000_000_000u64;
    let seq: [(u64, bool, u64); 13] = [
        (0, true, 1),
        (1, true, 2),
        (2, false, 1),
        (3, false, 3),
        (4, false, 5),
        (5, false, 6),
        (6, false, 2),
        (2 * second, true, 5),
        (2 * second + 1, false, 7),
        (2 * second + 2, false, 1),
        (2 * second + 3, true, 9),
        (2 * second + 4, true, 9),
        (2 * second + 5, true, 3),
    ];
    let mut a = Analyzer::new(Options::default()).unwrap();
    for (t, write, line) in seq {
        a.add(&Request {
            time_ns: t,
            volume: VolumeId(0),
            op: if write { Op::Write } else { Op::Read },
            offset: line * 4096,
            len: 4096,
        })
        .unwrap();
    }
    let an = a.finish(&|v| v.0.to_string());
    let rows = &an.characterisation.intervals;
    assert_eq!(rows.len(), 3);
    let reuse = |i: usize| {
        let r = rows[i].reuse.unwrap();
        (
            r.reuses,
            r.useful_reuses,
            r.urd_demand_lines,
            r.trd_demand_lines,
        )
    };
    // R1 at distance 2, R2 at 5 (max URD 4, docs/design.md §4.10).
    assert_eq!(reuse(0), (2, 2, 5, 5));
    assert_eq!(reuse(1), (0, 0, 0, 0));
    // W5 at 3, R1 at 6 (3 5 6 2 7 since), W9 at 1, W3 at 7 (5 6 2 7 1 9 since): the URD
    // demand is R1's, the TRD demand W3's.
    assert_eq!(reuse(2), (4, 1, 6, 7));
    let ws: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| (r.working_set_lines.unwrap(), r.footprint_lines.unwrap()))
        .collect();
    assert_eq!(ws, [(5, 5), (0, 5), (5, 7)]);
    let json = serde_json::to_value(&an).unwrap();
    assert_eq!(
        json["characterisation"]["intervals"][2]["trd_demand_lines"],
        7
    );
    assert_eq!(
        json["characterisation"]["intervals"][2]["urd_demand_lines"],
        6
    );
    assert_eq!(json["characterisation"]["intervals"][0]["useful_reuses"], 2);
    let text = an.to_string();
    assert!(
        text.contains("reuse        per interval: reuses median 2, max 4; URD demand median 5, max 6 lines; TRD demand median 5, max 7 lines"),
        "{text}"
    );
}

/// The Analyzer's intervals (working sets from the shared stack) agree with a characteriser
/// keeping its own line sets, over several volumes joining at different times.
#[test]
fn interval_working_sets_match_a_characteriser_with_its_own_sets() {
    let mut reqs = zipf_requests(60_000, 5_000, 12);
    for (i, r) in reqs.iter_mut().enumerate() {
        r.time_ns = i as u64 * 7_919;
        if i >= 20_000 {
            r.volume = VolumeId((i % 3) as u32);
        }
    }
    let interval_ns = 10_000_000;
    let mut own = tiercache_analyze::characterise::Characteriser::new(
        tiercache_core::LineGeometry::new(4096).unwrap(),
        interval_ns,
        2.0,
    );
    reqs.iter().for_each(|r| own.add(r));
    let own = own.finish();
    let an = analyse(
        &reqs,
        Options {
            interval_ns,
            ..Options::default()
        },
    );
    let rows = &an.characterisation.intervals;
    assert_eq!(rows.len(), own.intervals.len());
    for (mine, theirs) in rows.iter().zip(&own.intervals) {
        assert_eq!(
            (mine.working_set_lines, mine.footprint_lines, mine.requests),
            (
                theirs.working_set_lines,
                theirs.footprint_lines,
                theirs.requests
            )
        );
    }
    let reuses: u64 = rows.iter().map(|r| r.reuse.unwrap().reuses).sum();
    assert_eq!(reuses, an.line_accesses - an.footprint_lines.unwrap());
}

/// A request past what the line geometry addresses (the end of a 2^64-byte range, or past the
/// 2^48 lines of a volume) is an error that changes nothing, not a panic.
#[test]
fn an_unaddressable_request_is_an_error_and_changes_nothing() {
    for exact in [true, false] {
        let mut a = Analyzer::new(Options {
            exact,
            shards_rate: (!exact).then_some(0.5),
            ..Options::default()
        })
        .unwrap();
        a.add(&Request::read(4096, 4096)).unwrap();
        for (offset, len) in [(u64::MAX - 100, 4096), (1 << 62, 4096)] {
            let e = a.add(&Request::read(offset, len)).unwrap_err();
            assert!(
                matches!(e, tiercache_core::GeometryError::Range { .. }),
                "{e}"
            );
        }
        let out = a.finish(&|_| "0".to_string());
        assert_eq!(out.requests, 1);
    }
}

/// A trim drops the lines it covers whole, as the core does: the read after it misses and is
/// no reuse (the analysis ignored trims, and reported a hit the simulator does not see).
/// On random reads, writes and trims the curve stays within 0.002 of the core's at every
/// size, and closer than ignoring the trims. (Not equal: an LRU stack that loses a line lets
/// a line evicted before that count as cached again; see the crate's doc.)
#[test]
fn trims_drop_whole_lines_as_the_core_does() {
    let small = vec![
        Request::write(0, 4096),
        Request::write(4096, 4096),
        Request::trim(0, 4096),
        Request::read(0, 4096),
        Request::read(4096, 4096),
    ];
    let curve = exact_curve(&small, &[16]);
    assert!((curve[0] - core_lru_miss_ratio(&small, 16)).abs() < 1e-12);
    assert!((curve[0] - 0.75).abs() < 1e-12, "{curve:?}");
    let mut a = Analyzer::new(Options {
        sizes: vec![16],
        ..Options::default()
    })
    .unwrap();
    small.iter().for_each(|r| a.add(r).unwrap());
    let an = a.finish(&|v| v.0.to_string());
    assert_eq!(an.trimmed_lines, 1);
    // Read after write: 1 (line 1); the read of line 0 follows its trim, no reuse.
    assert_eq!(an.volumes.as_ref().unwrap()[0].reuse_types, [0, 1, 0, 0]);

    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
    use rand::Rng;
    let reqs: Vec<Request> = (0..60_000)
        .map(|_| {
            let b = rng.gen_range(0..3000u64);
            match rng.gen_range(0..10) {
                0 => Request::trim(b * 4096, rng.gen_range(1..40_000)),
                1..=3 => Request::write(b * 4096, 4096),
                _ => Request::read(b * 4096, 4096),
            }
        })
        .collect();
    let sizes = [1u64, 10, 100, 1000, 3000];
    let curve = exact_curve(&reqs, &sizes);
    let without: Vec<Request> = reqs.iter().filter(|r| r.op != Op::Trim).copied().collect();
    let ignoring = exact_curve(&without, &sizes);
    let (mut err, mut err_ignoring) = (0.0, 0.0);
    for ((&lines, &mine), &ign) in sizes.iter().zip(&curve).zip(&ignoring) {
        let core = core_lru_miss_ratio(&reqs, lines);
        assert!(
            (mine - core).abs() < 0.002,
            "{lines} lines: curve {mine} vs core {core}"
        );
        err += (mine - core).abs();
        err_ignoring += (ign - core).abs();
    }
    assert!(
        err < err_ignoring / 10.0,
        "{err} vs {err_ignoring} ignoring trims"
    );
}

/// The reuse CDF is by reuse distance (distinct lines in between, docs/design.md §4.10), not stack
/// distance: docs/design.md §4.10's example W1 W2 R1 R3 R5 R6 R2 has reuses at distances 1 and 4.
#[test]
fn the_reuse_cdf_is_by_reuse_distance() {
    let reqs: Vec<Request> = [
        (true, 1u64),
        (true, 2),
        (false, 1),
        (false, 3),
        (false, 5),
        (false, 6),
        (false, 2),
    ]
    .iter()
    .map(|&(w, b)| {
        if w {
            Request::write(b * 4096, 4096)
        } else {
            Request::read(b * 4096, 4096)
        }
    })
    .collect();
    let mut a = Analyzer::new(Options::default()).unwrap();
    reqs.iter().for_each(|r| a.add(r).unwrap());
    let an = a.finish(&|v| v.0.to_string());
    assert_eq!(
        an.reuse_cdf.unwrap(),
        vec![(1, 0.5, 0.5), (2, 0.5, 0.5), (4, 1.0, 1.0)]
    );
}

/// With no reads, the read miss ratio is undefined (`None`, printed `-`), not 0.
#[test]
fn a_miss_ratio_over_no_access_is_undefined() {
    let reqs = [Request::write(0, 4096), Request::write(0, 4096)];
    let mut a = Analyzer::new(Options {
        sizes: vec![4],
        ..Options::default()
    })
    .unwrap();
    reqs.iter().for_each(|r| a.add(r).unwrap());
    let an = a.finish(&|v| v.0.to_string());
    assert_eq!(an.curve[0].read_miss_ratio, None);
    assert_eq!(an.curve[0].write_miss_ratio, Some(0.5));
    assert!(an.to_string().contains("0.5000        -"), "{an}");
}
