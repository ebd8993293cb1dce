//! Exact agreement with libCacheSim: per-request hits recorded from libCacheSim's own
//! LRU, FIFO, Clock, Sieve, ARC and S3FIFO, and of SLRU, TwoQ, LFU, LFUDA, LRUK and LIRS (see
//! `data/gen_libcachesim_golden.py`) must be reproduced bit for bit by the policies here driven
//! through the core's protocol, except the [`KNOWN_DIFFERENCES`] pinned below.
//!
//! CAR, CLOCK-Pro, W-TinyLFU, LeCaR and LHD are pinned differently (each policy file says why its
//! results cannot equal libCacheSim's): by the number of hits on the same streams, within a
//! stated bound of a libCacheSim reference (`libcachesim_bounds_for_the_newer_policies`).

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

fn parse_golden() -> (Vec<(String, Vec<Op>)>, Vec<Case<'static>>) {
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

/// The policies libCacheSim defines as tiercache does: hit-by-hit equality.
const EXACT: [EvictionKind; 12] = [
    EvictionKind::Lru,
    EvictionKind::Fifo,
    EvictionKind::Clock,
    EvictionKind::Sieve,
    EvictionKind::Arc,
    EvictionKind::S3Fifo,
    EvictionKind::Slru,
    EvictionKind::TwoQ,
    EvictionKind::Lfu,
    EvictionKind::Lfuda,
    EvictionKind::LruK,
    EvictionKind::Lirs,
];

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
    let (streams, cases) = parse_golden();
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|c| EXACT.contains(&c.kind))
        .collect();
    assert_eq!(
        cases.len(),
        2 * EXACT.len() * 4,
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

/// Hits of `kind` at `size` lines over `ops`, driven as the core drives a policy.
fn replay(ops: &[Op], kind: EvictionKind, size: usize) -> usize {
    let none = HashSet::new();
    let mut h = Harness::new(kind, size);
    let mut hits = 0;
    for op in ops {
        match *op {
            Op::Get(k) => hits += (h.access(k, &none) == Outcome::Hit) as usize,
            Op::Remove(k) => {
                h.remove(k);
            }
        }
    }
    hits
}

/// libCacheSim's recorded hits for `policy` on `stream` at `size`.
fn recorded(cases: &[Case], stream: &str, policy: &str, size: usize) -> usize {
    let case = cases
        .iter()
        .find(|c| c.stream == stream && c.kind.as_str() == policy && c.size == size)
        .unwrap_or_else(|| panic!("no recorded {policy} {stream} {size}"));
    bits(case.hits_hex).iter().filter(|&&b| b).count()
}

/// LHD's hit ratio within this of libCacheSim's on each stream and size (measured: within
/// 0.0082, on `mixed-removes` at 37 and 150 lines).
const LHD_BOUND: f64 = 0.015;

/// Hit-ratio bounds for the policies whose results cannot equal libCacheSim's (measured on
/// these streams: CAR within 0.017 of ARC, LeCaR within 0.004, W-TinyLFU within 0.011, CLOCK-Pro
/// within 0.022 of ARC; the bounds leave a little room, not an order of magnitude):
/// - CAR against libCacheSim's ARC (the package has no CAR; CAR approximates ARC, car.rs);
/// - LeCaR against libCacheSim's LeCaR (only the random draws differ, lecar.rs);
/// - LHD against libCacheSim's LHD within [`LHD_BOUND`] (only the random draws of the
///   sampled candidates and explorers differ, lhd.rs);
/// - W-TinyLFU against libCacheSim's WTinyLFU from 100 lines; below, libCacheSim's window of
///   `floor(0.01 c)` = 0 objects refuses every insert (0 hits, pinned too), ours has one line;
/// - CLOCK-Pro against libCacheSim's ARC, and above libCacheSim's ClockPro, which loses
///   returning test keys (clockpro.rs) and hits less than half as often as LRU here.
#[test]
fn libcachesim_bounds_for_the_newer_policies() {
    let (streams, cases) = parse_golden();
    let mut failures = Vec::new();
    for (name, ops) in &streams {
        let gets = ops.iter().filter(|op| matches!(op, Op::Get(_))).count() as f64;
        for size in [20, 37, 64, 150] {
            let ours = |kind| replay(ops, kind, size) as f64 / gets;
            let theirs = |policy| recorded(&cases, name, policy, size) as f64 / gets;
            let mut check = |what: &str, ok: bool, detail: String| {
                if !ok {
                    failures.push(format!("{name} {size} lines: {what}: {detail}"));
                }
            };
            let (car, arc) = (ours(EvictionKind::Car), theirs("arc"));
            check(
                "car vs arc",
                (car - arc).abs() <= 0.025,
                format!("{car:.4} vs {arc:.4}"),
            );
            let (lecar, lcs_lecar) = (ours(EvictionKind::LeCaR), theirs("lecar"));
            check(
                "lecar",
                (lecar - lcs_lecar).abs() <= 0.01,
                format!("{lecar:.4} vs {lcs_lecar:.4}"),
            );
            let (lhd, lcs_lhd) = (ours(EvictionKind::Lhd), theirs("lhd"));
            check(
                "lhd",
                (lhd - lcs_lhd).abs() <= LHD_BOUND,
                format!("{lhd:.4} vs {lcs_lhd:.4}"),
            );
            let (tiny, lcs_tiny) = (ours(EvictionKind::WTinyLfu), theirs("w-tinylfu"));
            if size >= 100 {
                check(
                    "w-tinylfu",
                    (tiny - lcs_tiny).abs() <= 0.02,
                    format!("{tiny:.4} vs {lcs_tiny:.4}"),
                );
            } else {
                check(
                    "w-tinylfu below 100 lines",
                    lcs_tiny == 0.0 && tiny > 0.2,
                    format!("{tiny:.4} vs {lcs_tiny:.4}"),
                );
            }
            let (pro, lcs_pro, lru) = (
                ours(EvictionKind::ClockPro),
                theirs("clock-pro"),
                theirs("lru"),
            );
            check(
                "clock-pro vs arc",
                (pro - arc).abs() <= 0.03,
                format!("{pro:.4} vs {arc:.4}"),
            );
            check(
                "clock-pro above libCacheSim's",
                pro > lcs_pro && lcs_pro < 0.6 * lru,
                format!("{pro:.4}, libCacheSim {lcs_pro:.4}, its LRU {lru:.4}"),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
