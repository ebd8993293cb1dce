//! The request path with io_uring selected, on real files (O_DIRECT where the file system has
//! it, and through the page cache): concurrent random reads, writes and batched hit reads
//! ([`Engine::read_hits`], one submission per batch) read back what a model says was written,
//! across restarts, for both I/O engines, and the batched path agrees with single reads.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::{Arc, Mutex};
use tiercache_engine::{Engine, EngineConfig, IoEngine, Lookup};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const VOLUME: usize = 4 << 20;
const THREADS: usize = 3;

fn cache_config() -> CacheConfig {
    CacheConfig {
        // Half the volume: misses, evictions and write-backs as well as hits.
        capacity: 2 << 20,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 16,
        },
        shards: 16,
        ..CacheConfig::default()
    }
}

fn open(dir: &std::path::Path, io: IoEngine, direct: bool) -> Option<Engine> {
    let ecfg = EngineConfig {
        cache_path: dir.join("cache.img"),
        backend_path: dir.join("backend.img"),
        backend_size: Some(VOLUME as u64),
        cache_direct: direct,
        cache_mapped_reads: false,
        io,
        lookup: Lookup::HtFg,
        ..EngineConfig::default()
    };
    match Engine::open(&cache_config(), &ecfg) {
        Ok(e) => Some(e),
        Err(e) if direct && e.to_string().contains("O_DIRECT") => {
            eprintln!("skipping O_DIRECT: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Each thread owns a stripe of 64 KiB chunks (so the model is exact under concurrency):
/// aligned and unaligned writes, single reads, and batches of up to 16 reads through
/// `read_hits` (reads it does not serve go through `read`).
fn workload(engine: &Engine, model: &Mutex<Vec<u8>>, seed: u64) {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 31 + t as u64);
                let chunks = VOLUME / 65536;
                let pick = |rng: &mut Xoshiro256PlusPlus, len: usize| {
                    let chunk = (rng.gen_range(0..chunks / THREADS) * THREADS + t) * 65536;
                    let aligned = rng.gen_bool(0.7);
                    let off = if aligned {
                        rng.gen_range(0..(65536 - len) / 4096) * 4096
                    } else {
                        rng.gen_range(0..65536 - len)
                    };
                    (chunk + off) as u64
                };
                for _ in 0..400 {
                    match rng.gen_range(0..10) {
                        0..=2 => {
                            let len = [512, 4096, 8192, 3000][rng.gen_range(0..4)];
                            let off = pick(&mut rng, len);
                            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                            engine.write(&data, off, false).unwrap();
                            model.lock().unwrap()[off as usize..off as usize + len]
                                .copy_from_slice(&data);
                        }
                        3..=5 => {
                            let len = [4096, 8192, 700][rng.gen_range(0..3)];
                            let off = pick(&mut rng, len);
                            let mut b = vec![0u8; len];
                            engine.read(&mut b, off).unwrap();
                            let m = model.lock().unwrap();
                            assert!(
                                b[..] == m[off as usize..off as usize + len],
                                "read at {off}"
                            );
                        }
                        _ => {
                            let n = rng.gen_range(2..=16);
                            let mut bufs: Vec<(u64, Vec<u8>)> = (0..n)
                                .map(|_| {
                                    let len = [4096, 4096, 8192, 512][rng.gen_range(0..4)];
                                    (pick(&mut rng, len), vec![0u8; len])
                                })
                                .collect();
                            let answers = {
                                let mut reads: Vec<(u64, &mut [u8])> =
                                    bufs.iter_mut().map(|(o, b)| (*o, &mut b[..])).collect();
                                engine.read_hits(&mut reads)
                            };
                            for ((off, b), a) in bufs.iter_mut().zip(answers) {
                                match a {
                                    Some(r) => r.unwrap(),
                                    None => engine.read(b, *off).unwrap(),
                                }
                                let m = model.lock().unwrap();
                                assert!(
                                    b[..] == m[*off as usize..*off as usize + b.len()],
                                    "batched read at {off}"
                                );
                            }
                        }
                    }
                }
            });
        }
    });
}

fn round_trip(io: IoEngine, direct: bool) {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let model = Mutex::new(vec![0u8; VOLUME]);
    for round in 0..2 {
        let Some(engine) = open(dir.path(), io, direct) else {
            return;
        };
        workload(&engine, &model, round);
        let s = engine.stats();
        assert!(s.cache.read_line_hits > 0 && s.cache.evictions > 0, "{s:?}");
        engine.audit();
        // Restart: dirty lines come back from the slot table.
        engine.shutdown().unwrap();
    }
    let engine = Arc::new(open(dir.path(), io, direct).unwrap());
    let mut all = vec![0u8; VOLUME];
    engine.read(&mut all, 0).unwrap();
    assert!(all == *model.lock().unwrap(), "after two restarts");
    engine.flush_all().unwrap();
    engine.shutdown().unwrap();
    drop(engine);
    let backend = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert!(
        backend == *model.lock().unwrap(),
        "the backend alone after detach"
    );
}

#[test]
fn io_uring_direct_request_path_matches_the_model() {
    round_trip(IoEngine::IoUring, true);
}

#[test]
fn io_uring_buffered_request_path_matches_the_model() {
    round_trip(IoEngine::IoUring, false);
}

#[test]
fn psync_direct_request_path_matches_the_model() {
    round_trip(IoEngine::Psync, true);
}

