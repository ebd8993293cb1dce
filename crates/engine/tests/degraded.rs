//! A failing or full cache device degrades the engine rather than failing clients
//! (docs/design.md §11): random I/O under injected faults (EIO on reads or writes, ENOSPC,
//! latency spikes) for each write policy, against a shadow model of the volume. Writes never
//! fail; a read fails only where the cache held the only copy (dirty data it cannot read);
//! once the device is fixed every acknowledged byte reads back and reaches the backend.
//!
//! `cargo test -p tiercache-engine --test degraded -- --nocapture` prints the fault sweep
//! table (client-visible errors, acknowledged writes lost, time from the first fault to
//! degraded mode).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::NbdBackend;
use tiercache_engine::device::{FaultDevice, FaultKind, FaultOp, FaultRule};
use tiercache_engine::health::{DeviceOp, DeviceRole, ErrorClass};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig, OnErrorAction, OnErrorConfig};
use tiercache_nbd::{
    serve_unix, NbdUri, Remote, RemoteConfig, ServerConfig, ServerStats, Shutdown,
};
use tiercache_policy::{
    CacheConfig, CleaningConfig, DirtyFullPolicy, PromotionConfig, WritePolicy,
};

const LINE: u64 = 16 << 10;
const CAPACITY: u64 = 2 << 20;
const VOLUME: u64 = 16 << 20;

fn cache_config(policy: WritePolicy) -> CacheConfig {
    cache_config_with(policy, DirtyFullPolicy::Bypass)
}

fn cache_config_with(policy: WritePolicy, dirty_full: DirtyFullPolicy) -> CacheConfig {
    CacheConfig {
        capacity: CAPACITY,
        line_size: LINE,
        write_policy: policy,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 16,
        },
        shards: 4,
        // `bypass`: dirty lines are written back by the flusher only, which keeps them dirty
        // while their cache reads fail; `evict-then-write`: an eviction that cannot read its
        // dirty victim puts it back in its slot and the request goes past the cache
        // (docs/design.md §11).
        dirty_full,
        ..CacheConfig::default()
    }
}

fn layout() -> Layout {
    Layout::new((CAPACITY / LINE) as u32, LINE)
}

