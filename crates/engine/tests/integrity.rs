//! The engine against a model: concurrent random I/O reads back what was written, for every
//! write policy and lookup; after a detach the backend alone holds the volume.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::{Engine, EngineConfig, Lookup};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const VOLUME: usize = 8 << 20;
const THREADS: usize = 4;

/// Fault injection: the bytes of a [`MemDevice`] behind hooks that see the test's `state` and
/// may fail or hold up each read (`before_read`) and write (`before_write`).
struct Faulty<S> {
    inner: MemDevice,
    state: S,
    before_read: fn(&S) -> std::io::Result<()>,
    before_write: fn(&S) -> std::io::Result<()>,
}

/// A hook that lets everything through.
fn pass<S>(_: &S) -> std::io::Result<()> {
    Ok(())
}

impl<S: Send + Sync> BlockDevice for Faulty<S> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        (self.before_read)(&self.state)?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        (self.before_write)(&self.state)?;
        self.inner.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

/// A gate hooks wait at until a test opens it.
#[derive(Default)]
struct Gate(std::sync::Mutex<bool>, std::sync::Condvar);

impl Gate {
    fn wait(&self) {
        let mut open = self.0.lock().unwrap();
        while !*open {
            open = self.1.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.0.lock().unwrap() = true;
        self.1.notify_all();
    }
}

/// Starts a 4 KiB read at `offset` on a thread of `s` and returns once the backend has seen a
/// read (`reads` counts them): the read is planned and its miss is under way.
fn start_miss<'s, 'e>(
    s: &'s std::thread::Scope<'s, 'e>,
    engine: &'e Engine,
    offset: u64,
    reads: &std::sync::atomic::AtomicU32,
) -> std::thread::ScopedJoinHandle<'s, std::io::Result<Vec<u8>>> {
    let miss = s.spawn(move || {
        let mut b = vec![0u8; 4096];
        engine.read(&mut b, offset).map(|()| b)
    });
    while reads.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    miss
}

fn cache_config(policy: WritePolicy, line: u64) -> CacheConfig {
    CacheConfig {
        capacity: 512 << 10,
        line_size: line,
        write_policy: policy,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 16,
        },
        // Several policy shards, as the shipped serve configs run (a lock each under ht-fg).
        shards: 16,
        ..CacheConfig::default()
    }
}

fn run(policy: WritePolicy, lookup: Lookup, line: u64, seed: u64) {
    let cfg = cache_config(policy, line);
    let ecfg = EngineConfig {
        lookup,
        ..EngineConfig::default()
    };
    let layout_len = 16 << 20;
    let cache_dev = Arc::new(MemDevice::new(layout_len));
    let backend = Arc::new(MemDevice::new(VOLUME));
    let engine = Engine::with_devices(&cfg, &ecfg, cache_dev, backend.clone()).unwrap();
    let region = VOLUME / THREADS;
    // Each thread owns a region (its own model) but shares cache slots with the others.
    let shadows: Vec<Vec<Option<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let engine = &engine;
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 100 + t as u64);
                    let base = t * region;
                    let mut shadow = vec![Some(0u8); region];
                    let mut buf = vec![0u8; 64 << 10];
                    for n in 0..1500u32 {
                        let len = match rng.gen_range(0..10) {
                            0 => rng.gen_range(1..600),
                            1..=6 => 4096,
                            _ => rng.gen_range(1..(48 << 10)),
                        };
                        let hot = rng.gen_bool(0.7);
                        let span = if hot { region / 8 } else { region };
                        let mut off = rng.gen_range(0..span - len);
                        if rng.gen_bool(0.7) {
                            off &= !4095;
                        }
                        let abs = (base + off) as u64;
                        match rng.gen_range(0..10) {
                            0..=4 => {
                                engine.read(&mut buf[..len], abs).unwrap();
                                for (i, b) in buf[..len].iter().enumerate() {
                                    if let Some(want) = shadow[off + i] {
                                        assert_eq!(
                                            *b, want,
                                            "thread {t} read #{n} byte {} of {len} at {abs}",
                                            i
                                        );
                                    }
                                }
                            }
                            5..=8 => {
                                for (i, b) in buf[..len].iter_mut().enumerate() {
                                    *b = (n as u8).wrapping_mul(13) ^ (i as u8) ^ (t as u8 * 64);
                                }
                                engine.write(&buf[..len], abs, rng.gen_bool(0.05)).unwrap();
                                for i in 0..len {
                                    shadow[off + i] = Some(buf[i]);
                                }
                            }
                            _ => {
                                engine.trim(abs, len as u64).unwrap();
                                shadow[off..off + len].fill(None);
                            }
                        }
                        if n % 300 == 0 {
                            engine.flush().unwrap();
                        }
                    }
                    shadow
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    engine.audit();
    let st = engine.stats();
    assert_eq!(st.errors, 0);
    assert_eq!(
        st.cache.line_hits + st.cache.line_partial_hits + st.cache.line_misses,
        st.cache.line_accesses
    );
    assert!(st.cache.line_hits > 0 && st.cache.evictions > 0, "{st:?}");
    // Read misses were answered before their cache fills (except under the serial LT lookup).
    if lookup == Lookup::Lt {
        assert_eq!(st.deferred_plans, 0);
    } else {
        assert!(st.deferred_plans > 0, "{st:?}");
    }
    engine.flush_all().unwrap();
    assert_eq!(engine.stats().dirty_lines, 0);
    let img = backend.snapshot();
    for (t, shadow) in shadows.iter().enumerate() {
        for (i, want) in shadow.iter().enumerate() {
            if let Some(w) = want {
                assert_eq!(
                    img[t * region + i],
                    *w,
                    "backend byte {} after detach",
                    t * region + i
                );
            }
        }
    }
    engine.shutdown().unwrap();
}

