//! What the engine refuses at open rather than lose or corrupt data: a device that is not
//! blank yet has no superblock, a format that would drop dirty lines written under another
//! layout, a backend that is the cache device itself, a volume that ends inside a line.

use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, WritePolicy};

const VOLUME: usize = 1 << 20;

fn cache_config(lines: u64) -> CacheConfig {
    CacheConfig {
        capacity: lines * 4096,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        // The lines must still be dirty when the engine reopens.
        cleaning: CleaningConfig::None,
        shards: 1,
        ..CacheConfig::default()
    }
}

/// A cache device holding 4 dirty lines written by a cache of `lines` lines (and the backend
/// they belong to).
fn dirty_device(lines: u64) -> (Arc<MemDevice>, Arc<MemDevice>) {
    let cache_dev = Arc::new(MemDevice::new(4 << 20));
    let backend = Arc::new(MemDevice::new(VOLUME));
    let e = Engine::with_devices(
        &cache_config(lines),
        &EngineConfig::default(),
        cache_dev.clone(),
        backend.clone(),
    )
    .unwrap();
    for i in 0..4u64 {
        e.write(&[i as u8 + 1; 4096], i * 4096, false).unwrap();
    }
    e.flush().unwrap();
    assert_eq!(e.stats().dirty_lines, 4);
    e.shutdown().unwrap();
    (cache_dev, backend)
}

fn reopen(
    cache_dev: &MemDevice,
    backend: &Arc<MemDevice>,
    lines: u64,
    engine: EngineConfig,
) -> Result<Engine, String> {
    Engine::with_devices(
        &cache_config(lines),
        &engine,
        Arc::new(MemDevice::from_bytes(cache_dev.snapshot())),
        backend.clone(),
    )
    .map_err(|e| e.to_string())
}

/// A device whose superblock was zeroed but whose slot table holds records is not formatted
/// on its own (it was, silently, dropping every dirty line); a blank device still is.
#[test]
fn a_device_without_superblock_is_formatted_only_when_blank() {
    let (cache_dev, backend) = dirty_device(64);
    cache_dev.write_at(&[0u8; 64], 0, false).unwrap();
    let err = reopen(&cache_dev, &backend, 64, EngineConfig::default())
        .err()
        .expect("refused");
    assert!(err.contains("not a blank device"), "{err}");
    assert!(err.contains("engine.format"), "{err}");
    // Asked for, the format goes ahead (no superblock: no dirty lines of ours can be counted).
    let e = reopen(
        &cache_dev,
        &backend,
        64,
        EngineConfig {
            format: true,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    assert_eq!(e.stats().dirty_lines, 0);
    // A blank device is formatted without being asked.
    let blank = MemDevice::new(4 << 20);
    let e = reopen(&blank, &backend, 64, EngineConfig::default()).unwrap();
    assert_eq!(e.stats().dirty_lines, 0);
}

/// `engine.format` is refused while the device holds dirty lines, also when they were
/// written under another layout (the check used to read the table with the configured layout
/// only, fail, and format) or the superblock cannot be read; `force_format` overrides.
#[test]
fn format_is_refused_over_dirty_lines_of_another_layout() {
    let (cache_dev, backend) = dirty_device(64);
    let format = EngineConfig {
        format: true,
        ..EngineConfig::default()
    };
    let err = reopen(&cache_dev, &backend, 128, format.clone())
        .err()
        .expect("refused");
    assert!(err.contains("holds 4 dirty lines"), "{err}");
    // Same layout: refused too (as before).
    let err = reopen(&cache_dev, &backend, 64, format.clone())
        .err()
        .expect("refused");
    assert!(err.contains("holds 4 dirty lines"), "{err}");
    // A damaged superblock: whether lines are dirty is unknown, so refused.
    let damaged = MemDevice::from_bytes(cache_dev.snapshot());
    damaged.write_at(&[0xEE], 13, false).unwrap();
    let err = reopen(&damaged, &backend, 128, format.clone())
        .err()
        .expect("refused");
    assert!(err.contains("cannot be read"), "{err}");
    // Forced: formatted, under the new layout.
    let e = reopen(
        &cache_dev,
        &backend,
        128,
        EngineConfig {
            force_format: true,
            ..format.clone()
        },
    )
    .unwrap();
    assert_eq!(e.stats().dirty_lines, 0);
    e.shutdown().unwrap();
    // Once its dirty lines are written back, the device formats under another layout when
    // asked: the check refuses dirty lines, not a layout change.
    let e = Engine::with_devices(
        &cache_config(64),
        &EngineConfig::default(),
        cache_dev.clone(),
        backend.clone(),
    )
    .unwrap();
    e.flush_all().unwrap();
    e.shutdown().unwrap();
    let e = reopen(&cache_dev, &backend, 128, format).unwrap();
    assert_eq!(e.stats().dirty_lines, 0);
}

/// A backend that is the cache device (the same path, or a hard link to it) is refused
/// naming the setting: write-backs overwrote the cache's own metadata.
#[test]
fn a_backend_that_is_the_cache_device_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let link = dir.path().join("link.img");
    let cfg = cache_config(16);
    for backend in [cache.clone(), link.clone()] {
        let engine = EngineConfig {
            cache_path: cache.clone(),
            backend_path: backend.clone(),
            backend_size: Some(VOLUME as u64),
            ..EngineConfig::default()
        };
        if backend == link && !link.exists() {
            // The cache file exists once an open has created it.
            let _ = std::fs::File::create(&cache);
            std::fs::hard_link(&cache, &link).unwrap();
        }
        let err = Engine::open(&cfg, &engine)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("engine.backend_path"), "{err}");
        assert!(err.contains("is the cache device"), "{err}");
    }
    // Another file is fine.
    let engine = EngineConfig {
        cache_path: cache,
        backend_path: dir.path().join("backend.img"),
        backend_size: Some(VOLUME as u64),
        ..EngineConfig::default()
    };
    Engine::open(&cfg, &engine).unwrap().shutdown().unwrap();
}

