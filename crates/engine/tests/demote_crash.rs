//! Demoted lines are not recorded when they land (they are clean: a crash may forget them),
//! so a slot cycles through demoted lines without metadata I/O. What must hold: a power loss
//! at any point never recovers a record paired with bytes written over its line's data (a
//! demote reusing a slot whose record names another line clears that record durably first),
//! and a clean shutdown records the demoted lines, so a restart finds them.

use std::sync::Arc;
use tiercache_blockdev::{DemoteReply, MemDevice};
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, EvictionKind, WritePolicy};

const LINE: u64 = 4096;
const VOLUME_LINES: u64 = 48;

fn config(eviction: EvictionKind) -> CacheConfig {
    CacheConfig {
        capacity: 8 * LINE,
        line_size: LINE,
        eviction,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        shards: 1,
        ..CacheConfig::default()
    }
}

/// The backend's bytes of line `i` (every line distinct, so a slot paired with the wrong
/// line's record reads back as the wrong bytes).
fn line_bytes(i: u64) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8 ^ 0x5a; LINE as usize];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn backend_image() -> Vec<u8> {
    (0..VOLUME_LINES).flat_map(line_bytes).collect()
}

/// Reads, demotes (of lines the cache does and does not hold, evicting recorded and
/// unrecorded lines) and flushes on crash-logging devices; the backend never changes, so
/// every line's only correct content is the backend's. Returns the engine still running.
fn scenario(cfg: &CacheConfig, log: &Arc<CrashLog>, cache0: &[u8]) -> Engine {
    let engine = Engine::with_devices(
        cfg,
        &EngineConfig::default(),
        Arc::new(CrashDevice::new(0, cache0.to_vec(), log.clone())),
        Arc::new(CrashDevice::new(1, backend_image(), log.clone())),
    )
    .unwrap();
    let mut b = vec![0u8; LINE as usize];
    let mut accepted = 0;
    for round in 0..4u64 {
        // Fills (recorded) of a few lines…
        for i in 0..6 {
            let i = (i * 7 + round) % VOLUME_LINES;
            engine.read(&mut b, i * LINE).unwrap();
            assert_eq!(b, line_bytes(i));
        }
        // …then demotes that take their slots (and those of earlier demoted lines).
        for k in 0..10 {
            let i = (20 + round * 5 + k) % VOLUME_LINES;
            if engine.demote(i * LINE, &line_bytes(i), &|| true).unwrap() == DemoteReply::Accepted {
                accepted += 1;
            }
        }
        // Hits on demoted lines, and a sync now and then.
        for k in 0..3 {
            let i = (20 + round * 5 + 9 - k) % VOLUME_LINES;
            engine.read(&mut b, i * LINE).unwrap();
            assert_eq!(b, line_bytes(i));
        }
        if round % 2 == 1 {
            engine.flush().unwrap();
        }
    }
    let st = engine.stats();
    assert!(accepted > 10, "the scenario demotes: {accepted}");
    assert_eq!(st.demotes.received_accepted, accepted);
    // Demotes reused slots whose records named other lines (cleared first), and wrote no
    // record of their own: every record is a fill's.
    assert!(st.slot_invalidations > 0, "{st:?}");
    assert_eq!(st.records_written, st.cache.promotions, "{st:?}");
    engine
}

/// The lines `engine` holds, probed with hit-only reads (which evict nothing), each checked
/// to read back as its backend bytes.
fn resident(engine: &Engine) -> Vec<u64> {
    let mut bufs = vec![vec![0u8; LINE as usize]; VOLUME_LINES as usize];
    let mut reads: Vec<(u64, &mut [u8])> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| (i as u64 * LINE, &mut b[..]))
        .collect();
    let out = engine.read_hits(&mut reads);
    drop(reads);
    let held: Vec<u64> = (0..VOLUME_LINES)
        .filter(|&i| matches!(out[i as usize], Some(Ok(()))))
        .collect();
    for &i in &held {
        assert!(
            bufs[i as usize] == line_bytes(i),
            "resident line {i}: wrong bytes"
        );
    }
    held
}

fn crash_at_every_point(eviction: EvictionKind) {
    let cfg = config(eviction);
    let layout = Layout::new((cfg.capacity / LINE) as u32, LINE);
    let cache0 = vec![0u8; layout.device_len() as usize];
    let log = CrashLog::new();
    let engine = scenario(&cfg, &log, &cache0);
    // What a restart after the clean shutdown must find: exactly these lines, demoted ones
    // included (a shutdown record naming a wrong line would lose one and invent another).
    let held_at_shutdown = resident(&engine);
    assert_eq!(
        held_at_shutdown.len(),
        8,
        "a full cache: {held_at_shutdown:?}"
    );
    let before_shutdown = log.len();
    engine.shutdown().unwrap();
    drop(engine);
    let mut recovered_demoted = 0;
    for crash_at in 0..=log.len() {
        for lose_unsynced in [true, false] {
            let cache = log.image(0, &cache0, crash_at, lose_unsynced);
            let engine = Engine::with_devices(
                &cfg,
                &EngineConfig::default(),
                Arc::new(MemDevice::from_bytes(cache)),
                Arc::new(MemDevice::from_bytes(backend_image())),
            )
            .unwrap_or_else(|e| panic!("crash at {crash_at}: recovery failed: {e}"));
            let lines = engine.stats().recovery.lines;
            if crash_at == log.len() {
                assert_eq!(
                    resident(&engine),
                    held_at_shutdown,
                    "lines after a clean shutdown"
                );
            }
            let mut b = vec![0u8; LINE as usize];
            for i in 0..VOLUME_LINES {
                engine.read(&mut b, i * LINE).unwrap();
                assert!(
                    b == line_bytes(i),
                    "crash at event {crash_at} of {} (lose unsynced: {lose_unsynced}): line {i} \
                     reads another line's bytes ({} lines recovered)",
                    log.len(),
                    lines
                );
            }
            engine.audit();
            if crash_at == log.len() {
                recovered_demoted = lines;
            }
        }
    }
    // After the clean shutdown every resident line (demoted ones included) is recorded.
    assert!(log.len() > before_shutdown, "the shutdown wrote records");
    assert_eq!(
        recovered_demoted, 8,
        "a restart after shutdown finds a full cache"
    );
}

#[test]
fn a_crash_at_any_point_after_unrecorded_demotes_recovers_no_wrong_data_lru() {
    crash_at_every_point(EvictionKind::Lru);
}

#[test]
fn a_crash_at_any_point_after_unrecorded_demotes_recovers_no_wrong_data_mru() {
    crash_at_every_point(EvictionKind::Mru);
}
