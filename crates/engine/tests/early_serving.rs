//! Serving reads before the scan ends (docs/design.md §13, "Serving before the scan ends"):
//! an engine opened with `Engine::with_devices_early` answers reads of lines whose shards are
//! restored while another shard's scan is held (its slot records' reads wait at a gate on the
//! cache device), makes reads of the held shard wait, and holds every write until the whole
//! open is done. Every read returns the bytes last written (a reference model of the volume;
//! write-back, lines dirty at the restart); a recovery error found after reads were served
//! halts the engine with that error and leaves the device as it was. Nothing here waits on a
//! clock: the tests wait for states (a request counted as waiting, a shard ready).

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_core::VolumeId;
use tiercache_engine::slot_table::Layout;
use tiercache_engine::testing::{wait_until, ScanGate};
use tiercache_engine::{Engine, EngineConfig, OpeningEngine};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, ShardLayout, WritePolicy};

const LINE: u64 = 4096;
const SECTOR: usize = 512;
/// Lines of the volume.
const LINES: u64 = 256;

/// A 64-line write-back cache on 4 shards, no cleaner: written lines stay dirty.
fn config() -> CacheConfig {
    CacheConfig {
        capacity: 64 * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 4,
        ..CacheConfig::default()
    }
}

fn shards() -> ShardLayout {
    ShardLayout::new(&config()).unwrap()
}

fn shard_of(line: u64) -> usize {
    shards().shard_of(VolumeId(0), line)
}

/// What a run left: the cache device's and the backend's bytes, and the volume as a client
/// wrote it (the reference model).
struct Written {
    cache: Vec<u8>,
    backend: Vec<u8>,
    model: Vec<u8>,
}

/// Writes `writes` random sector runs (seeded) through an engine over a patterned backend of
/// `backend_lines` lines, on lines `pick` chooses, reads some back, and shuts the engine down
/// (dirty lines stay in the cache, recorded).
fn written(seed: u64, writes: usize, pick: impl Fn(&mut Xoshiro256PlusPlus) -> u64) -> Written {
    let layout = Layout::new(shards().total_lines(), LINE);
    let mut model: Vec<u8> = (0..LINES * LINE).map(|i| (i / 509 % 251) as u8).collect();
    let cache = Arc::new(MemDevice::new(layout.device_len() as usize));
    let backend = Arc::new(MemDevice::from_bytes(model.clone()));
    let engine = Engine::with_devices(
        &config(),
        &EngineConfig::default(),
        cache.clone(),
        backend.clone(),
    )
    .unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut buf = vec![0u8; 2 * LINE as usize];
    for id in 0..writes {
        let line = pick(&mut rng);
        let first = line as usize * (LINE as usize / SECTOR) + rng.gen_range(0..8);
        let sectors = rng.gen_range(1..=4usize);
        let at = first * SECTOR;
        let end = (at + sectors * SECTOR).min(model.len());
        for (j, b) in model[at..end].iter_mut().enumerate() {
            *b = (id as u8).wrapping_mul(31).wrapping_add(j as u8) | 1;
        }
        engine.write(&model[at..end], at as u64, false).unwrap();
        if id % 5 == 0 {
            let r = rng.gen_range(0..LINES - 1) * LINE;
            engine.read(&mut buf, r).unwrap();
            assert_eq!(&buf[..], &model[r as usize..r as usize + buf.len()]);
        }
    }
    assert!(engine.stats().dirty_lines > 0, "lines dirty at the restart");
    engine.shutdown().unwrap();
    drop(engine);
    Written {
        cache: cache.snapshot(),
        backend: backend.snapshot(),
        model,
    }
}

fn any_line(rng: &mut Xoshiro256PlusPlus) -> u64 {
    rng.gen_range(0..LINES)
}

/// The engine reopened early over `w`'s devices, the records of shards `shut` held.
fn reopen(w: &Written, shut: &[usize]) -> (OpeningEngine, Arc<ScanGate>, Arc<MemDevice>) {
    let gate = ScanGate::new(w.cache.clone(), &shards(), LINE, shut);
    let backend = Arc::new(MemDevice::from_bytes(w.backend.clone()));
    let opening = Engine::with_devices_early(
        &config(),
        &EngineConfig::default(),
        gate.clone(),
        backend.clone(),
    );
    (opening, gate, backend)
}

