//! The FUSE mount, in process: deletes free blocks and cancel write-back, metadata reaches the
//! store before the call returns, data matches a plain directory under random operations for
//! all four variants, and concurrent readers and writers of one file see atomic, ordered
//! writes. Every mount is unmounted on drop (also when a test fails) and a watchdog ends a hung
//! test run. Without FUSE the tests are skipped, saying so, except on CI (`CI` set), where
//! they fail.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tiercache_filecache::store::StoreLatency;
use tiercache_filecache::{CleaningConfig, MountConfig, State, Variant};

/// Ends the test process if the FUSE tests hang (a deadlocked mount would otherwise block
/// `cargo test` forever); mounts are lazily unmounted first.
fn watchdog() {
    static START: Once = Once::new();
    START.call_once(|| {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(240));
            eprintln!("mount tests: watchdog fired after 240 s");
            for m in MOUNTS.lock().unwrap().iter() {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(m)
                    .status();
            }
            std::process::exit(101);
        });
    });
}

static MOUNTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

struct Mounted {
    session: Option<fuser::BackgroundSession>,
    state: Arc<Mutex<State>>,
    /// Mounts inside the store, unmounted after the FUSE mount and before `dir` is removed.
    _inner: TestMounts,
    dir: tempfile::TempDir,
}