struct Rig {
    engine: Engine,
    cache: Arc<FaultDevice<MemDevice>>,
    backend: Arc<MemDevice>,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

fn rig(policy: WritePolicy, rules: Vec<FaultRule>, on_error: OnErrorConfig) -> Rig {
    let backend = Arc::new(MemDevice::new(VOLUME as usize));
    rig_over(
        policy,
        DirtyFullPolicy::Bypass,
        rules,
        on_error,
        backend.clone(),
        backend,
    )
}

/// The engine over the failing cache device and `backend` (whose bytes `image` holds).
fn rig_over(
    policy: WritePolicy,
    dirty_full: DirtyFullPolicy,
    rules: Vec<FaultRule>,
    on_error: OnErrorConfig,
    backend: Arc<dyn BlockDevice>,
    image: Arc<MemDevice>,
) -> Rig {
    let cache = Arc::new(FaultDevice::new(
        MemDevice::new(layout().device_len() as usize),
        rules,
        7,
    ));
    let ecfg = EngineConfig {
        on_error,
        ..EngineConfig::default()
    };
    let engine = Engine::with_devices(
        &cache_config_with(policy, dirty_full),
        &ecfg,
        cache.clone(),
        backend,
    )
    .unwrap();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = log.clone();
    engine.set_log(Arc::new(move |m: &str| {
        sink.lock().unwrap().push(m.to_string())
    }));
    Rig {
        engine,
        cache,
        backend: image,
        log,
    }
}

/// Where the failing cache sits.
#[derive(Clone, Copy, Debug)]
enum Topology {
    /// One engine over a local backend.
    Single,
    /// A small write-through engine above the failing one (two levels; clients talk to the
    /// upper).
    TwoLevel,
    /// The failing engine over a remote backend (an NBD export served in process).
    Remote,
}

/// The backend of a remote topology: `image` served over NBD on a Unix socket in `dir`.
fn remote_backend(
    image: Arc<MemDevice>,
    dir: &std::path::Path,
) -> (Arc<dyn BlockDevice>, Shutdown) {
    let sock = dir.join("nbd.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stop = Shutdown::new();
    let cfg = ServerConfig {
        max_payload: 32 << 20,
        workers: 4,
        export_name: String::new(),
        busy_poll: std::time::Duration::ZERO,
        ..ServerConfig::default()
    };
    let (dev, sd) = (image as Arc<dyn BlockDevice>, stop.clone());
    std::thread::spawn(move || {
        serve_unix(listener, dev, cfg, Arc::new(ServerStats::default()), sd)
    });
    let uri: NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap();
    let remote = Remote::connect(uri, RemoteConfig::default()).unwrap();
    (Arc::new(NbdBackend(remote)), stop)
}

/// The first scenario in miniature: the cache device runs out of room (every slot
/// data write past 1.75 MiB gets ENOSPC, as a sparse file on a full file system does); 16 MiB
/// written through a write-back cache all succeed, read back equal, and reach the backend;
/// the engine says it degraded, in its log and its counters.
#[test]
fn a_full_cache_device_degrades_and_every_write_succeeds() {
    let data = layout().data_offset;
    let full = FaultRule::new(FaultOp::Write, FaultKind::Enospc).range(data + (7 << 18), u64::MAX);
    let r = rig(WritePolicy::WriteBack, vec![full], OnErrorConfig::default());
    let chunk = 256 << 10;
    let bytes = |i: u64| vec![(i * 37 % 251) as u8 + 1; chunk];
    for i in 0..(16 << 20) / chunk as u64 {
        r.engine
            .write(&bytes(i), i * chunk as u64, false)
            .unwrap_or_else(|e| panic!("write {i}: {e}"));
    }
    r.engine.flush().unwrap();
    let mut got = vec![0u8; chunk];
    for i in 0..(16 << 20) / chunk as u64 {
        r.engine.read(&mut got, i * chunk as u64).unwrap();
        assert!(got == bytes(i), "chunk {i} reads back");
    }
    let h = r.engine.health();
    assert!(h.degraded, "{h:?}");
    assert_eq!(h.degraded_entered, 1);
    assert!(h.count(DeviceRole::Cache, DeviceOp::Write, ErrorClass::Enospc) >= 8);
    assert!(h.served_past_cache >= 1);
    assert_eq!(r.engine.stats().errors, 0, "no client saw an error");
    let log = r.log.lock().unwrap().join("\n");
    assert!(
        log.contains("first enospc write error on the cache device"),
        "{log}"
    );
    assert!(
        log.contains("errno 28") && log.contains("DEGRADED"),
        "{log}"
    );
    // The figures match: degraded, the flusher writes every dirty line back (the device
    // still reads); once it has, the dirty count is 0 and a full flush writes nothing more.
    let drained = settled_stats(&r.engine, |s| s.dirty_lines == 0);
    r.engine.flush_all().unwrap();
    assert_eq!(r.engine.stats().flushed_lines, drained.flushed_lines);
    assert_eq!(r.engine.stats().dirty_lines, 0);
    let img = r.backend.snapshot();
    for i in 0..(16 << 20) / chunk {
        assert!(
            img[i * chunk..(i + 1) * chunk] == bytes(i as u64)[..],
            "chunk {i} on the backend"
        );
    }
    // Fixed: back in service, the cache takes writes again.
    r.cache.set_rules(Vec::new());
    assert!(r.engine.return_to_service());
    let h = r.engine.health();
    assert!(!h.degraded && h.degraded_left == 1);
    let cache_ops = r.engine.stats().cache_ops;
    r.engine.write(&bytes(1), 0, false).unwrap();
    assert!(
        r.engine.stats().cache_ops > cache_ops,
        "the cache is used again"
    );
    r.engine.audit();
}

/// `action = "fail"`: past the threshold the engine halts (every request fails), and says why.
#[test]
fn action_fail_halts_past_the_threshold() {
    let data = layout().data_offset;
    let rule = FaultRule::new(FaultOp::Write, FaultKind::Eio).range(data, u64::MAX);
    let r = rig(
        WritePolicy::WriteBack,
        vec![rule],
        OnErrorConfig {
            threshold: 2,
            action: OnErrorAction::Fail,
            ..OnErrorConfig::default()
        },
    );
    let b = vec![1u8; 4096];
    // The first failure is served past the cache; the second passes the threshold.
    r.engine.write(&b, 0, false).unwrap();
    let _ = r.engine.write(&b, 1 << 20, false);
    let e = r.engine.write(&b, 2 << 20, false).unwrap_err();
    assert!(e.to_string().contains("on_error.action"), "{e}");
    assert!(r.engine.halted().is_some());
}

/// A cache device whose flushes fail cannot make write-back data durable: a client FLUSH then
/// degrades the engine, writes every dirty line back, syncs the backend, and succeeds.
#[test]
fn a_failed_cache_flush_writes_dirty_data_back_and_the_flush_succeeds() {
    let r = rig(WritePolicy::WriteBack, Vec::new(), OnErrorConfig::default());
    // The write's lines stay dirty until the client's flush (no cleaner behind its back).
    stop_cleaner(&r);
    // From now on (start-up syncs the device too).
    r.cache
        .set_rules(vec![FaultRule::new(FaultOp::Flush, FaultKind::Eio)]);
    let data = vec![0x3cu8; 64 << 10];
    r.engine.write(&data, 1 << 20, false).unwrap();
    assert!(r.engine.stats().dirty_lines > 0);
    r.engine.flush().unwrap();
    assert!(r.engine.degraded());
    assert_eq!(r.engine.stats().dirty_lines, 0, "written back");
    assert_eq!(
        &r.backend.snapshot()[1 << 20..(1 << 20) + (64 << 10)],
        &data[..]
    );
    // FUA writes go the same way.
    r.engine.write(&[7u8; 4096], 0, true).unwrap();
    assert_eq!(&r.backend.snapshot()[..4096], &[7u8; 4096][..]);
    let h = r.engine.health();
    assert!(h.count(DeviceRole::Cache, DeviceOp::Flush, ErrorClass::Eio) >= 1);
    assert!(h
        .degraded_reason
        .unwrap()
        .contains("cache-device flush failed"));
}

/// `dirty_full = "evict-then-write"` on a cache device whose reads fail, never degrading on
/// the count: each write miss evicts a dirty victim it cannot read. The victim goes back in
/// its slot, dirty (counted, logged), the write goes to the backend, nothing halts; a read of
/// a victim fails (the cache holds the only copy) rather than return the backend's stale
/// bytes; once the device reads again, every acknowledged write reads back and a flush puts
/// it on the backend.
#[test]
fn an_unreadable_dirty_victim_stays_in_its_slot_and_the_write_goes_past_the_cache() {
    let image = Arc::new(MemDevice::new(VOLUME as usize));
    let r = rig_over(
        WritePolicy::WriteBack,
        DirtyFullPolicy::EvictThenWrite,
        Vec::new(),
        OnErrorConfig {
            threshold: 1_000_000,
            ..OnErrorConfig::default()
        },
        image.clone(),
        image,
    );
    // Dirty data leaves by evictions and the final flush only, so the counts below are exact.
    stop_cleaner(&r);
    let lines = CAPACITY / LINE;
    let old = |i: u64| vec![(i % 250) as u8 + 1; LINE as usize];
    // Twice the cache: the first half is written back by evictions, the second is dirty.
    for i in 0..2 * lines {
        r.engine.write(&old(i), i * LINE, false).unwrap();
    }
    assert_eq!(r.engine.stats().dirty_lines, lines);
    let data = layout().data_offset;
    r.cache.set_rules(vec![
        FaultRule::new(FaultOp::Read, FaultKind::Eio).range(data, u64::MAX)
    ]);
    let new = |i: u64| vec![(i % 7) as u8 + 0xf0; LINE as usize];
    for i in 2 * lines..3 * lines {
        r.engine
            .write(&new(i), i * LINE, false)
            .unwrap_or_else(|e| panic!("write of line {i}: {e}"));
    }
    let s = r.engine.stats();
    assert!(s.halted.is_none(), "{:?}", s.halted);
    assert!(s.health.evictions_kept > 0, "{:?}", s.health);
    assert!(!s.health.degraded);
    assert_eq!(s.dirty_lines, lines, "every dirty victim kept");
    let log = r.log.lock().unwrap().join("\n");
    assert!(log.contains("stays in its slot, dirty"), "{log}");
    // A kept victim is not read from the backend's stale copy: its read fails.
    let mut b = vec![0u8; LINE as usize];
    for i in lines..2 * lines {
        if let Ok(()) = r.engine.read(&mut b, i * LINE) {
            assert!(b == old(i), "line {i}: stale bytes");
        }
    }
    r.cache.set_rules(Vec::new());
    for i in 0..3 * lines {
        r.engine.read(&mut b, i * LINE).unwrap();
        let want = if i < 2 * lines { old(i) } else { new(i) };
        assert!(b == want, "line {i} reads back");
    }
    let quiet = settled_stats(&r.engine, |_| true);
    r.engine.flush_all().unwrap();
    assert_eq!(
        r.engine.stats().flushed_lines - quiet.flushed_lines,
        quiet.dirty_lines
    );
    let img = r.backend.snapshot();
    for i in 0..3 * lines {
        let at = (i * LINE) as usize;
        let want = if i < 2 * lines { old(i) } else { new(i) };
        assert!(
            img[at..at + LINE as usize] == want[..],
            "line {i} on the backend"
        );
    }
    r.engine.audit();
}

/// A restart after a degraded run never recovers a clean line older than the backend: the
/// engine degrades (the pass-through mark is made durable first), the cache device stops
/// taking metadata writes, and a write to a line the cache holds clean goes to the backend
/// while the record still names the old copy. Killed there (the devices as they are) and
/// restarted, the engine drops the clean data the records name, keeps the dirty, says so, and
/// reads the newest data back.
#[test]
fn a_restart_after_pass_through_recovers_no_stale_clean_line() {
    let r = rig(WritePolicy::WriteBack, Vec::new(), OnErrorConfig::default());
    // Line 5 stays dirty until the kill (no cleaner behind the test's back).
    stop_cleaner(&r);
    let line = |v: u8| vec![v; LINE as usize];
    // Line 0 clean in the cache (written back), line 5 dirty.
    r.engine.write(&line(1), 0, false).unwrap();
    r.engine.flush_all().unwrap();
    let mut b = line(0);
    r.engine.read(&mut b, 0).unwrap();
    r.engine.write(&line(5), 5 * LINE, false).unwrap();
    assert_eq!(r.engine.stats().dirty_lines, 1);
    assert_eq!(r.engine.stats().resident_lines, 2);
    r.engine.degrade("test");
    let data = layout().data_offset;
    r.cache.set_rules(vec![
        FaultRule::new(FaultOp::Write, FaultKind::Eio).range(4096, data)
    ]);
    // Past the cache: the backend takes it; the record dropping line 0 cannot be written.
    r.engine.write(&line(2), 0, false).unwrap();
    assert!(r.engine.health().cache_errors() >= 1);
    // kill -9: the devices as they are now, under a new engine.
    let cache_img = Arc::new(MemDevice::from_bytes(r.cache.inner().snapshot()));
    let backend_img = Arc::new(MemDevice::from_bytes(r.backend.snapshot()));
    let engine = Engine::with_devices(
        &cache_config(WritePolicy::WriteBack),
        &EngineConfig::default(),
        cache_img.clone(),
        backend_img.clone(),
    )
    .unwrap();
    engine.read(&mut b, 0).unwrap();
    assert!(
        b == line(2),
        "line 0: the newest data, not the cache's stale copy"
    );
    engine.read(&mut b, 5 * LINE).unwrap();
    assert!(b == line(5), "line 5: acknowledged, kept");
    let rec = engine.stats().recovery;
    assert!(rec.clean_dropped_after_pass_through >= 1, "{rec:?}");
    assert!(
        engine
            .notes()
            .iter()
            .any(|n| n.contains("served requests past the cache")),
        "{:?}",
        engine.notes()
    );
    engine.audit();
    drop(engine);
    // The mark is cleared once recovery rewrote the records: the next restart trusts them.
    let again = Engine::with_devices(
        &cache_config(WritePolicy::WriteBack),
        &EngineConfig::default(),
        cache_img,
        backend_img,
    )
    .unwrap();
    assert_eq!(again.stats().recovery.clean_dropped_after_pass_through, 0);
    again.read(&mut b, 0).unwrap();
    assert!(b == line(2));
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    EioRead,
    EioWrite,
    Enospc,
    Latency,
}

/// What one sweep run saw.
struct Outcome {
    ops: u64,
    client_errors: u64,
    /// Reads that failed although the model says the cache held no dirty copy: must be 0.
    unexplained_errors: u64,
    /// The first of them: the op and the error.
    first_unexplained: Option<String>,
    lost_writes: u64,
    to_degraded_ms: Option<f64>,
    /// Dirty victims put back in their slots (evict-then-write).
    evictions_kept: u64,
}

fn sweep_one(
    topology: Topology,
    policy: WritePolicy,
    dirty_full: DirtyFullPolicy,
    fault: Fault,
    seed: u64,
) -> Outcome {
    let data = layout().data_offset;
    // Faults on the slot data (a failing region of the device), from the 50th op on, each op
    // with chance 0.2; latency spikes everywhere.
    let rule = match fault {
        Fault::EioRead => FaultRule::new(FaultOp::Read, FaultKind::Eio),
        Fault::EioWrite => FaultRule::new(FaultOp::Write, FaultKind::Eio),
        Fault::Enospc => FaultRule::new(FaultOp::Write, FaultKind::Enospc),
        Fault::Latency => FaultRule {
            latency_ns: 2_000_000,
            ..FaultRule::new(FaultOp::Any, FaultKind::Latency)
        },
    }
    .range(data, u64::MAX)
    .after(50)
    .probability(0.2);
    let dir = tempfile::tempdir().unwrap();
    let image = Arc::new(MemDevice::new(VOLUME as usize));
    let mut _remote = None;
    let backend: Arc<dyn BlockDevice> = match topology {
        Topology::Remote => {
            let (b, stop) = remote_backend(image.clone(), dir.path());
            _remote = Some(StopOnDrop(stop));
            b
        }
        _ => image.clone(),
    };
    let r = rig_over(
        policy,
        dirty_full,
        vec![rule],
        OnErrorConfig::default(),
        backend,
        image,
    );
    // Two levels: clients talk to an engine whose backend is the failing one.
    let upper = matches!(topology, Topology::TwoLevel).then(|| {
        let cfg = CacheConfig {
            capacity: CAPACITY / 4,
            write_policy: WritePolicy::WriteThrough,
            ..cache_config(policy)
        };
        let ram = Arc::new(MemDevice::new(
            Layout::new((CAPACITY / 4 / LINE) as u32, LINE).device_len() as usize,
        ));
        let lower: Arc<dyn BlockDevice> = Arc::new(Lower(&r.engine as *const Engine));
        Engine::with_devices(&cfg, &EngineConfig::default(), ram, lower).unwrap()
    });
    let client: &Engine = upper.as_ref().unwrap_or(&r.engine);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut shadow = vec![0u8; VOLUME as usize];
    // Writes acknowledged, for counting lost ones at the end.
    let mut acked: Vec<(u64, usize, u8)> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let (mut client_errors, mut unexplained) = (0, 0);
    let mut first_unexplained = None;
    let ops = 1500;
    for n in 0..ops {
        let len = match rng.gen_range(0..4) {
            0 => 4096,
            1 => LINE as usize,
            2 => rng.gen_range(1..16) * 4096,
            _ => rng.gen_range(1..(48 << 10)),
        };
        // A hot region a little larger than the cache, so lines come and go.
        let span = (3 * CAPACITY) as usize;
        let mut off = rng.gen_range(0..span - len);
        if rng.gen_bool(0.8) {
            off &= !4095;
        }
        if rng.gen_bool(0.5) {
            match client.read(&mut buf[..len], off as u64) {
                Ok(()) => {
                    if let Some(i) = (0..len).find(|&i| buf[i] != shadow[off + i]) {
                        let last = acked.iter().rposition(|(o, l, _)| {
                            (*o..*o + *l as u64).contains(&((off + i) as u64))
                        });
                        panic!(
                            "{policy:?} {fault:?} op {n}: read {len} at {off} differs at byte {} \
                             (got {}, want {}; last write to it: {:?} of {}); events: {:#?}",
                            off + i,
                            buf[i],
                            shadow[off + i],
                            last.map(|k| acked[k]),
                            acked.len(),
                            r.engine.health().events
                        );
                    }
                }
                Err(e) => {
                    client_errors += 1;
                    // Only where the cache held the only copy: write-back's dirty data, with
                    // its cache reads failing.
                    if !(matches!(fault, Fault::EioRead)
                        && matches!(policy, WritePolicy::WriteBack))
                    {
                        unexplained += 1;
                        first_unexplained
                            .get_or_insert_with(|| format!("op {n}: read {len} at {off}: {e}"));
                    }
                }
            }
        } else {
            let v = (n % 250) as u8 + 1;
            let data = vec![v; len];
            match client.write(&data, off as u64, false) {
                Ok(()) => {
                    shadow[off..off + len].copy_from_slice(&data);
                    acked.push((off as u64, len, v));
                }
                Err(e) => {
                    // An unacknowledged write may or may not have landed: the model cannot
                    // say, so the run stops here.
                    panic!("{policy:?} {fault:?} op {n}: write failed: {e}");
                }
            }
        }
    }
    let h = r.engine.health();
    // Fixed: every acknowledged byte reads back, and a detach puts it on the backend.
    r.cache.set_rules(Vec::new());
    r.engine.return_to_service();
    let mut got = vec![0u8; 1 << 20];
    for at in (0..VOLUME as usize).step_by(1 << 20) {
        client.read(&mut got, at as u64).unwrap();
        assert!(
            got == shadow[at..at + (1 << 20)],
            "{policy:?} {fault:?}: MiB at {at}"
        );
    }
    if let Some(u) = &upper {
        u.flush_all().unwrap();
    }
    drop(upper);
    // The figures match: what is dirty now is what a full flush writes back. The lazy cleaner
    // is stopped first and its last jobs let finish, or it would write back lines between the
    // snapshot and the flush (a race of the check, not of the engine).
    stop_cleaner(&r);
    let quiet = settled_stats(&r.engine, |_| true);
    let (dirty, flushed) = (quiet.dirty_lines, quiet.flushed_lines);
    r.engine.flush_all().unwrap();
    assert_eq!(
        r.engine.stats().flushed_lines - flushed,
        dirty,
        "{policy:?} {fault:?}: dirty lines = lines the flush wrote back"
    );
    assert!(r.engine.halted().is_none(), "{policy:?} {fault:?}");
    let img = r.backend.snapshot();
    // A write is lost if a byte of it that no later write covered differs on the backend.
    let lost_writes = acked
        .iter()
        .filter(|(off, len, _)| {
            let (a, b) = (*off as usize, *off as usize + len);
            img[a..b] != shadow[a..b]
        })
        .count() as u64;
    r.engine.audit();
    Outcome {
        ops,
        client_errors,
        unexplained_errors: unexplained,
        first_unexplained,
        lost_writes,
        to_degraded_ms: h.first_error_to_degraded_ns.map(|ns| ns as f64 / 1e6),
        evictions_kept: h.evictions_kept,
    }
}

/// Stops the rig's background cleaner (cleaning set to none, the other policies as they are),
/// so that the dirty lines a test counts are not written back behind its back.
fn stop_cleaner(r: &Rig) {
    r.engine
        .set_policies(&CacheConfig {
            cleaning: CleaningConfig::None,
            ..r.engine.policies()
        })
        .unwrap();
}

/// The engine's stats once `settled` holds of them and no write-back is in flight (the
/// cleaner stopped or a degraded engine's drain done, no client). Waits on the condition,
/// checked each millisecond, for at most a minute.
fn settled_stats(
    engine: &Engine,
    settled: impl Fn(&tiercache_engine::EngineStats) -> bool,
) -> tiercache_engine::EngineStats {
    for _ in 0..60_000 {
        let s = engine.stats();
        if s.write_backs_in_flight == 0 && settled(&s) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("the engine's write-backs did not settle within a minute with no client");
}

/// The fault sweep: each fault kind under each write policy, for one engine, two levels and
/// a remote backend. No write fails, no read fails unless the cache held the only copy, no
/// acknowledged write is lost.
#[test]
fn fault_sweep_loses_nothing_and_fails_only_lost_only_copies() {
    println!(
        "| configuration | fault | write policy | ops | client errors | unexplained errors | acked writes lost | first fault → degraded | dirty victims kept |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let faults = [
        Fault::EioRead,
        Fault::EioWrite,
        Fault::Enospc,
        Fault::Latency,
    ];
    let policies = [
        (WritePolicy::WriteBack, DirtyFullPolicy::Bypass),
        (WritePolicy::WriteBack, DirtyFullPolicy::EvictThenWrite),
        (WritePolicy::WriteThrough, DirtyFullPolicy::Bypass),
        (WritePolicy::WriteAround, DirtyFullPolicy::Bypass),
    ];
    let topologies = [Topology::Single, Topology::TwoLevel, Topology::Remote];
    for (t, topology) in topologies.into_iter().enumerate() {
        for (i, fault) in faults.into_iter().enumerate() {
            for (j, (policy, dirty_full)) in policies.into_iter().enumerate() {
                // Latency spikes are slow by design: one policy is enough to show them.
                if matches!(fault, Fault::Latency) && j > 0 {
                    continue;
                }
                let o = sweep_one(
                    topology,
                    policy,
                    dirty_full,
                    fault,
                    (t * 100 + i * 10 + j) as u64,
                );
                let evict_then_write = dirty_full == DirtyFullPolicy::EvictThenWrite;
                println!(
                    "| {topology:?} | {fault:?} | {}{} | {} | {} | {} | {} | {} | {} |",
                    policy.short_name(),
                    if evict_then_write {
                        " (evict-then-write)"
                    } else {
                        ""
                    },
                    o.ops,
                    o.client_errors,
                    o.unexplained_errors,
                    o.lost_writes,
                    o.to_degraded_ms
                        .map_or("not degraded".into(), |ms| format!("{ms:.1} ms")),
                    o.evictions_kept
                );
                let what = format!("{topology:?} {fault:?} {policy:?} {dirty_full:?}");
                assert_eq!(
                    o.unexplained_errors, 0,
                    "{what}: first {:?}",
                    o.first_unexplained
                );
                assert_eq!(o.lost_writes, 0, "{what}");
                if !matches!(fault, Fault::Latency) {
                    assert!(o.to_degraded_ms.is_some(), "{what}: degraded");
                }
            }
        }
    }
}

/// Shuts an in-process NBD server down when dropped.
struct StopOnDrop(Shutdown);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.trigger();
    }
}

/// The failing engine as the upper engine's backend, borrowed for one run: `sweep_one` drops
/// the upper engine before the engine this points to.
struct Lower(*const Engine);

// SAFETY: `Lower` only hands out `&Engine`, and `Engine` is Send + Sync; the pointer stays
// valid while the upper engine (its only holder) lives, see the type's comment.
unsafe impl Send for Lower {}
unsafe impl Sync for Lower {}

impl Lower {
    fn get(&self) -> &Engine {
        // SAFETY: valid while the upper engine lives (see the type's comment).
        unsafe { &*self.0 }
    }
}

impl BlockDevice for Lower {
    fn size(&self) -> u64 {
        self.get().size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.get().read(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> std::io::Result<()> {
        self.get().write(data, off, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.get().flush()
    }
}
