//! Several threads creating, writing, reading back, renaming over and unlinking files of their
//! own through one write-back mount at once, its requests served on several request threads
//! (docs/design.md §14 "Dispatch"), with a cache smaller than the data and a cap on cached
//! files: every read sees what its thread last wrote, the cache never holds more blocks
//! than its slots nor blocks of more files than the cap (sampled under the mount's lock
//! throughout), and after a flush the store holds exactly the files left, each with its
//! last contents. Without FUSE the test is skipped, saying so, except on CI.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tiercache_filecache::store::StoreLatency;
use tiercache_filecache::{CleaningConfig, FuseOptions, MountConfig, Variant};

const THREADS: usize = 4;
const STEPS: usize = 60;
const SLOTS: u32 = 32;
const MAX_FILES: u64 = 6;

/// One thread's run over its own names; returns the files it left and their contents.
fn worker(mnt: &Path, t: usize) -> HashMap<String, Vec<u8>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + t as u64);
    let mut model: HashMap<String, Vec<u8>> = HashMap::new();
    for i in 0..STEPS {
        let name = format!("t{t}_{}", rng.gen_range(0..5));
        match rng.gen_range(0..10) {
            // Write a whole file (new, or replacing one), sometimes fsynced.
            0..=4 => {
                let len = rng.gen_range(1..40_000);
                let data: Vec<u8> = (0..len)
                    .map(|k| (k as u8).wrapping_mul(7) ^ (t as u8 * 50 + i as u8))
                    .collect();
                let mut f = fs::File::create(mnt.join(&name)).unwrap();
                f.write_all(&data).unwrap();
                if rng.gen_bool(0.3) {
                    f.sync_all().unwrap();
                }
                drop(f);
                model.insert(name, data);
            }
            // Unlink right after the last close (the release may still be in flight).
            5..=6 => {
                let gone = fs::remove_file(mnt.join(&name)).is_ok();
                assert_eq!(
                    gone,
                    model.remove(&name).is_some(),
                    "thread {t}: unlink {name}"
                );
            }
            // Rename one of its files over another (the target loses its last name).
            7 => {
                let to = format!("t{t}_{}", rng.gen_range(0..5));
                if model.contains_key(&name) && to != name {
                    fs::rename(mnt.join(&name), mnt.join(&to)).unwrap();
                    let data = model.remove(&name).unwrap();
                    model.insert(to, data);
                }
            }
            // Read a file back whole.
            _ => match model.get(&name) {
                Some(want) => {
                    let got = fs::read(mnt.join(&name)).unwrap();
                    assert!(got == *want, "thread {t}: read {name} at step {i}");
                }
                None => assert!(fs::metadata(mnt.join(&name)).is_err()),
            },
        }
    }
    for (name, want) in &model {
        assert!(
            fs::read(mnt.join(name)).unwrap() == *want,
            "thread {t}: final {name}"
        );
    }
    model
}

/// A write-back mount's configuration of `capacity_blocks` 4 KiB blocks over `dir`'s `store`,
/// `cache` and `mnt` (made here), the kernel's caches on, no cleaner.
fn write_back_config(dir: &std::path::Path, capacity_blocks: u32) -> MountConfig {
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.join(d)).unwrap();
    }
    MountConfig {
        store: dir.join("store"),
        cache_dir: dir.join("cache"),
        capacity_blocks,
        block_size: 4096,
        variant: Variant::WB,
        latency: StoreLatency::default(),
        direct_io: false,
        kernel_cache: true,
        cleaning: CleaningConfig::None,
        on_error: Default::default(),
    }
}

#[test]
fn concurrent_writers_and_unlinkers_keep_the_data_and_the_caps() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_back_config(dir.path(), SLOTS);
    let mnt = dir.path().join("mnt");
    let (session, state) =
        tiercache_filecache::spawn_mount_with(cfg, &mnt, FuseOptions::default(), |st| {
            st.set_max_files(MAX_FILES)
        })
        .unwrap();
    let done = AtomicBool::new(false);
    let (models, samples) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut samples = 0u64;
            while !done.load(Ordering::SeqCst) {
                let st = state.lock().unwrap().stats();
                assert!(st.cached_blocks <= SLOTS as u64, "{st:?}");
                assert!(st.cached_files <= MAX_FILES, "{st:?}");
                samples += 1;
                std::thread::yield_now();
            }
            samples
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let mnt = &mnt;
                s.spawn(move || worker(mnt, t))
            })
            .collect();
        let models: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::SeqCst);
        (models, sampler.join().unwrap())
    });
    let stats = {
        let mut st = state.lock().unwrap();
        st.flush_all().unwrap();
        st.stats()
    };
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    assert!(samples > 0);
    assert!(stats.core.write_backs > 0, "no eviction ran: {stats:?}");
    assert!(
        stats.files_cap_refused > 0,
        "the file cap never bit: {stats:?}"
    );
    assert!(stats.files_deleted > 0);
    let want: BTreeMap<String, Vec<u8>> = models.into_iter().flatten().collect();
    let mut have = BTreeMap::new();
    for entry in fs::read_dir(dir.path().join("store")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        have.insert(name, fs::read(entry.path()).unwrap());
    }
    assert_eq!(
        have.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the store's files"
    );
    for (name, data) in &want {
        assert!(have[name] == *data, "store file {name}");
    }
}