#[test]
fn write_back_concurrent() {
    run(WritePolicy::WriteBack, Lookup::HtCg, 4096, 1);
}

#[test]
fn write_back_sharded_locks() {
    run(WritePolicy::WriteBack, Lookup::HtFg, 4096, 5);
}

#[test]
fn write_through_sharded_locks_large_lines() {
    run(WritePolicy::WriteThrough, Lookup::HtFg, 16384, 6);
}

#[test]
fn write_back_large_lines_locked_table() {
    run(WritePolicy::WriteBack, Lookup::Lt, 16384, 2);
}

#[test]
fn write_through_concurrent() {
    run(WritePolicy::WriteThrough, Lookup::HtCg, 4096, 3);
}

#[test]
fn write_around_concurrent() {
    run(WritePolicy::WriteAround, Lookup::HtCg, 4096, 4);
}

#[test]
fn backend_read_errors_fail_that_request_only() {
    let backend = Arc::new(Faulty {
        inner: MemDevice::from_bytes((0..1 << 20).map(|i| (i / 4096) as u8).collect()),
        state: std::sync::atomic::AtomicBool::new(false),
        before_read: |fail| match fail.load(std::sync::atomic::Ordering::SeqCst) {
            true => Err(std::io::Error::other("injected")),
            false => Ok(()),
        },
        before_write: pass,
    });
    let cfg = cache_config(WritePolicy::WriteBack, 4096);
    let engine = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        Arc::new(MemDevice::new(4 << 20)),
        backend.clone(),
    )
    .unwrap();
    let mut b = vec![0u8; 4096];
    engine.read(&mut b, 4096).unwrap();
    engine.write(&[9u8; 100], 8192 + 50, false).unwrap();
    backend
        .state
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // A miss fails; a hit is still served; a partial line write's fill fails.
    assert!(engine.read(&mut b, 40960).is_err());
    engine.read(&mut b, 4096).unwrap();
    assert_eq!(b, vec![1u8; 4096]);
    backend
        .state
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // The failed miss left nothing behind: the line reads right now.
    engine.read(&mut b, 40960).unwrap();
    assert_eq!(b, vec![10u8; 4096]);
    engine.read(&mut b, 8192).unwrap();
    assert_eq!(&b[50..150], &[9u8; 100][..]);
    assert_eq!(b[0], 2);
    assert_eq!(engine.stats().errors, 1);
    engine.audit();
}

