//! Property tests over random valid specs: requests stay in range and aligned, counts are exact,
//! generation is deterministic, open-loop time never goes backwards.

use proptest::prelude::*;
use tiercache_core::{Op, Request};
use tiercache_workload::{
    stream, AddressDist, ArrivalProcess, BlockSize, Bursts, SyntheticWorkload, WorkloadSpec, Zone,
};

fn dist() -> impl Strategy<Value = AddressDist> {
    prop_oneof![
        Just(AddressDist::Uniform),
        (0.05f64..3.0, any::<bool>())
            .prop_map(|(theta, scramble)| AddressDist::Zipf { theta, scramble }),
        (0.05f64..3.0, any::<bool>())
            .prop_map(|(shape, scramble)| AddressDist::Pareto { shape, scramble }),
        (0.0f64..=1.0, 0.001f64..=1.0).prop_map(|(mean_fraction, stddev_fraction)| {
            AddressDist::Normal {
                mean_fraction,
                stddev_fraction,
            }
        }),
        (0.0f64..0.6, 0.05f64..0.4, 0.0f64..0.4, 0.05f64..0.4).prop_map(|(a1, f1, a2, f2)| {
            AddressDist::Zoned {
                zones: vec![
                    Zone {
                        access_fraction: a1,
                        size_fraction: Some(f1),
                        size: None,
                    },
                    Zone {
                        access_fraction: a2,
                        size_fraction: Some(f2),
                        size: None,
                    },
                ],
            }
        }),
        Just(AddressDist::Sequential),
        (0.3f64..=1.0).prop_map(|f| AddressDist::Loop {
            size: None,
            size_fraction: Some(f)
        }),
    ]
}

prop_compose! {
    fn spec()(
        seed in any::<u64>(),
        jobs in 1u32..5,
        open in any::<bool>(),
        uniform_arrivals in any::<bool>(),
        read_fraction in 0.0f64..=1.0,
        trim_share in 0.0f64..=1.0,
        sizes in prop::collection::vec((0u32..5, 0.1f64..10.0), 1..4),
        align_shift in prop::option::of(9u32..14),
        // At least 64 largest blocks (64 KiB) so zones of 5% still hold one.
        footprint in (1u64 << 22)..(1u64 << 30),
        distribution in dist(),
        write_distribution in prop::option::of(dist()),
        bursts in prop::option::of((1u64..1_000_000, 0u64..1_000_000)),
        requests in 1u64..400,
        weighted_volumes in any::<bool>(),
        flush_every in prop::option::of(1u64..5),
    ) -> WorkloadSpec {
        WorkloadSpec {
            seed,
            jobs,
            iodepth: if open { None } else { Some(4) },
            rate_iops: open.then_some(100_000.0),
            arrival: if uniform_arrivals { ArrivalProcess::Uniform } else { ArrivalProcess::Poisson },
            read_fraction,
            trim_fraction: (1.0 - read_fraction) * trim_share * 0.999,
            block_sizes: sizes.iter().map(|&(s, w)| BlockSize { size: 4096 << s, weight: w }).collect(),
            alignment: align_shift.map(|s| 1 << s),
            footprint,
            volumes: if weighted_volumes { 3 } else { 1 },
            volume_weights: weighted_volumes.then(|| vec![1.0, 2.0, 0.5]),
            distribution,
            write_distribution,
            bursts: bursts.map(|(on_ns, off_ns)| Bursts { on_ns, off_ns }),
            requests: Some(requests),
            duration_ns: None,
            flush_every,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn requests_stay_in_range_and_counts_are_exact(spec in spec()) {
        let w = SyntheticWorkload::new(&spec).unwrap();
        let align = w.alignment();
        let reqs: Vec<Request> = w.into_stream().collect();
        prop_assert_eq!(reqs.len() as u64, spec.requests.unwrap());
        let sizes: Vec<u64> = spec.block_sizes.iter().map(|b| b.size).collect();
        for r in reqs.iter().filter(|r| r.op != Op::Flush) {
            prop_assert_eq!(r.offset % align, 0, "{:?}", r);
            prop_assert!(r.end() <= spec.footprint, "{:?} beyond {}", r, spec.footprint);
            prop_assert!(sizes.contains(&r.len));
            prop_assert!(r.volume.0 < spec.volumes);
            if spec.read_fraction == 1.0 {
                prop_assert_eq!(r.op, Op::Read);
            }
        }
        // Flushes: none without flush_every; with it, never two in a row within a job.
        let flushes = reqs.iter().filter(|r| r.op == Op::Flush).count();
        let writes = reqs.iter().filter(|r| r.op == Op::Write).count();
        match spec.flush_every {
            None => prop_assert_eq!(flushes, 0),
            Some(n) => prop_assert!(flushes as u64 <= writes as u64 / n),
        }
        if spec.is_open_loop() {
            prop_assert!(reqs.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
            if let Some(b) = spec.bursts {
                prop_assert!(reqs.iter().all(|r| r.time_ns % (b.on_ns + b.off_ns) < b.on_ns));
            }
        }
        // Same seed, same stream.
        let again: Vec<Request> = stream(&spec).unwrap().collect();
        prop_assert_eq!(reqs, again);
    }

    #[test]
    fn closed_loop_clock_respects_bursts(spec in spec(), clock in prop::collection::vec(0u64..10_000_000, 1..50)) {
        let mut w = SyntheticWorkload::new(&spec).unwrap();
        for (i, &now) in clock.iter().enumerate() {
            let job = i as u32 % spec.jobs;
            if let Some(r) = w.next_request_at(job, now) {
                if !spec.is_open_loop() {
                    prop_assert!(r.time_ns >= now);
                    if let Some(b) = spec.bursts {
                        prop_assert!(r.time_ns % (b.on_ns + b.off_ns) < b.on_ns);
                        prop_assert!(r.time_ns - now <= b.off_ns);
                    } else {
                        prop_assert_eq!(r.time_ns, now);
                    }
                }
            }
        }
    }
}
