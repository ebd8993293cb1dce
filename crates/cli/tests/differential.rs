//! One config, one policy, in both executors: the same request stream through the simulator
//! (virtual time, modelled devices) and the engine (threads, devices in memory), one request
//! at a time, gives the same policy decisions — every hit, promotion, eviction, write-back and
//! byte moved per device, as the policy core counts them.
//!
//! Run with one policy core and with 16 policy shards (`cache.shards`, which both executors
//! run), under every lookup (`ht-fg`, a lock per shard; `ht-cg`, one lock; `lt`, serial): the
//! lookup changes the engine's locking, never its decisions. Cleaning is lazy with an idle time no run reaches,
//! so dirty lines leave only by eviction, inside the requests' own plans: background cleaning
//! is timed by each executor's own clock, virtual or real, and would make the comparison
//! depend on the machine.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::MemDevice;
use tiercache_core::{Arrival, Op, Request, RequestSource, VolumeId};
use tiercache_engine::{Engine, EngineConfig, Lookup};
use tiercache_policy::{
    CacheConfig, CacheStats, CleaningConfig, Decide, PromotionConfig, Report, ShardedCache,
    WritePolicy,
};

const VOLUME: u64 = 16 << 20;

/// A fixed list of requests for one submitter with one request in flight.
struct Replay<I>(I);

impl<I: Iterator<Item = Request>> RequestSource for Replay<I> {
    fn arrival(&self) -> Arrival {
        Arrival::Closed {
            jobs: 1,
            iodepth: 1,
        }
    }
    fn next_request(&mut self, _job: u32) -> Option<Request> {
        self.0.next()
    }
}

/// Reads, writes and a few trims of 1–12 sectors, and a few flushes at sector-aligned offsets, two thirds of them in a hot
/// quarter of the volume, some crossing line boundaries.
fn requests(seed: u64, n: usize) -> Vec<Request> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let span = if rng.gen_bool(0.66) {
                VOLUME / 4
            } else {
                VOLUME
            };
            let len = 512 * rng.gen_range(1..=12u64);
            let offset = rng.gen_range(0..(span - len) / 512) * 512;
            Request {
                time_ns: 0,
                volume: VolumeId(0),
                op: match rng.gen_range(0..100) {
                    0..60 => Op::Read,
                    60..97 => Op::Write,
                    97..99 => Op::Trim,
                    _ => Op::Flush,
                },
                offset,
                len,
            }
        })
        .collect()
}

fn config(policy: WritePolicy, line: u64, promotion: PromotionConfig, shards: u32) -> CacheConfig {
    CacheConfig {
        shards,
        capacity: 1 << 20,
        line_size: line,
        write_policy: policy,
        promotion,
        // Lazy, as the shipped configs, but never idle long enough to clean in these runs:
        // the longest idle time a policy takes (a year).
        cleaning: CleaningConfig::Lazy {
            idle_ns: tiercache_policy::config::MAX_DURATION_NS,
            batch: 32,
        },
        ..CacheConfig::default()
    }
}

fn simulated(cfg: &CacheConfig, reqs: &[Request]) -> CacheStats {
    let mut cache = ShardedCache::new(cfg).unwrap();
    let out = tiercache_sim::simulate(
        &mut cache,
        &mut Replay(reqs.iter().copied()),
        &tiercache_sim::SimConfig::default(),
    )
    .unwrap();
    out.final_stats
}

/// Runs `reqs` through the engine one at a time. With `step`, the policy core the simulator
/// runs is stepped beside it, and after every request the engine's counters must equal the
/// core's: the same decision for each request, not only in total.
fn executed(
    cfg: &CacheConfig,
    lookup: Lookup,
    reqs: &[Request],
    mut step: Option<&mut ShardedCache>,
) -> CacheStats {
    let engine = Engine::with_devices(
        cfg,
        &EngineConfig {
            lookup,
            ..EngineConfig::default()
        },
        Arc::new(MemDevice::new(8 << 20)),
        Arc::new(MemDevice::new(VOLUME as usize)),
    )
    .unwrap();
    let mut buf = vec![0u8; 12 * 512];
    for (i, r) in reqs.iter().enumerate() {
        let b = &mut buf[..r.len as usize];
        match r.op {
            Op::Read => engine.read(b, r.offset).unwrap(),
            Op::Write => {
                b.fill(i as u8);
                engine.write(b, r.offset, false).unwrap()
            }
            Op::Trim => engine.trim(r.offset, r.len).unwrap(),
            Op::Flush => engine.flush().unwrap(),
        }
        if let Some(core) = step.as_deref_mut() {
            core.access(r, Some(&mut tiercache_core::Plan::new()))
                .unwrap();
            assert_eq!(
                core.stats_snapshot(),
                engine.stats().cache,
                "request {i} ({r:?}) decided differently ({lookup:?})"
            );
        }
    }
    engine.shutdown().unwrap();
    let stats = engine.stats().cache;
    engine.audit();
    stats
}

