//! Round trips: every fixture through the native format, and native <-> each writable format.

use proptest::prelude::*;
use std::collections::HashMap;
use tiercache_core::{Op, Request, VolumeId};
use tiercache_trace::native::NativeWriter;
use tiercache_trace::{
    convert, read_all, Format, OutputFormat, ReadOptions, TraceWriter, VolumeMap,
};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn inputs() -> Vec<String> {
    let mut v: Vec<String> = [
        "msr-hm0-sample.csv",
        "cloudphysics-w.vscsi",
        "tencent-cbs-sample.csv.bz2",
        "systor17-sample.csv.gz",
    ]
    .iter()
    .map(|f| format!("{TRACES}/{f}"))
    .collect();
    for f in [
        "sample.blkparse",
        "sample.fiu",
        "sample-v2.iolog",
        "sample-v3.iolog",
        "sample.spc",
        "sample.alibaba.csv",
    ] {
        v.push(format!("{DATA}/{f}"));
    }
    v
}

#[test]
fn every_fixture_survives_native_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ReadOptions::default();
    for input in inputs() {
        let out = dir.path().join("t.tctrace");
        let out = out.to_str().unwrap();
        let (orig, vols, _, meta) = read_all(&input, None, &opts).unwrap();
        let s = convert(&input, None, out, OutputFormat::Native, 4096, &opts).unwrap();
        assert_eq!(s.output.records_out, orig.len() as u64, "{input}");
        let (back, bvols, _, bmeta) = read_all(out, None, &opts).unwrap();
        assert_eq!(bmeta.format, Format::Native);
        assert_eq!(back, orig, "{input}");
        assert_eq!(bvols, vols, "{input}");
        assert_eq!(bmeta.epoch_unix_ns, meta.epoch_unix_ns, "{input}");
        // native -> native is the identity as well.
        let again = dir.path().join("u.tctrace");
        convert(
            out,
            None,
            again.to_str().unwrap(),
            OutputFormat::Native,
            4096,
            &opts,
        )
        .unwrap();
        assert_eq!(
            std::fs::read(out).unwrap(),
            std::fs::read(&again).unwrap(),
            "{input}"
        );
    }
}

/// fio iologs carry µs: a trace whose times are whole µs (vSCSI, SYSTOR, Tencent, the iolog
/// samples) comes back identical; others come back with times truncated to µs.
#[test]
fn fixtures_through_fio_iolog() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ReadOptions::default();
    for input in inputs() {
        let (orig, vols, ..) = read_all(&input, None, &opts).unwrap();
        let out = dir.path().join("t.iolog");
        let out = out.to_str().unwrap();
        convert(&input, None, out, OutputFormat::FioIolog, 4096, &opts).unwrap();
        let (back, bvols, ..) = read_all(out, None, &opts).unwrap();
        assert_eq!(bvols, vols, "{input}");
        let want: Vec<Request> = orig
            .iter()
            .map(|r| Request {
                time_ns: r.time_ns / 1000 * 1000,
                ..*r
            })
            .collect();
        assert_eq!(back, want, "{input}");
        if !input.contains("msr")
            && !input.contains("blkparse")
            && !input.contains("fiu")
            && !input.contains("spc")
        {
            assert_eq!(back, orig, "{input} has whole-µs times");
        }
    }
}

/// Line expansion the oracleGeneral writer must produce: one (second, line key) per line touched
/// by a read or write.
fn expand(reqs: &[Request], line: u64) -> Vec<(u32, u64)> {
    let mut v = Vec::new();
    for r in reqs {
        if matches!(r.op, Op::Read | Op::Write) && r.len > 0 {
            for i in r.offset / line..=(r.offset + r.len - 1) / line {
                v.push((
                    (r.time_ns / 1_000_000_000) as u32,
                    ((r.volume.0 as u64) << 48) | i,
                ));
            }
        }
    }
    v
}

/// Reference next_access_vtime: 1-based index of the next record with the same id, by a
/// quadratic-free but independent forward scan.
fn reference_next(ids: &[u64]) -> Vec<i64> {
    let mut next = vec![-1i64; ids.len()];
    let mut last: HashMap<u64, usize> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        if let Some(p) = last.insert(*id, i) {
            next[p] = i as i64 + 1;
        }
    }
    next
}

