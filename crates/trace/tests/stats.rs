//! Trace statistics against hand-computed and reference-model values (the `tiercache trace`
//! command end to end is tested with the binary, in `crates/cli`).

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tiercache_core::{Op, Request, VolumeId};
use tiercache_trace::native::NativeWriter;
use tiercache_trace::{stats, ReadOptions, StatsOptions, VolumeMap};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

#[test]
fn msr_sample_matches_independent_counts() {
    // Reference values computed outside this crate (a short Python script over the CSV).
    let s = stats(
        &format!("{TRACES}/msr-hm0-sample.csv"),
        None,
        &ReadOptions::default(),
        &StatsOptions::default(),
    )
    .unwrap();
    assert_eq!(s.records, 1000);
    assert_eq!((s.ops.reads, s.ops.writes), (508, 492));
    assert_eq!(
        (s.ops.read_bytes, s.ops.write_bytes),
        (6_108_672, 3_580_928)
    );
    assert_eq!(
        (
            s.footprint_lines,
            s.read_footprint_lines,
            s.write_footprint_lines
        ),
        (1917, 1449, 475)
    );
    assert_eq!(s.footprint_bytes, 1917 * 4096);
    let hist: Vec<(u64, u64)> = s
        .size_histogram
        .iter()
        .map(|b| (b.max_bytes, b.count))
        .collect();
    assert_eq!(
        hist,
        vec![
            (512, 22),
            (1024, 26),
            (2048, 22),
            (4096, 572),
            (8192, 135),
            (16384, 97),
            (32768, 85),
            (65536, 41)
        ]
    );
    assert_eq!(
        s.duration_ns,
        (128166386567849604u64 - 128166385295514663) * 100
    );
    assert_eq!(s.volumes.len(), 1);
    assert_eq!(s.volumes[0].name, "hm_0");
    assert_eq!(s.volumes[0].footprint_lines, 1917);
    assert_eq!(s.iops.counts.iter().sum::<u64>(), 1000);
    assert_eq!(s.time_regressions, 0);
    let text = s.to_string();
    assert!(
        text.contains("records     1000") && text.contains("footprint   1917 lines"),
        "{text}"
    );
}

#[test]
fn iolog_sample_by_hand() {
    let s = stats(
        &format!("{DATA}/sample-v2.iolog"),
        None,
        &ReadOptions::default(),
        &StatsOptions::default(),
    )
    .unwrap();
    assert_eq!(s.records, 5);
    assert_eq!(
        (s.ops.reads, s.ops.writes, s.ops.trims, s.ops.flushes),
        (2, 1, 1, 1)
    );
    assert_eq!(s.ops.read_bytes, 16_384 + 512);
    // sdb: write line 0, reads lines 2..=5 and 1; sdc: trims do not count.
    assert_eq!(
        (
            s.footprint_lines,
            s.read_footprint_lines,
            s.write_footprint_lines
        ),
        (6, 5, 1)
    );
    assert_eq!(s.duration_ns, 1_250_000);
    let hist: Vec<(u64, u64)> = s
        .size_histogram
        .iter()
        .map(|b| (b.max_bytes, b.count))
        .collect();
    assert_eq!(hist, vec![(512, 1), (4096, 1), (16_384, 1), (65_536, 1)]);
    assert_eq!(
        s.volumes.iter().map(|v| v.records).collect::<Vec<_>>(),
        vec![4, 1]
    );
}

#[test]
fn iops_series_coarsens_to_stay_bounded() {
    let opts = StatsOptions {
        iops_interval_ns: 1_000_000,
        max_iops_points: 64,
        ..StatsOptions::default()
    };
    let s = stats(
        &format!("{TRACES}/cloudphysics-w.vscsi"),
        None,
        &ReadOptions::default(),
        &opts,
    )
    .unwrap();
    assert!(s.iops.counts.len() <= 64);
    // The interval doubles from 1 ms.
    assert_eq!(s.iops.interval_ns % 1_000_000, 0);
    assert!(s.iops.interval_ns > 1_000_000 && (s.iops.interval_ns / 1_000_000).is_power_of_two());
    assert_eq!(s.iops.counts.iter().sum::<u64>(), 113_872);
    assert!(s.peak_iops >= s.mean_iops);
}

