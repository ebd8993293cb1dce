//! Power loss at every point (the model in `common/mod.rs`): a write-back scenario runs on
//! crash-logging devices; for every write the cache device ever received, both devices are
//! rebuilt as a crash just before it leaves them (with unsynced writes kept, and lost), the
//! engine recovers, and every sector must read back a value it may legally hold: the value as
//! of the last completed FLUSH, a FUA write completed since, or any write issued after that.

mod common;

use common::{check_every_crash_point, config, legal_values, sector_bytes, Event, Kind};
use common::{LINE, SECTOR, VOLUME};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};

#[test]
fn every_crash_point_recovers_durable_data() {
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
            Arc::new(CrashDevice::new(1, backend0.clone(), log.clone())),
        )
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for id in 1..=70u32 {
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
            let sectors = rng.gen_range(1..=3);
            let fua = rng.gen_bool(0.1);
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

/// The old model's flaw, pinned: a FUA write over part of an earlier pending write leaves the
/// rest of that write pending, so a FLUSH after it makes that rest durable.
#[test]
fn a_partial_fua_write_leaves_the_rest_of_an_earlier_write_pending() {
    let w = |done_at, id, first, sectors, fua| Event {
        done_at,
        kind: Kind::Write {
            id,
            first,
            sectors,
            fua,
        },
    };
    let events = [
        w(1, 5, 0, 4, false),
        w(2, 6, 1, 1, true),
        Event {
            done_at: 3,
            kind: Kind::Flush,
        },
    ];
    let (stable, _) = legal_values(&events, 10);
    assert_eq!(&stable[0..4], &[5, 6, 5, 5]);
}