#[test]
fn one_request_at_a_time_both_executors_make_the_same_decisions() {
    let mut crossing = 0;
    for (policy, line, promotion) in [
        (WritePolicy::WriteBack, 4096, PromotionConfig::Always),
        (
            WritePolicy::WriteBack,
            16384,
            PromotionConfig::Nhit {
                n: 2,
                table_ratio: 4.0,
                occupancy_threshold: 0.0,
            },
        ),
        (WritePolicy::WriteThrough, 4096, PromotionConfig::Always),
        (WritePolicy::WriteAround, 8192, PromotionConfig::Always),
        (WritePolicy::ReadOnly, 4096, PromotionConfig::Always),
    ] {
        for shards in [1, 16] {
            let cfg = config(policy, line, promotion.clone(), shards);
            let reqs = requests(line ^ 0x5eed, 6000);
            let layout = tiercache_policy::ShardLayout::new(&cfg).unwrap();
            crossing += reqs
                .iter()
                .filter(|r| layout.pieces(r.volume, r.offset, r.len).count() > 1)
                .count();
            let sim = simulated(&cfg, &reqs);
            assert!(sim.evictions > 100, "{policy:?}: the cache never filled");
            for lookup in [Lookup::HtFg, Lookup::HtCg, Lookup::Lt] {
                // Request by request under the lookup that locks per shard; in total otherwise.
                let mut core = ShardedCache::new(&cfg).unwrap();
                let step = (lookup == Lookup::HtFg).then_some(&mut core);
                let eng = executed(&cfg, lookup, &reqs, step);
                assert_eq!(
                    sim, eng,
                    "{policy:?} {line} {promotion:?} {shards} shards: simulator vs engine ({lookup:?})"
                );
            }
        }
    }
    // Requests cut into pieces on two shards were part of the streams, counted once each.
    assert!(crossing > 100, "only {crossing} requests crossed shards");
}

/// Each admission policy in front of the core, in both executors: the same decisions request
/// by request (probabilistic admission draws from its seeded stream in the same order in
/// both; TinyLFU and the Bloom filters see the same accesses), with writes turned away too.
#[test]
fn both_executors_make_the_same_admission_decisions() {
    use tiercache_policy::AdmissionConfig;
    for (admission, policy, shards) in [
        (
            AdmissionConfig::Probabilistic {
                probability: 0.4,
                seed: 9,
            },
            WritePolicy::WriteBack,
            1,
        ),
        (
            AdmissionConfig::Tinylfu { sketch_ratio: 1.0 },
            WritePolicy::WriteBack,
            16,
        ),
        (
            AdmissionConfig::Bloom {
                window_ratio: 1.0,
                bits_per_key: 10,
            },
            WritePolicy::WriteThrough,
            1,
        ),
    ] {
        let cfg = CacheConfig {
            admission: admission.clone(),
            ..config(policy, 4096, PromotionConfig::Always, shards)
        };
        let reqs = requests(0xadd1, 4000);
        let sim = simulated(&cfg, &reqs);
        assert!(sim.evictions > 50, "{admission:?}: the cache never filled");
        let refused = sim.bypasses_for(tiercache_policy::BypassReason::Admission);
        assert!(
            refused > 100,
            "{admission:?}: only {refused} lines turned away"
        );
        let mut core = ShardedCache::new(&cfg).unwrap();
        let eng = executed(&cfg, Lookup::HtFg, &reqs, Some(&mut core));
        assert_eq!(sim, eng, "{admission:?}: simulator vs engine");
    }
}