fn check_oracle(input: &str, line: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = ReadOptions::default();
    let (orig, ..) = read_all(input, None, &opts).unwrap();
    let out = dir.path().join("t.oracleGeneral.bin");
    let out = out.to_str().unwrap();
    let s = convert(input, None, out, OutputFormat::OracleGeneral, line, &opts).unwrap();
    let want = expand(&orig, line);
    assert_eq!(s.output.records_out, want.len() as u64);
    let raw = std::fs::read(out).unwrap();
    assert_eq!(raw.len(), want.len() * 24);
    let ids: Vec<u64> = want.iter().map(|w| w.1).collect();
    let next = reference_next(&ids);
    let distinct: std::collections::HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(s.output.objects, Some(distinct.len() as u64));
    for (i, rec) in raw.chunks_exact(24).enumerate() {
        let clock = u32::from_le_bytes(rec[0..4].try_into().unwrap());
        let id = u64::from_le_bytes(rec[4..12].try_into().unwrap());
        let size = u32::from_le_bytes(rec[12..16].try_into().unwrap());
        let nv = i64::from_le_bytes(rec[16..24].try_into().unwrap());
        assert_eq!(
            (clock, id, size as u64, nv),
            (want[i].0, want[i].1, line, next[i]),
            "record {i}"
        );
    }
    // Reading it back yields line-sized reads at the same places.
    let ropts = ReadOptions {
        oracle_line_size: line,
        ..ReadOptions::default()
    };
    let (back, ..) = read_all(out, None, &ropts).unwrap();
    assert_eq!(back.len(), want.len());
    let first_s = want.first().map_or(0, |w| w.0 as u64);
    for (b, w) in back.iter().zip(&want) {
        assert_eq!(b.op, Op::Read);
        assert_eq!(b.len, line);
        assert_eq!(b.offset, (w.1 & ((1 << 48) - 1)) * line);
        assert_eq!(
            b.time_ns,
            (w.0 as u64).saturating_sub(first_s) * 1_000_000_000
        );
    }
}

#[test]
fn fixtures_to_oracle_general() {
    check_oracle(&format!("{TRACES}/msr-hm0-sample.csv"), 4096);
    check_oracle(&format!("{TRACES}/cloudphysics-w.vscsi"), 8192);
    check_oracle(&format!("{DATA}/sample.blkparse"), 512);
}

fn write_native(path: &str, reqs: &[Request], vols: &VolumeMap, epoch: Option<i64>) {
    let mut w = NativeWriter::create(path).unwrap();
    for r in reqs {
        w.write(r).unwrap();
    }
    w.finish(vols, epoch).unwrap();
}

