//! A sampled analysis (SHARDS without the exact stacks) against the same analysis with them:
//! every estimate bit for bit the same, every exact output absent rather than zero.

use proptest::prelude::*;
use tiercache_analyze::{Analysis, Analyzer, EvictionKind, Options};
use tiercache_core::{Op, Request, VolumeId};

fn run(reqs: &[Request], opts: Options) -> Analysis {
    let mut a = Analyzer::new(opts).unwrap();
    reqs.iter().for_each(|r| a.add(r).unwrap());
    a.finish(&|v| v.0.to_string())
}

fn requests() -> impl Strategy<Value = Vec<Request>> {
    proptest::collection::vec(
        (0u32..3, 0u64..300, 1u64..3, 0u8..10, 0u64..3_000_000),
        1..1500,
    )
    .prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(vol, line, lines, op, gap)| {
                t += gap;
                Request {
                    time_ns: t,
                    volume: VolumeId(vol),
                    op: match op {
                        0..=5 => Op::Read,
                        6..=8 => Op::Write,
                        _ => Op::Trim,
                    },
                    offset: line * 4096 + (op as u64 % 2) * 512,
                    len: lines * 4096 - 512,
                }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Fixed-rate and fixed-size SHARDS, with mini-simulations, at given sizes: the sampled
    /// analysis equals the exact one in everything it computes.
    #[test]
    fn sampled_estimates_equal_those_of_the_exact_run(
        reqs in requests(),
        fixed_size in any::<bool>(),
    ) {
        let opts = |exact| Options {
            sizes: vec![1, 10, 50, 200, 600],
            shards_rate: (!fixed_size).then_some(0.3),
            shards_max_entries: fixed_size.then_some(100),
            policies: vec![EvictionKind::Fifo, EvictionKind::S3Fifo],
            minisim_rate: 0.5,
            interval_ns: 10_000_000,
            exact,
            ..Options::default()
        };
        let full = run(&reqs, opts(true));
        let sampled = run(&reqs, opts(false));
        prop_assert!(full.exact && !sampled.exact);
        prop_assert_eq!(
            (sampled.requests, sampled.read_requests, sampled.write_requests, sampled.line_accesses),
            (full.requests, full.read_requests, full.write_requests, full.line_accesses)
        );
        prop_assert_eq!(sampled.sequential_fraction, full.sequential_fraction);
        prop_assert_eq!(sampled.shards, full.shards);
        prop_assert_eq!(&sampled.minisim, &full.minisim);
        prop_assert_eq!(sampled.curve.len(), full.curve.len());
        for (s, f) in sampled.curve.iter().zip(&full.curve) {
            prop_assert_eq!((s.lines, s.shards_miss_ratio), (f.lines, f.shards_miss_ratio));
            prop_assert!(f.shards_miss_ratio.is_some() && f.miss_ratio.is_some());
            prop_assert_eq!((s.miss_ratio, s.read_miss_ratio, s.write_miss_ratio), (None, None, None));
        }
        prop_assert_eq!(sampled.footprint_lines, None);
        prop_assert!(sampled.volumes.is_none() && sampled.reuse_cdf.is_none());
        prop_assert!(sampled.total_urd_demand_lines.is_none());
        let (sc, fc) = (&sampled.characterisation, &full.characterisation);
        prop_assert_eq!((&sc.request_sizes, &sc.inter_arrival_ns), (&fc.request_sizes, &fc.inter_arrival_ns));
        prop_assert_eq!(&sc.bursts, &fc.bursts);
        prop_assert_eq!(sc.intervals.len(), fc.intervals.len());
        for (s, f) in sc.intervals.iter().zip(&fc.intervals) {
            prop_assert_eq!((s.start_ns, s.requests, s.bytes, s.iops), (f.start_ns, f.requests, f.bytes, f.iops));
            prop_assert!(s.working_set_lines.is_none() && s.reuse.is_none());
            prop_assert!(f.working_set_lines.is_some() && f.reuse.is_some());
        }
    }
}

/// What a sampled analysis did not compute is said, in the text and the JSON alike: no
/// zeros that read as measurements.
#[test]
fn outputs_not_computed_say_so() {
    let reqs: Vec<Request> = (0..5000u64)
        .map(|i| Request::read((i * 7919 % 900) * 4096, 4096).at(i * 1000))
        .collect();
    let an = run(
        &reqs,
        Options {
            shards_rate: Some(0.1),
            exact: false,
            ..Options::default()
        },
    );
    let text = an.to_string();
    assert!(text.contains("distinct lines: not computed"), "{text}");
    assert!(text.contains("per volume   not computed"), "{text}");
    assert!(
        text.contains("reuse        per interval: not computed"),
        "{text}"
    );
    let json = serde_json::to_value(&an).unwrap();
    assert_eq!(json["exact"], false);
    for key in [
        "footprint_lines",
        "volumes",
        "reuse_cdf",
        "total_urd_demand_lines",
    ] {
        assert!(json.get(key).is_none(), "{key}");
    }
    let point = &json["curve"][0];
    assert!(point.get("miss_ratio").is_none() && point["shards_miss_ratio"].is_f64());
    let row = &json["characterisation"]["intervals"][0];
    assert!(row.get("working_set_lines").is_none() && row.get("reuses").is_none());
    assert!(row["requests"].as_u64().unwrap() > 0);
    // The grid ends at the footprint SHARDS estimates (900 lines, at 10 %: near it).
    let last = an.curve.last().unwrap().lines;
    assert!((700..=1100).contains(&last), "{last}");
    // Without sampling the exact stacks always run, whatever `exact` says.
    let plain = run(
        &reqs,
        Options {
            exact: false,
            ..Options::default()
        },
    );
    assert!(plain.exact && plain.footprint_lines == Some(900));
}