fn line_of(model: &[u8], line: u64) -> Vec<u8> {
    model[(line * LINE) as usize..((line + 1) * LINE) as usize].to_vec()
}

/// A dirty line of shard `k` at the restart (the cache alone holds its bytes).
fn dirty_line_in(w: &Written, k: usize) -> u64 {
    (0..LINES)
        .find(|&l| shard_of(l) == k && line_of(&w.model, l) != line_of(&w.backend, l))
        .unwrap_or_else(|| panic!("no dirty line in shard {k}"))
}

#[test]
fn a_ready_shard_answers_while_another_is_held_and_writes_wait_for_the_open() {
    let w = written(1, 120, any_line);
    let held = 2;
    let (opening, gate, _) = reopen(&w, &[held]);
    let _release = gate.release_on_drop();
    wait_until("shard 0 ready", || opening.shard_ready(0));
    // A dirty line of a ready shard: its bytes come from the cache device.
    let line = dirty_line_in(&w, 0);
    let mut buf = vec![0u8; LINE as usize];
    opening.read(&mut buf, line * LINE).unwrap();
    assert_eq!(buf, line_of(&w.model, line));
    let s = opening.early_stats();
    assert!(!s.open_ended, "shard {held}'s scan is held");
    assert_eq!((s.shards, s.early_reads), (4, 1));
    assert!(s.early_hit_lines >= 1, "{s:?}");
    let waiting_line = dirty_line_in(&w, held);
    let data = vec![0xa5u8; LINE as usize];
    std::thread::scope(|scope| {
        let _release = gate.release_on_drop();
        let reader = scope.spawn(|| {
            let mut buf = vec![0u8; LINE as usize];
            opening.read(&mut buf, waiting_line * LINE).unwrap();
            buf
        });
        let writer = scope.spawn(|| {
            opening.write(&data, line * LINE, false).unwrap();
            opening.early_stats().open_ended
        });
        wait_until("a read and a write waiting", || {
            let s = opening.early_stats();
            s.reads_waiting == 1 && s.others_waiting == 1
        });
        assert!(!reader.is_finished() && !writer.is_finished());
        assert!(!opening.early_stats().open_ended);
        assert_eq!(gate.waiting(), 1, "one scan held at the gate");
        gate.open_all();
        assert_eq!(reader.join().unwrap(), line_of(&w.model, waiting_line));
        assert!(writer.join().unwrap(), "the write completed after the open");
    });
    let engine = opening.into_engine().unwrap();
    engine.read(&mut buf, line * LINE).unwrap();
    assert!(buf.iter().all(|&b| b == 0xa5));
    engine.audit();
}

#[test]
fn shards_with_waiting_reads_are_scanned_next() {
    let w = written(2, 120, any_line);
    // Both recovery threads (two on this small cache) stop at shards 0 and 1.
    let (opening, gate, _) = reopen(&w, &[0, 1, 2, 3]);
    let _release = gate.release_on_drop();
    wait_until("both recovery threads held", || gate.waiting() == 2);
    let line = dirty_line_in(&w, 3);
    std::thread::scope(|scope| {
        let _release = gate.release_on_drop();
        let reader = scope.spawn(|| {
            let mut buf = vec![0u8; LINE as usize];
            opening.read(&mut buf, line * LINE).unwrap();
            buf
        });
        wait_until("the read waiting", || {
            opening.early_stats().reads_waiting == 1
        });
        // Shard 2 stays held: a thread freed from shard 0 must take shard 3 (waited for)
        // before it, or it stops at shard 2's gate.
        gate.open(0);
        gate.open(3);
        wait_until("a third shard asked for", || gate.asked().len() >= 3);
        assert_eq!(gate.asked()[2], 3, "asked in order {:?}", gate.asked());
        assert_eq!(reader.join().unwrap(), line_of(&w.model, line));
        assert!(!opening.early_stats().open_ended);
        gate.open_all();
    });
    opening.wait().unwrap();
}

