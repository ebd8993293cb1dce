//! Failed plans leave no sub-block valid or dirty whose bytes are undefined.
//!
//! A write smaller than a sub-block needs the rest of its sub-block valid first: read from
//! the backend (an edge fill) or already in the cache. When the line is being filled by an
//! earlier plan that then fails, the write is planned as a hit on bytes that never arrive; it
//! fails too (it waited for the fill), and nothing it or the fill marked may survive as valid
//! data: a read would return the slot's old bytes, a write-back would copy them to the backend.
//! An acknowledged write is never lost; the failed (unacknowledged) write may be.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::{Engine, EngineConfig, Lookup};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

/// What the backend holds before any write: every byte this value.
const OLD: u8 = 0x5a;
/// What the tests write.
const NEW: u8 = 0x99;
const LINE: u64 = 4096;
/// A sub-block of a 4 KiB line: 1/64 of it, at least 512 bytes.
const SUB: u64 = 512;

/// A gate hooks wait at until a test opens it.
#[derive(Default)]
struct Gate(Mutex<bool>, Condvar);

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

/// A backend whose first read waits at a gate and then fails (`fail_first`), or whose reads
/// all fail while `failing` is set; writes always work.
struct Backend {
    bytes: MemDevice,
    fail_first: bool,
    gate: Gate,
    reads: AtomicU32,
    failing: AtomicBool,
}

impl Backend {
    fn new(fail_first: bool) -> Arc<Self> {
        Arc::new(Self {
            bytes: MemDevice::from_bytes(vec![OLD; 1 << 20]),
            fail_first,
            gate: Gate::default(),
            reads: 0.into(),
            failing: false.into(),
        })
    }
}

impl BlockDevice for Backend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let n = self.reads.fetch_add(1, SeqCst);
        if self.fail_first && n == 0 {
            self.gate.wait();
            return Err(std::io::Error::other("injected: the fill's read fails"));
        }
        if self.failing.load(SeqCst) {
            return Err(std::io::Error::other("injected: backend reads fail"));
        }
        self.bytes.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        self.bytes.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.bytes.size()
    }
}

/// An engine over `backend` and a fresh cache device.
fn engine(backend: Arc<Backend>, lookup: Lookup, capacity: u64) -> Engine {
    // The cache device starts zeroed: a sub-block never filled reads as zeroes, not OLD.
    let cache_dev = Arc::new(MemDevice::new(4 << 20));
    engine_on(cache_dev, backend, lookup, capacity)
}

/// An engine over `backend` and `cache_dev`, recovering what the device holds.
fn engine_on(
    cache_dev: Arc<MemDevice>,
    backend: Arc<Backend>,
    lookup: Lookup,
    capacity: u64,
) -> Engine {
    let cfg = CacheConfig {
        capacity,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        // No background cleaning: the tests decide when lines are written back.
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    };
    let ecfg = EngineConfig {
        lookup,
        ..EngineConfig::default()
    };
    Engine::with_devices(&cfg, &ecfg, cache_dev, backend).unwrap()
}

/// Waits (bounded) until `cond` holds.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(std::time::Instant::now() < give_up, "never: {what}");
        std::thread::yield_now();
    }
}

/// Checks the bytes `got` of `[at, at + got.len())` against what may be there after a failed
/// write of `[w, w + wlen)` over a backend of OLD: OLD outside the write, OLD or NEW inside.
fn check_bytes(what: &str, got: &[u8], at: u64, w: u64, wlen: u64) {
    for (i, &b) in got.iter().enumerate() {
        let addr = at + i as u64;
        let inside = (w..w + wlen).contains(&addr);
        assert!(
            b == OLD || (inside && b == NEW),
            "{what}: byte {addr} is {b:#x} (the failed write covers {w}+{wlen})"
        );
    }
}

/// Checks the bytes `got` of `[at, at + got.len())` after an acknowledged write of
/// `[w, w + wlen)` over a backend of OLD: NEW inside, OLD outside.
fn check_written(what: &str, got: &[u8], at: u64, w: u64, wlen: u64) {
    for (i, &b) in got.iter().enumerate() {
        let addr = at + i as u64;
        let want = if (w..w + wlen).contains(&addr) {
            NEW
        } else {
            OLD
        };
        assert_eq!(b, want, "{what}: byte {addr} (the write covers {w}+{wlen})");
    }
}

