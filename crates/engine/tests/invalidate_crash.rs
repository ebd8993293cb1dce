//! A write that invalidates dirty data (read-only and pass-through send writes to the backend
//! and drop what the cache held) must not make the dropped data's record durable before the
//! write is on the backend: a power loss that keeps the cache device's unsynced writes and
//! loses the backend's would leave neither the flushed dirty data nor the write.

use std::sync::Arc;
use tiercache_blockdev::MemDevice;
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, WritePolicy};

const LINE: u64 = 4096;
const VOLUME: usize = 256 << 10;
/// The line written, dirty then overwritten.
const AT: u64 = 5 * LINE;

fn config(write_policy: WritePolicy) -> CacheConfig {
    CacheConfig {
        capacity: 16 * LINE,
        line_size: LINE,
        write_policy,
        cleaning: CleaningConfig::None,
        shards: 1,
        ..CacheConfig::default()
    }
}

#[test]
fn a_write_dropping_dirty_data_is_on_the_backend_before_its_record() {
    for policy in [WritePolicy::ReadOnly, WritePolicy::PassThrough] {
        let layout = Layout::new(16, LINE);
        // Phase 1, write-back: D is written and flushed, so it is durable, dirty, in the cache
        // alone.
        let cache0 = Arc::new(MemDevice::new(layout.device_len() as usize));
        let backend0 = Arc::new(MemDevice::new(VOLUME));
        {
            let e = Engine::with_devices(
                &config(WritePolicy::WriteBack),
                &EngineConfig::default(),
                cache0.clone(),
                backend0.clone(),
            )
            .unwrap();
            e.write(&[b'D'; LINE as usize], AT, false).unwrap();
            e.flush().unwrap();
            assert_eq!(e.stats().dirty_lines, 1);
            e.shutdown().unwrap();
        }
        let (cache0, backend0) = (cache0.snapshot(), backend0.snapshot());
        // Phase 2, under `policy`: W over D, no FLUSH; every crash point of it.
        let log = CrashLog::new();
        {
            let e = Engine::with_devices(
                &config(policy),
                &EngineConfig::default(),
                Arc::new(CrashDevice::new(0, cache0.clone(), log.clone())),
                Arc::new(CrashDevice::new(1, backend0.clone(), log.clone())),
            )
            .unwrap();
            e.write(&[b'W'; LINE as usize], AT, false).unwrap();
            std::mem::forget(e);
        }
        let mut points = log.writes_of(0);
        points.extend(log.writes_of(1));
        points.push(log.len());
        assert!(points.len() > 1, "{policy:?}: the write reached no device");
        for &crash_at in &points {
            for (lose_cache, lose_backend) in [(false, false), (true, true), (false, true)] {
                let cache = log.image(0, &cache0, crash_at, lose_cache);
                let backend = log.image(1, &backend0, crash_at, lose_backend);
                let e = Engine::with_devices(
                    &config(WritePolicy::WriteBack),
                    &EngineConfig::default(),
                    Arc::new(MemDevice::from_bytes(cache)),
                    Arc::new(MemDevice::from_bytes(backend)),
                )
                .unwrap();
                let mut got = vec![0u8; LINE as usize];
                e.read(&mut got, AT).unwrap();
                assert!(
                    got.iter().all(|&b| b == b'D') || got.iter().all(|&b| b == b'W'),
                    "{policy:?}, crash at {crash_at} (cache unsynced lost: {lose_cache}, backend: {lose_backend}): read {:?}…",
                    &got[..8]
                );
            }
        }
    }
}
