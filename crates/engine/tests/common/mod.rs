//! The power-loss model shared by the crash tests (`crash.rs`, `zero_crash.rs`): a scenario
//! runs on crash-logging devices and records its operations as [`Event`]s; for every write
//! the cache device received, both devices are rebuilt as a crash just before it (unsynced
//! writes kept, and lost), the engine recovers, and every sector must read back a value it may
//! legally hold — as of the last completed FLUSH, a FUA write completed since, or any write
//! issued after that.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashSet;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_engine::device::{CrashDevice, CrashLog};
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

/// Bytes of a sector: the unit a value is tracked in.
pub const SECTOR: usize = 512;
/// Bytes of the volume.
pub const VOLUME: usize = 256 << 10;
/// Bytes of a cache line.
pub const LINE: u64 = 4096;

/// A 12-line write-back cache on 16 shards, no cleaner: evictions do the write-backs.
pub fn config() -> CacheConfig {
    CacheConfig {
        capacity: 12 * LINE,
        line_size: LINE,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 16,
        ..CacheConfig::default()
    }
}

/// The cache device's and the backend's bytes before a scenario: zeroes.
fn zeroed_devices() -> (Vec<u8>, Vec<u8>) {
    let layout = Layout::new((config().capacity / LINE) as u32, LINE);
    (vec![0u8; layout.device_len() as usize], vec![0u8; VOLUME])
}

/// A sector's content names the write that produced it (0 = never written, or zeroed).
pub fn sector_bytes(id: u32) -> [u8; SECTOR] {
    let mut b = [0u8; SECTOR];
    for c in b.chunks_mut(4) {
        c.copy_from_slice(&id.to_le_bytes());
    }
    b
}

/// The write a sector's content names, if it is one whole.
pub fn sector_id(b: &[u8]) -> Option<u32> {
    let id = u32::from_le_bytes(b[0..4].try_into().unwrap());
    b.chunks(4).all(|c| c == id.to_le_bytes()).then_some(id)
}

/// An operation of the scenario, with the crash log's length when it returned.
pub struct Event {
    /// Log length when the operation returned.
    pub done_at: usize,
    /// What it was.
    pub kind: Kind,
}

/// A scenario's operation.
pub enum Kind {
    /// Sectors `first..first + sectors` written with write `id` (0: zeroes).
    Write {
        id: u32,
        first: usize,
        sectors: usize,
        fua: bool,
    },
    /// A FLUSH.
    Flush,
}

/// What each sector may hold after a crash at log position `crash_at`: its durable value (as
/// of the last FLUSH completed before the crash, or a FUA write completed after it) and the
/// writes issued since that it may hold instead.
pub fn legal_values(events: &[Event], crash_at: usize) -> (Vec<u32>, Vec<HashSet<u32>>) {
    let mut stable = vec![0u32; VOLUME / SECTOR];
    let mut maybe: Vec<HashSet<u32>> = vec![HashSet::new(); VOLUME / SECTOR];
    // The newest write since the last completed FLUSH, per sector: a FUA write that covers
    // only part of an earlier one leaves the rest of that one pending.
    let mut pending: Vec<Option<u32>> = vec![None; VOLUME / SECTOR];
    for e in events {
        let completed = e.done_at <= crash_at;
        match e.kind {
            Kind::Flush if completed => {
                for (s, p) in pending.iter_mut().enumerate() {
                    if let Some(id) = p.take() {
                        stable[s] = id;
                    }
                }
                maybe.iter_mut().for_each(|m| m.clear());
            }
            Kind::Flush => {}
            Kind::Write {
                id,
                first,
                sectors,
                fua,
            } => {
                for s in first..first + sectors {
                    if completed && fua {
                        stable[s] = id;
                        maybe[s].clear();
                        pending[s] = None;
                    } else {
                        pending[s] = Some(id);
                        maybe[s].insert(id);
                    }
                }
            }
        }
    }
    (stable, maybe)
}