/// A batch of hits answers exactly what single reads answer, and serves every read that is
/// a hit (all of them, once the volume is read whole into a cache that holds it).
#[test]
fn batched_hits_serve_every_hit_and_agree_with_single_reads() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let ecfg = EngineConfig {
        cache_path: dir.path().join("cache.img"),
        backend_path: dir.path().join("backend.img"),
        backend_size: Some(2 << 20),
        cache_direct: true,
        cache_mapped_reads: false,
        io: IoEngine::IoUring,
        ..EngineConfig::default()
    };
    let cfg = CacheConfig {
        capacity: 2 << 20,
        // No background write-back: a line being cleaned is busy, and the batch leaves a busy
        // line to a single read (under load the cleaner could catch the reads below).
        cleaning: CleaningConfig::Lazy {
            idle_ns: tiercache_policy::config::MAX_DURATION_NS,
            batch: 16,
        },
        ..cache_config()
    };
    let engine = match Engine::open(&cfg, &ecfg) {
        Ok(e) => e,
        Err(e) if e.to_string().contains("O_DIRECT") => return,
        Err(e) => panic!("{e}"),
    };
    let pattern: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 % 253) as u8).collect();
    engine.write(&pattern, 0, false).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for _ in 0..50 {
        let offs: Vec<u64> = (0..16).map(|_| rng.gen_range(0..256u64) * 4096).collect();
        let mut bufs = vec![vec![0u8; 4096]; 16];
        let answers = {
            let mut reads: Vec<(u64, &mut [u8])> = offs
                .iter()
                .zip(bufs.iter_mut())
                .map(|(o, b)| (*o, &mut b[..]))
                .collect();
            engine.read_hits(&mut reads)
        };
        for ((o, b), a) in offs.iter().zip(&bufs).zip(answers) {
            a.expect("every read is a hit").unwrap();
            let mut single = vec![0u8; 4096];
            engine.read(&mut single, *o).unwrap();
            assert_eq!(*b, single);
            assert!(b[..] == pattern[*o as usize..*o as usize + 4096]);
        }
    }
    // Reads the batch does not serve: past the end, and across shards (64 KiB chunks).
    let (mut past, mut across) = (vec![0u8; 4096], vec![0u8; 8192]);
    let mut reads: Vec<(u64, &mut [u8])> =
        vec![(2 << 20, &mut past[..]), (65536 - 4096, &mut across[..])];
    let answers = engine.read_hits(&mut reads);
    assert!(answers.iter().all(Option::is_none));
}

/// Served over NBD with an O_DIRECT cache: a client's pipelined reads (hits started on the
/// ring and answered as they finish, misses on the workers) and writes interleaved with them
/// read back what was written, and started reads are answered (every request gets a reply).
#[test]
fn served_pipelined_reads_on_a_direct_cache_read_back() {
    served_pipelined_reads(std::time::Duration::ZERO);
}

/// The same with the server polling 1 ms for requests and completions before it sleeps.
#[test]
fn served_pipelined_reads_on_a_direct_cache_read_back_when_busy_polling() {
    served_pipelined_reads(std::time::Duration::from_millis(1));
}

fn served_pipelined_reads(busy_poll: std::time::Duration) {
    use std::time::Duration;
    use tiercache_nbd::{Connection, NbdUri, ServerConfig, ServerStats, Shutdown};
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let engine = match open(dir.path(), IoEngine::Auto, true) {
        Some(e) => Arc::new(e),
        None => return,
    };
    let sock = dir.path().join("nbd.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stats = Arc::new(ServerStats::default());
    let stop = Shutdown::new();
    let server = {
        let (dev, st, sd) = (engine.clone(), stats.clone(), stop.clone());
        std::thread::spawn(move || {
            let cfg = ServerConfig {
                busy_poll,
                ..ServerConfig::default()
            };
            tiercache_nbd::serve_unix(listener, dev, cfg, st, sd)
        })
    };
    let uri: NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap();
    let conn = Connection::open(&uri, Duration::from_secs(10)).unwrap();
    let mut model = vec![0u8; VOLUME];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let t = Duration::from_secs(20);
    for round in 0..40 {
        // A burst of writes, then a burst of pipelined reads (some the same lines: hits).
        for _ in 0..8 {
            let at = rng.gen_range(0..(VOLUME / 4096) as u64) * 4096;
            let data: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
            conn.call(
                tiercache_nbd::client::Command::Write,
                false,
                at,
                4096,
                &data,
                t,
            )
            .unwrap();
            model[at as usize..at as usize + 4096].copy_from_slice(&data);
        }
        let offs: Vec<u64> = (0..24)
            .map(|_| rng.gen_range(0..(VOLUME / 4096) as u64 / 4) * 4096)
            .collect();
        let sent: Vec<_> = offs
            .iter()
            .map(|&o| {
                conn.send(tiercache_nbd::client::Command::Read, false, o, 4096, &[])
                    .unwrap()
            })
            .collect();
        for (o, s) in offs.iter().zip(sent) {
            let got = s.wait(t).unwrap();
            assert!(
                got[..] == model[*o as usize..*o as usize + 4096],
                "round {round}: read at {o}"
            );
        }
    }
    let s = engine.stats();
    assert!(s.cache.read_line_hits > 200, "hits were served: {s:?}");
    stop.trigger();
    drop(conn);
    server.join().unwrap().unwrap();
}
