//! An engine is a block device like any other: one engine, in-process, is the backend of a
//! second (no adapter), and data round-trips through both levels — write-back from the upper
//! engine into the lower, the lower's own write-back into its backend, and the upper's clean
//! victims demoted into the lower.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, VictimConfig, WritePolicy};

const LINE: u64 = 4096;
const VOLUME: u64 = 256 * LINE;

fn cache_config(lines: u64, victim: VictimConfig) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        cleaning: CleaningConfig::None,
        victim,
        ..CacheConfig::default()
    }
}

fn cache_device(cfg: &CacheConfig) -> Arc<MemDevice> {
    let len = Layout::new((cfg.capacity / cfg.line_size) as u32, cfg.line_size).device_len();
    Arc::new(MemDevice::new(len as usize))
}

#[test]
fn an_engine_is_another_engines_backend_and_data_round_trips() {
    // The lower engine caches a MemDevice; the upper one caches the lower engine. Both are
    // small beside the volume, so both evict and write back.
    let lower_cfg = cache_config(48, VictimConfig::Drop);
    let backend = Arc::new(MemDevice::new(VOLUME as usize));
    let lower = Arc::new(
        Engine::with_devices(
            &lower_cfg,
            &EngineConfig::default(),
            cache_device(&lower_cfg),
            backend.clone(),
        )
        .unwrap(),
    );
    let upper_cfg = cache_config(16, VictimConfig::Demote);
    let upper = Engine::with_devices(
        &upper_cfg,
        &EngineConfig::default(),
        cache_device(&upper_cfg),
        lower.clone() as Arc<dyn BlockDevice>,
    )
    .unwrap();
    assert_eq!(
        upper.size(),
        VOLUME,
        "the upper volume is the lower engine's"
    );

    let mut model = vec![0u8; VOLUME as usize];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut buf = vec![0u8; 3 * LINE as usize];
    for n in 0..3000u32 {
        // Sector-aligned requests of 1–24 sectors, often several lines, some unaligned to lines.
        let len = 512 * rng.gen_range(1..=24u64);
        let off = 512 * rng.gen_range(0..(VOLUME - len) / 512);
        let (o, l) = (off as usize, len as usize);
        if rng.gen_bool(0.45) {
            for (i, b) in buf[..l].iter_mut().enumerate() {
                *b = (n as u8).wrapping_mul(7) ^ (i as u8);
            }
            upper.write(&buf[..l], off, rng.gen_bool(0.05)).unwrap();
            model[o..o + l].copy_from_slice(&buf[..l]);
        } else {
            upper.read(&mut buf[..l], off).unwrap();
            assert!(buf[..l] == model[o..o + l], "read #{n} of {len} at {off}");
        }
        if n % 500 == 499 {
            upper.flush().unwrap();
        }
    }
    let up = upper.stats();
    assert_eq!(up.errors, 0);
    assert!(
        up.cache.evictions > 0 && up.cache.line_hits > 0,
        "the upper level both hits and evicts: {up:?}"
    );
    assert!(
        up.demotes.sent > 0 && up.demotes.sent_accepted > 0,
        "clean victims of the upper engine are demoted into the lower one: {:?}",
        up.demotes
    );

    // Detach the upper level: the lower engine alone holds the volume.
    upper.flush_all().unwrap();
    assert_eq!(upper.stats().dirty_lines, 0);
    let mut all = vec![0u8; VOLUME as usize];
    lower.read(&mut all, 0).unwrap();
    assert!(
        all == model,
        "the lower engine holds every byte written above"
    );
    upper.shutdown().unwrap();
    // Once the upper engine has stopped (no plan left in flight), every demote it sent was
    // received below.
    assert_eq!(
        lower.stats().demotes.received,
        upper.stats().demotes.sent,
        "every demote sent arrives"
    );

    // Detach the lower level: the backend alone holds it.
    lower.flush_all().unwrap();
    assert!(backend.snapshot() == model, "the backend holds every byte");
    lower.shutdown().unwrap();
}