/// Reads the line at `at` through the engine, writes everything back, and checks both the
/// read and the backend's copy against [`check_bytes`].
fn check_line_after(engine: &Engine, backend: &Backend, at: u64, w: u64, wlen: u64) {
    let mut b = vec![0u8; LINE as usize];
    engine.read(&mut b, at).unwrap();
    check_bytes("read back", &b, at, w, wlen);
    engine.flush_all().unwrap();
    let img = backend.bytes.snapshot();
    check_bytes(
        "on the backend after a detach",
        &img[at as usize..(at + LINE) as usize],
        at,
        w,
        wlen,
    );
    engine.audit();
    assert!(engine.stats().halted.is_none());
}

/// The same failed partial write as [`a_partial_write_whose_edge_fill_fails_leaves_no_undefined_bytes`]
/// after a restart: the records on the cache device name no undefined sub-block either (the
/// failed plans wrote none of theirs; a line forgotten after a failure is not recovered).
#[test]
fn after_a_failed_partial_write_a_restart_recovers_no_undefined_bytes() {
    for lookup in [Lookup::HtFg, Lookup::HtCg] {
        let backend = Backend::new(false);
        let cache_dev = Arc::new(MemDevice::new(4 << 20));
        let e = engine_on(cache_dev.clone(), backend.clone(), lookup, 512 << 10);
        // An acknowledged write of sub-block 0 makes the line resident (only that sub-block
        // valid, and dirty); a read of sub-blocks 1..=3 fills them, clean.
        let (line, w, wlen) = (4 * LINE, 4 * LINE + 6 * SUB + 7, 100);
        e.write(&[NEW; 512], line, false).unwrap();
        e.read(&mut vec![0u8; 3 * SUB as usize], line + SUB)
            .unwrap();
        // A write into sub-block 6 needs its edges from the backend, whose reads fail now.
        // What the core forgets after it (the clean sub-blocks) must not be written as a
        // record that still names sub-block 6 (valid and dirty in the core for a moment).
        backend.failing.store(true, SeqCst);
        assert!(e.write(&[NEW; 100], w, false).is_err());
        backend.failing.store(false, SeqCst);
        e.flush().unwrap();
        e.shutdown().unwrap();
        drop(e);
        let e = engine_on(cache_dev, backend.clone(), lookup, 512 << 10);
        assert_eq!(e.stats().recovery.dirty_lines, 1, "{lookup:?}");
        let mut b = vec![0u8; LINE as usize];
        e.read(&mut b, line).unwrap();
        assert!(
            b[..512].iter().all(|&x| x == NEW),
            "{lookup:?}: acknowledged"
        );
        check_bytes("after a restart", &b[512..], line + 512, w, wlen);
        e.audit();
    }
}

/// The known corner case: a 100-byte write into sub-block 0 of a line whose fill (a read
/// miss) is under way is planned as a write hit (the line counts as valid once the fill is
/// planned) and writes only its 100 bytes; the fill fails, so the other 412 bytes of the
/// sub-block were never read from the backend. The write fails, and sub-block 0 must not stay
/// valid and dirty with the slot's old bytes around the write.
#[test]
fn a_sub_block_write_racing_a_failing_fill_leaves_no_undefined_bytes() {
    for lookup in [Lookup::HtFg, Lookup::HtCg, Lookup::Lt] {
        let backend = Backend::new(true);
        let engine = engine(backend.clone(), lookup, 512 << 10);
        let (line, w, wlen) = (2 * LINE, 2 * LINE + 50, 100);
        std::thread::scope(|s| {
            let miss = s.spawn(|| engine.read(&mut vec![0u8; LINE as usize], line));
            wait_for("the fill's backend read", || backend.reads.load(SeqCst) > 0);
            let write = s.spawn(|| engine.write(&[NEW; 100], w, false));
            if lookup == Lookup::Lt {
                // Requests run one at a time: the write is planned after the failed fill,
                // as a miss whose edge fill reads the backend.
                backend.gate.open();
                assert!(miss.join().unwrap().is_err());
                write.join().unwrap().unwrap();
                return;
            }
            // The write is planned (it dirtied the line) and waits for the fill.
            wait_for("the write's plan", || engine.stats().dirty_lines == 1);
            backend.gate.open();
            assert!(miss.join().unwrap().is_err(), "{lookup:?}: the fill failed");
            let e = write.join().unwrap().unwrap_err();
            assert!(e.to_string().contains("earlier request"), "{lookup:?}: {e}");
        });
        check_line_after(&engine, &backend, line, w, wlen);
        if lookup == Lookup::Lt {
            // The write succeeded: its bytes are there.
            let mut b = vec![0u8; 100];
            engine.read(&mut b, w).unwrap();
            assert_eq!(b, vec![NEW; 100]);
        }
    }
}