fn arb_requests() -> impl Strategy<Value = (Vec<Request>, usize)> {
    (1usize..4)
        .prop_flat_map(|nvol| {
            let req = (
                0u64..5_000_000,
                0..nvol as u32,
                0u8..4,
                0u64..(1 << 40),
                1u64..300_000,
            )
                .prop_map(|(us, v, op, off, len)| {
                    let op = [Op::Read, Op::Write, Op::Trim, Op::Flush][op as usize];
                    let (offset, len) = if op == Op::Flush { (0, 0) } else { (off, len) };
                    Request {
                        time_ns: us * 1000,
                        volume: VolumeId(v),
                        op,
                        offset,
                        len,
                    }
                });
            (proptest::collection::vec(req, 1..200), Just(nvol))
        })
        .prop_map(|(mut reqs, nvol)| {
            // Time 0 is the first record's time; volumes are numbered in order of appearance.
            reqs[0].time_ns = 0;
            let mut order: Vec<u32> = Vec::new();
            for r in &reqs {
                if !order.contains(&r.volume.0) {
                    order.push(r.volume.0);
                }
            }
            for r in &mut reqs {
                r.volume = VolumeId(order.iter().position(|&v| v == r.volume.0).unwrap() as u32);
            }
            (reqs, nvol.min(order.len()))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn native_fio_native_is_lossless((reqs, nvol) in arb_requests()) {
        let dir = tempfile::tempdir().unwrap();
        let mut vols = VolumeMap::new();
        for i in 0..nvol {
            vols.intern(format!("/dev/vd{}", (b'a' + i as u8) as char).as_bytes());
        }
        let native = dir.path().join("in.tctrace");
        let native = native.to_str().unwrap();
        write_native(native, &reqs, &vols, Some(1_700_000_000_123_456_789));
        let (r1, v1, _, m1) = read_all(native, None, &ReadOptions::default()).unwrap();
        prop_assert_eq!(&r1, &reqs);
        prop_assert_eq!(&v1, &vols);
        prop_assert_eq!(m1.epoch_unix_ns, Some(1_700_000_000_123_456_789));

        let fio = dir.path().join("t.iolog");
        let fio = fio.to_str().unwrap();
        convert(native, None, fio, OutputFormat::FioIolog, 4096, &ReadOptions::default()).unwrap();
        let back = dir.path().join("back.tctrace");
        let back = back.to_str().unwrap();
        convert(fio, None, back, OutputFormat::Native, 4096, &ReadOptions::default()).unwrap();
        let (r2, v2, ..) = read_all(back, None, &ReadOptions::default()).unwrap();
        prop_assert_eq!(r2, reqs);
        prop_assert_eq!(v2, vols);
    }

    /// What oracleGeneral carries (line-sized reads at whole seconds, volumes named by id)
    /// survives native -> oracleGeneral -> native unchanged.
    #[test]
    fn native_oracle_native_is_lossless_for_line_reads((reqs, nvol) in arb_requests(), shift in 9u32..21) {
        let line = 1u64 << shift;
        let reqs: Vec<Request> = reqs
            .into_iter()
            .map(|r| Request { time_ns: r.time_ns / 1_000_000_000 * 1_000_000_000, op: Op::Read, offset: r.offset / line * line, len: line, ..r })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut vols = VolumeMap::new();
        for i in 0..nvol {
            vols.intern(i.to_string().as_bytes());
        }
        let native = dir.path().join("in.tctrace");
        let native = native.to_str().unwrap();
        write_native(native, &reqs, &vols, None);
        let og = dir.path().join("t.oracleGeneral.bin");
        let og = og.to_str().unwrap();
        convert(native, None, og, OutputFormat::OracleGeneral, line, &ReadOptions::default()).unwrap();
        let back = dir.path().join("back.tctrace");
        let back = back.to_str().unwrap();
        let ropts = ReadOptions { oracle_line_size: line, ..ReadOptions::default() };
        convert(og, None, back, OutputFormat::Native, line, &ropts).unwrap();
        let (r2, v2, ..) = read_all(back, None, &ReadOptions::default()).unwrap();
        prop_assert_eq!(r2, reqs);
        prop_assert_eq!(v2, vols);
    }

    #[test]
    fn oracle_next_access_matches_reference((reqs, nvol) in arb_requests(), shift in 9u32..14) {
        let dir = tempfile::tempdir().unwrap();
        let mut vols = VolumeMap::new();
        for i in 0..nvol {
            vols.intern(i.to_string().as_bytes());
        }
        // Keep lines few so objects repeat.
        let reqs: Vec<Request> = reqs.into_iter().map(|r| Request { offset: r.offset % 65_536, len: r.len % 20_000, ..r }).collect();
        let native = dir.path().join("in.tctrace");
        let native = native.to_str().unwrap();
        write_native(native, &reqs, &vols, None);
        check_oracle(native, 1 << shift);
    }
}

#[test]
fn writer_rejects_unrepresentable_requests() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.tctrace");
    let mut w = NativeWriter::create(p.to_str().unwrap()).unwrap();
    let e = w.write(&Request::read(0, 1 << 33)).unwrap_err().to_string();
    assert!(e.contains("record 0") && e.contains("length"), "{e}");
    w.write(&Request::read(0, 512).on_volume(VolumeId(3)))
        .unwrap();
    let e = w.finish(&VolumeMap::new(), None).unwrap_err().to_string();
    assert!(e.contains("volume id 3"), "{e}");

    let mut fio = tiercache_trace::writer::FioIologWriter::create(
        dir.path().join("x.iolog").to_str().unwrap(),
    )
    .unwrap();
    let mut vols = VolumeMap::new();
    vols.intern(b"has space");
    let e = fio
        .write(&Request::read(0, 512), &vols)
        .unwrap_err()
        .to_string();
    assert!(e.contains("whitespace"), "{e}");

    // Converting a file onto itself would destroy the input: refused before anything is written.
    let msr = dir.path().join("m.csv");
    std::fs::copy(format!("{TRACES}/msr-hm0-sample.csv"), &msr).unwrap();
    let m = msr.to_str().unwrap();
    let e = convert(
        m,
        None,
        m,
        OutputFormat::Native,
        4096,
        &ReadOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("overwrite the input"), "{e}");
    assert_eq!(
        read_all(m, None, &ReadOptions::default()).unwrap().0.len(),
        1000
    );
}
