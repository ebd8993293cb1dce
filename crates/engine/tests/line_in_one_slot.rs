//! A line is never found in two slots after a crash (docs/design.md §11, "A line in one
//! slot"). A plan that takes a clean line from its slot (a clean eviction, or a resize
//! dropping it) writes that slot's record when it ends; a later plan that puts the line in
//! another slot must not write the record naming it there first, or a crash (kill -9, or a
//! power loss) between the two records finds the line in both slots and recovery refuses the
//! device ("slot or line restored twice").
//!
//! Each scenario holds the first plan in flight (its backend I/O waits on a gate), lets a
//! second request re-admit the line meanwhile, then opens the gate. Every crash point of the
//! cache device's log (unsynced writes kept, and lost) must then recover, and read back what
//! the volume holds.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const LINE: u64 = 4096;
const VOLUME: usize = 64 << 10;

/// Line `i` of the backend holds byte `i + 1`.
fn backend_bytes() -> Vec<u8> {
    let mut b = vec![0u8; VOLUME];
    for (i, l) in b.chunks_mut(LINE as usize).enumerate() {
        l.fill(i as u8 + 1);
    }
    b
}

/// A backend whose ops on line `gated` (reads, or writes) wait while the gate is shut.
struct Gated {
    mem: MemDevice,
    gated: u64,
    writes: bool,
    shut: Mutex<bool>,
    opened: Condvar,
    /// Ops waiting at the gate now.
    waiting: AtomicUsize,
}

