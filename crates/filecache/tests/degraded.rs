//! The mount's degraded mode under injected cache-device faults (docs/design.md §11): random
//! writes, reads, truncates and fsyncs on a few files against a shadow copy, with EIO or ENOSPC
//! on the block file or the journal, for each write policy. Every read that succeeds equals
//! the shadow; a client sees an error only where the cache held the only copy of data it could
//! not read (write-back with failing block-file reads); and no acknowledged write is lost:
//! after the run, both a flush and a `kill -9` followed by a restart leave the store equal to
//! the shadow. `cargo test -p tiercache-filecache --test degraded -- --nocapture` prints the
//! table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use tiercache_filecache::faults::{CacheFaults, ErrorKind, FaultRule, Op, Target};
use tiercache_filecache::store::StoreLatency;
use tiercache_filecache::{MountConfig, State, Variant};

const FILES: usize = 3;
const BLOCK: usize = 512;

fn config(dir: &Path, variant: Variant, threshold: f64, capacity: u32) -> MountConfig {
    MountConfig {
        store: dir.join("store"),
        cache_dir: dir.join("cache"),
        capacity_blocks: capacity,
        block_size: BLOCK as u32,
        variant,
        latency: StoreLatency::default(),
        direct_io: false,
        kernel_cache: true,
        cleaning: tiercache_policy::CleaningConfig::None,
        on_error: tiercache_filecache::state::OnError {
            threshold,
            ..Default::default()
        },
    }
}

/// A scratch directory, in memory where the machine has /dev/shm (the sweep fsyncs often).
fn scratch() -> tempfile::TempDir {
    match tempfile::tempdir_in("/dev/shm") {
        Ok(d) => d,
        Err(_) => tempfile::tempdir().unwrap(),
    }
}

/// A fault kind of the sweep and its rule.
fn fault(name: &str, capacity: u32) -> FaultRule {
    let rule = |target, op, kind| FaultRule {
        after: 40,
        probability: 0.15,
        ..FaultRule::always(target, Some(op), kind)
    };
    match name {
        "blocks read EIO" => rule(Target::Blocks, Op::Read, ErrorKind::Eio),
        "blocks write EIO" => rule(Target::Blocks, Op::Write, ErrorKind::Eio),
        // The file system fills: every write past the first half of the block file fails.
        "blocks write ENOSPC" => FaultRule {
            start: (capacity as usize / 2 * BLOCK) as u64,
            after: 0,
            ..FaultRule::always(Target::Blocks, Some(Op::Write), ErrorKind::Enospc)
        },
        "blocks sync EIO" => FaultRule {
            after: 2,
            count: Some(1),
            ..FaultRule::always(Target::Blocks, Some(Op::Sync), ErrorKind::Eio)
        },
        "journal write EIO" => rule(Target::Journal, Op::Write, ErrorKind::Eio),
        "journal write ENOSPC" => FaultRule {
            after: 60,
            ..FaultRule::always(Target::Journal, Some(Op::Write), ErrorKind::Enospc)
        },
        // A slow device: any op of the block file may stall 300 µs, then run (latency spikes
        // are no errors: nothing degrades, no client sees an error).
        "blocks latency" => FaultRule {
            after: 40,
            probability: 0.15,
            ..FaultRule::latency(Target::Blocks, None, std::time::Duration::from_micros(300))
        },
        _ => unreachable!("{name}"),
    }
}

const FAULTS: [&str; 7] = [
    "blocks read EIO",
    "blocks write EIO",
    "blocks write ENOSPC",
    "blocks sync EIO",
    "journal write EIO",
    "journal write ENOSPC",
    "blocks latency",
];

/// What one cell saw.
struct Cell {
    threshold: f64,
    injected: u64,
    client_errors: u64,
    degraded: bool,
    to_degraded_ms: Option<f64>,
    lost_after_flush: usize,
    lost_after_crash: usize,
}