impl Mounted {
    fn new(variant: Variant, capacity_blocks: u32) -> Mounted {
        Mounted::with_direct_io(variant, capacity_blocks, false)
    }
    fn with_direct_io(variant: Variant, capacity_blocks: u32, direct_io: bool) -> Mounted {
        Mounted::with_setup(variant, capacity_blocks, direct_io, |_, _| {})
    }
    /// A mount whose store `setup` prepares first (with mounts the mount undoes).
    fn with_setup(
        variant: Variant,
        capacity_blocks: u32,
        direct_io: bool,
        setup: impl FnOnce(&Path, &mut TestMounts),
    ) -> Mounted {
        Mounted::with_options(
            variant,
            capacity_blocks,
            direct_io,
            true,
            CleaningConfig::None,
            StoreLatency::default(),
            setup,
        )
    }
    /// A mount with the kernel's caching on or off, whose background cleaner runs
    /// `cleaning`.
    fn with_options(
        variant: Variant,
        capacity_blocks: u32,
        direct_io: bool,
        kernel_cache: bool,
        cleaning: CleaningConfig,
        latency: StoreLatency,
        setup: impl FnOnce(&Path, &mut TestMounts),
    ) -> Mounted {
        watchdog();
        let dir = tempfile::tempdir().unwrap();
        for d in ["store", "cache", "mnt"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        let mut inner = TestMounts(Vec::new());
        setup(&dir.path().join("store"), &mut inner);
        let cfg = MountConfig {
            latency,
            direct_io,
            kernel_cache,
            cleaning,
            ..MountConfig::new(
                dir.path().join("store"),
                dir.path().join("cache"),
                capacity_blocks,
                4096,
                variant,
            )
        };
        let mnt = dir.path().join("mnt");
        MOUNTS.lock().unwrap().push(mnt.clone());
        let (session, state) = tiercache_filecache::spawn_mount(cfg, &mnt).unwrap();
        Mounted {
            session: Some(session),
            state,
            _inner: inner,
            dir,
        }
    }
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }
    fn stats(&self) -> tiercache_filecache::MountStats {
        self.state.lock().unwrap().stats()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

impl Mounted {
    fn unmount(&mut self) {
        if let Some(s) = self.session.take() {
            if s.umount_and_join().is_err() {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(self.mnt())
                    .status();
            }
        }
    }
}

/// Returns from the test without FUSE (saying so), and fails it on CI.
macro_rules! need_fuse {
    () => {
        if !tiercache_testsupport::fuse() {
            return;
        }
    };
}

#[test]
fn a_deleted_files_blocks_are_freed_and_never_written_back() {
    need_fuse!();
    let m = Mounted::new(Variant::WB, 64);
    let path = m.mnt().join("doomed");
    fs::write(&path, vec![7u8; 64 * 1024]).unwrap();
    let s = m.stats();
    assert_eq!(s.dirty_blocks, 16);
    assert_eq!(
        s.store_bytes_written, 0,
        "write-back: nothing reached the store yet"
    );
    assert_eq!(fs::metadata(m.store().join("doomed")).unwrap().len(), 0);
    fs::remove_file(&path).unwrap();
    let s = m.stats();
    assert_eq!(s.core.freed_by_delete, 16);
    assert_eq!(s.core.write_backs_cancelled, 16);
    assert_eq!(s.dirty_blocks, 0);
    assert_eq!(s.cached_blocks, 0);
    // A flush now and a full cache later write nothing of it.
    assert_eq!(m.state.lock().unwrap().flush_all().unwrap(), 0);
    fs::write(m.mnt().join("other"), vec![1u8; 1024 * 1024]).unwrap(); // 256 blocks > 64
    let s = m.stats();
    assert_eq!(
        s.core.write_backs,
        256 - 64,
        "only the other file's evicted blocks"
    );
    assert_eq!(s.store_bytes_written, (256 - 64) * 4096);

    // Truncation frees the tail the same way.
    let f = m.mnt().join("other");
    OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(10_000)
        .unwrap();
    let s = m.stats();
    // The cache held the last 64 blocks (LRU): all lie past the new end.
    assert_eq!(s.cached_blocks, 0);
    assert_eq!(s.core.write_backs_cancelled, 16 + 64);
    let mut back = Vec::new();
    File::open(&f).unwrap().read_to_end(&mut back).unwrap();
    assert_eq!(back, vec![1u8; 10_000]);
}

#[test]
fn metadata_reaches_the_store_before_the_call_returns() {
    need_fuse!();
    for variant in Variant::ALL {
        let m = Mounted::new(variant, 64);
        let (mnt, store) = (m.mnt(), m.store());
        fs::create_dir(mnt.join("d")).unwrap();
        assert!(store.join("d").is_dir(), "{variant}: mkdir");
        let mut f = File::create(mnt.join("d/a")).unwrap();
        assert!(store.join("d/a").is_file(), "{variant}: create");
        f.write_all(&[5u8; 10_000]).unwrap();
        fs::rename(mnt.join("d/a"), mnt.join("d/b")).unwrap();
        assert!(
            !store.join("d/a").exists() && store.join("d/b").is_file(),
            "{variant}: rename"
        );
        fs::set_permissions(mnt.join("d/b"), fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            fs::metadata(store.join("d/b"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600,
            "{variant}: chmod"
        );
        f.set_len(3000).unwrap();
        assert_eq!(
            fs::metadata(store.join("d/b")).unwrap().len(),
            3000,
            "{variant}: truncate"
        );
        drop(f);
        fs::rename(mnt.join("d"), mnt.join("e")).unwrap();
        assert!(store.join("e/b").is_file(), "{variant}: directory rename");
        // The cached data follows the renamed file.
        assert_eq!(fs::read(mnt.join("e/b")).unwrap(), vec![5u8; 3000]);
        fs::remove_file(mnt.join("e/b")).unwrap();
        assert!(!store.join("e/b").exists(), "{variant}: unlink");
        fs::remove_dir(mnt.join("e")).unwrap();
        assert!(!store.join("e").exists(), "{variant}: rmdir");
        assert!(m.stats().store_meta_ops > 0);
    }
}

/// Random writes, reads, appends and truncates on a few files, on the mount and on a plain
/// directory; every read must agree, and after a flush the store must equal the reference.
fn random_ops_agree_with_plain_directory(variant: Variant, seed: u64) {
    let m = Mounted::new(variant, 24);
    let reference = tempfile::tempdir().unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let names = ["a", "b", "c"];
    for name in names {
        File::create(m.mnt().join(name)).unwrap();
        File::create(reference.path().join(name)).unwrap();
    }
    for step in 0..300 {
        let name = names[rng.gen_range(0..names.len())];
        let open = |dir: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join(name))
                .unwrap()
        };
        let (fm, fr) = (open(&m.mnt()), open(reference.path()));
        match rng.gen_range(0..10) {
            0..=3 => {
                let off = rng.gen_range(0..60_000u64);
                let len = rng.gen_range(1..20_000usize);
                let byte: u8 = rng.gen();
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                fm.write_all_at(&data, off).unwrap();
                fr.write_all_at(&data, off).unwrap();
            }
            4 => {
                let len = rng.gen_range(0..70_000u64);
                fm.set_len(len).unwrap();
                fr.set_len(len).unwrap();
            }
            5 => {
                let data = vec![rng.gen::<u8>(); rng.gen_range(1..9000)];
                let mut am = OpenOptions::new()
                    .append(true)
                    .open(m.mnt().join(name))
                    .unwrap();
                let mut ar = OpenOptions::new()
                    .append(true)
                    .open(reference.path().join(name))
                    .unwrap();
                am.write_all(&data).unwrap();
                ar.write_all(&data).unwrap();
            }
            _ => {
                let off = rng.gen_range(0..80_000u64);
                let len = rng.gen_range(1..30_000usize);
                let (mut bm, mut br) = (vec![0u8; len], vec![0u8; len]);
                let (mut gm, mut gr) = (fm.try_clone().unwrap(), fr.try_clone().unwrap());
                gm.seek(SeekFrom::Start(off)).unwrap();
                gr.seek(SeekFrom::Start(off)).unwrap();
                let nm = read_up_to(&mut gm, &mut bm);
                let nr = read_up_to(&mut gr, &mut br);
                assert_eq!(
                    nm, nr,
                    "{variant} seed {seed} step {step}: read length of {name}"
                );
                if bm[..nm] != br[..nr] {
                    let first = (0..nm).find(|&i| bm[i] != br[i]).unwrap();
                    let last = (0..nm).rev().find(|&i| bm[i] != br[i]).unwrap();
                    panic!(
                        "{variant} seed {seed} step {step}: data of {name} at {off}+{len}: differs in {}..={} (size {}), mount {:?} reference {:?}",
                        off + first as u64,
                        off + last as u64,
                        fr.metadata().unwrap().len(),
                        &bm[first..(first + 8).min(nm)],
                        &br[first..(first + 8).min(nr)]
                    );
                }
            }
        }
    }
    for name in names {
        assert_eq!(
            fs::read(m.mnt().join(name)).unwrap(),
            fs::read(reference.path().join(name)).unwrap(),
            "{variant}: {name} through the mount"
        );
    }
    m.state.lock().unwrap().flush_all().unwrap();
    for name in names {
        assert_eq!(
            fs::read(m.store().join(name)).unwrap(),
            fs::read(reference.path().join(name)).unwrap(),
            "{variant}: {name} in the store after flush"
        );
    }
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> usize {
    let mut done = 0;
    while done < buf.len() {
        let n = f.read(&mut buf[done..]).unwrap();
        if n == 0 {
            break;
        }
        done += n;
    }
    done
}

#[test]
fn random_operations_read_as_on_a_plain_directory_for_every_variant() {
    need_fuse!();
    for variant in Variant::ALL {
        random_ops_agree_with_plain_directory(variant, 1);
    }
    random_ops_agree_with_plain_directory(Variant::WB, 2);
}

/// With direct I/O every request reaches the mount, whose one lock makes each write atomic
/// against each read; through the kernel page cache Linux itself does not promise that (a read
/// may copy a page while a write fills it, on any file system), so there only ordering holds.
fn concurrent_readers_and_writers(direct_io: bool) {
    let m = Mounted::with_direct_io(Variant::WB, 8, direct_io); // smaller than the file: evictions under the race
    const RECORDS: u64 = 16;
    const REC: usize = 4096;
    let path = m.mnt().join("shared");
    fs::write(&path, vec![0u8; RECORDS as usize * REC]).unwrap();
    // published[r] = the last version of record r whose write has returned.
    let published: Arc<Vec<AtomicU64>> =
        Arc::new((0..RECORDS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, published, stop) = (path.clone(), published.clone(), stop.clone());
        std::thread::spawn(move || {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
            for _ in 0..1500 {
                let r = rng.gen_range(0..RECORDS);
                let v = published[r as usize].load(Ordering::SeqCst) + 1;
                f.write_all_at(&vec![(v % 251) as u8 + 1; REC], r * REC as u64)
                    .unwrap();
                published[r as usize].store(v, Ordering::SeqCst);
            }
            stop.store(true, Ordering::SeqCst);
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|i| {
            let (path, published, stop) = (path.clone(), published.clone(), stop.clone());
            std::thread::spawn(move || {
                let f = File::open(&path).unwrap();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + i);
                let mut buf = vec![0u8; REC];
                let mut checked = 0;
                while !stop.load(Ordering::SeqCst) || checked < 100 {
                    let r = rng.gen_range(0..RECORDS);
                    let before = published[r as usize].load(Ordering::SeqCst);
                    f.read_exact_at(&mut buf, r * REC as u64).unwrap();
                    let after = published[r as usize].load(Ordering::SeqCst);
                    // Atomic: one write's bytes, never a mix.
                    if direct_io {
                        assert!(buf.iter().all(|&b| b == buf[0]), "torn record {r}");
                    }
                    // Ordered: a write that returned before the read began is visible; at most
                    // one newer write (in flight) may be seen.
                    let version = |v: u64| if v == 0 { 0 } else { (v % 251) as u8 + 1 };
                    for &b in [buf[0], buf[REC - 1]].iter() {
                        let ok = (before..=after + 1).any(|v| b == version(v));
                        assert!(ok, "record {r}: read {b} with versions {before}..={after}");
                    }
                    checked += 1;
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
}

#[test]
fn concurrent_readers_and_writers_see_atomic_ordered_writes_with_direct_io() {
    need_fuse!();
    concurrent_readers_and_writers(true);
}

#[test]
fn concurrent_readers_and_writers_see_ordered_writes_through_the_page_cache() {
    need_fuse!();
    concurrent_readers_and_writers(false);
}

#[test]
fn an_open_file_keeps_its_data_after_unlink_or_rename_over() {
    need_fuse!();
    for (direct_io, kernel_cache) in [(true, false), (false, false), (false, true)] {
        let m = Mounted::with_options(
            Variant::WB,
            64,
            direct_io,
            kernel_cache,
            CleaningConfig::None,
            StoreLatency::default(),
            |_, _| {},
        );
        let data: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8 + 1).collect();
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(p)
                .unwrap()
        };
        let read_all = |f: &File, len: usize| {
            let mut back = vec![0u8; len];
            f.read_exact_at(&mut back, 0).unwrap();
            back
        };

        // Unlinked while open: its data (not yet in the store) still reads back, and writes
        // through the handle too.
        let f = open(&m.mnt().join("scratch"));
        f.write_all_at(&data, 0).unwrap();
        if !direct_io {
            // The kernel holds written pages until its write-back (or, passed through, writes
            // land in the file's image until close); an fsync sends them.
            f.sync_data().unwrap();
        }
        assert_eq!(
            m.stats().dirty_blocks,
            3,
            "write-back: the data is in the cache"
        );
        fs::remove_file(m.mnt().join("scratch")).unwrap();
        assert_eq!(
            read_all(&f, 10_000),
            data,
            "direct_io {direct_io}: after unlink"
        );
        f.write_all_at(b"more", 10_000).unwrap();
        let mut longer = data.clone();
        longer.extend_from_slice(b"more");
        assert_eq!(
            read_all(&f, 10_004),
            longer,
            "direct_io {direct_io}: written after"
        );
        drop(f);

        // Replaced by a rename while open: the same.
        let g = open(&m.mnt().join("target"));
        g.write_all_at(&data, 0).unwrap();
        fs::write(m.mnt().join("source"), b"new content").unwrap();
        fs::rename(m.mnt().join("source"), m.mnt().join("target")).unwrap();
        assert_eq!(
            read_all(&g, 10_000),
            data,
            "direct_io {direct_io}: after rename-over"
        );
        drop(g);
        assert_eq!(fs::read(m.mnt().join("target")).unwrap(), b"new content");
        // Nothing of either is left dirty in the cache.
        assert_eq!(m.stats().dirty_blocks, 1, "only the new target's block");
    }
}

/// Mounts a test made (tmpfs, bind), lazily unmounted (innermost first) when dropped.
struct TestMounts(Vec<PathBuf>);

impl TestMounts {
    /// Mounts a tmpfs at `at`; false if that is not possible here (not root).
    fn tmpfs(&mut self, at: &Path) -> bool {
        self.mount(&["-t", "tmpfs", "tiercache-test"], None, at)
    }
    /// Bind-mounts `from` at `at`.
    fn bind(&mut self, from: &Path, at: &Path) -> bool {
        self.mount(&["--bind"], Some(from), at)
    }
    fn mount(&mut self, args: &[&str], from: Option<&Path>, at: &Path) -> bool {
        let ok = std::process::Command::new("mount")
            .args(args)
            .args(from)
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            self.0.push(at.to_path_buf());
        }
        ok
    }
}

impl Drop for TestMounts {
    fn drop(&mut self) {
        for at in self.0.iter().rev() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(at)
                .status();
        }
    }
}

#[test]
fn files_on_another_file_system_inside_the_store_are_refused() {
    need_fuse!();
    use std::os::unix::fs::MetadataExt;
    let mut ready = false;
    // The store and a directory bound into it from another file system, two fresh tmpfs
    // filled alike: `sub/y` has the inode number of `a`.
    let mut m = Mounted::with_setup(Variant::WB, 64, true, |store, mounts| {
        let other = store.parent().unwrap().join("other");
        fs::create_dir(&other).unwrap();
        if !mounts.tmpfs(store) || !mounts.tmpfs(&other) {
            return;
        }
        for root in [store, other.as_path()] {
            fs::create_dir(root.join("sub")).unwrap();
        }
        fs::write(store.join("pad"), b"").unwrap();
        fs::write(store.join("a"), b"outer a").unwrap();
        fs::write(other.join("sub/x"), b"").unwrap();
        fs::write(other.join("sub/y"), b"inner y").unwrap();
        ready = mounts.bind(&other.join("sub"), &store.join("sub"));
    });
    if !ready {
        eprintln!("skipped: cannot mount tmpfs here (needs root)");
        return;
    }
    let (store, mnt) = (m.store(), m.mnt());
    let ino = |p: &str| fs::metadata(store.join(p)).unwrap().ino();
    eprintln!("inode numbers: a {}, sub/y {}", ino("a"), ino("sub/y"));
    // a's new content is only in the cache (write-back).
    fs::write(mnt.join("a"), b"outer a, cached").unwrap();
    match fs::read(mnt.join("sub/y")) {
        Ok(bytes) => panic!(
            "sub/y served {:?} (its own content is \"inner y\")",
            String::from_utf8_lossy(&bytes)
        ),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}"),
    }
    assert!(m.stats().cross_device_refused >= 1);
    assert_eq!(fs::read(mnt.join("a")).unwrap(), b"outer a, cached");
    m.unmount();
    assert_eq!(fs::read(store.join("sub/y")).unwrap(), b"inner y");
}

/// Polls the mount's counters until `done` holds of them; the bound only ends a hang (a
/// failure), it measures nothing.
fn wait_for(m: &Mounted, what: &str, done: impl Fn(&tiercache_filecache::MountStats) -> bool) {
    for _ in 0..3000 {
        if done(&m.stats()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{what}: never happened; counters {:?}", m.stats());
}

#[test]
fn the_background_cleaner_writes_dirty_blocks_back_while_mounted() {
    need_fuse!();
    let capacity = 32u32;
    let policies = [
        // Idle-triggered: everything drains once the mount is quiet.
        (
            CleaningConfig::Lazy {
                idle_ns: 20_000_000,
                batch: 4,
            },
            0u64,
        ),
        // Threshold-triggered: drains to the low watermark (8 of 32 blocks).
        (
            CleaningConfig::Threshold {
                high: 0.5,
                low: 0.25,
                batch: 2,
            },
            8,
        ),
    ];
    for (cleaning, left) in policies {
        let m = Mounted::with_options(
            Variant::WB,
            capacity,
            false,
            true,
            cleaning.clone(),
            StoreLatency::default(),
            |_, _| {},
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let data: Vec<u8> = (0..24 * 4096).map(|_| rng.gen()).collect();
        // No fsync, no unmount: only the cleaner can write these back. The close hands the
        // kernel's buffered pages to the mount.
        fs::write(m.mnt().join("f"), &data).unwrap();
        wait_for(&m, "writes reach the mount", |s| {
            s.bytes_written >= data.len() as u64
        });
        wait_for(&m, "the cleaner drains", |s| s.dirty_blocks <= left);
        let s = m.stats();
        assert!(
            s.cleaned_blocks >= 24 - left,
            "{cleaning:?}: {} blocks cleaned",
            s.cleaned_blocks
        );
        assert_eq!(s.cleaner_errors, 0);
        if left == 0 {
            // Still mounted, the file still open: the store alone has the data.
            assert_eq!(fs::read(m.store().join("f")).unwrap(), data, "{cleaning:?}");
        } else {
            // The cleaned blocks (least recently written first) are in the store.
            let store = fs::read(m.store().join("f")).unwrap();
            let cleaned = (24 - left as usize) * 4096;
            assert_eq!(&store[..cleaned], &data[..cleaned], "{cleaning:?}");
        }
        assert_eq!(fs::read(m.mnt().join("f")).unwrap(), data);
    }
}

#[test]
fn without_a_cleaner_dirty_blocks_stay_until_unmount() {
    need_fuse!();
    let m = Mounted::new(Variant::WB, 32);
    fs::write(m.mnt().join("f"), vec![7u8; 8 * 4096]).unwrap();
    // What the cleaner test waits for does not happen by itself: the blocks stay dirty.
    std::thread::sleep(Duration::from_millis(300));
    let s = m.stats();
    assert_eq!((s.dirty_blocks, s.cleaned_blocks), (8, 0));
}

/// Writers of different files at once, each through its own handle, every write reaching
/// the mount (no kernel write-back): each file reads back as its writer wrote it.
fn concurrent_writers(m: &Mounted, writers: usize, chunks: usize) {
    let chunk = 4096usize;
    std::thread::scope(|scope| {
        for w in 0..writers {
            let path = m.mnt().join(format!("w{w}"));
            scope.spawn(move || {
                let f = File::create(&path).unwrap();
                for c in 0..chunks {
                    let buf = vec![(w * 31 + c) as u8; chunk];
                    f.write_all_at(&buf, (c * chunk) as u64).unwrap();
                }
                f.sync_all().unwrap();
            });
        }
    });
    for w in 0..writers {
        let back = fs::read(m.mnt().join(format!("w{w}"))).unwrap();
        assert_eq!(back.len(), chunks * chunk, "writer {w}");
        for c in 0..chunks {
            assert!(
                back[c * chunk..(c + 1) * chunk]
                    .iter()
                    .all(|&b| b == (w * 31 + c) as u8),
                "writer {w}, chunk {c}"
            );
        }
    }
}

#[test]
fn writers_of_different_files_proceed_in_parallel() {
    need_fuse!();
    // Uncached (the store alone, slowed): the writers' store operations overlap.
    let slow = StoreLatency {
        data: Duration::from_millis(20),
        meta: Duration::ZERO,
    };
    let m = Mounted::with_options(
        Variant::WB,
        0,
        false,
        false,
        CleaningConfig::None,
        slow,
        |_, _| {},
    );
    concurrent_writers(&m, 4, 8);
    let s = m.stats();
    assert_eq!(s.store_writes, 32);
    assert!(
        s.store_ops_in_flight_peak >= 2,
        "store writes of different files never overlapped: {s:?}"
    );
    for w in 0..4 {
        assert_eq!(
            fs::metadata(m.store().join(format!("w{w}"))).unwrap().len(),
            8 * 4096
        );
    }
    // Cached, write-back, with the cleaner running: the same data, every block accounted.
    let m = Mounted::with_options(
        Variant::WB,
        64,
        false,
        false,
        CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 4,
        },
        StoreLatency::default(),
        |_, _| {},
    );
    concurrent_writers(&m, 4, 24);
}

#[test]
fn with_the_kernels_write_back_a_users_times_still_reach_the_store() {
    need_fuse!();
    let m = Mounted::with_options(
        Variant::WB,
        64,
        false,
        true,
        CleaningConfig::None,
        StoreLatency::default(),
        |_, _| {},
    );
    let f = File::create(m.mnt().join("f")).unwrap();
    f.write_all_at(&[5u8; 3 * 4096], 0).unwrap();
    let t = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    // A user's futimens through a file open for write, whose pages the kernel buffers,
    // reaches the store; the kernel's own time updates at close and fsync do not undo it.
    f.set_modified(t).unwrap();
    assert_eq!(
        fs::metadata(m.store().join("f"))
            .unwrap()
            .modified()
            .unwrap(),
        t
    );
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(
        fs::metadata(m.mnt().join("f")).unwrap().modified().unwrap(),
        t
    );
    let later = t + Duration::from_secs(86_400);
    File::options()
        .write(true)
        .open(m.mnt().join("f"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(
        fs::metadata(m.store().join("f"))
            .unwrap()
            .modified()
            .unwrap(),
        later
    );
    assert_eq!(
        m.stats().dirty_blocks,
        3,
        "no write-back changed the store's times"
    );
}
