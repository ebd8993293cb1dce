//! Behaviour of the generator: determinism, distribution shapes, bounds, timing.

use std::collections::HashMap;

use tiercache_core::{Arrival, Op, Request, RequestSource, VolumeId};
use tiercache_workload::dist::Zipf;
use tiercache_workload::{
    stream, AddressDist, ArrivalProcess, BlockSize, Bursts, SyntheticWorkload, WorkloadSpec, Zone,
};

const KIB4: u64 = 4096;

fn collect(spec: &WorkloadSpec, n: usize) -> Vec<Request> {
    stream(spec).unwrap().take(n).collect()
}

fn slots_spec(slots: u64, distribution: AddressDist) -> WorkloadSpec {
    WorkloadSpec {
        footprint: slots * KIB4,
        distribution,
        ..WorkloadSpec::default()
    }
}

/// `k`-sigma half-width of a binomial frequency estimate.
fn tolerance(p: f64, n: usize, k: f64) -> f64 {
    k * (p * (1.0 - p) / n as f64).sqrt()
}

#[test]
fn same_seed_same_requests_different_seed_different() {
    let spec = WorkloadSpec {
        seed: 11,
        jobs: 3,
        read_fraction: 0.5,
        trim_fraction: 0.1,
        block_sizes: vec![
            BlockSize {
                size: 4096,
                weight: 1.0,
            },
            BlockSize {
                size: 16384,
                weight: 1.0,
            },
        ],
        distribution: AddressDist::Zipf {
            theta: 0.9,
            scramble: true,
        },
        ..WorkloadSpec::default()
    };
    let a = collect(&spec, 20_000);
    let b = collect(&spec, 20_000);
    assert_eq!(a, b);
    let other = collect(
        &WorkloadSpec {
            seed: 12,
            ..spec.clone()
        },
        20_000,
    );
    let same = a.iter().zip(&other).filter(|(x, y)| x == y).count();
    assert!(
        same < 2_000,
        "{same} of 20000 requests identical across seeds"
    );
}

#[test]
fn job_streams_do_not_depend_on_interleaving() {
    let spec = WorkloadSpec {
        seed: 5,
        jobs: 4,
        iodepth: Some(8),
        read_fraction: 0.7,
        distribution: AddressDist::Zipf {
            theta: 1.1,
            scramble: true,
        },
        requests: Some(4_000),
        ..WorkloadSpec::default()
    };
    // One job after the other ...
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    assert_eq!(
        w.arrival(),
        Arrival::Closed {
            jobs: 4,
            iodepth: 8
        }
    );
    let mut serial: Vec<Vec<Request>> = vec![Vec::new(); 4];
    for (j, out) in serial.iter_mut().enumerate() {
        while let Some(r) = w.next_request(j as u32) {
            out.push(r);
        }
    }
    // ... or in an irregular interleaving: the same per-job streams.
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    let mut mixed: Vec<Vec<Request>> = vec![Vec::new(); 4];
    let order = [3u32, 0, 0, 2, 1, 3, 3, 3, 0, 2];
    let mut live = 4;
    let mut i = 0;
    while live > 0 {
        let j = order[i % order.len()] as usize;
        i += 1;
        match w.next_request(j as u32) {
            Some(r) => mixed[j].push(r),
            None if mixed[j].len() == 1_000 => {
                live -= 1;
                // Drain so the loop ends; a finished job stays finished.
                assert!(w.next_request(j as u32).is_none());
                mixed[j].push(Request::read(u64::MAX, 0));
            }
            None => {}
        }
    }
    for j in 0..4 {
        mixed[j].pop();
        assert_eq!(serial[j].len(), 1_000);
        assert_eq!(serial[j], mixed[j], "job {j}");
    }
    assert!(
        w.next_request(4).is_none(),
        "job index out of range yields nothing"
    );
}