fn open(dir: &Path, variant: Variant, threshold: f64, capacity: u32) -> (State, Vec<u64>) {
    // The cache directory's lock may still be held an instant by a child another test forked
    // (a FUSE mount's helper, between its fork and exec): wait for it.
    let mut tries = 0;
    let mut st = loop {
        match State::open(config(dir, variant, threshold, capacity)) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    let ids = (0..FILES)
        .map(|f| {
            let rel = PathBuf::from(format!("f{f}"));
            let md = std::fs::metadata(dir.join("store").join(&rel)).unwrap();
            st.remember(rel, &md).unwrap()
        })
        .collect();
    (st, ids)
}

/// What a file must hold: its bytes, the size the mount shows, and the bytes a failed write
/// left unspecified (a write that fails may have written part of its data, as a disk's does).
#[derive(Default, Clone)]
struct Shadow {
    data: Vec<u8>,
    unknown: Vec<bool>,
    size: usize,
}

impl Shadow {
    fn cover(&mut self, end: usize) {
        if self.data.len() < end {
            self.data.resize(end, 0);
            self.unknown.resize(end, false);
        }
    }

    fn written(&mut self, off: usize, data: &[u8]) {
        let end = off + data.len();
        self.cover(end);
        self.data[off..end].copy_from_slice(data);
        self.unknown[off..end].fill(false);
        self.size = self.size.max(end);
    }

    fn failed(&mut self, off: usize, len: usize) {
        self.cover(off + len);
        self.unknown[off..off + len].fill(true);
    }

    fn truncated(&mut self, size: usize) {
        self.data.resize(size, 0);
        self.unknown.resize(size, false);
        self.size = size;
    }

    /// The first byte of `got` (read at `off`, or the whole store file when `off` is None)
    /// that differs from what is known, or a length that cannot be.
    fn check(&self, off: Option<usize>, got: &[u8]) -> Result<(), String> {
        let start = off.unwrap_or(0);
        let want_len = match off {
            Some(o) => self.size.saturating_sub(o),
            None => self.size,
        };
        // A read's length is the caller's to check; a store file may have grown past the size
        // the mount shows by a failed write.
        let len_ok = off.is_some()
            || got.len() == want_len
            || (got.len() > want_len
                && got.len() <= self.data.len()
                && self.unknown[want_len..got.len()].iter().all(|&u| u));
        if !len_ok {
            return Err(format!("{} bytes where {want_len} are due", got.len()));
        }
        for (i, &g) in got.iter().enumerate().take(want_len) {
            let at = start + i;
            if !self.unknown[at] && g != self.data[at] {
                return Err(format!("byte {at}: {g}, not {}", self.data[at]));
            }
        }
        Ok(())
    }
}

/// Files of the store that differ from the shadow.
fn differing(dir: &Path, shadow: &[Shadow]) -> usize {
    (0..FILES)
        .filter(|&f| {
            let got = std::fs::read(dir.join("store").join(format!("f{f}"))).unwrap();
            match shadow[f].check(None, &got) {
                Ok(()) => false,
                Err(e) => {
                    eprintln!("f{f} in the store: {e}");
                    true
                }
            }
        })
        .count()
}

/// Runs 400 random operations with `fault` injected, then ends by a flush (`crash` false) or
/// by dropping the mount's state unflushed and reopening it (`crash` true, recovery).
fn run(variant: Variant, fault_name: &str, seed: u64, crash: bool) -> Cell {
    // Even seeds never degrade on the error count: every error is repaired and its request
    // served past the cache, the mount staying in service. Seeds past 6 run a cache of 4
    // blocks, which one request can overflow (it evicts its own blocks).
    let threshold = if seed % 2 == 1 { 8.0 } else { 1e9 };
    let capacity = if seed > 6 { 4 } else { 12 };
    let dir = scratch();
    for d in ["store", "cache"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    for f in 0..FILES {
        std::fs::write(dir.path().join("store").join(format!("f{f}")), b"").unwrap();
    }
    let (mut st, ids) = open(dir.path(), variant, threshold, capacity);
    let faults = Arc::new(CacheFaults::new(seed));
    faults.add(fault(fault_name, capacity));
    st.set_cache_faults(Some(faults.clone()));
    let mut shadow = vec![Shadow::default(); FILES];
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut client_errors = 0;
    let only_copy_may_fail = variant.is_write_back() && fault_name == "blocks read EIO";
    let cell = format!("{variant} {fault_name} seed {seed}");
    for step in 0..400 {
        let f = rng.gen_range(0..FILES);
        let id = ids[f];
        let model = &mut shadow[f];
        match rng.gen_range(0..10) {
            0..=4 => {
                let off = rng.gen_range(0..6000usize);
                let len = rng.gen_range(1..1500usize);
                let b: u8 = rng.gen();
                let data: Vec<u8> = (0..len).map(|i| b.wrapping_add(i as u8)).collect();
                match st.write(id, off as u64, &data) {
                    Ok(()) => model.written(off, &data),
                    Err(e) => {
                        assert!(only_copy_may_fail, "{cell} step {step}: write failed: {e}");
                        model.failed(off, len);
                        client_errors += 1;
                    }
                }
            }
            5 => {
                let len = rng.gen_range(0..6500usize);
                st.truncate(id, len as u64)
                    .unwrap_or_else(|e| panic!("{cell} step {step}: truncate: {e}"));
                model.truncated(len);
            }
            6 if step % 7 == 0 => {
                // A write-back of everything (`tiercache flush`, unmount): dirty blocks it cannot
                // read stay dirty, it does not fail.
                st.flush_all()
                    .unwrap_or_else(|e| panic!("{cell} step {step}: flush: {e}"));
            }
            6 => {
                if let Err(e) = st.fsync(id) {
                    assert!(only_copy_may_fail, "{cell} step {step}: fsync failed: {e}");
                    client_errors += 1;
                }
            }
            _ => {
                let off = rng.gen_range(0..7000usize);
                let len = rng.gen_range(1..2000u32);
                match st.read(id, off as u64, len) {
                    Ok(got) => {
                        let want = model.size.saturating_sub(off).min(len as usize);
                        assert_eq!(got.len(), want, "{cell} step {step}: read {off}+{len}");
                        if let Err(e) = model.check(Some(off), &got) {
                            panic!("{cell} step {step}: read {off}+{len}: {e}");
                        }
                    }
                    Err(e) => {
                        assert!(only_copy_may_fail, "{cell} step {step}: read failed: {e}");
                        client_errors += 1;
                    }
                }
            }
        }
    }
    let stats = st.stats();
    let injected = faults.fired();
    // The device is fixed (what the mount could not read it can read now).
    faults.clear();
    // The figures match (what the mount reports dirty at exit is what a flush or a restart
    // writes back): the device fixed, every dirty block it reports can be read.
    let dirty = st.stats().dirty_blocks;
    let (lost_after_flush, lost_after_crash) = if crash {
        drop(st);
        let (st, _) = open(dir.path(), variant, threshold, capacity);
        assert_eq!(
            st.stats().recovered_blocks,
            dirty,
            "{cell}: dirty blocks at exit = blocks the restart wrote back"
        );
        drop(st);
        (0, differing(dir.path(), &shadow))
    } else {
        let written = st.flush_all().unwrap();
        assert_eq!(
            written, dirty,
            "{cell}: dirty blocks at exit = blocks the flush wrote back"
        );
        assert_eq!(
            st.stats().dirty_blocks,
            0,
            "{cell}: nothing dirty after a flush"
        );
        (differing(dir.path(), &shadow), 0)
    };
    Cell {
        threshold,
        injected,
        client_errors,
        degraded: stats.degraded,
        to_degraded_ms: stats.first_error_to_degraded_ns.map(|ns| ns as f64 / 1e6),
        lost_after_flush,
        lost_after_crash,
    }
}

#[test]
fn fault_sweep() {
    println!(
        "{:<22} {:<10} {:>9} {:>8} {:>13} {:>9} {:>16} {:>10} {:>10}",
        "fault",
        "policy",
        "threshold",
        "injected",
        "client errors",
        "degraded",
        "first→degraded ms",
        "lost flush",
        "lost crash"
    );
    let mut any_degraded = false;
    for fault_name in FAULTS {
        for variant in Variant::ALL {
            let mut fired = 0;
            for seed in 1..=10u64 {
                let a = run(variant, fault_name, seed, false);
                let b = run(variant, fault_name, seed, true);
                assert_eq!(
                    a.lost_after_flush, 0,
                    "{variant} {fault_name} seed {seed}: files differ from the shadow after flush"
                );
                assert_eq!(
                    b.lost_after_crash, 0,
                    "{variant} {fault_name} seed {seed}: files differ from the shadow after a \
                     crash and recovery"
                );
                fired += a.injected;
                any_degraded |= a.degraded;
                if fault_name.ends_with("latency") {
                    assert!(
                        !a.degraded && !b.degraded && a.client_errors + b.client_errors == 0,
                        "{variant} {fault_name} seed {seed}: a slow device is no failing one"
                    );
                }
                if seed <= 2 {
                    println!(
                        "{:<22} {:<10} {:>9} {:>8} {:>13} {:>9} {:>16} {:>10} {:>10}",
                        fault_name,
                        variant.to_string(),
                        if a.threshold > 1e6 {
                            "never".to_string()
                        } else {
                            a.threshold.to_string()
                        },
                        a.injected,
                        a.client_errors + b.client_errors,
                        a.degraded,
                        a.to_degraded_ms.map_or("-".into(), |m| format!("{m:.2}")),
                        a.lost_after_flush,
                        b.lost_after_crash
                    );
                }
            }
            // A write-through cache has no journal and never syncs its block file (nothing
            // in it needs to survive): those faults cannot fire there.
            let can_fire = variant.is_write_back()
                || (fault_name.starts_with("blocks") && !fault_name.contains("sync"));
            assert!(
                !can_fire || fired > 0,
                "{variant} {fault_name}: no fault fired"
            );
        }
    }
    assert!(any_degraded, "no cell reached degraded mode");
}

/// A journal that fails degrades the mount at once: everything dirty is written back, the
/// journal is removed (nothing is left for it to name), and the mount goes on serving from the
/// store with fsync succeeding; the stats say so.
#[test]
fn a_failing_journal_degrades_at_once_and_nothing_is_lost() {
    let dir = scratch();
    for d in ["store", "cache"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    for f in 0..FILES {
        std::fs::write(dir.path().join("store").join(format!("f{f}")), b"").unwrap();
    }
    let (mut st, ids) = open(dir.path(), Variant::WB, 8.0, 12);
    st.write(ids[0], 0, &[7u8; 3000]).unwrap();
    st.fsync(ids[0]).unwrap();
    assert!(st.stats().dirty_blocks > 0);
    let faults = Arc::new(CacheFaults::new(1));
    faults.add(FaultRule::always(
        Target::Journal,
        Some(Op::Write),
        ErrorKind::Enospc,
    ));
    st.set_cache_faults(Some(faults.clone()));
    st.write(ids[0], 100, &[9u8; 50]).unwrap();
    let s = st.stats();
    assert!(s.degraded, "{s:?}");
    assert!(
        s.degraded_reason.as_deref().unwrap().contains("journal"),
        "{s:?}"
    );
    assert_eq!(s.dirty_blocks, 0, "every dirty block drained");
    assert_eq!(
        s.cache_errors.get("journal_write_enospc"),
        Some(&1),
        "{s:?}"
    );
    assert!(
        !dir.path().join("cache/journal").exists(),
        "journal retired"
    );
    st.write(ids[1], 0, &[1u8; 700]).unwrap();
    st.fsync(ids[1]).unwrap();
    assert!(st.stats().served_past_cache >= 2);
    let mut want = vec![7u8; 3000];
    want[100..150].fill(9);
    assert_eq!(st.read(ids[0], 0, 4000).unwrap(), want);
    // kill -9 and restart: the store alone has it all.
    drop(st);
    let (st, _) = open(dir.path(), Variant::WB, 8.0, 12);
    drop(st);
    assert_eq!(std::fs::read(dir.path().join("store/f0")).unwrap(), want);
    assert_eq!(
        std::fs::read(dir.path().join("store/f1")).unwrap(),
        [1u8; 700]
    );
}

/// Below the threshold a failing block-file write is served past the cache and the mount
/// stays in service; the error score decays with its half-life.
#[test]
fn single_errors_are_served_past_the_cache_without_degrading() {
    let dir = scratch();
    for d in ["store", "cache"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    for f in 0..FILES {
        std::fs::write(dir.path().join("store").join(format!("f{f}")), b"").unwrap();
    }
    let (mut st, ids) = open(dir.path(), Variant::WB, 8.0, 12);
    let faults = Arc::new(CacheFaults::new(1));
    faults.add(FaultRule {
        count: Some(2),
        ..FaultRule::always(Target::Blocks, Some(Op::Write), ErrorKind::Eio)
    });
    st.set_cache_faults(Some(faults.clone()));
    st.write(ids[0], 0, &[5u8; 1024]).unwrap();
    st.write(ids[0], 1024, &[6u8; 1024]).unwrap();
    st.write(ids[0], 2048, &[7u8; 1024]).unwrap();
    let s = st.stats();
    assert!(!s.degraded, "{s:?}");
    assert_eq!(s.cache_errors.get("blocks_write_eio"), Some(&2), "{s:?}");
    assert_eq!(s.served_past_cache, 2);
    // The two writes the cache refused went to the store; the third is cached dirty.
    let store = std::fs::read(dir.path().join("store/f0")).unwrap();
    assert_eq!(&store[..2048], &[[5u8; 1024], [6u8; 1024]].concat()[..]);
    assert_eq!(s.dirty_blocks, 2);
    let got = st.read(ids[0], 0, 3072).unwrap();
    assert_eq!(got, [[5u8; 1024], [6u8; 1024], [7u8; 1024]].concat());
    // The score: 2 errors now, a quarter of that two half-lives later.
    let h = std::time::Duration::from_secs(60);
    let later = tiercache_filecache::state::decayed_score(2.0, 0, 120_000_000_000, h);
    assert!((later - 0.5).abs() < 1e-9, "{later}");
}

/// The second scenario while mounted, on a real full file system: the cache directory
/// is a 3 MiB tmpfs this test mounts, and once the mount has taken its block file the rest is
/// filled. The journal's appends then fail with ENOSPC: the mount degrades, and every file
/// written and fsynced through it succeeds, reads back equal, and is in the store alone after
/// unmount (needs root and FUSE).
#[test]
fn a_cache_directory_that_fills_while_mounted_degrades_and_every_fsynced_file_lands() {
    use std::io::Write;
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    let Some(_small) = tiercache_testsupport::tmpfs(&dir.path().join("cache"), "3m") else {
        return;
    };
    let mut cfg = config(dir.path(), Variant::WB, 8.0, 256);
    cfg.block_size = 4096;
    let mnt = dir.path().join("mnt");
    let (session, state) = tiercache_filecache::spawn_mount(cfg, &mnt).unwrap();
    // Fill what is left of the cache directory's file system.
    let mut filler = std::fs::File::create(dir.path().join("cache/filler")).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while filler.write_all(&chunk).is_ok() {}
    let _ = filler.write_all(&chunk[..4096]);
    let content =
        |i: usize| -> Vec<u8> { (0..96 << 10).map(|j| (i * 7 + j / 512) as u8).collect() };
    let written: Result<(), String> = (|| {
        for i in 0..24 {
            let path = mnt.join(format!("f{i}"));
            let mut f = std::fs::File::create(&path).map_err(|e| format!("create f{i}: {e}"))?;
            f.write_all(&content(i))
                .map_err(|e| format!("write f{i}: {e}"))?;
            f.sync_all().map_err(|e| format!("fsync f{i}: {e}"))?;
        }
        for i in 0..24 {
            let got =
                std::fs::read(mnt.join(format!("f{i}"))).map_err(|e| format!("read f{i}: {e}"))?;
            if got != content(i) {
                return Err(format!("f{i} reads back different"));
            }
        }
        Ok(())
    })();
    let stats = state.lock().unwrap().stats();
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    written.unwrap();
    assert!(stats.degraded, "{stats:?}");
    assert!(
        stats
            .degraded_reason
            .as_deref()
            .unwrap_or("")
            .contains("journal"),
        "{stats:?}"
    );
    assert!(
        stats.cache_errors.contains_key("journal_write_enospc"),
        "{stats:?}"
    );
    let dirty = state.lock().unwrap().stats().dirty_blocks;
    assert_eq!(
        dirty, 0,
        "a degraded mount holds no dirty block it can read"
    );
    drop(state);
    // A restart finds nothing to recover: the store alone has every file.
    let cache = tiercache_filecache::store::CacheDir::new(&dir.path().join("cache"));
    let n = tiercache_filecache::recovery::recover(&dir.path().join("store"), &cache).unwrap();
    assert_eq!(n, 0);
    for i in 0..24 {
        assert!(
            std::fs::read(dir.path().join("store").join(format!("f{i}"))).unwrap() == content(i),
            "f{i} in the store"
        );
    }
}

/// An operator returns a degraded mount to service once its cache directory is fixed: while
/// its dirty blocks cannot be read it stays degraded (and says how many); fixed, they are
/// written back, the cache is used again (reads hit it), and nothing written is lost.
#[test]
fn a_degraded_mount_returns_to_service_once_fixed() {
    let dir = scratch();
    for d in ["store", "cache"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    for f in 0..FILES {
        std::fs::write(dir.path().join("store").join(format!("f{f}")), b"").unwrap();
    }
    let (mut st, ids) = open(dir.path(), Variant::WB, 8.0, 12);
    assert!(
        !st.return_to_service().unwrap(),
        "not degraded: nothing to do"
    );
    let mut want = vec![3u8; 4000];
    st.write(ids[0], 0, &want).unwrap();
    assert!(st.stats().dirty_blocks > 0);
    // The block file fails every read: the dirty blocks cannot be written back.
    let faults = Arc::new(CacheFaults::new(1));
    faults.add(FaultRule::always(
        Target::Blocks,
        Some(Op::Read),
        ErrorKind::Eio,
    ));
    st.set_cache_faults(Some(faults.clone()));
    st.take_out_of_service("test");
    let s = st.stats();
    assert!(s.degraded && s.dirty_blocks > 0, "{s:?}");
    st.write(ids[1], 0, &[5u8; 1000]).unwrap();
    let e = st.return_to_service().unwrap_err();
    assert!(e.to_string().contains("still cannot be read"), "{e}");
    assert!(st.degraded());
    // Fixed: back in service, every dirty block written back first.
    faults.clear();
    assert!(st.return_to_service().unwrap());
    let s = st.stats();
    assert!(!s.degraded && s.degraded_reason.is_none(), "{s:?}");
    assert_eq!((s.dirty_blocks, s.returned_to_service), (0, 1), "{s:?}");
    assert_eq!(std::fs::read(dir.path().join("store/f0")).unwrap(), want);
    // The cache is used again: a write lands in it (dirty, journaled), a read of it hits.
    want[100..600].fill(9);
    st.write(ids[0], 100, &[9u8; 500]).unwrap();
    assert!(st.stats().dirty_blocks > 0, "write-back again");
    let hits = st.stats().core.read_hits;
    assert_eq!(st.read(ids[0], 0, 4000).unwrap(), want);
    assert_eq!(st.read(ids[0], 0, 4000).unwrap(), want);
    assert!(
        st.stats().core.read_hits > hits,
        "reads hit the cache again"
    );
    let served = st.stats().served_past_cache;
    assert_eq!(st.read(ids[1], 0, 1000).unwrap(), vec![5u8; 1000]);
    assert_eq!(
        st.stats().served_past_cache,
        served,
        "nothing past the cache"
    );
    // kill -9 and restart: the journal made anew recovers the dirty blocks.
    drop(st);
    let (st, _) = open(dir.path(), Variant::WB, 8.0, 12);
    assert!(st.stats().recovered_blocks > 0);
    drop(st);
    assert_eq!(std::fs::read(dir.path().join("store/f0")).unwrap(), want);
    assert_eq!(
        std::fs::read(dir.path().join("store/f1")).unwrap(),
        [5u8; 1000]
    );
}