/// The same race with a flush job planned between the write and the fill's failure: the job
/// would write sub-block 0 back from the slot, undefined bytes and all, unless it fails too.
#[test]
fn a_flush_job_behind_a_failing_fill_writes_no_undefined_bytes_back() {
    for lookup in [Lookup::HtFg, Lookup::HtCg] {
        let backend = Backend::new(true);
        let engine = engine(backend.clone(), lookup, 512 << 10);
        let (line, w, wlen) = (5 * LINE, 5 * LINE + 300, 64);
        std::thread::scope(|s| {
            let miss = s.spawn(|| engine.read(&mut vec![0u8; LINE as usize], line));
            wait_for("the fill's backend read", || backend.reads.load(SeqCst) > 0);
            let write = s.spawn(|| engine.write(&[NEW; 64], w, false));
            wait_for("the write's plan", || engine.stats().dirty_lines == 1);
            // A detach takes the dirty line into a flush job, which waits behind the write.
            let detach = s.spawn(|| engine.flush_all());
            wait_for("the flush job", || engine.stats().cache.clean_jobs == 1);
            backend.gate.open();
            assert!(miss.join().unwrap().is_err());
            assert!(write.join().unwrap().is_err());
            // Whether that detach reports the failure is not the point; what it wrote is.
            let _ = detach.join().unwrap();
        });
        let img = backend.bytes.snapshot();
        check_bytes(
            "on the backend after the racing detach",
            &img[line as usize..(line + LINE) as usize],
            line,
            w,
            wlen,
        );
        check_line_after(&engine, &backend, line, w, wlen);
    }
}

/// No race: a 100-byte write to a line not in the cache needs the rest of its sub-block from
/// the backend, and that read fails. The sub-block must not stay dirty with the slot's bytes.
#[test]
fn a_partial_write_whose_edge_fill_fails_leaves_no_undefined_bytes() {
    for lookup in [Lookup::HtFg, Lookup::HtCg, Lookup::Lt] {
        let backend = Backend::new(false);
        let engine = engine(backend.clone(), lookup, 512 << 10);
        let (line, w, wlen) = (3 * LINE, 3 * LINE + SUB + 10, 100);
        backend.failing.store(true, SeqCst);
        assert!(engine.write(&[NEW; 100], w, false).is_err());
        backend.failing.store(false, SeqCst);
        check_line_after(&engine, &backend, line, w, wlen);
        // An acknowledged partial write after that keeps its bytes and the rest of the line.
        engine.write(&[NEW; 100], w, false).unwrap();
        let mut b = vec![0u8; LINE as usize];
        engine.read(&mut b, line).unwrap();
        let at = (w - line) as usize;
        assert!(b[at..at + 100].iter().all(|&x| x == NEW), "{lookup:?}");
        assert!(b[..at].iter().chain(&b[at + 100..]).all(|&x| x == OLD));
    }
}

