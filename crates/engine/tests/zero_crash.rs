//! Power loss at every point, with zeroes: the write-back scenario of `crash.rs` with
//! WRITE_ZEROES of whole lines mixed in, on a backend that zeroes fast (so each goes through
//! the engine's zeroing plan: cached copies, dirty ones included, dropped and the backend
//! zeroed, the records dropping dirty data written only once the backend's zeroes are
//! durable). For every write the cache device received, both devices are rebuilt as a crash
//! just before it (unsynced writes kept, and lost), the engine recovers, and every sector must
//! read back a value it may legally hold: as of the last completed FLUSH, a FUA write or zero
//! completed since, or any write or zero issued after that (a zero is "write 0").

mod common;

use common::{check_every_crash_point, config, sector_bytes, Event, Kind};
use common::{LINE, SECTOR, VOLUME};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io;
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};

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
    let checked = check_every_crash_point(&cfg, &log, &cache0, &backend0, &events);
    assert!(checked > 300);
}
