//! The engine's all-hit 4 KiB random-read IOPS at queue depth 16 on an O_DIRECT cache file,
//! driven in-process (no NBD transport): with io_uring, one thread keeping 16 reads in flight
//! (hits started on the ring and replaced as each finishes, as the NBD server runs a
//! connection on an O_DIRECT cache), and one thread offering batches of 16 reads and waiting
//! for each batch whole ([`Engine::read_hits`]);
//! with pread, 16 threads each reading (the pread path's only way to keep 16 in flight) and
//! one thread taking its batches one read at a time (what a connection's reader did).
//!
//! `cargo run --profile test -p tiercache-engine --example odirect_qd16 -- DIR [SECONDS] [ROUNDS]`
//!
//! DIR must be on a file system with O_DIRECT (a real disk, not tmpfs). Prints one JSON line
//! per run and the median ratios; `bench/odirect_vs_fio.sh` sets it beside fio.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::path::Path;
use std::time::{Duration, Instant};
use tiercache_engine::{Engine, EngineConfig, IoEngine};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const VOLUME: u64 = 256 << 20;
const QD: usize = 16;
const BS: usize = 4096;

fn open(dir: &Path, io: IoEngine) -> Engine {
    let cfg = CacheConfig {
        capacity: VOLUME,
        line_size: BS as u64,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        // One policy shard: the cache holds exactly the volume (with 16, lines hash to shards
        // unevenly and a full shard evicts), so every slot is written and every read hits.
        shards: 1,
        ..CacheConfig::default()
    };
    let ecfg = EngineConfig {
        cache_path: dir.join("cache.img"),
        backend_path: dir.join("backend.img"),
        backend_size: Some(VOLUME),
        cache_direct: true,
        cache_mapped_reads: false,
        io,
        ..EngineConfig::default()
    };
    Engine::open(&cfg, &ecfg).unwrap_or_else(|e| {
        eprintln!("odirect_qd16: {e}");
        std::process::exit(1)
    })
}

fn offset(rng: &mut Xoshiro256PlusPlus) -> u64 {
    rng.gen_range(0..VOLUME / BS as u64) * BS as u64
}

/// One thread, batches of [`QD`] reads through `read_hits` (misses read singly): IOPS.
fn batched(engine: &Engine, secs: f64) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut bufs = vec![vec![0u8; BS]; QD];
    let (start, mut done) = (Instant::now(), 0u64);
    while start.elapsed().as_secs_f64() < secs {
        let offs: Vec<u64> = (0..QD).map(|_| offset(&mut rng)).collect();
        let mut reads: Vec<(u64, &mut [u8])> = offs
            .iter()
            .zip(bufs.iter_mut())
            .map(|(o, b)| (*o, &mut b[..]))
            .collect();
        let answers = engine.read_hits(&mut reads);
        for ((o, b), a) in reads.iter_mut().zip(answers) {
            match a {
                Some(r) => r.expect("read"),
                None => engine.read(b, *o).expect("read"),
            }
        }
        done += QD as u64;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

/// One thread keeping [`QD`] reads in flight: hits started on the ring
/// (`BlockDevice::start_reads`) and replaced as each finishes (`reap_started`), as the NBD
/// server runs a connection's reads on an O_DIRECT cache: IOPS.
fn started(engine: &Engine, secs: f64) -> f64 {
    use tiercache_blockdev::{BlockDevice, ReapWait};
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let (start, mut done, mut in_flight, mut tag) = (Instant::now(), 0u64, 0usize, 0u64);
    let mut b = vec![0u8; BS];
    let mut refill = |n: usize, in_flight: &mut usize, done: &mut u64| {
        let reads: Vec<(u64, u64, u32)> = (0..n)
            .map(|_| {
                tag += 1;
                (tag, offset(&mut rng), BS as u32)
            })
            .collect();
        for (r, st) in reads.iter().zip(engine.start_reads(&reads)) {
            match st {
                Some(res) => {
                    res.expect("start");
                    *in_flight += 1;
                }
                None => {
                    engine.read(&mut b, r.1).expect("read");
                    *done += 1;
                }
            }
        }
    };
    refill(QD, &mut in_flight, &mut done);
    while start.elapsed().as_secs_f64() < secs {
        let mut ok = true;
        let n = engine.reap_started(ReapWait::Completion, &mut |_, res| ok &= res.is_ok());
        assert!(ok, "a started read failed");
        in_flight -= n;
        done += n as u64;
        refill(QD - in_flight, &mut in_flight, &mut done);
    }
    while in_flight > 0 {
        in_flight -= engine.reap_started(ReapWait::Completion, &mut |_, _| {});
    }
    done as f64 / start.elapsed().as_secs_f64()
}

/// [`QD`] threads, each one read at a time: IOPS.
fn threaded(engine: &Engine, secs: f64) -> f64 {
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..QD)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(t as u64 + 7);
                    let mut b = vec![0u8; BS];
                    let mut n = 0u64;
                    while start.elapsed().as_secs_f64() < secs {
                        engine.read(&mut b, offset(&mut rng)).expect("read");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| {
        eprintln!("usage: odirect_qd16 DIR [SECONDS] [ROUNDS]");
        std::process::exit(2)
    });
    let secs: f64 = args
        .next()
        .map_or(5.0, |a| a.parse().expect("SECONDS: a number"));
    let rounds: usize = args
        .next()
        .map_or(3, |a| a.parse().expect("ROUNDS: a number"));
    let dir = Path::new(&dir);
    {
        // Warm: every line resident (read once, sequentially), then recorded for the reopens.
        let e = open(dir, IoEngine::IoUring);
        let mut b = vec![0u8; 1 << 20];
        for at in (0..VOLUME).step_by(b.len()) {
            e.read(&mut b, at).expect("warm read");
        }
        e.shutdown().expect("shutdown");
    }
    let (mut ur, mut ps_thr, mut ps_seq, mut st) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        for (name, io, mode) in [
            ("engine-io_uring-started", IoEngine::IoUring, 2),
            ("engine-io_uring-batched", IoEngine::IoUring, 0),
            ("engine-pread-16-threads", IoEngine::Psync, 1),
            ("engine-pread-batched", IoEngine::Psync, 0),
        ] {
            let e = open(dir, io);
            let iops = match mode {
                0 => batched(&e, secs),
                1 => threaded(&e, secs),
                _ => started(&e, secs),
            };
            let s = e.stats();
            assert_eq!(
                s.cache.read_line_hits, s.cache.read_line_accesses,
                "every read hits"
            );
            e.shutdown().expect("shutdown");
            drop(e);
            std::thread::sleep(Duration::from_millis(200));
            println!(
                "{{\"round\": {round}, \"name\": \"{name}\", \"iops\": {iops:.0}, \"read_hit_lines\": {}}}",
                s.cache.read_line_hits
            );
            match name {
                "engine-io_uring-started" => st.push(iops),
                "engine-io_uring-batched" => ur.push(iops),
                "engine-pread-16-threads" => ps_thr.push(iops),
                _ => ps_seq.push(iops),
            }
        }
    }
    let (u, t, q, s) = (median(ur), median(ps_thr), median(ps_seq), median(st));
    println!(
        "{{\"median_iops_io_uring_started\": {s:.0}, \"median_iops_io_uring_batched\": {u:.0}, \"median_iops_pread_16_threads\": {t:.0}, \"median_iops_pread_batched\": {q:.0}, \"io_uring_started_over_pread_16_threads\": {:.3}, \"io_uring_batched_over_pread_batched\": {:.3}}}",
        s / t,
        u / q
    );
}