#[test]
fn zipf_rank_one_frequency_matches_theory() {
    let slots = 10_000u64;
    let draws = 1_000_000;
    for theta in [0.9, 1.2] {
        let p1 = Zipf::probability(slots, theta, 1);
        let p2 = Zipf::probability(slots, theta, 2);
        // Unscrambled: rank k is slot k-1.
        let spec = slots_spec(
            slots,
            AddressDist::Zipf {
                theta,
                scramble: false,
            },
        );
        let mut counts = vec![0usize; slots as usize];
        for r in collect(&spec, draws) {
            counts[(r.offset / KIB4) as usize] += 1;
        }
        let f1 = counts[0] as f64 / draws as f64;
        let f2 = counts[1] as f64 / draws as f64;
        assert!(
            (f1 - p1).abs() < tolerance(p1, draws, 5.0),
            "theta={theta}: f1={f1} p1={p1}"
        );
        assert!(
            (f2 - p2).abs() < tolerance(p2, draws, 5.0),
            "theta={theta}: f2={f2} p2={p2}"
        );
        // Scrambled: the same frequencies, on scattered slots.
        let spec = slots_spec(
            slots,
            AddressDist::Zipf {
                theta,
                scramble: true,
            },
        );
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for r in collect(&spec, draws) {
            *counts.entry(r.offset / KIB4).or_default() += 1;
        }
        let mut by_count: Vec<(usize, u64)> = counts.iter().map(|(&s, &c)| (c, s)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top = by_count[0].0 as f64 / draws as f64;
        assert!(
            (top - p1).abs() < tolerance(p1, draws, 5.0),
            "theta={theta}: top={top} p1={p1}"
        );
        let hottest: Vec<u64> = by_count[..10].iter().map(|&(_, s)| s).collect();
        assert!(
            hottest != (0..10).collect::<Vec<u64>>(),
            "scrambling left the hot slots in place"
        );
    }
}

#[test]
fn zipf_large_support_head_frequency() {
    // 2^20 slots: the rejection-inversion tail matters here, not only the head.
    let slots = 1u64 << 20;
    let draws = 400_000;
    let theta = 0.9;
    let spec = slots_spec(
        slots,
        AddressDist::Zipf {
            theta,
            scramble: false,
        },
    );
    let reqs = collect(&spec, draws);
    let top10 = reqs.iter().filter(|r| r.offset / KIB4 < 10).count() as f64 / draws as f64;
    let p10: f64 = (1..=10).map(|k| Zipf::probability(slots, theta, k)).sum();
    assert!(
        (top10 - p10).abs() < tolerance(p10, draws, 5.0),
        "top10={top10} expected {p10}"
    );
    let upper_half =
        reqs.iter().filter(|r| r.offset / KIB4 >= slots / 2).count() as f64 / draws as f64;
    let weight = |k: u64| (k as f64).powf(-theta);
    let p_upper: f64 =
        ((slots / 2 + 1)..=slots).map(weight).sum::<f64>() / (1..=slots).map(weight).sum::<f64>();
    assert!(
        (upper_half - p_upper).abs() < tolerance(p_upper, draws, 5.0),
        "{upper_half} vs {p_upper}"
    );
}

#[test]
fn pareto_is_skewed_like_its_cdf() {
    let slots = 100_000u64;
    let draws = 400_000;
    let shape = 0.5;
    let spec = slots_spec(
        slots,
        AddressDist::Pareto {
            shape,
            scramble: false,
        },
    );
    let reqs = collect(&spec, draws);
    // Rank 0 ⇔ X in [1, 2): P = (1 − 2^−α) / (1 − (slots+1)^−α).
    let mass = 1.0 - (slots as f64 + 1.0).powf(-shape);
    let p0 = (1.0 - 2f64.powf(-shape)) / mass;
    let f0 = reqs.iter().filter(|r| r.offset == 0).count() as f64 / draws as f64;
    assert!(
        (f0 - p0).abs() < tolerance(p0, draws, 5.0),
        "f0={f0} p0={p0}"
    );
    // Below rank 99 ⇔ X < 100.
    let p100 = (1.0 - 100f64.powf(-shape)) / mass;
    let f100 = reqs.iter().filter(|r| r.offset / KIB4 < 99).count() as f64 / draws as f64;
    assert!(
        (f100 - p100).abs() < tolerance(p100, draws, 5.0),
        "f100={f100} p100={p100}"
    );
}

#[test]
fn pareto_with_a_tiny_shape_tends_to_log_uniform() {
    // As α → 0 the bounded Pareto tends to ln X uniform on [0, ln(slots+1)): rank 0 (X < 2)
    // takes ln 2 / ln(slots+1) of the draws, and the draws spread over thousands of slots.
    // `1 − u·mass` rounded away the mass (~1e-14) at α = 1e-15, and 1/α overflows at a
    // subnormal α.
    let slots = 16_384u64;
    let draws = 10_000;
    for shape in [1e-15, 1e-200, 5e-324] {
        let spec = slots_spec(
            slots,
            AddressDist::Pareto {
                shape,
                scramble: false,
            },
        );
        let reqs = collect(&spec, draws);
        let distinct: std::collections::HashSet<u64> = reqs.iter().map(|r| r.offset).collect();
        assert!(distinct.len() >= 1000, "shape {shape}: {}", distinct.len());
        let p0 = 2f64.ln() / (slots as f64 + 1.0).ln();
        let f0 = reqs.iter().filter(|r| r.offset == 0).count() as f64 / draws as f64;
        assert!(
            (f0 - p0).abs() < tolerance(p0, draws, 5.0),
            "shape {shape}: f0={f0} p0={p0}"
        );
    }
}

#[test]
fn normal_at_the_end_with_a_tiny_spread_returns_the_last_slot() {
    // The spread is below the float precision of a mean at `slots`: every raw draw is
    // `slots`, out of range; the generator used to redraw for ever.
    let slots = 16_384u64;
    let spec = slots_spec(
        slots,
        AddressDist::Normal {
            mean_fraction: 1.0,
            stddev_fraction: 1e-17,
        },
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(collect(&spec, 1000)));
    let reqs = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("1000 draws did not return within a minute");
    assert_eq!(reqs.len(), 1000);
    assert!(reqs.iter().all(|r| r.offset == (slots - 1) * KIB4));
}

#[test]
fn normal_has_the_requested_mean_and_spread() {
    let slots = 1_000_000u64;
    let spec = slots_spec(
        slots,
        AddressDist::Normal {
            mean_fraction: 0.3,
            stddev_fraction: 0.05,
        },
    );
    let reqs = collect(&spec, 200_000);
    let xs: Vec<f64> = reqs
        .iter()
        .map(|r| r.offset as f64 / (slots * KIB4) as f64)
        .collect();
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
    assert!((mean - 0.3).abs() < 0.001, "mean {mean}");
    assert!((sd - 0.05).abs() < 0.001, "sd {sd}");
    // Truncated at the edges: a mean at the start stays in range.
    let spec = slots_spec(
        slots,
        AddressDist::Normal {
            mean_fraction: 0.0,
            stddev_fraction: 1.0,
        },
    );
    assert!(collect(&spec, 10_000)
        .iter()
        .all(|r| r.end() <= slots * KIB4));
}

#[test]
fn zoned_fractions_and_zone_bounds() {
    let footprint = 1u64 << 30;
    let cache = 100u64 << 20;
    let spec = WorkloadSpec {
        footprint,
        block_sizes: vec![
            BlockSize {
                size: 4096,
                weight: 1.0,
            },
            BlockSize {
                size: 65536,
                weight: 1.0,
            },
        ],
        distribution: AddressDist::Zoned {
            zones: vec![
                Zone {
                    access_fraction: 0.55,
                    size_fraction: None,
                    size: Some(cache),
                },
                Zone {
                    access_fraction: 0.30,
                    size_fraction: Some(0.25),
                    size: None,
                },
            ],
        },
        ..WorkloadSpec::default()
    };
    let z1_end = cache;
    let z2_end = cache + footprint / 4;
    let draws = 200_000;
    let reqs = collect(&spec, draws);
    let mut counts = [0usize; 3];
    for r in &reqs {
        // Each request lies entirely inside one zone.
        let zone = if r.end() <= z1_end {
            0
        } else if r.offset >= z1_end && r.end() <= z2_end {
            1
        } else {
            assert!(
                r.offset >= z2_end && r.end() <= footprint,
                "{r:?} straddles a zone boundary"
            );
            2
        };
        counts[zone] += 1;
    }
    for (i, want) in [0.55, 0.30, 0.15].into_iter().enumerate() {
        let got = counts[i] as f64 / draws as f64;
        assert!((got - want).abs() < 0.01, "zone {i}: {got} vs {want}");
    }
}

#[test]
fn uniform_is_flat_chi_square() {
    let slots = 256u64;
    let draws = 256_000;
    let reqs = collect(&slots_spec(slots, AddressDist::Uniform), draws);
    let mut counts = vec![0f64; slots as usize];
    for r in &reqs {
        counts[(r.offset / KIB4) as usize] += 1.0;
    }
    let e = draws as f64 / slots as f64;
    let chi2: f64 = counts.iter().map(|c| (c - e).powi(2) / e).sum();
    // 255 degrees of freedom: mean 255, sd ≈ 22.6; 6 sd above.
    assert!(chi2 < 255.0 + 6.0 * 22.6, "chi2 = {chi2}");
    assert!(
        chi2 > 255.0 - 6.0 * 22.6,
        "chi2 = {chi2}: suspiciously regular"
    );
}

#[test]
fn sequential_streams_are_continuous_and_wrap() {
    let slots = 1000u64;
    let jobs = 4u32;
    let spec = WorkloadSpec {
        jobs,
        ..slots_spec(slots, AddressDist::Sequential)
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    for j in 0..jobs {
        let first = w.next_request(j).unwrap();
        assert_eq!(
            first.offset,
            (j as u64 * slots / jobs as u64) * KIB4,
            "job {j} start"
        );
        let mut prev = first;
        let mut wraps = 0;
        for _ in 0..2_500 {
            let r = w.next_request(j).unwrap();
            if r.offset == 0 {
                assert_eq!(
                    prev.end(),
                    slots * KIB4,
                    "wrap only at the end of the footprint"
                );
                wraps += 1;
            } else {
                assert_eq!(r.offset, prev.end(), "job {j} not continuous");
            }
            prev = r;
        }
        assert!(wraps >= 2);
    }
}

#[test]
fn loop_cycles_over_its_working_set() {
    let spec = WorkloadSpec {
        footprint: 1 << 30,
        block_sizes: vec![BlockSize {
            size: 8192,
            weight: 1.0,
        }],
        alignment: Some(4096),
        distribution: AddressDist::Loop {
            size: Some(100 * 8192),
            size_fraction: None,
        },
        ..WorkloadSpec::default()
    };
    let reqs = collect(&spec, 300);
    for (i, r) in reqs.iter().enumerate() {
        // 8 KiB requests step by 2 slots of 4 KiB: 100 requests per loop.
        assert_eq!(r.offset, (i as u64 % 100) * 8192, "request {i}");
        assert_eq!(r.len, 8192);
    }
}

#[test]
fn every_request_is_aligned_in_range_with_weighted_sizes() {
    let footprint = (1u64 << 30) + 12_345;
    for distribution in [
        AddressDist::Uniform,
        AddressDist::Zipf {
            theta: 0.7,
            scramble: true,
        },
        AddressDist::Pareto {
            shape: 1.5,
            scramble: true,
        },
        AddressDist::Normal {
            mean_fraction: 1.0,
            stddev_fraction: 0.01,
        },
        AddressDist::Sequential,
    ] {
        let spec = WorkloadSpec {
            footprint,
            block_sizes: vec![
                BlockSize {
                    size: 4096,
                    weight: 3.0,
                },
                BlockSize {
                    size: 65536,
                    weight: 1.0,
                },
            ],
            distribution: distribution.clone(),
            ..WorkloadSpec::default()
        };
        let draws = 100_000;
        let reqs = collect(&spec, draws);
        for r in &reqs {
            assert_eq!(r.offset % 4096, 0, "{distribution:?}: {r:?}");
            assert!(r.end() <= footprint, "{distribution:?}: {r:?}");
            assert!(r.len == 4096 || r.len == 65536);
        }
        let small = reqs.iter().filter(|r| r.len == 4096).count() as f64 / draws as f64;
        assert!(
            (small - 0.75).abs() < tolerance(0.75, draws, 5.0),
            "{distribution:?}: {small}"
        );
    }
    // The default alignment is the smallest block size.
    let spec = WorkloadSpec {
        block_sizes: vec![BlockSize {
            size: 65536,
            weight: 1.0,
        }],
        ..WorkloadSpec::default()
    };
    assert_eq!(SyntheticWorkload::new(&spec).unwrap().alignment(), 65536);
    assert!(collect(&spec, 10_000).iter().all(|r| r.offset % 65536 == 0));
}

#[test]
fn op_mix_matches_fractions() {
    let spec = WorkloadSpec {
        read_fraction: 0.6,
        trim_fraction: 0.1,
        ..WorkloadSpec::default()
    };
    let draws = 200_000;
    let reqs = collect(&spec, draws);
    let frac = |op| reqs.iter().filter(|r| r.op == op).count() as f64 / draws as f64;
    assert!((frac(Op::Read) - 0.6).abs() < 0.005);
    assert!((frac(Op::Trim) - 0.1).abs() < 0.005);
    assert!((frac(Op::Write) - 0.3).abs() < 0.005);
    let writes = WorkloadSpec {
        read_fraction: 0.0,
        ..WorkloadSpec::default()
    };
    assert!(collect(&writes, 1000).iter().all(|r| r.op == Op::Write));
    assert!(collect(&WorkloadSpec::default(), 1000)
        .iter()
        .all(|r| r.op == Op::Read));
}

#[test]
fn separate_write_distribution() {
    let spec = WorkloadSpec {
        read_fraction: 0.5,
        distribution: AddressDist::Zipf {
            theta: 1.2,
            scramble: false,
        },
        write_distribution: Some(AddressDist::Sequential),
        ..slots_spec(1 << 16, AddressDist::Uniform)
    };
    let reqs = collect(&spec, 20_000);
    let writes: Vec<&Request> = reqs.iter().filter(|r| r.op == Op::Write).collect();
    for w in writes.windows(2) {
        assert_eq!(w[1].offset, w[0].end(), "writes form one sequential stream");
    }
    let reads_at_zero = reqs
        .iter()
        .filter(|r| r.op == Op::Read && r.offset == 0)
        .count();
    assert!(
        reads_at_zero > 1000,
        "reads follow the zipf head: {reads_at_zero}"
    );
}

#[test]
fn requests_split_exactly_over_jobs() {
    let spec = WorkloadSpec {
        jobs: 3,
        requests: Some(10),
        ..WorkloadSpec::default()
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    let per_job: Vec<usize> = (0..3)
        .map(|j| std::iter::from_fn(|| w.next_request(j)).count())
        .collect();
    assert_eq!(per_job, vec![4, 3, 3]);
    assert_eq!(stream(&spec).unwrap().count(), 10);
    let mut s = stream(&spec).unwrap();
    assert_eq!(s.size_hint(), (10, Some(10)));
    s.next();
    assert_eq!(s.size_hint(), (9, Some(9)));
    assert_eq!(s.workload().remaining(), Some(9));
    assert_eq!(
        stream(&WorkloadSpec::default()).unwrap().size_hint(),
        (0, None)
    );
    let open = WorkloadSpec {
        rate_iops: Some(1000.0),
        ..spec
    };
    assert_eq!(stream(&open).unwrap().count(), 10);
}

#[test]
fn volumes_by_job_and_by_weight() {
    let spec = WorkloadSpec {
        jobs: 4,
        volumes: 2,
        requests: Some(400),
        ..WorkloadSpec::default()
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    for j in 0..4u32 {
        assert!(std::iter::from_fn(|| w.next_request(j)).all(|r| r.volume == VolumeId(j % 2)));
    }
    let spec = WorkloadSpec {
        volumes: 3,
        volume_weights: Some(vec![1.0, 2.0, 1.0]),
        ..WorkloadSpec::default()
    };
    let draws = 100_000;
    let reqs = collect(&spec, draws);
    let frac = |v| reqs.iter().filter(|r| r.volume == VolumeId(v)).count() as f64 / draws as f64;
    assert!(
        (frac(0) - 0.25).abs() < 0.01
            && (frac(1) - 0.5).abs() < 0.01
            && (frac(2) - 0.25).abs() < 0.01
    );
}

#[test]
fn open_loop_poisson_rate_and_order() {
    let rate = 50_000.0;
    let spec = WorkloadSpec {
        rate_iops: Some(rate),
        jobs: 2,
        ..WorkloadSpec::default()
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    assert_eq!(w.arrival(), Arrival::Open);
    assert!(w.next_request(1).is_none(), "open loop serves job 0 only");
    let reqs = collect(&spec, 200_000);
    let gaps: Vec<f64> = reqs
        .windows(2)
        .map(|p| p[1].time_ns as f64 - p[0].time_ns as f64)
        .collect();
    assert!(gaps.iter().all(|&g| g >= 0.0), "times non-decreasing");
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let want = 1e9 / rate;
    assert!(
        (mean / want - 1.0).abs() < 0.01,
        "mean gap {mean} vs {want}"
    );
    // Exponential gaps: standard deviation equals the mean.
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    assert!((sd / mean - 1.0).abs() < 0.02, "cv {}", sd / mean);
}

#[test]
fn open_loop_uniform_spacing_and_duration() {
    let spec = WorkloadSpec {
        rate_iops: Some(1000.0),
        arrival: ArrivalProcess::Uniform,
        duration_ns: Some(1_000_000_000),
        ..WorkloadSpec::default()
    };
    let reqs: Vec<Request> = stream(&spec).unwrap().collect();
    assert_eq!(reqs.len(), 1000, "one second at 1000 IOPS");
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.time_ns, i as u64 * 1_000_000);
    }
}

#[test]
fn open_loop_bursts_have_no_arrivals_when_off() {
    let b = Bursts {
        on_ns: 1_000_000,
        off_ns: 3_000_000,
    };
    let rate = 1_000_000.0;
    let spec = WorkloadSpec {
        rate_iops: Some(rate),
        bursts: Some(b),
        ..WorkloadSpec::default()
    };
    let reqs = collect(&spec, 100_000);
    let period = b.on_ns + b.off_ns;
    assert!(
        reqs.iter().all(|r| r.time_ns % period < b.on_ns),
        "arrival in an off period"
    );
    assert!(reqs.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
    // The rate during on periods is rate_iops: ~1000 arrivals per 1 ms on period.
    let periods = reqs.last().unwrap().time_ns / period;
    let per_period = reqs.len() as f64 / periods as f64;
    assert!(
        (per_period / 1000.0 - 1.0).abs() < 0.03,
        "{per_period} arrivals per on period"
    );
}

#[test]
fn closed_loop_bursts_and_duration_through_the_clock() {
    let b = Bursts {
        on_ns: 100,
        off_ns: 900,
    };
    let spec = WorkloadSpec {
        bursts: Some(b),
        duration_ns: Some(5_000),
        ..WorkloadSpec::default()
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    // In an on period: issue now.
    assert_eq!(w.next_request_at(0, 1_050).unwrap().time_ns, 1_050);
    // In an off period: pushed to the next on period.
    assert_eq!(w.next_request_at(0, 1_100).unwrap().time_ns, 2_000);
    assert_eq!(w.next_request_at(0, 1_999).unwrap().time_ns, 2_000);
    for now in (0..4_000).step_by(37) {
        let t = w.next_request_at(0, now).unwrap().time_ns;
        assert!(t >= now && t % 1_000 < 100, "now {now} -> {t}");
    }
    // Pushed past the duration: the job ends, and stays ended.
    assert!(w.next_request_at(0, 4_500).is_none());
    assert!(w.next_request_at(0, 10).is_none());
    // Without the clock, closed-loop requests may issue at once.
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    assert_eq!(w.next_request(0).unwrap().time_ns, 0);
}

#[test]
fn flush_after_every_n_writes_of_a_job() {
    let spec = WorkloadSpec {
        jobs: 2,
        read_fraction: 0.5,
        flush_every: Some(3),
        requests: Some(2_000),
        ..WorkloadSpec::default()
    };
    let mut w = SyntheticWorkload::new(&spec).unwrap();
    for j in 0..2 {
        let reqs: Vec<Request> = std::iter::from_fn(|| w.next_request(j)).collect();
        assert_eq!(reqs.len(), 1_000, "flushes count towards requests");
        let mut writes = 0;
        for (i, r) in reqs.iter().enumerate() {
            match r.op {
                Op::Write => writes += 1,
                Op::Flush => {
                    assert_eq!(writes, 3, "flush at {i} after {writes} writes");
                    assert_eq!((r.offset, r.len), (0, 0));
                    writes = 0;
                }
                _ => {}
            }
            // A third write is followed at once by the flush.
            if writes == 3 {
                assert_eq!(reqs.get(i + 1).map_or(Op::Flush, |n| n.op), Op::Flush);
            }
        }
    }
}

#[test]
fn extreme_values_do_not_panic() {
    // The whole u64 address space at byte alignment.
    for distribution in [
        AddressDist::Uniform,
        AddressDist::Zipf {
            theta: 0.5,
            scramble: true,
        },
        AddressDist::Pareto {
            shape: 0.2,
            scramble: true,
        },
        AddressDist::Normal {
            mean_fraction: 1.0,
            stddev_fraction: 1.0,
        },
        AddressDist::Sequential,
    ] {
        let spec = WorkloadSpec {
            footprint: u64::MAX,
            alignment: Some(1),
            block_sizes: vec![BlockSize {
                size: 1,
                weight: 1.0,
            }],
            distribution,
            ..WorkloadSpec::default()
        };
        // offset + len never overflows: the request fits in the address space.
        assert!(collect(&spec, 1000)
            .iter()
            .all(|r| r.offset.checked_add(r.len).is_some()));
    }
    // A rate so low the next arrival is beyond the end of time, with bursts.
    let spec = WorkloadSpec {
        rate_iops: Some(1e-12),
        bursts: Some(Bursts {
            on_ns: 3,
            off_ns: u64::MAX / 2,
        }),
        ..WorkloadSpec::default()
    };
    let reqs = collect(&spec, 3);
    assert!(reqs.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
    let mut w = SyntheticWorkload::new(&WorkloadSpec {
        bursts: spec.bursts,
        ..WorkloadSpec::default()
    })
    .unwrap();
    assert!(w.next_request_at(0, u64::MAX - 1).is_some());
}
