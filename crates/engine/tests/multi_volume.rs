//! Several volumes on one cache: each volume's bytes go to its own backend, partitions are
//! resized while every volume is written and read, and a restart puts each volume's lines
//! back in its own partition, at the size it had — with nothing lost.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::{Arc, Mutex};
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::VolumeSet;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig};

const VOLUME: usize = 2 << 20;
const LINE: u64 = 4096;
const VOLUMES: [u32; 3] = [1, 2, 5];

fn config() -> CacheConfig {
    CacheConfig {
        capacity: 96 * LINE,
        line_size: LINE,
        // No background cleaning: dirty lines leave only through shrinks and evictions.
        cleaning: CleaningConfig::None,
        shards: 4,
        ..CacheConfig::default()
    }
}

struct Devices {
    cache: Arc<MemDevice>,
    backends: Vec<Arc<MemDevice>>,
}

fn open(d: &Devices) -> Engine {
    open_volumes(&d.cache, &VOLUMES, &d.backends)
}

/// An engine serving `volumes` (each over the backend at the same place) on `cache`.
fn open_volumes(cache: &Arc<MemDevice>, volumes: &[u32], backends: &[Arc<MemDevice>]) -> Engine {
    let set = VolumeSet::new(
        volumes
            .iter()
            .zip(backends)
            .map(|(&v, b)| (v, b.clone() as Arc<dyn BlockDevice>))
            .collect(),
    )
    .unwrap();
    let extents = set.extents();
    Engine::with_volume_devices(
        &config(),
        &EngineConfig::default(),
        cache.clone(),
        Arc::new(set),
        extents,
    )
    .unwrap()
}

/// Each volume's bytes as the application wrote them.
type Model = Vec<Mutex<Vec<u8>>>;

fn check_all(engine: &Engine, model: &Model) {
    for (i, &v) in VOLUMES.iter().enumerate() {
        let want = model[i].lock().unwrap();
        let mut got = vec![0u8; VOLUME];
        for at in (0..VOLUME).step_by(64 << 10) {
            engine
                .read_volume(v, &mut got[at..at + (64 << 10)], at as u64)
                .unwrap();
        }
        assert!(got == *want, "volume {v} differs from what was written");
    }
}