/// Copies the regular files of `from` into `to` (the cache directory as a crash leaves it).
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Group commit (docs/design.md §14 "Dispatch"): threads writing and fsyncing files of their
/// own at once share journal syncs (fewer syncs than fsyncs: an fsync arriving while
/// another's sync is in flight is answered by the next one begun after it), and a `kill -9`
/// right after the last fsyncs (the cache directory copied under the mount's lock) recovers
/// every file to exactly what was written.
#[test]
fn concurrent_fsyncs_share_journal_syncs_and_lose_no_fsynced_byte() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    const WRITERS: usize = 6;
    const LEN: usize = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_back_config(dir.path(), 256);
    let mnt = dir.path().join("mnt");
    let options = FuseOptions {
        passthrough: false,
        ..FuseOptions::default()
    };
    let (session, state) =
        tiercache_filecache::spawn_mount_with(cfg, &mnt, options, |_| Ok(())).unwrap();
    let models: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|t| {
                let mnt = &mnt;
                s.spawn(move || {
                    use std::os::unix::fs::FileExt;
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(t as u64);
                    let f = fs::File::create(mnt.join(format!("w{t}"))).unwrap();
                    let mut model = vec![0u8; LEN];
                    f.write_all_at(&model, 0).unwrap();
                    for i in 0..40u8 {
                        let at = rng.gen_range(0..LEN - 4096);
                        let fill = (t as u8 * 40).wrapping_add(i) | 1;
                        f.write_all_at(&[fill; 4096], at as u64).unwrap();
                        model[at..at + 4096].fill(fill);
                        f.sync_data().unwrap();
                    }
                    model
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let crashed = tempfile::tempdir().unwrap();
    let stats = {
        let st = state.lock().unwrap();
        copy_dir(&dir.path().join("cache"), &crashed.path().join("cache"));
        st.stats()
    };
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    drop(state);
    eprintln!(
        "{} fsyncs, {} grouped, {} journal syncs",
        stats.fsyncs, stats.fsyncs_grouped, stats.journal_syncs
    );
    assert!(stats.fsyncs >= (WRITERS * 40) as u64, "{stats:?}");
    assert!(stats.fsyncs_grouped > 0, "no fsync was grouped: {stats:?}");
    assert!(
        stats.journal_syncs < stats.fsyncs,
        "{} journal syncs for {} fsyncs",
        stats.journal_syncs,
        stats.fsyncs
    );
    let store = dir.path().join("store");
    let cache = tiercache_filecache::store::CacheDir::new(&crashed.path().join("cache"));
    tiercache_filecache::recovery::recover(&store, &cache).unwrap();
    for (t, model) in models.iter().enumerate() {
        let back = fs::read(store.join(format!("w{t}"))).unwrap();
        assert!(back == *model, "w{t} after the crash");
    }
}

/// The block path off the mount's lock (docs/design.md §14, "The data path off the lock"):
/// per file one writer (random writes, truncates, unlink-and-recreate, serialised with its
/// readers by a lock of the test's own) and, on every file at once, readers checking each
/// read exactly against the model, through a direct-I/O mount (every read reaches it) with
/// a slow store and a cache smaller than the files, so misses read the store without the
/// mount's lock while other files' hits, misses and evictions proceed. The caps are sampled
/// under the mount's lock throughout; after a flush the store holds the model exactly.
#[test]
fn concurrent_readers_writers_truncaters_unlinkers_match_a_model() {
    use std::os::unix::fs::FileExt;
    use std::sync::RwLock;
    if !tiercache_testsupport::fuse() {
        return;
    }
    const FILES: usize = 4;
    const FILE_LEN: usize = 20 * 4096;
    const READERS: usize = 4;
    for variant in [Variant::WB, Variant::WT] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = write_back_config(dir.path(), 24);
        cfg.variant = variant;
        cfg.direct_io = true;
        cfg.kernel_cache = false;
        cfg.latency.data = std::time::Duration::from_micros(300);
        let mnt = dir.path().join("mnt");
        let models: Vec<RwLock<Vec<u8>>> = (0..FILES)
            .map(|f| {
                let data: Vec<u8> = (0..FILE_LEN).map(|k| (k * 13 + f * 7) as u8).collect();
                fs::write(dir.path().join("store").join(format!("f{f}")), &data).unwrap();
                RwLock::new(data)
            })
            .collect();
        let options = FuseOptions {
            passthrough: false,
            ..FuseOptions::default()
        };
        let (session, state) =
            tiercache_filecache::spawn_mount_with(cfg, &mnt, options, |_| Ok(())).unwrap();
        let done = AtomicBool::new(false);
        let checked = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    let st = state.lock().unwrap().stats();
                    assert!(st.cached_blocks <= 24, "{st:?}");
                    std::thread::yield_now();
                }
            });
            let writers: Vec<_> = (0..FILES)
                .map(|f| {
                    let (mnt, model) = (&mnt, &models[f]);
                    s.spawn(move || {
                        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7 + f as u64);
                        let path = mnt.join(format!("f{f}"));
                        for i in 0..80u32 {
                            let mut m = model.write().unwrap();
                            match rng.gen_range(0..10) {
                                0 => {
                                    let len = rng.gen_range(0..FILE_LEN);
                                    let file = fs::OpenOptions::new().write(true).open(&path);
                                    file.unwrap().set_len(len as u64).unwrap();
                                    m.resize(len, 0);
                                }
                                1 => {
                                    fs::remove_file(&path).unwrap();
                                    let len = rng.gen_range(1..FILE_LEN);
                                    let data: Vec<u8> =
                                        (0..len).map(|k| (k as u32 ^ i) as u8 | 1).collect();
                                    fs::write(&path, &data).unwrap();
                                    *m = data;
                                }
                                _ => {
                                    let at = rng.gen_range(0..FILE_LEN);
                                    let len = rng.gen_range(1..3 * 4096);
                                    let byte = (i as u8).wrapping_mul(3) ^ f as u8;
                                    let file = fs::OpenOptions::new().write(true).open(&path);
                                    file.unwrap()
                                        .write_all_at(&vec![byte; len], at as u64)
                                        .unwrap();
                                    if m.len() < at + len {
                                        m.resize(at + len, 0);
                                    }
                                    m[at..at + len].fill(byte);
                                }
                            }
                            drop(m);
                            std::thread::yield_now();
                        }
                    })
                })
                .collect();
            let readers: Vec<_> = (0..READERS)
                .map(|r| {
                    let (mnt, models, checked, done) = (&mnt, &models, &checked, &done);
                    s.spawn(move || {
                        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1000 + r as u64);
                        let mut buf = vec![0u8; 3 * 4096];
                        while !done.load(Ordering::SeqCst) {
                            let f = rng.gen_range(0..FILES);
                            let m = models[f].read().unwrap();
                            let file = fs::File::open(mnt.join(format!("f{f}"))).unwrap();
                            let at = rng.gen_range(0..FILE_LEN);
                            let len = rng.gen_range(1..buf.len());
                            let n = file.read_at(&mut buf[..len], at as u64).unwrap();
                            let want = &m[at.min(m.len())..(at + len).min(m.len())];
                            assert!(&buf[..n] == want, "reader {r}: f{f} {at}+{len}");
                            checked.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, Ordering::SeqCst);
            for r in readers {
                r.join().unwrap();
            }
            sampler.join().unwrap();
        });
        let stats = {
            let mut st = state.lock().unwrap();
            st.flush_all().unwrap();
            st.stats()
        };
        if session.umount_and_join().is_err() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&mnt)
                .status();
        }
        assert!(checked.load(Ordering::Relaxed) > 100, "{variant:?}");
        assert!(
            stats.core.read_misses > 0 && stats.store_reads > 0,
            "{stats:?}"
        );
        for (f, m) in models.iter().enumerate() {
            let back = fs::read(dir.path().join("store").join(format!("f{f}"))).unwrap();
            assert!(back == *m.read().unwrap(), "{variant:?}: store f{f}");
        }
    }
}
