//! Power loss at every point, with zeroes: the write-back scenario of `crash.rs` with
//! WRITE_ZEROES of whole lines mixed in, on a backend that zeroes fast (so each goes through
//! the engine's zeroing plan: cached copies, dirty ones included, dropped and the backend
//! zeroed, the records dropping dirty data written only once the backend's zeroes are
//! durable). For every write the cache device received, both devices are rebuilt as a crash
//! just before it (unsynced writes kept, and lost), the engine recovers, and every sector must
//! read back a value it may legally hold: as of the last completed FLUSH, a FUA write or zero
//! completed since, or any write or zero issued after that (a zero is "write 0").

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashSet;
use std::io;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

/// A crash-logging device that says it zeroes fast (its zeroes are logged writes).
struct FastZeroes(CrashDevice);

impl BlockDevice for FastZeroes {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.0.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
    fn fast_zeroes(&self) -> bool {
        true
    }
}

const SECTOR: usize = 512;
const VOLUME: usize = 256 << 10;
const LINE: u64 = 4096;

fn config() -> CacheConfig {
    CacheConfig {
        capacity: 12 * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 16,
        ..CacheConfig::default()
    }
}

/// A sector's content names the write that produced it (0 = never written).
fn sector_bytes(id: u32) -> [u8; SECTOR] {
    let mut b = [0u8; SECTOR];
    for c in b.chunks_mut(4) {
        c.copy_from_slice(&id.to_le_bytes());
    }
    b
}

fn sector_id(b: &[u8]) -> Option<u32> {
    let id = u32::from_le_bytes(b[0..4].try_into().unwrap());
    b.chunks(4).all(|c| c == id.to_le_bytes()).then_some(id)
}

struct Event {
    /// Log length when the operation returned.
    done_at: usize,
    kind: Kind,
}

enum Kind {
    Write {
        id: u32,
        first: usize,
        sectors: usize,
        fua: bool,
    },
    Flush,
}

