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

/// Three volumes sharing a cache of `shards` shards under tenancy `mode`: a re-read hot set
/// (volume 0), rewrites (volume 1, which `eci` runs read-only) and a scan in 64 KiB reads
/// (volume 2), with requests of one to four lines crossing chunks and so shards.
fn tenant_requests(seed: u64, n: usize) -> Vec<Request> {
    const LINE: u64 = 4096;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut scan = 0u64;
    (0..n)
        .map(|_| {
            let v = rng.gen_range(0..3u32);
            let (op, offset, len) = match v {
                0 => (
                    Op::Read,
                    rng.gen_range(0..160) * LINE,
                    LINE * rng.gen_range(1..=4),
                ),
                1 => (
                    Op::Write,
                    rng.gen_range(0..64) * LINE,
                    LINE * rng.gen_range(1..=2),
                ),
                _ => {
                    scan = (scan + 16 * LINE) % TENANT_VOLUME;
                    (Op::Read, scan, 16 * LINE)
                }
            };
            Request {
                time_ns: 0,
                volume: VolumeId(v),
                op,
                offset,
                len,
            }
        })
        .collect()
}

const TENANT_VOLUME: u64 = 4 << 20;

/// Multi-tenant sizing on 4 shards (docs/design.md §4.10, "On shards"), `eci` and `trd`: the
/// engine and the simulator's core (the `ShardedCache` the simulator runs, stepped beside it)
/// get the same three-volume stream one request at a time and are polled for the tenancy
/// decision at the same points of it, on one virtual clock (the engine through
/// `Engine::repartition_at`; its interval, an hour, is never reached by its own clock). After
/// every request the counters must be equal, and after every poll each shard's partitions
/// and each volume's write policy.
#[test]
fn sharded_tenancy_both_executors_make_the_same_decisions() {
    use tiercache_blockdev::BlockDevice;
    use tiercache_engine::device::VolumeSet;
    use tiercache_policy::{Background, ExecutorState, TenancyConfig, TenancyModeKind};
    const HOUR: u64 = 3_600_000_000_000;
    for mode in [TenancyModeKind::Eci, TenancyModeKind::Trd] {
        let cfg = CacheConfig {
            tenancy: TenancyConfig {
                mode,
                interval_ns: HOUR,
                ..TenancyConfig::default()
            },
            ..config(WritePolicy::WriteBack, 4096, PromotionConfig::Always, 4)
        };
        let set = VolumeSet::new(
            (0..3)
                .map(|v| {
                    let b: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(TENANT_VOLUME as usize));
                    (v, b)
                })
                .collect(),
        )
        .unwrap();
        let extents = set.extents();
        let engine = Engine::with_volume_devices(
            &cfg,
            &EngineConfig::default(),
            Arc::new(MemDevice::new(8 << 20)),
            Arc::new(set),
            extents,
        )
        .unwrap();
        let mut core = ShardedCache::new(&cfg).unwrap();
        let poll = |core: &mut ShardedCache, now: u64| {
            engine.repartition_at(now);
            core.repartition(&ExecutorState {
                now,
                ..ExecutorState::default()
            });
            let mut jobs = Vec::new();
            core.take_resize_jobs(&mut jobs);
            for j in jobs {
                core.flush_done(j);
            }
        };
        // Starts both schedules before any request (the engine's flusher may have already).
        poll(&mut core, 0);
        let reqs = tenant_requests(mode as u64 ^ 0x7e4a, 6000);
        let mut buf = vec![0u8; 16 * 4096];
        let mut decisions = 0;
        for (i, r) in reqs.iter().enumerate() {
            let b = &mut buf[..r.len as usize];
            match r.op {
                Op::Read => engine.read_volume(r.volume.0, b, r.offset).unwrap(),
                _ => {
                    b.fill(i as u8);
                    engine.write_volume(r.volume.0, b, r.offset, false).unwrap()
                }
            }
            core.access(r, Some(&mut tiercache_core::Plan::new()))
                .unwrap();
            assert_eq!(
                core.stats_snapshot(),
                engine.stats().cache,
                "{mode:?}: request {i} ({r:?}) decided differently"
            );
            if i % 500 != 499 {
                continue;
            }
            // Interval j ends between its polls: half an interval on.
            poll(&mut core, (i as u64 / 500 + 1) * HOUR + HOUR / 2);
            let mut layout: Vec<(u16, u32, u32)> = core
                .shards()
                .iter()
                .enumerate()
                .flat_map(|(k, c)| {
                    c.partition_stats().into_iter().filter_map(move |p| {
                        p.volume.map(|v| (k as u16, v.0, p.capacity_lines as u32))
                    })
                })
                .collect();
            let mut engine_layout: Vec<(u16, u32, u32)> = engine
                .partition_layout()
                .iter()
                .map(|e| (e.shard, e.volume, e.lines))
                .collect();
            layout.sort();
            engine_layout.sort();
            assert!(
                decisions == 0 || layout.len() == 12,
                "{mode:?}: three volumes in four shards"
            );
            assert_eq!(
                layout, engine_layout,
                "{mode:?}: partitions after request {i}"
            );
            assert_eq!(
                core.stats_snapshot(),
                engine.stats().cache,
                "{mode:?}: resize after request {i}"
            );
            for v in 0..3 {
                assert_eq!(
                    core.write_policy(VolumeId(v)),
                    engine.write_policy_in_force(v),
                    "{mode:?}: volume {v}'s write policy"
                );
            }
            let rep = core.tenancy_report().unwrap();
            assert_eq!(engine.tenancy_report().unwrap().volumes, rep.volumes);
            decisions = rep.decisions;
        }
        assert!(decisions >= 10, "{mode:?}: only {decisions} decisions");
        assert!(
            core.stats_snapshot().written_back_bytes > 0,
            "{mode:?}: no shrink wrote dirty lines back"
        );
        engine.shutdown().unwrap();
        engine.audit();
    }
}
