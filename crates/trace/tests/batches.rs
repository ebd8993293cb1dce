//! `TraceReader::next_batch` against `next`: the same requests, counters and errors, whatever
//! the batch size, for the fixed-record readers (which override it) and a text reader (which
//! uses the default).

use proptest::prelude::*;
use tiercache_core::Request;
use tiercache_trace::{open, Format, ReadOptions, TraceReader};

/// Everything a reader gave: requests, then the error that ended it (as text), and counters.
type Outcome = (Vec<Request>, Option<String>, tiercache_trace::ReadCounters);

fn one_by_one(mut r: Box<dyn TraceReader>) -> Outcome {
    let mut reqs = Vec::new();
    let mut err = None;
    for x in r.by_ref() {
        match x {
            Ok(q) => reqs.push(q),
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
    }
    (reqs, err, r.counters().clone())
}

fn batched(mut r: Box<dyn TraceReader>, max: usize) -> Outcome {
    let mut reqs = Vec::new();
    let mut err = None;
    loop {
        let before = reqs.len();
        match r.next_batch(&mut reqs, max) {
            Ok(0) => break,
            Ok(n) => assert_eq!(reqs.len() - before, n),
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
        assert!(reqs.len() - before <= max);
    }
    // After the end (or the error) nothing more comes.
    assert!(matches!(r.next_batch(&mut reqs, max), Ok(0)));
    (reqs, err, r.counters().clone())
}

/// An oracleGeneral record: u32 time, u64 obj_id, u32 obj_size, i64 next_access_vtime.
fn oracle(time: u32, obj: u64, size: u32, next: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&time.to_le_bytes());
    v.extend_from_slice(&obj.to_le_bytes());
    v.extend_from_slice(&size.to_le_bytes());
    v.extend_from_slice(&next.to_le_bytes());
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// oracleGeneral files with times going back, several volumes, bad records
    /// (`next_access_vtime` below -1, or a line index whose offset overflows at a huge line
    /// size) and a truncated tail, read strictly or skipping bad records, in batches of any
    /// size (the batches decode records of a known volume on a plain path of their own).
    #[test]
    fn oracle_batches_equal_next(
        recs in proptest::collection::vec((0u32..50, 0u64..3, 0u64..1000, 1u32..9000, 0u8..40), 0..3000),
        tail in 0usize..24,
        skip_bad in any::<bool>(),
        max in prop_oneof![Just(1usize), 2usize..50, Just(4096), Just(100_000)],
        line_size in prop_oneof![Just(4096u64), Just(1u64 << 62)],
    ) {
        let mut bytes = Vec::new();
        for (t, vol, idx, size, bad) in &recs {
            let next = if *bad == 0 { -5 } else { 7 };
            // At the huge line size, indices 4 and 5 overflow the offset (bad records).
            let idx = if line_size > 4096 { idx % 6 } else { *idx };
            bytes.extend(oracle(*t, (vol << 48) | idx, *size, next));
        }
        bytes.extend(std::iter::repeat_n(0u8, tail));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.oracleGeneral");
        std::fs::write(&p, &bytes).unwrap();
        let p = p.to_str().unwrap();
        let opts = ReadOptions { skip_bad, oracle_line_size: line_size, ..Default::default() };
        let a = one_by_one(open(p, Some(Format::OracleGeneral), &opts).unwrap());
        let b = batched(open(p, Some(Format::OracleGeneral), &opts).unwrap(), max);
        prop_assert_eq!(a, b);
    }
}

#[test]
fn text_reader_batches_equal_next() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.csv");
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!("{},h,{},Read,{},512,1\n", 10 + i, i % 4, i * 512));
    }
    text.push_str("999,h,0,Read,zz,512,1\n");
    std::fs::write(&p, text).unwrap();
    let p = p.to_str().unwrap();
    for max in [1, 3, 299, 300, 301, 10_000] {
        let a = one_by_one(open(p, None, &ReadOptions::default()).unwrap());
        let b = batched(open(p, None, &ReadOptions::default()).unwrap(), max);
        assert_eq!(a.0.len(), 300);
        assert!(a.1.as_deref().unwrap().contains(":301: field `offset`"));
        assert_eq!(a, b, "batch size {max}");
    }
}