/// A backend that fails writes while told to: a detach with many flush jobs fails, leaves
/// every line dirty (none dropped half-done, none left pinned), and a later detach completes.
#[test]
fn failed_detach_keeps_every_dirty_line_for_the_next() {
    struct State {
        fail: std::sync::atomic::AtomicBool,
        writes: std::sync::atomic::AtomicU64,
    }
    let backend = Arc::new(Faulty {
        inner: MemDevice::new(4 << 20),
        state: State {
            fail: true.into(),
            writes: 0.into(),
        },
        before_read: pass,
        // Every third write fails: jobs fail part-way, after some of their writes landed.
        before_write: |st| {
            let n = st.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if st.fail.load(std::sync::atomic::Ordering::SeqCst) && n % 3 == 2 {
                return Err(std::io::Error::other("injected"));
            }
            Ok(())
        },
    });
    let mut cfg = cache_config(WritePolicy::WriteBack, 4096);
    cfg.capacity = 2 << 20;
    cfg.cleaning = CleaningConfig::None;
    let engine = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        Arc::new(MemDevice::new(8 << 20)),
        backend.clone(),
    )
    .unwrap();
    for i in 0..400u64 {
        engine
            .write(&[(i % 251) as u8 + 1; 4096], i * 4096, false)
            .unwrap();
    }
    assert_eq!(engine.stats().dirty_lines, 400);
    assert!(
        engine.flush_all().is_err(),
        "128-line jobs each meet a failing write"
    );
    engine.audit();
    assert!(
        engine.stats().dirty_lines > 0,
        "failed jobs' lines are dirty again"
    );
    backend
        .state
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    engine.flush_all().unwrap();
    engine.audit();
    assert_eq!(engine.stats().dirty_lines, 0);
    let img = backend.inner.snapshot();
    for i in 0..400usize {
        assert!(
            img[i * 4096..(i + 1) * 4096]
                .iter()
                .all(|&b| b == (i % 251) as u8 + 1),
            "line {i} on the backend after detach"
        );
    }
    // And the engine still answers for those lines (no ordering ticket was left open).
    let mut b = vec![0u8; 4096];
    engine.read(&mut b, 399 * 4096).unwrap();
    assert_eq!(b[0], (399 % 251) as u8 + 1);
}

/// The shard layout (`cache.shards`) is part of the cache device: a cache written under one
/// shard count recovers under one shard (which reads any layout) whatever the lookup, and is
/// refused, naming the setting, under a sharding that would put its lines in the wrong shards.
#[test]
fn shard_layout_changes_are_recovered_or_named() {
    let with = |lookup, shards| {
        (
            CacheConfig {
                shards,
                // The lines must still be dirty at the restart: no cleaning after an idle
                // millisecond.
                cleaning: CleaningConfig::None,
                ..cache_config(WritePolicy::WriteBack, 4096)
            },
            EngineConfig {
                lookup,
                ..EngineConfig::default()
            },
        )
    };
    let cache_dev = Arc::new(MemDevice::new(4 << 20));
    let backend = Arc::new(MemDevice::new(VOLUME));
    {
        let (c, e) = with(Lookup::HtFg, 8);
        let e = Engine::with_devices(&c, &e, cache_dev.clone(), backend.clone()).unwrap();
        for i in 0..64u64 {
            e.write(&[i as u8 + 1; 4096], i * 65536, false).unwrap();
        }
        e.flush().unwrap();
        e.shutdown().unwrap();
    }
    let reopen = |(c, e): &(CacheConfig, EngineConfig)| {
        Engine::with_devices(
            c,
            e,
            Arc::new(MemDevice::from_bytes(cache_dev.snapshot())),
            backend.clone(),
        )
    };
    let err = reopen(&with(Lookup::HtFg, 4)).err().expect("refused");
    assert!(err.to_string().contains("cache.shards changed"), "{err}");
    for ok in [
        with(Lookup::HtFg, 8),
        with(Lookup::HtCg, 8),
        with(Lookup::Lt, 8),
        with(Lookup::HtCg, 1),
        with(Lookup::HtFg, 1),
    ] {
        let e = reopen(&ok).unwrap();
        assert_eq!(e.stats().dirty_lines, 64, "{:?}", ok.1.lookup);
        let mut b = vec![0u8; 4096];
        for i in 0..64u64 {
            e.read(&mut b, i * 65536).unwrap();
            assert_eq!(b[0], i as u8 + 1);
        }
        e.audit();
    }
}

/// `engine.shards` moved to `cache.shards`; naming it says so.
#[test]
fn engine_shards_is_refused_naming_its_new_place() {
    let e = EngineConfig {
        shards: Some(16),
        ..EngineConfig::default()
    };
    let err = Engine::with_devices(
        &cache_config(WritePolicy::WriteBack, 4096),
        &e,
        Arc::new(MemDevice::new(4 << 20)),
        Arc::new(MemDevice::new(VOLUME)),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("moved to cache.shards"), "{err}");
}

