//! The request path's own cost: 4 KiB reads and writes, and 512-byte writes, that all hit a
//! write-back cache on in-memory devices (no device latency, no flusher work), from two
//! threads. What it prints is the policy core, the ordering table, plan execution, record
//! writes and the request path's checks, per request; against the same loop of bare
//! in-memory device copies (the anchor, measured in the same run) as a ratio. And the cost of
//! the watcher every device op goes through (`device/watched.rs`, docs/design.md §11): the
//! same hits on an engine built without it, interleaved round by round, as the median ratio
//! watched / unwatched.
//!
//! `cargo run --release -p tiercache-engine --example request_path_cost -- [OPS_PER_THREAD]`

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use std::time::Instant;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const HOT: u64 = 16 << 20;
const THREADS: usize = 2;
/// Rounds of the watched / unwatched comparison.
const ROUNDS: usize = 15;

/// Runs `op(thread, i, rng)` `n` times on each of [`THREADS`] threads; ns per op.
fn timed(n: usize, op: impl Fn(usize, &mut Xoshiro256PlusPlus, &mut [u8]) + Sync) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let op = &op;
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t as u64 + 1);
                let mut buf = vec![t as u8; 4096];
                for _ in 0..n {
                    op(t, &mut rng, &mut buf);
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / (n * THREADS) as f64
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("OPS_PER_THREAD: a number"))
        .unwrap_or(200_000);
    let cfg = CacheConfig {
        capacity: 32 << 20,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let open = |watched: bool| {
        let (c, b): (Arc<dyn BlockDevice>, Arc<dyn BlockDevice>) = (
            Arc::new(MemDevice::new(40 << 20)),
            Arc::new(MemDevice::new(64 << 20)),
        );
        let engine = if watched {
            Engine::with_devices(&cfg, &EngineConfig::default(), c, b)
        } else {
            Engine::with_devices_unwatched(&cfg, &EngineConfig::default(), c, b)
        }
        .expect("engine");
        // Every hot line resident and dirty: what follows hits.
        let line = vec![7u8; 4096];
        for at in (0..HOT).step_by(4096) {
            engine.write(&line, at, false).unwrap();
        }
        engine
    };
    let unwatched = open(false);
    let engine = open(true);
    let bare = MemDevice::new(HOT as usize);
    let aligned = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(0..HOT / 4096) * 4096;
    let anchor = timed(n, |_, rng, buf| {
        let at = aligned(rng);
        if rng.gen_bool(0.5) {
            bare.read_at(buf, at).unwrap();
        } else {
            bare.write_at(buf, at, false).unwrap();
        }
    });
    let mixed = timed(n, |_, rng, buf| {
        let at = aligned(rng);
        if rng.gen_bool(0.5) {
            engine.read(buf, at).unwrap();
        } else {
            engine.write(buf, at, false).unwrap();
        }
    });
    let small = timed(n, |_, rng, buf| {
        let at = aligned(rng) + rng.gen_range(0..8) * 512;
        engine.write(&buf[..512], at, false).unwrap();
    });
    // The watcher: 4 KiB reads (the hit path that serves most), watched and not, alternating.
    // Short rounds, many of them: the machine's noise falls on both alike.
    let reads = |e: &Engine| {
        timed(n / 4, |_, rng, buf| {
            e.read(buf, aligned(rng)).unwrap();
        })
    };
    let mut ratios = Vec::new();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Either first, by turns.
        let (a, b) = if round % 2 == 0 {
            let b = reads(&unwatched);
            (reads(&engine), b)
        } else {
            let a = reads(&engine);
            (a, reads(&unwatched))
        };
        with.push(a);
        without.push(b);
        ratios.push(a / b);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let st = engine.stats();
    assert_eq!(st.errors, 0);
    println!("{THREADS} threads x {n} requests each, every one a hit");
    println!("  anchor: bare in-memory 4 KiB copies      {anchor:8.0} ns/op");
    println!(
        "  engine: 4 KiB reads and writes, 50/50     {mixed:8.0} ns/op  ({:.1}x the anchor)",
        mixed / anchor
    );
    println!(
        "  engine: 512-byte writes                   {small:8.0} ns/op  ({:.1}x the anchor)",
        small / anchor
    );
    println!(
        "  engine: 4 KiB read hits, watched devices  {:8.0} ns/op, unwatched {:.0} ns/op: \
         watched / unwatched {:.3} (median of {ROUNDS} interleaved rounds)",
        median(&mut with),
        median(&mut without),
        median(&mut ratios)
    );
}