#[test]
fn stats_are_deterministic_and_serialise() {
    let p = format!("{TRACES}/tencent-cbs-sample.csv.bz2");
    let a = stats(&p, None, &ReadOptions::default(), &StatsOptions::default()).unwrap();
    let b = stats(&p, None, &ReadOptions::default(), &StatsOptions::default()).unwrap();
    let ja = serde_json::to_string(&a).unwrap();
    assert_eq!(ja, serde_json::to_string(&b).unwrap());
    let v: serde_json::Value = serde_json::from_str(&ja).unwrap();
    assert_eq!(v["records"], 50_000);
    assert_eq!(v["format"], "tencent");
    assert_eq!(v["volumes"].as_array().unwrap().len(), 2038);
    assert_eq!(v["counters"]["clamped_times"], 1297);
    assert_eq!(a.volumes.iter().map(|v| v.records).sum::<u64>(), 50_000);
}

fn arb_reqs() -> impl Strategy<Value = Vec<Request>> {
    let req = (
        0u64..10_000_000_000,
        0u32..3,
        0u8..4,
        0u64..200_000,
        0u64..40_000,
    )
        .prop_map(|(t, v, op, off, len)| {
            let op = [Op::Read, Op::Write, Op::Trim, Op::Flush][op as usize];
            Request {
                time_ns: t,
                volume: VolumeId(v),
                op,
                offset: off,
                len,
            }
        });
    proptest::collection::vec(req, 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Footprints against a byte-level reference model; counts conserved across breakdowns.
    #[test]
    fn footprint_matches_reference(mut reqs in arb_reqs(), shift in 9u32..14) {
        reqs[0].time_ns = 0;
        let line = 1u64 << shift;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.tctrace");
        let p = p.to_str().unwrap();
        let mut vols = VolumeMap::new();
        for i in 0..3 { vols.intern(format!("v{i}").as_bytes()); }
        let mut w = NativeWriter::create(p).unwrap();
        for r in &reqs { w.write(r).unwrap(); }
        w.finish(&vols, None).unwrap();
        let s = stats(p, None, &ReadOptions::default(), &StatsOptions { line_size: line, ..StatsOptions::default() }).unwrap();

        let (mut all, mut rd, mut wr) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut per_vol: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        for r in &reqs {
            if matches!(r.op, Op::Read | Op::Write) {
                // The line of every 512th byte and of the last byte (lines are >= 512 B, so no
                // line is missed), the slow way.
                let bytes = (r.offset..r.offset + r.len).step_by(512).chain((r.len > 0).then(|| r.offset + r.len - 1));
                for b in bytes {
                    let k = (r.volume.0, b / line);
                    all.insert(k);
                    per_vol.entry(r.volume.0).or_default().insert(b / line);
                    if r.op == Op::Read { rd.insert(k); } else { wr.insert(k); }
                }
            }
        }
        prop_assert_eq!(s.footprint_lines, all.len() as u64);
        prop_assert_eq!(s.read_footprint_lines, rd.len() as u64);
        prop_assert_eq!(s.write_footprint_lines, wr.len() as u64);
        for v in &s.volumes {
            let i: u32 = v.name[1..].parse().unwrap();
            prop_assert_eq!(v.footprint_lines, per_vol.get(&i).map_or(0, |x| x.len() as u64));
        }
        prop_assert_eq!(s.records, reqs.len() as u64);
        prop_assert_eq!(s.volumes.iter().map(|v| v.records).sum::<u64>(), s.records);
        prop_assert_eq!(s.iops.counts.iter().sum::<u64>(), s.records);
        let flushes = reqs.iter().filter(|r| r.op == Op::Flush).count() as u64;
        prop_assert_eq!(s.size_histogram.iter().map(|b| b.count).sum::<u64>(), s.records - flushes);
        let regressions = reqs.windows(2).filter(|w| w[1].time_ns < w[0].time_ns).count() as u64;
        prop_assert_eq!(s.time_regressions, regressions);
        let max = reqs.iter().map(|r| r.time_ns).max().unwrap();
        prop_assert_eq!(s.duration_ns, max);
    }
}