/// A thread that panics while holding a policy core's lock may leave the core half updated:
/// the next request to take that lock halts the engine (fail-stop), and every request after it
/// fails, on any shard, instead of being served from a possibly broken core.
#[test]
fn a_poisoned_core_lock_halts_the_engine() {
    let cfg = cache_config(WritePolicy::WriteBack, 4096);
    let e = Engine::with_devices(
        &cfg,
        &EngineConfig::default(),
        Arc::new(MemDevice::new(4 << 20)),
        Arc::new(MemDevice::new(VOLUME)),
    )
    .unwrap();
    e.write(&[1; 4096], 0, false).unwrap();
    let mut b = vec![0u8; 4096];
    e.read(&mut b, 0).unwrap();
    assert!(e.halted().is_none());
    e.poison_core_for_test(0);
    let err = e.read(&mut b, 0).unwrap_err();
    assert!(err.to_string().contains("halted"), "{err}");
    assert!(e.halted().is_some_and(|w| w.contains("panicked")));
    assert!(
        e.read(&mut b, 1 << 20).is_err(),
        "another shard still served"
    );
    assert!(e.write(&[2; 4096], 3 << 16, false).is_err());
    assert!(e.flush_all().is_err());
}

/// A slot record that passes its checksum but names a line the backend cannot hold (a cache
/// device reopened over a smaller backend, or a record naming an index or volume out of any
/// range) is a named recovery error, not a panic, and the devices are left as they were.
#[test]
fn recovered_records_outside_the_backend_are_named() {
    use tiercache_engine::slot_table::{Layout, SlotRecord, SlotTable};
    let cfg = cache_config(WritePolicy::WriteBack, 4096);
    let cache_dev = Arc::new(MemDevice::new(4 << 20));
    let backend = Arc::new(MemDevice::new(VOLUME));
    {
        let e = Engine::with_devices(&cfg, &EngineConfig::default(), cache_dev.clone(), backend)
            .unwrap();
        e.write(&[7; 4096], VOLUME as u64 - 4096, false).unwrap();
        e.flush().unwrap();
        e.shutdown().unwrap();
    }
    let reopen = |cache: Vec<u8>, backend_len: usize| {
        Engine::with_devices(
            &cfg,
            &EngineConfig::default(),
            Arc::new(MemDevice::from_bytes(cache)),
            Arc::new(MemDevice::new(backend_len)),
        )
        .err()
        .expect("refused")
        .to_string()
    };
    let err = reopen(cache_dev.snapshot(), VOLUME / 2);
    assert!(err.contains("outside the backend"), "{err}");

    // Records naming an index past 2^48 and a volume the engine does not serve. The compact
    // records (format 2) cannot name the first, second and last: a device of the wide
    // format (1, an earlier build's) can.
    for line in [(0u32, 1u64 << 50), (0, u64::MAX), (7, 0), (u32::MAX, 3)] {
        let fits = line.0 <= u32::from(u16::MAX) && line.1 < 1 << 48;
        let lines = (cfg.capacity / 4096) as u32;
        let layout = if fits {
            Layout::new(lines, 4096)
        } else {
            Layout::with_version(1, lines, 4096)
        };
        let dev = MemDevice::from_bytes(cache_dev.snapshot());
        let (table, _, _) = SlotTable::open(&dev, layout, !fits).unwrap();
        table
            .write(
                &dev,
                1,
                &SlotRecord {
                    line: Some(line),
                    valid: 1,
                    dirty: 1,
                },
            )
            .unwrap();
        let err = reopen(dev.snapshot(), VOLUME);
        assert!(
            err.contains("slot 1") && err.contains("outside the backend"),
            "{line:?}: {err}"
        );
    }
}

/// Both devices opened with O_DIRECT (where the file system has it): random aligned and
/// unaligned I/O reads back, survives a restart, and detaches onto the backend file.
#[test]
fn direct_io_devices_read_back_restart_and_detach() {
    direct_io_round_trip(tiercache_engine::IoEngine::Psync);
}

/// The same through io_uring (where the kernel has it; else its pread/pwrite fallback).
#[test]
fn io_uring_devices_read_back_restart_and_detach() {
    direct_io_round_trip(tiercache_engine::IoEngine::IoUring);
}