#[test]
fn volumes_resized_under_load_keep_their_data_and_partitions_across_a_restart() {
    let d = Devices {
        cache: Arc::new(MemDevice::new(8 << 20)),
        backends: (0..3).map(|_| Arc::new(MemDevice::new(VOLUME))).collect(),
    };
    let model: Arc<Model> = Arc::new((0..3).map(|_| Mutex::new(vec![0u8; VOLUME])).collect());
    let engine = Arc::new(open(&d));
    assert_eq!(
        engine.volumes(),
        vec![(1, VOLUME as u64), (2, VOLUME as u64), (5, VOLUME as u64)]
    );
    engine
        .set_volume_partitions(&[(1, 32), (2, 32), (5, 32)])
        .unwrap();
    std::thread::scope(|s| {
        for (i, &v) in VOLUMES.iter().enumerate() {
            let (engine, model) = (engine.clone(), model.clone());
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(v as u64);
                for n in 0..600u32 {
                    // A small hot set (reused) and the whole volume (scanned) by turns.
                    let span = if n % 3 == 0 { VOLUME as u64 } else { 64 * LINE };
                    let off = rng.gen_range(0..span / 512) * 512;
                    let len = (rng.gen_range(1..=16u64) * 512).min(VOLUME as u64 - off);
                    if rng.gen_bool(0.5) {
                        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                        // The model is updated under its lock while the write runs: reads of
                        // the same volume by this thread only, so no race on the bytes.
                        let mut m = model[i].lock().unwrap();
                        engine.write_volume(v, &data, off, false).unwrap();
                        m[off as usize..(off + len) as usize].copy_from_slice(&data);
                    } else {
                        let mut got = vec![0u8; len as usize];
                        engine.read_volume(v, &mut got, off).unwrap();
                        let m = model[i].lock().unwrap();
                        assert!(
                            got == m[off as usize..(off + len) as usize],
                            "volume {v} at {off}+{len}"
                        );
                    }
                }
            });
        }
        // Meanwhile: partitions shrink and grow (dirty lines of shrinking ones written back).
        let engine = engine.clone();
        s.spawn(move || {
            for sizes in [
                [48, 16, 32],
                [8, 64, 24],
                [30, 30, 30],
                [64, 8, 8],
                [16, 40, 40],
            ] {
                let list: Vec<(u32, u64)> = VOLUMES.iter().copied().zip(sizes).collect();
                engine.set_volume_partitions(&list).unwrap();
                let stats = engine.volume_stats();
                for (st, want) in stats.iter().zip(sizes) {
                    assert_eq!(st.partition_lines, Some(want), "volume {}", st.volume);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
    });
    engine.audit();
    check_all(&engine, &model);
    // Reading everything evicted the dirty lines: leave some for the restart to recover.
    for (i, &v) in VOLUMES.iter().enumerate() {
        let data = vec![v as u8 + 100; 8 * LINE as usize];
        engine.write_volume(v, &data, 4 * LINE, false).unwrap();
        model[i].lock().unwrap()[4 * LINE as usize..12 * LINE as usize].copy_from_slice(&data);
    }
    let stats = engine.volume_stats();
    let sizes = [16u64, 40, 40];
    for (st, want) in stats.iter().zip(sizes) {
        assert_eq!(st.partition_lines, Some(want));
        assert!(st.resident_lines.unwrap() <= want, "{st:?}");
        assert!(
            st.reads > 0 && st.writes > 0 && st.read_line_hits > 0,
            "{st:?}"
        );
    }
    let layout = engine.partition_layout();
    let resident: Vec<Option<u64>> = stats.iter().map(|s| s.resident_lines).collect();
    let dirty_before = engine.stats().dirty_lines;
    assert!(
        dirty_before > 0,
        "the test should leave dirty lines to recover"
    );
    engine.shutdown().unwrap();
    drop(engine);
    // A warm restart: the same layout, each volume's lines in its own partition.
    let engine = open(&d);
    assert_eq!(engine.partition_layout(), layout);
    let after: Vec<Option<u64>> = engine
        .volume_stats()
        .iter()
        .map(|s| s.resident_lines)
        .collect();
    assert_eq!(after, resident);
    assert_eq!(engine.stats().dirty_lines, dirty_before);
    engine.audit();
    check_all(&engine, &model);
    // Detach: every volume's backend alone holds what was written.
    engine.flush_all().unwrap();
    engine.shutdown().unwrap();
    for (i, b) in d.backends.iter().enumerate() {
        assert!(
            b.snapshot() == *model[i].lock().unwrap(),
            "backend of volume {}",
            VOLUMES[i]
        );
    }
}

#[test]
fn bad_partitions_and_volumes_are_refused() {
    let d = Devices {
        cache: Arc::new(MemDevice::new(8 << 20)),
        backends: (0..3).map(|_| Arc::new(MemDevice::new(VOLUME))).collect(),
    };
    let engine = open(&d);
    let e = engine.set_volume_partitions(&[(3, 10)]).unwrap_err();
    assert!(e.to_string().contains("no volume 3"), "{e}");
    let e = engine
        .set_volume_partitions(&[(1, 10), (1, 5)])
        .unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    let e = engine
        .set_volume_partitions(&[(1, 90), (2, 7)])
        .unwrap_err();
    assert!(e.to_string().contains("the cache has 96"), "{e}");
    let mut buf = [0u8; 512];
    let e = engine.read_volume(4, &mut buf, 0).unwrap_err();
    assert!(e.to_string().contains("no volume 4"), "{e}");
    let e = engine.read_volume(1, &mut buf, VOLUME as u64).unwrap_err();
    assert!(e.to_string().contains("beyond volume 1"), "{e}");
}

/// Partitions journaled for a volume that is no longer served are dropped at open, with a
/// note, and the journal rewritten: they reserved their lines for nothing (the volume left
/// is served from the rest of the cache).
#[test]
fn partitions_of_volumes_no_longer_served_are_dropped() {
    let cache = Arc::new(MemDevice::new(4 << 20));
    let backends: Vec<Arc<MemDevice>> = (0..2).map(|_| Arc::new(MemDevice::new(VOLUME))).collect();
    let open_with = |vols: &[u32]| open_volumes(&cache, vols, &backends);
    let e = open_with(&[1, 2]);
    e.set_volume_partitions(&[(1, 32), (2, 32)]).unwrap();
    e.write_volume(1, &[7u8; 4096], 0, false).unwrap();
    e.shutdown().unwrap();
    drop(e);
    let e = open_with(&[1]);
    let named: Vec<u32> = e.partition_layout().iter().map(|p| p.volume).collect();
    assert!(!named.contains(&2), "{named:?}");
    assert!(named.contains(&1), "{named:?}");
    assert!(
        e.notes()
            .iter()
            .any(|n| n.contains("no longer served ([2])")),
        "{:?}",
        e.notes()
    );
    let mut b = [0u8; 4096];
    e.read_volume(1, &mut b, 0).unwrap();
    assert_eq!(b, [7u8; 4096]);
    e.shutdown().unwrap();
    drop(e);
    // The journal was rewritten: the next open has nothing to drop.
    let e = open_with(&[1]);
    assert!(
        !e.notes().iter().any(|n| n.contains("no longer served")),
        "{:?}",
        e.notes()
    );
    e.shutdown().unwrap();
}