impl Gated {
    fn new(bytes: Vec<u8>, gated: u64, writes: bool) -> Self {
        Self {
            mem: MemDevice::from_bytes(bytes),
            gated,
            writes,
            shut: Mutex::new(false),
            opened: Condvar::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    fn pass(&self, offset: u64, len: usize, write: bool) {
        let (a, b) = (self.gated * LINE, (self.gated + 1) * LINE);
        if write != self.writes || offset >= b || offset + len as u64 <= a {
            return;
        }
        let mut shut = self.shut.lock().unwrap();
        self.waiting.fetch_add(1, SeqCst);
        while *shut {
            shut = self.opened.wait(shut).unwrap();
        }
        self.waiting.fetch_sub(1, SeqCst);
    }

    fn set_shut(&self, shut: bool) {
        *self.shut.lock().unwrap() = shut;
        self.opened.notify_all();
    }

    /// Blocks until an op waits at the gate (or `first`, which should reach it, ended).
    fn wait_for_a_waiter(&self, first: &std::thread::JoinHandle<()>) {
        while self.waiting.load(SeqCst) == 0 {
            assert!(
                !first.is_finished(),
                "the first plan never reached the gate"
            );
            std::thread::yield_now();
        }
    }
}

impl BlockDevice for Gated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.pass(offset, buf.len(), false);
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        self.pass(offset, data.len(), true);
        self.mem.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.mem.flush()
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
}

fn config(lines: u64) -> CacheConfig {
    CacheConfig {
        capacity: lines * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 1,
        ..CacheConfig::default()
    }
}

fn engine_config() -> EngineConfig {
    EngineConfig {
        // Fills finish before reads return: the log is whole when a scenario ends.
        answer_reads_early: false,
        ..EngineConfig::default()
    }
}

/// Runs `second` on a thread while `first` (already started) waits at `gate`; opens the gate
/// once `second` returned, or after a while if it waits for `first` (as it must once the
/// ordering holds: what matters is the records' order, checked on the crash images).
fn overlap(gate: &Gated, first: std::thread::JoinHandle<()>, second: impl FnOnce() + Send) {
    gate.wait_for_a_waiter(&first);
    std::thread::scope(|s| {
        let t = s.spawn(second);
        for _ in 0..200 {
            if t.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        gate.set_shut(false);
        t.join().unwrap();
    });
    first.join().unwrap();
}

/// Recovers an engine on the cache device at every point of `log` (unsynced writes kept, and
/// lost) over `backend`; every line must read back as `backend` holds it.
fn check_every_crash_point(log: &CrashLog, cache0: &[u8], backend: &[u8], lines: u64) -> usize {
    let points = log.writes_of(0);
    assert!(points.len() > 10, "scenario too small: {}", points.len());
    let mut checked = 0;
    for &crash_at in points.iter().chain(&[log.len()]) {
        for lose_unsynced in [false, true] {
            let cache = log.image(0, cache0, crash_at, lose_unsynced);
            let engine = Engine::with_devices(
                &config(lines),
                &engine_config(),
                Arc::new(MemDevice::from_bytes(cache)),
                Arc::new(MemDevice::from_bytes(backend.to_vec())),
            )
            .unwrap_or_else(|e| {
                panic!("crash at {crash_at} (lose unsynced: {lose_unsynced}): recovery failed: {e}")
            });
            engine.audit();
            let mut got = vec![0u8; VOLUME];
            engine.read(&mut got, 0).unwrap();
            assert!(
                got == backend,
                "crash at {crash_at} (lose unsynced: {lose_unsynced}): the volume reads otherwise"
            );
            std::mem::forget(engine);
            checked += 1;
        }
    }
    checked
}

/// A read miss evicts clean line 0 from its slot and waits for its own line's backend read
/// (its records not written yet); another read puts line 0 back, in the other slot.
#[test]
fn a_clean_line_evicted_by_a_request_and_read_back_elsewhere_is_in_one_slot_after_a_crash() {
    let lines = 2;
    let cache0 = vec![0u8; Layout::new(lines as u32, LINE).device_len() as usize];
    let log = CrashLog::new();
    // Reads of line 2 wait at the gate.
    let backend = Arc::new(Gated::new(backend_bytes(), 2, false));
    let engine = Engine::with_devices(
        &config(lines),
        &engine_config(),
        Arc::new(CrashDevice::new(0, cache0.clone(), log.clone())),
        backend.clone(),
    )
    .unwrap();
    let mut b = vec![0u8; LINE as usize];
    // Lines 0 and 1 fill both slots, 0 the least recent; their records durable.
    engine.read(&mut b, 0).unwrap();
    engine.read(&mut b, LINE).unwrap();
    engine.flush().unwrap();
    backend.set_shut(true);
    let engine = Arc::new(engine);
    let e = engine.clone();
    // Line 2 evicts line 0 (clean) and waits for its backend read.
    let first = std::thread::spawn(move || {
        let mut b = vec![0u8; LINE as usize];
        e.read(&mut b, 2 * LINE).unwrap();
        assert!(b.iter().all(|&x| x == 3));
    });
    overlap(&backend, first, || {
        // Line 0 back, into line 1's slot (or after line 2's plan, wherever it goes).
        let mut b = vec![0u8; LINE as usize];
        engine.read(&mut b, 0).unwrap();
        assert!(b.iter().all(|&x| x == 1));
    });
    engine.audit();
    let engine = Arc::into_inner(engine).expect("the threads are done");
    std::mem::forget(engine);
    let n = check_every_crash_point(&log, &cache0, &backend_bytes(), lines);
    eprintln!("{n} crash images recovered");
}

/// A partition shrink writes its dirty line back (waiting at the gate) and only then the
/// records of the clean lines it dropped; reads put those lines back meanwhile, in other
/// slots.
#[test]
fn clean_lines_dropped_by_a_shrink_and_read_back_are_in_one_slot_after_a_crash() {
    let lines = 8;
    let cache0 = vec![0u8; Layout::new(lines as u32, LINE).device_len() as usize];
    let log = CrashLog::new();
    // Write-backs of line 0 wait at the gate.
    let backend = Arc::new(Gated::new(backend_bytes(), 0, true));
    let engine = Engine::with_devices(
        &config(lines),
        &engine_config(),
        Arc::new(CrashDevice::new(0, cache0.clone(), log.clone())),
        backend.clone(),
    )
    .unwrap();
    engine.set_volume_partitions(&[(0, lines)]).unwrap();
    // Line 0 dirty (the least recent), lines 1..8 clean: the cache full.
    engine.write(&[1u8; LINE as usize], 0, false).unwrap();
    let mut b = vec![0u8; LINE as usize];
    for i in 1..lines {
        engine.read(&mut b, i * LINE).unwrap();
    }
    engine.flush().unwrap();
    assert_eq!(engine.stats().dirty_lines, 1);
    backend.set_shut(true);
    let engine = Arc::new(engine);
    let e = engine.clone();
    // Halving the partition writes line 0 back (at the gate) and drops clean lines.
    let first = std::thread::spawn(move || e.set_volume_partitions(&[(0, lines / 2)]).unwrap());
    overlap(&backend, first, || {
        // Every line read again: the dropped ones come back, in slots the others leave.
        let mut b = vec![0u8; LINE as usize];
        for i in 1..lines {
            engine.read(&mut b, i * LINE).unwrap();
            assert!(b.iter().all(|&x| x == i as u8 + 1));
        }
    });
    engine.audit();
    let engine = Arc::into_inner(engine).expect("the threads are done");
    std::mem::forget(engine);
    // Line 0 was written back with what the cache held (the same bytes).
    let n = check_every_crash_point(&log, &cache0, &backend_bytes(), lines);
    eprintln!("{n} crash images recovered");
}
