//! Power loss while a flush job fails and a write waits for it: the job's completion must not
//! write slot records describing the waiting write's decision before that write's data lands.
//!
//! The scenario: line Z's bytes are left in the only slot, line X is written there in part
//! (sub-blocks 0 and 1, dirty), a flush job writing X back stalls on the backend, a write of
//! X's sub-block 5 is decided meanwhile (it waits for the job, which reads the slot), then the
//! job fails. At every point of the resulting log the devices are rebuilt as a crash there
//! leaves them (every write before it landed), the engine recovers, and every sector of X must
//! read a value it may hold: never Z's stale bytes, which a record marking sub-block 5 valid
//! before its data landed would expose; and once the client's flush returned, the written
//! values only (the failed job must not leave records that forget a completed write).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig, Lookup};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

const LINE: u64 = 4096;
const SECTOR: usize = 512;
const VOLUME: usize = 64 << 10;

/// A logged backend whose writes, while `gated`, announce themselves in `entered`, wait for
/// `released`, and fail.
struct GatedBackend {
    dev: CrashDevice,
    gated: AtomicBool,
    entered: AtomicBool,
    released: AtomicBool,
}

impl BlockDevice for GatedBackend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> std::io::Result<()> {
        if self.gated.load(SeqCst) {
            self.entered.store(true, SeqCst);
            while !self.released.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            return Err(std::io::Error::other("injected: backend write failed"));
        }
        self.dev.write_at(data, offset, fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.dev.flush()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
}

fn config() -> CacheConfig {
    CacheConfig {
        // One slot: X takes the slot Z leaves.
        capacity: LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        ..CacheConfig::default()
    }
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_failed_flush_job_records_no_undone_write() {
    let cfg = config();
    let ecfg = EngineConfig {
        lookup: Lookup::HtCg,
        ..EngineConfig::default()
    };
    let layout = Layout::new(1, LINE);
    let cache0 = vec![0u8; layout.device_len() as usize];
    let backend0 = vec![0u8; VOLUME];
    let log = CrashLog::new();
    let durable_from;
    {
        let cache = Arc::new(CrashDevice::new(0, cache0.clone(), log.clone()));
        let backend = Arc::new(GatedBackend {
            dev: CrashDevice::new(1, backend0.clone(), log.clone()),
            gated: false.into(),
            entered: false.into(),
            released: false.into(),
        });
        let engine = Arc::new(Engine::with_devices(&cfg, &ecfg, cache, backend.clone()).unwrap());
        // Z (line 7) in the slot, then written back: its bytes stay in the slot.
        engine
            .write(&[0x77; LINE as usize], 7 * LINE, false)
            .unwrap();
        engine.flush_all().unwrap();
        // X (line 0), sub-blocks 0 and 1: Z, clean, leaves the slot; sub-blocks 2.. keep Z's.
        engine.write(&[0xAA; 2 * SECTOR], 0, false).unwrap();
        backend.gated.store(true, SeqCst);
        let flusher = {
            let e = engine.clone();
            std::thread::spawn(move || e.flush_all())
        };
        wait_until("the job's backend write", || backend.entered.load(SeqCst));
        let decided_before = engine.stats().cache.write_line_accesses;
        let writer = {
            let e = engine.clone();
            std::thread::spawn(move || e.write(&[0xBB; SECTOR], 5 * SECTOR as u64, false))
        };
        // Decided (and registered behind the job) once its core counted it.
        wait_until("the second write's decision", || {
            engine.stats().cache.write_line_accesses > decided_before
        });
        backend.released.store(true, SeqCst);
        assert!(flusher.join().unwrap().is_err(), "the job failed");
        backend.gated.store(false, SeqCst);
        writer.join().unwrap().unwrap();
        // The client's flush: every completed write must now survive a crash, the waiting
        // write's sub-block 5 included, whatever the failed job's records said.
        engine.flush().unwrap();
        durable_from = log.len();
        std::mem::forget(engine);
    }
    let mut checked = 0;
    for crash_at in 0..=log.len() {
        let cache = log.image(0, &cache0, crash_at, false);
        let backend = log.image(1, &backend0, crash_at, false);
        let engine = match Engine::with_devices(
            &cfg,
            &ecfg,
            Arc::new(MemDevice::from_bytes(cache)),
            Arc::new(MemDevice::from_bytes(backend)),
        ) {
            Ok(e) => e,
            // Before the table was first written whole there is nothing to recover.
            Err(_) if crash_at < 3 => continue,
            Err(e) => panic!("crash at {crash_at}: recovery failed: {e}"),
        };
        let mut x = vec![0u8; LINE as usize];
        engine.read(&mut x, 0).unwrap();
        for (s, sector) in x.chunks(SECTOR).enumerate() {
            let legal: &[u8] = match (s, crash_at >= durable_from) {
                (0 | 1, false) => &[0, 0xAA],
                (0 | 1, true) => &[0xAA],
                (5, false) => &[0, 0xBB],
                (5, true) => &[0xBB],
                _ => &[0],
            };
            assert!(
                sector.iter().all(|b| *b == sector[0]) && legal.contains(&sector[0]),
                "crash at {crash_at}: X's sector {s} reads {:#x} (legal: {legal:x?})",
                sector[0]
            );
        }
        checked += 1;
    }
    assert!(checked > 5, "{checked} crash points");
}