fn direct_io_round_trip(io: tiercache_engine::IoEngine) {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let ecfg = EngineConfig {
        cache_path: dir.path().join("cache.img"),
        backend_path: dir.path().join("backend.img"),
        backend_size: Some(VOLUME as u64),
        cache_direct: true,
        backend_direct: true,
        io,
        ..EngineConfig::default()
    };
    let cfg = cache_config(WritePolicy::WriteBack, 4096);
    let engine = match Engine::open(&cfg, &ecfg) {
        Ok(e) => e,
        Err(e) => {
            assert!(e.to_string().contains("O_DIRECT"), "{e}");
            eprintln!("skipping: {e}");
            return;
        }
    };
    let mut shadow = vec![0u8; VOLUME];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    let mut buf = vec![0u8; 32 << 10];
    for n in 0..3000u32 {
        let len = if rng.gen_bool(0.8) {
            4096 * rng.gen_range(1..8)
        } else {
            rng.gen_range(1..3000)
        };
        let mut off = rng.gen_range(0..(VOLUME / 4 - len));
        if len % 4096 == 0 {
            off &= !4095;
        }
        if rng.gen_bool(0.5) {
            for (i, b) in buf[..len].iter_mut().enumerate() {
                *b = (n as u8) ^ (i as u8).wrapping_mul(3);
            }
            engine
                .write(&buf[..len], off as u64, rng.gen_bool(0.02))
                .unwrap();
            shadow[off..off + len].copy_from_slice(&buf[..len]);
        } else {
            engine.read(&mut buf[..len], off as u64).unwrap();
            assert!(
                buf[..len] == shadow[off..off + len],
                "read {n} at {off}+{len}"
            );
        }
    }
    engine.flush().unwrap();
    drop(engine);
    let engine = Engine::open(&cfg, &ecfg).unwrap();
    assert!(engine.stats().recovery.lines > 0, "a warm restart");
    let mut all = vec![0u8; VOLUME];
    engine.read(&mut all, 0).unwrap();
    assert!(all == shadow, "after restart");
    engine.flush_all().unwrap();
    drop(engine);
    let on_disk = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert!(on_disk == shadow, "the backend file alone after detach");
}

/// The server's inline path: reads and writes the cache alone serves run at once; anything
/// else is declined untouched (no counters move) and runs on a worker.
#[test]
fn inline_requests_run_only_on_the_cache_alone() {
    use tiercache_blockdev::BlockDevice;
    let cfg = cache_config(WritePolicy::WriteBack, 4096);
    for lookup in [Lookup::HtFg, Lookup::HtCg] {
        let engine = Engine::with_devices(
            &cfg,
            &EngineConfig {
                lookup,
                ..EngineConfig::default()
            },
            Arc::new(MemDevice::new(4 << 20)),
            Arc::new(MemDevice::from_bytes(vec![7u8; VOLUME])),
        )
        .unwrap();
        let mut b = vec![0u8; 8192];
        assert!(engine.read_fast(&mut b, 0).is_none(), "a miss is declined");
        assert!(
            engine.write_fast(&[1u8; 4096], 0).is_none(),
            "a write miss too"
        );
        assert_eq!(
            engine.stats().reads + engine.stats().writes,
            0,
            "nothing ran"
        );
        // A read answered before its fill finished: hits on those lines are declined (they
        // would wait for the fill) until the fill is done.
        let fast_read = |b: &mut [u8], off: u64| {
            // Bounded, so a hit that never runs inline fails rather than hangs.
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                match engine.read_fast(b, off) {
                    Some(r) => break r,
                    None if std::time::Instant::now() < give_up => std::thread::yield_now(),
                    None => panic!("{lookup:?}: a hit at {off} never ran inline"),
                }
            }
        };
        engine.read(&mut b, 0).unwrap();
        assert!(fast_read(&mut b, 0).is_ok());
        assert_eq!(b, vec![7u8; 8192]);
        engine.write_fast(&[3u8; 4096], 4096).unwrap().unwrap();
        fast_read(&mut b, 0).unwrap();
        assert!(b[..4096] == [7u8; 4096] && b[4096..] == [3u8; 4096]);
        // Across a 64 KiB chunk boundary (two shards under ht-fg): both lines resident.
        engine.read(&mut b, 65536 - 4096).unwrap();
        assert!(fast_read(&mut b, 65536 - 4096).is_ok());
        let st = engine.stats();
        assert_eq!(
            (st.reads, st.writes, st.dirty_lines),
            (5, 1, 1),
            "{lookup:?}"
        );
        engine.audit();
    }
}

