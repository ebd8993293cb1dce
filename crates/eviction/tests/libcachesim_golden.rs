//! Exact agreement with libCacheSim: per-request hits recorded from libCacheSim's own
//! LRU, FIFO, Clock, Sieve, ARC and S3FIFO, and of SLRU, TwoQ, LFU, LFUDA, LRUK and LIRS (see
//! `data/gen_libcachesim_golden.py`) must be reproduced bit for bit by the policies here driven
//! through the core's protocol, except the [`KNOWN_DIFFERENCES`] pinned below.

mod common;

use common::{Harness, Outcome};
use std::collections::HashSet;
use tiercache_eviction::EvictionKind;

const GOLDEN: &str = include_str!("data/libcachesim_golden.txt");

enum Op {
    Get(u64),
    Remove(u64),
}

struct Case<'a> {
    stream: &'a str,
    kind: EvictionKind,
    size: usize,
    hits_hex: &'a str,
}

fn parse() -> (Vec<(String, Vec<Op>)>, Vec<Case<'static>>) {
    let mut streams = Vec::new();
    let mut cases = Vec::new();
    let mut lines = GOLDEN.lines();
    while let Some(line) = lines.next() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            Some(&"stream") => {
                let ops: Vec<Op> = lines
                    .next()
                    .expect("ops line")
                    .split_whitespace()
                    .map(|t| {
                        let key = t[1..].parse().expect("key");
                        if t.starts_with('g') {
                            Op::Get(key)
                        } else {
                            Op::Remove(key)
                        }
                    })
                    .collect();
                assert_eq!(ops.len(), f[2].parse::<usize>().unwrap());
                streams.push((f[1].to_string(), ops));
            }
            Some(&"result") => cases.push(Case {
                stream: f[1],
                kind: f[2].parse().expect("policy name"),
                size: f[3].parse().expect("size"),
                hits_hex: f[4],
            }),
            _ => panic!("unexpected line {line:?}"),
        }
    }
    (streams, cases)
}

fn bits(hex: &str) -> Vec<bool> {
    hex.chars()
        .flat_map(|c| {
            let v = c.to_digit(16).expect("hex digit");
            (0..4).rev().map(move |b| v >> b & 1 == 1)
        })
        .collect()
}

/// Cases where libCacheSim's implementation and the policy here knowingly differ, with the
/// hit counts of both pinned (stream, policy, size, hits here, hits in libCacheSim), so any
/// change on either side shows. Every other case must agree request by request.
///
/// Policies researchers compare against (issue 35):
/// - SLRU, `mixed` at 150 lines: 150 is not a multiple of 4, libCacheSim cools a line into
///   an over-full segment 0 by evicting during a hit (`slru.rs` module doc);
/// - SLRU on `mixed-removes`: libCacheSim's `SLRU_remove` unlinks the object but does not
///   lower its segment's object and byte counts, so after the first removal its segments
///   believe they hold lines they do not (and fill, cool and evict by those counts); the
///   counts here follow the lines actually held.
const KNOWN_DIFFERENCES: &[(&str, &str, usize, usize, usize)] = &[
    ("mixed", "slru", 150, 2308, 2302),
    ("mixed-removes", "slru", 20, 1184, 1128),
    ("mixed-removes", "slru", 37, 1501, 1441),
    ("mixed-removes", "slru", 64, 1779, 1749),
    ("mixed-removes", "slru", 150, 2281, 2189),
    // LFUDA as published against libCacheSim's variant, whose hit adds the age to the
    // priority instead of one to a count (`lfuda.rs` module doc).
    ("mixed", "lfuda", 20, 1151, 1257),
    ("mixed", "lfuda", 37, 1495, 1450),
    ("mixed", "lfuda", 64, 1821, 1769),
    ("mixed", "lfuda", 150, 2766, 2579),
    ("mixed-removes", "lfuda", 20, 1066, 1107),
    ("mixed-removes", "lfuda", 37, 1411, 1325),
    ("mixed-removes", "lfuda", 64, 1754, 1660),
    ("mixed-removes", "lfuda", 150, 2734, 2511),
    // LIRS as published against libCacheSim's, which demotes an LIR line and evicts a
    // resident HIR line during a hit on an HIR line outside the stack (`lirs.rs` module doc);
    // at 150 lines the two agree on both streams.
    ("mixed", "lirs", 20, 1302, 1294),
    ("mixed", "lirs", 37, 1632, 1629),
    ("mixed", "lirs", 64, 1890, 1891),
    ("mixed-removes", "lirs", 20, 1258, 1250),
    ("mixed-removes", "lirs", 37, 1546, 1544),
    ("mixed-removes", "lirs", 64, 1823, 1825),
];

#[test]
fn hits_match_libcachesim_request_by_request() {
    let (streams, cases) = parse();
    assert_eq!(
        cases.len(),
        2 * 12 * 4,
        "every stream × policy × size is present"
    );
    let none = HashSet::new();
    let mut failures = Vec::new();
    for case in &cases {
        let ops = &streams.iter().find(|(n, _)| n == case.stream).unwrap().1;
        let expected = bits(case.hits_hex);
        let mut h = Harness::new(case.kind, case.size);
        let mut gets = 0;
        let mut hits = 0;
        let mut first_diff = None;
        for op in ops {
            match *op {
                Op::Get(k) => {
                    let hit = h.access(k, &none) == Outcome::Hit;
                    if hit != expected[gets] && first_diff.is_none() {
                        first_diff = Some(gets);
                    }
                    hits += hit as usize;
                    gets += 1;
                }
                Op::Remove(k) => {
                    h.remove(k);
                }
            }
        }
        let want: usize = expected[..gets].iter().filter(|&&b| b).count();
        let known = KNOWN_DIFFERENCES
            .iter()
            .find(|d| (d.0, d.1, d.2) == (case.stream, case.kind.as_str(), case.size));
        if let Some(&(_, _, _, ours, theirs)) = known {
            if (hits, want) != (ours, theirs) {
                failures.push(format!(
                    "{} {} size {}: pinned difference changed: {hits} hits vs libCacheSim {want}, pinned {ours} vs {theirs}",
                    case.stream, case.kind, case.size
                ));
            }
        } else if let Some(i) = first_diff {
            failures.push(format!(
                "{} {} size {}: {hits} hits vs libCacheSim {want}, first difference at get #{i}",
                case.stream, case.kind, case.size
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