#[test]
fn every_crash_point_recovers_durable_data_with_zeroes() {
    let cfg = config();
    let layout = Layout::new((cfg.capacity / LINE) as u32, LINE);
    let cache_len = layout.device_len() as usize;
    let log = CrashLog::new();
    let cache0 = vec![0u8; cache_len];
    let backend0 = vec![0u8; VOLUME];
    let mut events = Vec::new();
    {
        let engine = Engine::with_devices(
            &cfg,
            &EngineConfig::default(),
            Arc::new(CrashDevice::new(0, cache0.clone(), log.clone())),
            Arc::new(FastZeroes(CrashDevice::new(
                1,
                backend0.clone(),
                log.clone(),
            ))),
        )
        .unwrap();
        assert!(engine.fast_zeroes());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for id in 1..=120u32 {
            if id % 9 == 0 {
                engine.flush().unwrap();
                events.push(Event {
                    done_at: log.len(),
                    kind: Kind::Flush,
                });
            }
            // Hot lines (rewrites in place) and cold ones (evictions, write-backs, reuse).
            let line = if rng.gen_bool(0.5) {
                rng.gen_range(0..6)
            } else {
                rng.gen_range(0..60)
            };
            let first = line * (LINE as usize / SECTOR) + rng.gen_range(0..6);
            let fua = rng.gen_bool(0.1);
            if id % 3 == 0 {
                // Zeroes over one to three whole lines, mostly hot ones (dirty in the cache,
                // their data durable there after a FLUSH: dropping it must wait for the zeroes).
                let lines = rng.gen_range(1..=3);
                let line = if rng.gen_bool(0.8) { line % 6 } else { line };
                let first = line * (LINE as usize / SECTOR);
                let sectors = lines * (LINE as usize / SECTOR);
                engine
                    .write_zeroes((first * SECTOR) as u64, lines as u64 * LINE, fua)
                    .unwrap();
                events.push(Event {
                    done_at: log.len(),
                    kind: Kind::Write {
                        id: 0,
                        first,
                        sectors,
                        fua,
                    },
                });
                continue;
            }
            let sectors = rng.gen_range(1..=3);
            let mut data = Vec::new();
            for _ in 0..sectors {
                data.extend_from_slice(&sector_bytes(id));
            }
            engine.write(&data, (first * SECTOR) as u64, fua).unwrap();
            events.push(Event {
                done_at: log.len(),
                kind: Kind::Write {
                    id,
                    first,
                    sectors,
                    fua,
                },
            });
        }
        // One read of the whole volume over the 12-line cache: one plan that evicts dirty
        // lines, fills their slots with other lines, evicts those and reads lines back into
        // slots they held before, with crash points all along it (it changes no sector).
        let mut vol = vec![0u8; VOLUME];
        engine.read(&mut vol, 0).unwrap();
        // The engine is dropped without a clean shutdown's flush mattering: crashes below
        // all happen before this point.
        std::mem::forget(engine);
    }
    let crash_points = log.writes_of(0);
    assert!(
        crash_points.len() > 100,
        "scenario too small: {}",
        crash_points.len()
    );
    let mut checked = 0;
    for &crash_at in &crash_points {
        for lose_unsynced in [false, true] {
            // What each sector may hold: its value at the last FLUSH completed before the
            // crash (or a FUA write completed after it), or any write issued after that.
            let mut stable = vec![0u32; VOLUME / SECTOR];
            let mut maybe: Vec<HashSet<u32>> = vec![HashSet::new(); VOLUME / SECTOR];
            // The newest write since the last completed FLUSH, per sector (a FUA write that
            // covers only part of an earlier one leaves the rest of it pending).
            let mut pending: Vec<Option<u32>> = vec![None; VOLUME / SECTOR];
            for e in &events {
                let completed = e.done_at <= crash_at;
                match e.kind {
                    Kind::Flush if completed => {
                        for (s, p) in pending.iter_mut().enumerate() {
                            if let Some(id) = p.take() {
                                stable[s] = id;
                            }
                        }
                        maybe.iter_mut().for_each(|m| m.clear());
                    }
                    Kind::Flush => {}
                    Kind::Write {
                        id,
                        first,
                        sectors,
                        fua,
                    } => {
                        for s in first..first + sectors {
                            if completed && fua {
                                stable[s] = id;
                                maybe[s].clear();
                                pending[s] = None;
                            } else {
                                pending[s] = Some(id);
                                maybe[s].insert(id);
                            }
                        }
                    }
                }
            }
            let cache = log.image(0, &cache0, crash_at, lose_unsynced);
            let backend = log.image(1, &backend0, crash_at, lose_unsynced);
            let backend_dev = Arc::new(MemDevice::from_bytes(backend));
            let engine = Engine::with_devices(
                &cfg,
                &EngineConfig::default(),
                Arc::new(MemDevice::from_bytes(cache)),
                backend_dev.clone(),
            )
            .unwrap_or_else(|e| panic!("crash at {crash_at}: recovery failed: {e}"));
            let mut vol = vec![0u8; VOLUME];
            engine.read(&mut vol, 0).unwrap();
            engine.audit();
            let check = |img: &[u8], what: &str| {
                for s in 0..VOLUME / SECTOR {
                    let got = sector_id(&img[s * SECTOR..(s + 1) * SECTOR]);
                    let ok = got.is_some_and(|g| g == stable[s] || maybe[s].contains(&g));
                    assert!(
                        ok,
                        "crash at event {crash_at} (lose unsynced: {lose_unsynced}), {what}: sector {s} holds {got:?}, durable {}, possible {:?}",
                        stable[s], maybe[s]
                    );
                }
            };
            check(&vol, "read after recovery");
            // Recovered dirty lines drain to the backend, which then holds the same.
            engine.flush_all().unwrap();
            engine.shutdown().unwrap();
            check(&backend_dev.snapshot(), "backend after detach");
            checked += 1;
        }
    }
    eprintln!(
        "{checked} crash images recovered and checked over {} cache-device writes",
        crash_points.len()
    );
    assert!(checked > 300);
}