/// Writing back a dirty victim inline (`dirty_full = evict-then-write`) to a backend that
/// fails (a local disk's EIO or ENOSPC): the write that needed the room fails (the backend
/// takes neither the victim nor the write), and the victim goes back in its slot, dirty: the
/// engine does not halt, and never serves the backend's stale copy of it. The lines the cache
/// holds read back while the backend fails, a restart on the same cache device recovers every
/// acknowledged write, and once the backend is healthy a detach puts them there.
#[test]
fn failed_inline_write_back_keeps_the_victim_dirty_in_its_slot() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let pattern = |i: u64| (i % 251) as u8 + 1;
    for lookup in [Lookup::HtFg, Lookup::HtCg, Lookup::Lt] {
        let backend = Arc::new(Faulty {
            inner: MemDevice::new(4 << 20),
            state: AtomicBool::new(false),
            before_read: pass,
            before_write: |fail| match fail.load(SeqCst) {
                true => Err(std::io::Error::other("injected: no space left")),
                false => Ok(()),
            },
        });
        let mut cfg = cache_config(WritePolicy::WriteBack, 4096);
        cfg.capacity = 64 << 10; // 16 lines
        cfg.cleaning = CleaningConfig::None;
        let ecfg = EngineConfig {
            lookup,
            ..EngineConfig::default()
        };
        let cache_dev = Arc::new(MemDevice::new(4 << 20));
        let engine = Engine::with_devices(&cfg, &ecfg, cache_dev.clone(), backend.clone()).unwrap();
        // Every line dirty: the next write miss must write a victim back inline.
        let mut acked = Vec::new();
        // One line a 64 KiB chunk, so that every lock shard fills.
        for i in (0..64u64).map(|c| c * 16) {
            let s = engine.stats();
            if s.dirty_lines == s.capacity_lines {
                break;
            }
            engine.write(&[pattern(i); 4096], i * 4096, false).unwrap();
            acked.push(i);
        }
        let s = engine.stats();
        assert_eq!(s.dirty_lines, s.capacity_lines, "{lookup:?}");
        engine.flush().unwrap();
        backend.state.store(true, SeqCst);
        let fresh = 1001u64;
        assert!(
            engine.write(&[7u8; 4096], fresh * 4096, false).is_err(),
            "{lookup:?}: the write-back of its victim failed"
        );
        let s = engine.stats();
        assert!(s.halted.is_none(), "{lookup:?}: {:?}", s.halted);
        assert_eq!(
            s.dirty_lines, s.capacity_lines,
            "{lookup:?}: the victim is dirty again"
        );
        assert!(s.health.evictions_kept >= 1, "{lookup:?}");
        // Never the backend's stale copy: a line the cache holds (dirty, the victim too) is
        // served from it; one written back earlier is a miss whose read may fail, when its
        // promotion must write a dirty victim back to the failing backend.
        let mut b = vec![0u8; 4096];
        let mut served = 0;
        for &i in &acked {
            if engine.read(&mut b, i * 4096).is_ok() {
                assert!(
                    b.iter().all(|&x| x == pattern(i)),
                    "{lookup:?}: line {i} while the backend fails"
                );
                served += 1;
            }
        }
        assert!(served >= s.capacity_lines, "{lookup:?}: {served} served");
        assert!(
            engine.flush_all().is_err(),
            "{lookup:?}: no detach while the backend fails"
        );
        engine.audit();
        drop(engine);
        // Restart on the same cache device, the backend healthy again.
        backend.state.store(false, SeqCst);
        let engine = Engine::with_devices(&cfg, &ecfg, cache_dev, backend.clone()).unwrap();
        assert!(engine.stats().halted.is_none());
        for &i in &acked {
            engine.read(&mut b, i * 4096).unwrap();
            assert!(
                b.iter().all(|&x| x == pattern(i)),
                "{lookup:?}: line {i} after restart"
            );
        }
        engine.flush_all().unwrap();
        let img = backend.inner.snapshot();
        for &i in &acked {
            let at = i as usize * 4096;
            assert!(
                img[at..at + 4096].iter().all(|&x| x == pattern(i)),
                "{lookup:?}: line {i} on the backend after detach"
            );
        }
        engine.audit();
    }
}