/// A volume that ends inside a line is refused at open (a read of its last bytes panicked a
/// worker and never got a reply).
#[test]
fn a_volume_ending_inside_a_line_is_refused() {
    let err = Engine::with_devices(
        &cache_config(16),
        &EngineConfig::default(),
        Arc::new(MemDevice::new(4 << 20)),
        Arc::new(MemDevice::new(8 * 4096 * 4 + 100)),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("not a multiple of cache.line_size"), "{err}");
    assert!(err.contains("engine.backend_path"), "{err}");
}

/// The remote client's settings are checked, not silently raised: no connections, or a
/// timeout under a millisecond, are refused naming the key (before any connection is tried).
#[test]
fn bad_remote_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    for (remote, field) in [
        (
            tiercache_engine::config::RemoteBackendConfig {
                connections: 0,
                ..Default::default()
            },
            "engine.remote.connections",
        ),
        (
            tiercache_engine::config::RemoteBackendConfig {
                timeout_ns: 10,
                ..Default::default()
            },
            "engine.remote.timeout_ns",
        ),
        (
            tiercache_engine::config::RemoteBackendConfig {
                connect_timeout_ns: 999_999,
                ..Default::default()
            },
            "engine.remote.connect_timeout_ns",
        ),
    ] {
        let engine = EngineConfig {
            cache_path: dir.path().join("cache.img"),
            backend_path: format!("nbd+unix:///?socket={}", sock.display()).into(),
            remote,
            ..EngineConfig::default()
        };
        let err = Engine::open(&cache_config(16), &engine)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains(field), "{err}");
    }
}

/// A configuration the policy cores refuse (made while the slot table is scanned, when the
/// device has a superblock; docs/design.md §13): that error is the one reported, even when
/// the scan fails too (the device was written with another line count), as when the cores
/// were made first.
#[test]
fn a_core_refused_is_reported_before_the_scans_error() {
    let (cache_dev, backend) = dirty_device(64);
    let refused = |lines: u64| CacheConfig {
        promotion: tiercache_policy::PromotionConfig::Nhit {
            n: 0,
            table_ratio: 1.0,
            occupancy_threshold: 0.0,
        },
        ..cache_config(lines)
    };
    for lines in [64, 128] {
        let e = Engine::with_devices(
            &refused(lines),
            &EngineConfig::default(),
            Arc::new(MemDevice::from_bytes(cache_dev.snapshot())),
            backend.clone(),
        )
        .err()
        .expect("the cores refuse n = 0")
        .to_string();
        assert!(e.contains("promotion.n"), "{lines} lines: {e}");
    }
    // The scan's error alone, for the record: the line count is named.
    let e = reopen(&cache_dev, &backend, 128, EngineConfig::default())
        .err()
        .expect("another line count");
    assert!(e.contains("lines"), "{e}");
}

/// A blank device is formatted by the open, but only after the cores are made: a refused
/// configuration leaves it blank.
#[test]
fn a_core_refused_leaves_a_blank_device_blank() {
    let cache_dev = Arc::new(MemDevice::new(4 << 20));
    let cfg = CacheConfig {
        promotion: tiercache_policy::PromotionConfig::Nhit {
            n: 0,
            table_ratio: 1.0,
            occupancy_threshold: 0.0,
        },
        ..cache_config(64)
    };
    let e = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        cache_dev.clone(),
        Arc::new(MemDevice::new(VOLUME)),
    )
    .err()
    .expect("the cores refuse n = 0")
    .to_string();
    assert!(e.contains("promotion.n"), "{e}");
    assert!(
        cache_dev.snapshot().iter().all(|&b| b == 0),
        "nothing written"
    );
    // The default promotion opens it, formatting it.
    let e = Engine::with_devices(
        &cache_config(64),
        &EngineConfig::default(),
        cache_dev.clone(),
        Arc::new(MemDevice::new(VOLUME)),
    )
    .unwrap();
    e.shutdown().unwrap();
    assert!(cache_dev.snapshot().iter().any(|&b| b != 0), "formatted");
}