/// Rebuilds both devices at every cache-device write of `log` (device 0 the cache, 1 the
/// backend, both zeroed at start), with unsynced writes kept and lost; recovers an engine of
/// [`config`] on each, and checks every sector of a read and of the backend
/// after a full flush against [`legal_values`]. Returns the images checked.
pub fn check_every_crash_point(log: &CrashLog, events: &[Event]) -> usize {
    let cfg = &config();
    let (cache0, backend0) = zeroed_devices();
    let (cache0, backend0) = (&cache0[..], &backend0[..]);
    let crash_points = log.writes_of(0);
    assert!(
        crash_points.len() > 100,
        "scenario too small: {}",
        crash_points.len()
    );
    let mut checked = 0;
    for &crash_at in &crash_points {
        let (stable, maybe) = legal_values(events, crash_at);
        for lose_unsynced in [false, true] {
            let cache = log.image(0, cache0, crash_at, lose_unsynced);
            let backend = log.image(1, backend0, crash_at, lose_unsynced);
            let backend_dev = Arc::new(MemDevice::from_bytes(backend));
            let engine = Engine::with_devices(
                cfg,
                &EngineConfig::default(),
                Arc::new(MemDevice::from_bytes(cache)),
                backend_dev.clone(),
            )
            .unwrap_or_else(|e| panic!("crash at {crash_at}: recovery failed: {e}"));
            let mut vol = vec![0u8; VOLUME];
            engine.read(&mut vol, 0).unwrap();
            engine.audit();
            let check = |img: &[u8], what: &str| {
                for s in 0..VOLUME / SECTOR {
                    let got = sector_id(&img[s * SECTOR..(s + 1) * SECTOR]);
                    let ok = got.is_some_and(|g| g == stable[s] || maybe[s].contains(&g));
                    assert!(
                        ok,
                        "crash at event {crash_at} (lose unsynced: {lose_unsynced}), {what}: sector {s} holds {got:?}, durable {}, possible {:?}",
                        stable[s], maybe[s]
                    );
                }
            };
            check(&vol, "read after recovery");
            // Recovered dirty lines drain to the backend, which then holds the same.
            engine.flush_all().unwrap();
            engine.shutdown().unwrap();
            check(&backend_dev.snapshot(), "backend after detach");
            checked += 1;
        }
    }
    eprintln!(
        "{checked} crash images recovered and checked over {} cache-device writes",
        crash_points.len()
    );
    checked
}

/// A scenario on crash-logging devices (device 0 the cache, 1 the backend, both zeroed at
/// start) over [`config`], recording what it does as [`Event`]s for
/// [`check_every_crash_point`].
pub struct Scenario {
    log: Arc<CrashLog>,
    /// The engine under test.
    pub engine: Engine,
    /// What the scenario did, in order.
    pub events: Vec<Event>,
    /// The scenario's random choices (seed 7).
    pub rng: Xoshiro256PlusPlus,
}

impl Scenario {
    /// The engine over the two devices, the backend's crash device wrapped by `backend`
    /// (one that zeroes fast, say).
    pub fn new(backend: impl FnOnce(CrashDevice) -> Arc<dyn BlockDevice>) -> Self {
        let log = CrashLog::new();
        let (cache0, backend0) = zeroed_devices();
        let engine = Engine::with_devices(
            &config(),
            &EngineConfig::default(),
            Arc::new(CrashDevice::new(0, cache0, log.clone())),
            backend(CrashDevice::new(1, backend0, log.clone())),
        )
        .unwrap();
        Scenario {
            log,
            engine,
            events: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(7),
        }
    }

    /// A line to write: half the time one of 6 hot lines (rewrites in place), else one of 60
    /// (evictions, write-backs, reuse).
    pub fn pick_line(&mut self) -> usize {
        if self.rng.gen_bool(0.5) {
            self.rng.gen_range(0..6)
        } else {
            self.rng.gen_range(0..60)
        }
    }

    /// A client FLUSH.
    pub fn flush(&mut self) {
        self.engine.flush().unwrap();
        self.done(Kind::Flush);
    }

    /// Write `id` over sectors `first..first + sectors`.
    pub fn write(&mut self, id: u32, first: usize, sectors: usize, fua: bool) {
        let mut data = Vec::new();
        for _ in 0..sectors {
            data.extend_from_slice(&sector_bytes(id));
        }
        self.engine
            .write(&data, (first * SECTOR) as u64, fua)
            .unwrap();
        self.done(Kind::Write {
            id,
            first,
            sectors,
            fua,
        });
    }

    /// WRITE_ZEROES over `lines` whole lines from line `line`.
    pub fn zero(&mut self, line: usize, lines: usize, fua: bool) {
        let first = line * (LINE as usize / SECTOR);
        self.engine
            .write_zeroes((first * SECTOR) as u64, lines as u64 * LINE, fua)
            .unwrap();
        self.done(Kind::Write {
            id: 0,
            first,
            sectors: lines * (LINE as usize / SECTOR),
            fua,
        });
    }

    fn done(&mut self, kind: Kind) {
        self.events.push(Event {
            done_at: self.log.len(),
            kind,
        });
    }

    /// Both devices (cache, backend) as a crash now leaves them, with unsynced writes kept or
    /// lost, and the log position of that crash (for [`legal_values`]).
    pub fn images_now(&self, lose_unsynced: bool) -> (Vec<u8>, Vec<u8>, usize) {
        let (cache0, backend0) = zeroed_devices();
        let at = self.log.len();
        (
            self.log.image(0, &cache0, at, lose_unsynced),
            self.log.image(1, &backend0, at, lose_unsynced),
            at,
        )
    }

    /// Ends the scenario with one read of the whole volume over the 12-line cache (one plan
    /// that evicts dirty lines, fills their slots with other lines, evicts those and reads
    /// lines back into slots they held before, crash points all along it; it changes no
    /// sector), drops the engine without a shutdown (every crash checked happens before),
    /// and checks every crash point. Returns the images checked.
    pub fn check(self) -> usize {
        let mut vol = vec![0u8; VOLUME];
        self.engine.read(&mut vol, 0).unwrap();
        std::mem::forget(self.engine);
        check_every_crash_point(&self.log, &self.events)
    }
}