/// A read planned as a hit on a line whose fill is still running, when that fill fails (the
/// backend read errs): the read must fail too, not return whatever the slot held before.
#[test]
fn a_hit_on_a_failing_fill_fails_rather_than_reading_the_slot() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    struct State {
        released: Gate,
        reads: AtomicU32,
        failed: AtomicBool,
    }
    for lookup in [Lookup::HtFg, Lookup::HtCg] {
        // The first read blocks until released, then fails; later reads work.
        let backend = Arc::new(Faulty {
            inner: MemDevice::from_bytes(vec![0x5a; 1 << 20]),
            state: State {
                released: Gate::default(),
                reads: 0.into(),
                failed: false.into(),
            },
            before_read: |st| {
                if st.reads.fetch_add(1, SeqCst) == 0 {
                    st.released.wait();
                    st.failed.store(true, SeqCst);
                    return Err(std::io::Error::other("injected"));
                }
                Ok(())
            },
            before_write: pass,
        });
        let cfg = cache_config(WritePolicy::WriteBack, 4096);
        let ecfg = EngineConfig {
            lookup,
            ..EngineConfig::default()
        };
        let engine = Engine::with_devices(
            &cfg,
            &ecfg,
            Arc::new(MemDevice::new(4 << 20)),
            backend.clone(),
        )
        .unwrap();
        std::thread::scope(|s| {
            let miss = start_miss(s, &engine, 8192, &backend.state.reads);
            // The miss is planned and blocked in its backend read: this read is planned as a
            // hit on the line being filled, and waits for the fill.
            let hit = s.spawn(|| {
                let mut b = vec![0u8; 4096];
                engine.read(&mut b, 8192).map(|()| b)
            });
            while engine.stats().in_flight < 2 {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            backend.state.released.open();
            assert!(miss.join().unwrap().is_err(), "{lookup:?}: the miss failed");
            // A read that waited for the failed fill must fail; one planned after it (had
            // the scheduler held it back that long) is a miss and reads the backend.
            let hit = hit.join().unwrap();
            let waited = engine.stats().ordering_waits > 0;
            match hit {
                Ok(b) => assert!(
                    !waited && b.iter().all(|&x| x == 0x5a),
                    "{lookup:?}: the read after a failed fill returned the slot's old bytes"
                ),
                Err(e) => assert!(e.to_string().contains("earlier request"), "{e}"),
            }
        });
        assert!(backend.state.failed.load(SeqCst));
        // Nothing stuck: the line reads right now.
        let mut b = vec![0u8; 4096];
        engine.read(&mut b, 8192).unwrap();
        assert!(b.iter().all(|&x| x == 0x5a), "{lookup:?}");
        assert!(engine.stats().halted.is_none());
        engine.audit();
    }
}

/// The server's inline path never blocks a connection's reader: a hit on a line whose fill
/// is still in flight is declined (to run on a worker) instead of waiting for the fill.
#[test]
fn inline_hits_decline_lines_with_a_fill_in_flight() {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use tiercache_blockdev::BlockDevice;
    struct State {
        open: Gate,
        reads: AtomicU32,
    }
    // Reads block until the gate opens.
    let backend = Arc::new(Faulty {
        inner: MemDevice::from_bytes(vec![9u8; 1 << 20]),
        state: State {
            open: Gate::default(),
            reads: 0.into(),
        },
        before_read: |st| {
            st.reads.fetch_add(1, SeqCst);
            st.open.wait();
            Ok(())
        },
        before_write: pass,
    });
    let engine = Engine::with_devices(
        &cache_config(WritePolicy::WriteBack, 4096),
        &EngineConfig::default(),
        Arc::new(MemDevice::new(4 << 20)),
        backend.clone(),
    )
    .unwrap();
    std::thread::scope(|s| {
        let miss = start_miss(s, &engine, 4096, &backend.state.reads);
        // The line is resident (its fill planned) but the fill waits on the backend.
        let (tx, rx) = std::sync::mpsc::channel();
        let e = &engine;
        s.spawn(move || {
            let mut b = vec![0u8; 4096];
            let declined = e.read_fast(&mut b, 4096).is_none();
            let write_declined = e.write_fast(&[1u8; 4096], 4096).is_none();
            let _ = tx.send((declined, write_declined));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        backend.state.open.open();
        assert_eq!(
            got,
            Ok((true, true)),
            "inline requests on a line being filled are declined at once"
        );
        assert_eq!(miss.join().unwrap().unwrap(), vec![9u8; 4096]);
    });
    assert_eq!(engine.stats().reads, 1, "declined requests ran nothing");
    engine.audit();
}