/// A whole-line write that evicts (clean) a line whose fill then fails: the write is planned
/// onto that slot, waits for the fill, and fails. The new line must not stay resident with the
/// evicted line's bytes marked dirty under its name.
#[test]
fn a_write_into_the_slot_of_a_failing_fill_leaves_no_foreign_bytes() {
    let backend = Backend::new(true);
    // One line of cache, one lock: the write's line takes the fill's slot.
    let engine = engine(backend.clone(), Lookup::HtCg, LINE);
    let (a, b) = (LINE, 7 * LINE);
    std::thread::scope(|s| {
        let miss = s.spawn(|| engine.read(&mut vec![0u8; LINE as usize], a));
        wait_for("the fill's backend read", || backend.reads.load(SeqCst) > 0);
        let write = s.spawn(|| engine.write(&[NEW; LINE as usize], b, false));
        wait_for("the write's plan", || engine.stats().dirty_lines == 1);
        backend.gate.open();
        assert!(miss.join().unwrap().is_err());
        assert!(write.join().unwrap().is_err());
    });
    check_line_after(&engine, &backend, b, b, LINE);
    check_line_after(&engine, &backend, a, a, 0);
}

/// A cache device whose first write of slot data (not of the slot table) waits at a gate and
/// then fails.
struct CacheDevice {
    bytes: MemDevice,
    data_offset: u64,
    data_writes: AtomicU32,
    gate: Gate,
}

impl BlockDevice for CacheDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.bytes.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        if offset >= self.data_offset && self.data_writes.fetch_add(1, SeqCst) == 0 {
            self.gate.wait();
            return Err(std::io::Error::other(
                "injected: the fill's cache write fails",
            ));
        }
        self.bytes.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.bytes.size()
    }
}

/// A read miss is answered as soon as the backend's bytes are in (its fill of the cache goes
/// on in the background); a 100-byte write to the line, planned as a hit on that fill, waits
/// for it; the fill's cache write fails. The read's answer stands; nothing of the line is
/// left valid over bytes the fill never wrote, and the write, failed by a cache-device error,
/// is served again past the cache (docs/design.md §11): it succeeds, and its bytes are read
/// back and reach the backend.
#[test]
fn a_sub_block_write_behind_a_failing_background_fill_leaves_no_undefined_bytes() {
    for lookup in [Lookup::HtFg, Lookup::HtCg] {
        let capacity = 512 << 10;
        let layout = tiercache_engine::slot_table::Layout::new((capacity / LINE) as u32, LINE);
        let cache_dev = Arc::new(CacheDevice {
            bytes: MemDevice::new(4 << 20),
            data_offset: layout.data_offset,
            data_writes: 0.into(),
            gate: Gate::default(),
        });
        let backend = Backend::new(false);
        let cfg = CacheConfig {
            capacity,
            line_size: LINE,
            write_policy: WritePolicy::WriteBack,
            promotion: PromotionConfig::Always,
            cleaning: CleaningConfig::None,
            ..CacheConfig::default()
        };
        let ecfg = EngineConfig {
            lookup,
            ..EngineConfig::default()
        };
        let engine = Engine::with_devices(&cfg, &ecfg, cache_dev.clone(), backend.clone()).unwrap();
        let (line, w, wlen) = (6 * LINE, 6 * LINE + 50, 100);
        std::thread::scope(|s| {
            let mut b = vec![0u8; LINE as usize];
            engine.read(&mut b, line).unwrap();
            assert!(b.iter().all(|&x| x == OLD), "{lookup:?}: the answered read");
            wait_for("the background fill", || {
                cache_dev.data_writes.load(SeqCst) > 0
            });
            let write = s.spawn(|| engine.write(&[NEW; 100], w, false));
            wait_for("the write's plan", || engine.stats().dirty_lines == 1);
            cache_dev.gate.open();
            write.join().unwrap().unwrap();
        });
        wait_for("the background fill's end", || {
            engine.stats().errors == 1 && engine.stats().in_flight == 0
        });
        assert_eq!(engine.health().served_past_cache, 1, "{lookup:?}");
        let mut b = vec![0u8; LINE as usize];
        engine.read(&mut b, line).unwrap();
        check_written("read back", &b, line, w, wlen);
        engine.flush_all().unwrap();
        let img = backend.bytes.snapshot();
        check_written(
            "on the backend after a detach",
            &img[line as usize..(line + LINE) as usize],
            line,
            w,
            wlen,
        );
        engine.audit();
    }
}
