//! Throughput and accuracy of the analysis paths on a seeded Zipf stream.
//!
//! ```text
//! cargo run --release -p tiercache-analyze --example bench_analyze -- [N=10000000]
//! ```
//!
//! N requests of 4 KiB (one line each, a quarter of them writes) drawn from Zipf(0.95) over
//! 2M lines, scattered over the address space. Timed separately:
//!
//! - the exact path: [`Analyzer`] `add` for every request plus `finish` (exact LRU curves for
//!   all/read/write accesses, reuse distances and types, characterisation);
//! - the bare exact stack ([`StackDistance`]) alone, for reference;
//! - SHARDS fixed-rate 1% and fixed-size (8192 lines);
//! - mini-simulations of LRU, FIFO, CLOCK, ARC, S3-FIFO and SIEVE at 1% (the MAE shown is
//!   that of its LRU curve).
//!
//! Then the mean absolute error of both SHARDS curves against the exact curve over the
//! power-of-two cache sizes. Targets: exact ≥ 3M requests/s, SHARDS 1% ≥ 30M requests/s,
//! MAE < 0.01.

use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::hint::black_box;
use std::time::Instant;
use tiercache_analyze::minisim::MiniSim;
use tiercache_analyze::shards::Shards;
use tiercache_analyze::stack::StackDistance;
use tiercache_analyze::{Analyzer, EvictionKind, Options};
use tiercache_core::{LineKey, Op, Request, VolumeId};

const LINE: u64 = 4096;
const FOOTPRINT: u64 = 2_000_000;
const EXPONENT: f64 = 0.95;
fn seed() -> u64 {
    std::env::var("BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(42)
}
const FIXED_SIZE: usize = 8192;

fn requests(n: usize) -> Vec<Request> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed());
    let zipf = Zipf::new(FOOTPRINT, EXPONENT).expect("valid Zipf");
    let salt = seed() << 32;
    (0..n)
        .map(|i| {
            let rank = zipf.sample(&mut rng) as u64 - 1;
            // Scatter ranks over four times the footprint so hot lines are not adjacent.
            let line = (rank ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) % (FOOTPRINT * 4);
            Request {
                time_ns: i as u64 * 1_000,
                volume: VolumeId(0),
                op: if i % 4 == 0 { Op::Write } else { Op::Read },
                offset: line * LINE,
                len: LINE,
            }
        })
        .collect()
}

fn key(r: &Request) -> u64 {
    LineKey::new(r.volume, r.offset / LINE).0
}

struct Row {
    name: &'static str,
    secs: f64,
    memory: usize,
    mae: Option<f64>,
    note: String,
}

fn mae(shards: &Shards, exact: &[(u64, f64)]) -> f64 {
    exact
        .iter()
        .map(|&(lines, m)| (shards.miss_ratio(lines) - m).abs())
        .sum::<f64>()
        / exact.len() as f64
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.replace('_', "").parse().expect("N: a request count"))
        .unwrap_or(10_000_000);
    let t = Instant::now();
    let reqs = requests(n);
    eprintln!(
        "generated {n} requests in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let mut rows = Vec::new();

    // (a) The full exact path.
    let t = Instant::now();
    let mut analyzer = Analyzer::new(Options::default()).expect("valid options");
    for r in &reqs {
        analyzer.add(r).expect("an addressable request");
    }
    let memory = analyzer.memory_bytes();
    let analysis = analyzer.finish(&|v| v.0.to_string());
    let secs = t.elapsed().as_secs_f64();
    let exact: Vec<(u64, f64)> = analysis
        .curve
        .iter()
        .map(|p| (p.lines, p.miss_ratio.expect("an exact analysis")))
        .collect();
    rows.push(Row {
        name: "exact (Analyzer)",
        secs,
        memory,
        mae: None,
        note: format!("{} distinct lines", analysis.footprint_lines.unwrap_or(0)),
    });
    drop(analyzer);

    // The bare stack, for reference.
    let t = Instant::now();
    let mut stack = StackDistance::new();
    let mut reuses = 0u64;
    for r in &reqs {
        reuses += stack.access(key(r)).is_some() as u64;
    }
    black_box(reuses);
    rows.push(Row {
        name: "exact stack only",
        secs: t.elapsed().as_secs_f64(),
        memory: stack.memory_bytes(),
        mae: None,
        note: String::new(),
    });
    drop(stack);

    // (b), (c) SHARDS.
    let mut curves = Vec::new();
    for (name, mut shards) in [
        ("SHARDS fixed-rate 1%", Shards::fixed_rate(0.01)),
        ("SHARDS fixed-size 8192", Shards::fixed_size(FIXED_SIZE)),
    ] {
        let t = Instant::now();
        for r in &reqs {
            shards.access(key(r));
        }
        let secs = t.elapsed().as_secs_f64();
        rows.push(Row {
            name,
            secs,
            memory: shards.memory_bytes(),
            mae: Some(mae(&shards, &exact)),
            note: format!(
                "final rate {:.5}, peak {} lines ({} hot)",
                shards.rate(),
                shards.peak_entries(),
                shards.hot_lines()
            ),
        });
        curves.push(shards);
    }

    // (d) Mini-simulation of every policy but MRU at 1%; its LRU curve checked against exact.
    let policies = [
        EvictionKind::Lru,
        EvictionKind::Fifo,
        EvictionKind::Clock,
        EvictionKind::Arc,
        EvictionKind::S3Fifo,
        EvictionKind::Sieve,
    ];
    let t = Instant::now();
    let mut minisim = MiniSim::new(&policies, 0.01, &[]);
    for r in &reqs {
        minisim.access(key(r));
    }
    let secs = t.elapsed().as_secs_f64();
    let lru_mae = exact
        .iter()
        .map(|&(lines, m)| (minisim.miss_ratio(EvictionKind::Lru, lines).unwrap() - m).abs())
        .sum::<f64>()
        / exact.len() as f64;
    rows.push(Row {
        name: "mini-sim 6 policies 1%",
        secs,
        memory: minisim.memory_bytes(),
        mae: Some(lru_mae),
        note: format!(
            "MAE of its LRU; {} hot lines, {} accesses simulated",
            minisim.hot_lines(),
            minisim.simulated_accesses()
        ),
    });

    println!(
        "{n} requests, Zipf({EXPONENT}) over {FOOTPRINT} lines, {} power-of-two sizes",
        exact.len()
    );
    println!(
        "{:<24} {:>9} {:>12} {:>12} {:>8}  notes",
        "path", "time s", "Mreq/s", "memory MiB", "MAE"
    );
    for r in &rows {
        println!(
            "{:<24} {:>9.3} {:>12.2} {:>12.2} {:>8}  {}",
            r.name,
            r.secs,
            n as f64 / r.secs / 1e6,
            r.memory as f64 / (1 << 20) as f64,
            r.mae.map_or("-".to_string(), |m| format!("{m:.5}")),
            r.note
        );
    }
    if std::env::var_os("BENCH_CURVES").is_some() {
        println!("{:>10} {:>8} {:>8} {:>8}", "lines", "exact", "1%", "fixed");
        for &(lines, m) in &exact {
            println!(
                "{lines:>10} {m:>8.4} {:>8.4} {:>8.4}",
                curves[0].miss_ratio(lines),
                curves[1].miss_ratio(lines)
            );
        }
    }
}