/// A reference model of the volume over several seeds and held shards: every read during the
/// scan (lines of ready shards while one is held; whole ranges across shards waiting for it)
/// and after it returns the bytes last written, dirty ones included.
#[test]
fn every_read_during_the_scan_returns_the_bytes_last_written() {
    for seed in 0..6u64 {
        let w = written(10 + seed, 150, any_line);
        let held = (seed % 4) as usize;
        let (opening, gate, _) = reopen(&w, &[held]);
        let _release = gate.release_on_drop();
        let others: Vec<u64> = (0..LINES).filter(|&l| shard_of(l) != held).collect();
        // Lines of the other shards, each read alone: answered with the held shard's scan
        // still at the gate.
        let mut buf = vec![0u8; LINE as usize];
        for &l in &others {
            opening.read(&mut buf, l * LINE).unwrap();
            assert_eq!(buf, line_of(&w.model, l), "seed {seed}, line {l}");
        }
        assert!(!opening.early_stats().open_ended);
        assert_eq!(opening.early_stats().early_reads, others.len() as u64);
        // Unaligned ranges across lines of every shard: they wait for the held one.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let ranges: Vec<(u64, usize)> = (0..20)
            .map(|_| {
                let len = rng.gen_range(1..=6usize) * SECTOR + rng.gen_range(0..3) * LINE as usize;
                let at = rng.gen_range(0..LINES * LINE - len as u64) / SECTOR as u64;
                (at * SECTOR as u64, len)
            })
            .collect();
        std::thread::scope(|scope| {
            let _release = gate.release_on_drop();
            let readers: Vec<_> = ranges
                .chunks(5)
                .map(|rs| {
                    let opening = &opening;
                    scope.spawn(move || {
                        rs.iter()
                            .map(|&(at, len)| {
                                let mut b = vec![0u8; len];
                                opening.read(&mut b, at).unwrap();
                                (at, b)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            // Some readers wait (their ranges touch the held shard), or are done.
            wait_until("a read waiting or all done", || {
                opening.early_stats().reads_waiting > 0 || readers.iter().all(|r| r.is_finished())
            });
            gate.open_all();
            for r in readers {
                for (at, b) in r.join().unwrap() {
                    assert_eq!(
                        &b[..],
                        &w.model[at as usize..at as usize + b.len()],
                        "seed {seed}"
                    );
                }
            }
        });
        let engine = opening.into_engine().unwrap();
        let mut vol = vec![0u8; w.model.len()];
        engine.read(&mut vol, 0).unwrap();
        assert!(vol == w.model, "seed {seed}: the volume after the open");
        engine.audit();
    }
}

/// Lines past a smaller backend's end found in one shard (its records name lines the
/// backend cannot hold): the open fails after reads of the other shards were served; the
/// engine halts with the open's error, every request after it fails, and the cache device is
/// left byte for byte as it was.
#[test]
fn a_late_recovery_error_halts_the_engine_and_leaves_the_device_as_it_was() {
    // One line past line 127 (the smaller backend's end); the rest below.
    let far = 200;
    let w = written(3, 100, move |rng| {
        if rng.gen_ratio(1, 20) {
            far
        } else {
            rng.gen_range(0..128)
        }
    });
    let bad = shard_of(far);
    let halved = Written {
        cache: w.cache.clone(),
        backend: w.backend[..(128 * LINE) as usize].to_vec(),
        model: w.model.clone(),
    };
    let (opening, gate, backend) = reopen(&halved, &[bad]);
    let _release = gate.release_on_drop();
    let good = (bad + 1) % 4;
    wait_until("the good shard ready", || opening.shard_ready(good));
    let line = dirty_line_in(&w, good);
    let mut buf = vec![0u8; LINE as usize];
    opening.read(&mut buf, line * LINE).unwrap();
    assert_eq!(buf, line_of(&w.model, line));
    assert!(opening.halted().is_none());
    gate.open_all();
    let err = opening.wait().err().expect("the open fails").to_string();
    assert!(err.contains("outside the backends"), "{err}");
    let halted = opening.halted().expect("halted");
    assert!(halted.contains("outside the backends"), "{halted}");
    let read = opening.read(&mut buf, line * LINE).unwrap_err().to_string();
    assert!(read.contains("outside the backends"), "{read}");
    assert!(opening.write(&buf, 0, false).is_err());
    assert!(opening.flush().is_err());
    assert!(gate.snapshot() == w.cache, "the cache device is as it was");
    assert!(
        backend.snapshot() == halved.backend,
        "the backend is as it was"
    );
}

/// The crash-test harness's scenario (`common`: a 12-line write-back cache on 16 shards,
/// FLUSHes and FUA writes among the writes) killed, or its power lost, at its end; the engine
/// reopened early with a shard held. Reads served meanwhile hold legal values; a crash (kill)
/// while a write waits for the open finds both devices as they were, and recovers them; the
/// write, once acknowledged after the open, survives a kill.
#[test]
fn a_crash_during_early_serving_recovers_every_acknowledged_write() {
    use common::{legal_values, sector_bytes, sector_id, Scenario, SECTOR as SEC, VOLUME};
    let mut run = Scenario::new(|backend| Arc::new(backend));
    for id in 1..=60u32 {
        if id % 9 == 0 {
            run.flush();
        }
        let line = run.pick_line();
        let first = line * (LINE as usize / SEC) + run.rng.gen_range(0..6);
        let sectors = run.rng.gen_range(1..=3);
        let fua = run.rng.gen_bool(0.1);
        run.write(id, first, sectors, fua);
    }
    let cfg = common::config();
    let sl = ShardLayout::new(&cfg).unwrap();
    let recovered = |cache: Vec<u8>, backend: Vec<u8>| {
        let e = Engine::with_devices(
            &cfg,
            &EngineConfig::default(),
            Arc::new(MemDevice::from_bytes(cache)),
            Arc::new(MemDevice::from_bytes(backend)),
        )
        .unwrap();
        let mut vol = vec![0u8; VOLUME];
        e.read(&mut vol, 0).unwrap();
        e.audit();
        vol
    };
    for lose_unsynced in [false, true] {
        let (cache, backend, at) = run.images_now(lose_unsynced);
        let (stable, maybe) = legal_values(&run.events, at);
        let legal = |s: usize, b: &[u8]| {
            let got = sector_id(b);
            assert!(
                got.is_some_and(|g| g == stable[s] || maybe[s].contains(&g)),
                "lose unsynced {lose_unsynced}: sector {s} holds {got:?}, durable {}, possible {:?}",
                stable[s],
                maybe[s]
            );
        };
        let held = (0..sl.shards()).find(|&k| sl.lines(k) > 0).unwrap();
        let gate = ScanGate::new(cache.clone(), &sl, LINE, &[held]);
        let backend_dev = Arc::new(MemDevice::from_bytes(backend.clone()));
        let opening = Engine::with_devices_early(
            &cfg,
            &EngineConfig::default(),
            gate.clone(),
            backend_dev.clone(),
        );
        let _release = gate.release_on_drop();
        let lines = VOLUME as u64 / LINE;
        let mut buf = vec![0u8; LINE as usize];
        for l in (0..lines).filter(|&l| sl.shard_of(VolumeId(0), l) != held) {
            opening.read(&mut buf, l * LINE).unwrap();
            for (j, b) in buf.chunks(SEC).enumerate() {
                legal(l as usize * (LINE as usize / SEC) + j, b);
            }
        }
        let target = (0..lines)
            .find(|&l| sl.shard_of(VolumeId(0), l) == held)
            .unwrap();
        let data: Vec<u8> = (0..LINE as usize / SEC)
            .flat_map(|_| sector_bytes(1000))
            .collect();
        std::thread::scope(|scope| {
            let _release = gate.release_on_drop();
            let writer = scope.spawn(|| opening.write(&data, target * LINE, false));
            wait_until("the write waiting", || {
                opening.early_stats().others_waiting == 1
            });
            // Killed now: nothing was written to either device, and they recover.
            assert!(gate.snapshot() == cache, "the cache device is untouched");
            assert!(
                backend_dev.snapshot() == backend,
                "the backend is untouched"
            );
            let vol = recovered(gate.snapshot(), backend_dev.snapshot());
            for (s, b) in vol.chunks(SEC).enumerate() {
                legal(s, b);
            }
            gate.open_all();
            writer.join().unwrap().unwrap();
        });
        // The write acknowledged, then a kill: it survives, the rest as legal as before.
        let engine = opening.into_engine().unwrap();
        let (c, b) = (gate.snapshot(), backend_dev.snapshot());
        std::mem::forget(engine);
        let vol = recovered(c, b);
        let first = (target * LINE) as usize / SEC;
        for (s, b) in vol.chunks(SEC).enumerate() {
            if (first..first + LINE as usize / SEC).contains(&s) {
                assert_eq!(
                    sector_id(b),
                    Some(1000),
                    "sector {s} of the acknowledged write"
                );
            } else {
                legal(s, b);
            }
        }
    }
}
