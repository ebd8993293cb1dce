//! Changes made to the store behind the mount (docs/design.md §14 "Changes to the store"),
//! in process over real FUSE. With `watch_store` and the kernel allowed to keep entries and
//! attributes for 60 s (so only an invalidation can explain a fresh answer), a file rewritten
//! in the store is read with its new bytes and size, a file created there appears after a
//! lookup that missed, one removed there disappears, a dirty file changed there keeps the
//! mount's bytes and counts a conflict, an open passthrough file goes on with its image and
//! the next open sees the store (one open for writing is a conflict, its image taken whole at
//! its close); the mount's own write-backs, creates, renames, truncates and unlinks, and an
//! uncached mount's writes, are not counted as changes. Without the watch a change stays unseen until a
//! remount. Polls wait up to [`DEADLINE`] and fail past it; no time is asserted. Without FUSE
//! the tests are skipped, saying so, except on CI.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tiercache_filecache::{CleaningConfig, FuseOptions, MountConfig, MountStats, State, Variant};

/// How long a poll waits for the mount to see a change before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// The kernel's entry and attribute timeout in these tests: far longer than any test.
const LONG: Duration = Duration::from_secs(60);

struct Mounted {
    session: Option<fuser::BackgroundSession>,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

struct Setup {
    watch: bool,
    passthrough: bool,
    capacity_blocks: u32,
    cleaning: CleaningConfig,
    cache_timeout: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            watch: true,
            passthrough: false,
            capacity_blocks: 1024,
            cleaning: CleaningConfig::None,
            cache_timeout: LONG,
        }
    }
}

impl Mounted {
    /// A write-back mount over a store `fill` fills first.
    fn new(setup: Setup, fill: impl FnOnce(&std::path::Path)) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        for d in ["store", "cache", "mnt"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        fill(&dir.path().join("store"));
        Mounted::over(dir, setup)
    }

    fn over(dir: tempfile::TempDir, setup: Setup) -> Mounted {
        let cfg = MountConfig {
            cleaning: setup.cleaning,
            ..MountConfig::new(
                dir.path().join("store"),
                dir.path().join("cache"),
                setup.capacity_blocks,
                4096,
                Variant::WB,
            )
        };
        let options = FuseOptions {
            passthrough: setup.passthrough,
            passthrough_min_size: 0,
            watch_store: setup.watch,
            cache_timeout: setup.cache_timeout,
            ..FuseOptions::default()
        };
        let (session, state) = tiercache_filecache::spawn_mount_with(
            cfg,
            &dir.path().join("mnt"),
            options,
            |_| Ok(()),
        )
        .unwrap();
        Mounted {
            session: Some(session),
            state,
            dir,
        }
    }

    fn mnt(&self, name: &str) -> PathBuf {
        self.dir.path().join("mnt").join(name)
    }

    fn store(&self, name: &str) -> PathBuf {
        self.dir.path().join("store").join(name)
    }

    fn stats(&self) -> MountStats {
        self.state.lock().unwrap().stats()
    }

    /// Another program rewrites store file `name` in place with bytes of its size: one
    /// change of its content. (`fs::write` truncates first, so a watch that wakes between
    /// the truncate and the write rightly sees two changes; tests counting exactly use this.)
    fn overwrite_in_store(&self, name: &str, data: &[u8]) {
        let f = OpenOptions::new()
            .write(true)
            .open(self.store(name))
            .unwrap();
        assert_eq!(
            f.metadata().unwrap().len(),
            data.len() as u64,
            "same size only"
        );
        f.write_all_at(data, 0).unwrap();
    }

    /// Another program makes store file `name` appear whole: written beside the store, then
    /// renamed in (one event; a file created and then written may be seen between the two).
    fn create_in_store(&self, name: &str, data: &[u8]) {
        let aside = self.dir.path().join(format!(".aside-{name}"));
        fs::write(&aside, data).unwrap();
        fs::rename(&aside, self.store(name)).unwrap();
    }

    fn unmount(&mut self) {
        if let Some(s) = self.session.take() {
            if s.umount_and_join().is_err() {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(self.dir.path().join("mnt"))
                    .status();
            }
        }
    }

    /// Unmounts and mounts the same directories again, as `setup` says.
    fn remount(mut self, setup: Setup) -> Mounted {
        self.unmount();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        drop(self); // its state holds the cache directory's lock
        Mounted::over(dir, setup)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
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

fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// Polls `cond` until it holds; fails the test, saying `what`, past [`DEADLINE`].
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < DEADLINE,
            "not within {DEADLINE:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read(path: &std::path::Path) -> Option<Vec<u8>> {
    fs::read(path).ok()
}

/// Fails naming `what` and the first differing byte if `got` is not `want`.
#[track_caller]
fn same(got: Option<Vec<u8>>, want: impl AsRef<[u8]>, what: &str) {
    let want = want.as_ref();
    let got = got.unwrap_or_else(|| panic!("{what}: not readable"));
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes read, {} expected, first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}

#[test]
fn a_file_rewritten_in_the_store_is_read_with_its_new_bytes_and_size() {
    need_fuse!();
    let old = content(1, 10_000);
    let m = Mounted::new(Setup::default(), |s| fs::write(s.join("f"), &old).unwrap());
    // Cached by the mount and by the kernel (pages kept across opens, size for 60 s).
    same(read(&m.mnt("f")), &old, "mnt/f");
    same(read(&m.mnt("f")), &old, "mnt/f");
    assert!(m.stats().cached_blocks > 0);
    let new = content(2, 23_000);
    fs::write(m.store("f"), &new).unwrap();
    eventually("the rewritten file read through the mount", || {
        read(&m.mnt("f")).is_some_and(|b| b == new)
    });
    assert_eq!(fs::metadata(m.mnt("f")).unwrap().len(), new.len() as u64);
    let s = m.stats();
    assert!(s.store_changes_seen >= 1, "{s:?}");
    assert_eq!(s.store_conflicts, 0);
}

#[test]
fn a_file_created_in_the_store_appears_after_a_lookup_that_missed() {
    need_fuse!();
    let m = Mounted::new(Setup::default(), |_| {});
    // A miss the kernel keeps (a negative entry, 60 s) and the mount's listing of the root.
    assert!(fs::metadata(m.mnt("new")).is_err());
    assert!(fs::metadata(m.mnt("new")).is_err());
    let data = content(3, 5_000);
    fs::write(m.store("new"), &data).unwrap();
    eventually("the new file through the mount", || {
        read(&m.mnt("new")).is_some_and(|b| b == data)
    });
    // In a subdirectory created in the store too.
    fs::create_dir(m.store("d")).unwrap();
    eventually("the new directory through the mount", || {
        fs::metadata(m.mnt("d")).is_ok_and(|md| md.is_dir())
    });
    assert!(fs::metadata(m.mnt("d/g")).is_err());
    fs::write(m.store("d/g"), b"g").unwrap();
    eventually("a file created in the new directory", || {
        read(&m.mnt("d/g")).is_some_and(|b| b == b"g")
    });
    assert!(m.stats().store_changes_seen >= 3);
}

#[test]
fn a_file_removed_or_renamed_in_the_store_disappears_from_the_mount() {
    need_fuse!();
    let m = Mounted::new(Setup::default(), |s| {
        fs::write(s.join("g"), content(4, 9_000)).unwrap();
        fs::write(s.join("h"), content(5, 9_000)).unwrap();
    });
    same(read(&m.mnt("g")), content(4, 9_000), "mnt/g");
    same(read(&m.mnt("h")), content(5, 9_000), "mnt/h");
    assert_eq!(m.stats().cached_blocks, 6);
    fs::remove_file(m.store("g")).unwrap();
    eventually("the removed file gone from the mount", || {
        fs::metadata(m.mnt("g")).is_err()
    });
    // Its blocks are dropped with it (a new file may reuse its inode number).
    eventually("the removed file's blocks dropped", || {
        m.stats().cached_blocks == 3
    });
    fs::rename(m.store("h"), m.store("h2")).unwrap();
    eventually("the renamed file under its new name only", || {
        fs::metadata(m.mnt("h")).is_err() && read(&m.mnt("h2")).is_some()
    });
    same(read(&m.mnt("h2")), content(5, 9_000), "mnt/h2");
    let names: Vec<_> = fs::read_dir(m.mnt("")).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn the_mounts_own_writes_and_write_backs_are_not_counted_as_changes() {
    need_fuse!();
    // A small cache and an eager cleaner: blocks are written back by eviction and by the
    // cleaner while the workload runs.
    let setup = Setup {
        capacity_blocks: 32,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 64,
        },
        ..Setup::default()
    };
    let m = Mounted::new(setup, |s| {
        fs::write(s.join("old"), content(9, 50_000)).unwrap()
    });
    same(read(&m.mnt("old")), content(9, 50_000), "mnt/old");
    for i in 0..12u8 {
        let name = format!("f{i}");
        let mut f = File::create(m.mnt(&name)).unwrap();
        f.write_all(&content(i, 40_000)).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let f = OpenOptions::new().write(true).open(m.mnt(&name)).unwrap();
        f.write_all_at(b"overwritten", 100).unwrap();
        f.set_len(30_000).unwrap();
        drop(f);
        fs::set_permissions(m.mnt(&name), fs::Permissions::from_mode(0o640)).unwrap();
        if i % 3 == 0 {
            fs::rename(m.mnt(&name), m.mnt(&format!("r{i}"))).unwrap();
        } else if i % 4 == 1 {
            fs::remove_file(m.mnt(&name)).unwrap();
        }
    }
    let mut f = OpenOptions::new().append(true).open(m.mnt("old")).unwrap();
    f.write_all(&content(8, 20_000)).unwrap();
    drop(f);
    fs::create_dir(m.mnt("sub")).unwrap();
    fs::write(m.mnt("sub/x"), content(7, 12_000)).unwrap();
    // Everything written back, so every write of the mount reached the store.
    m.state.lock().unwrap().flush_all().unwrap();
    let s = m.stats();
    assert!(s.store_writes > 20, "too few write-backs to test: {s:?}");
    // A change of someone else's, last: once it is seen, every event before it was applied.
    m.create_in_store("sentinel", b"s");
    eventually("the foreign change seen", || {
        m.stats().store_changes_seen > 0
    });
    let s = m.stats();
    assert_eq!(
        s.store_changes_seen, 1,
        "the mount's own changes were counted as foreign: {s:?}"
    );
    assert_eq!(s.store_conflicts, 0);
    // And the mount's data is intact.
    let mut expect_old = content(9, 50_000);
    expect_old.extend(content(8, 20_000));
    same(read(&m.mnt("old")), &expect_old, "mnt/old");
    let mut f2 = content(2, 30_000);
    f2[100..111].copy_from_slice(b"overwritten");
    same(read(&m.mnt("f2")), &f2, "mnt/f2");
    same(fs::read(m.store("f2")).ok(), &f2, "store/f2");
}

#[test]
fn a_dirty_file_changed_in_the_store_keeps_the_mounts_bytes_and_counts_a_conflict() {
    need_fuse!();
    let old = content(1, 8192);
    let m = Mounted::new(Setup::default(), |s| fs::write(s.join("f"), &old).unwrap());
    let mine = vec![b'M'; 4096];
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.mnt("f"))
        .unwrap();
    f.write_all_at(&mine, 0).unwrap();
    f.sync_all().unwrap(); // in the mount's cache, journaled, dirty
    let mut back = vec![0; 4096];
    f.read_exact_at(&mut back, 4096).unwrap(); // block 1 cached clean
    assert_eq!(back, old[4096..]);
    let s = m.stats();
    assert_eq!((s.dirty_blocks, s.cached_blocks), (1, 2), "{s:?}");
    drop(f);
    let theirs = content(2, 8192);
    m.overwrite_in_store("f", &theirs);
    eventually("the conflict counted", || m.stats().store_conflicts > 0);
    let s = m.stats();
    assert_eq!(s.store_conflicts, 1, "{s:?}");
    // The mount's block wins; the clean one is read anew from the store.
    let mut expect = mine.clone();
    expect.extend_from_slice(&theirs[4096..]);
    same(read(&m.mnt("f")), &expect, "mnt/f");
    assert_eq!(s.dirty_blocks, 1);
    // Written back, over the store's change.
    m.state.lock().unwrap().flush_all().unwrap();
    same(fs::read(m.store("f")).ok(), &expect, "store/f");
}

#[test]
fn an_open_passthrough_file_keeps_its_image_and_the_next_open_sees_the_store() {
    need_fuse!();
    let old = content(1, 64 << 10);
    let setup = Setup {
        passthrough: true,
        ..Setup::default()
    };
    let m = Mounted::new(setup, |s| fs::write(s.join("p"), &old).unwrap());
    same(read(&m.mnt("p")), &old, "mnt/p"); // on the block path: cached whole
    let mut held = File::open(m.mnt("p")).unwrap();
    assert!(
        m.stats().passthrough_opens > 0,
        "this kernel has FUSE passthrough (Linux 6.9+) but the mount did not use it"
    );
    let new = content(2, 64 << 10);
    fs::write(m.store("p"), &new).unwrap();
    eventually("the change seen", || m.stats().store_changes_seen > 0);
    // The open handle reads its image: the content at its open.
    let mut back = Vec::new();
    held.read_to_end(&mut back).unwrap();
    assert!(back == old, "an open passthrough handle changed content");
    drop(held);
    // The next open sees the store's content, and the image was not written back over it.
    eventually("the next open reading the new content", || {
        read(&m.mnt("p")).is_some_and(|b| b == new)
    });
    same(fs::read(m.store("p")).ok(), &new, "store/p");
    assert_eq!(m.stats().store_conflicts, 0);
}

#[test]
fn without_the_watch_a_change_behind_the_mount_stays_unseen_until_a_remount() {
    need_fuse!();
    let old = content(1, 10_000);
    // The kernel asks the mount every time (no entry or attribute caching): what stays stale
    // is the mount's own view, not the kernel's.
    let setup = || Setup {
        watch: false,
        cache_timeout: Duration::ZERO,
        ..Setup::default()
    };
    let m = Mounted::new(setup(), |s| fs::write(s.join("f"), &old).unwrap());
    same(read(&m.mnt("f")), &old, "mnt/f");
    assert!(fs::metadata(m.mnt("new")).is_err());
    let new = content(2, 12_000);
    fs::write(m.store("f"), &new).unwrap();
    fs::write(m.store("new"), b"n").unwrap();
    // The watched mount's tests see these within the deadline; this one never does.
    same(read(&m.mnt("f")), &old, "mnt/f, seen without a watch");
    assert_eq!(fs::metadata(m.mnt("f")).unwrap().len(), old.len() as u64);
    assert!(fs::metadata(m.mnt("new")).is_err(), "seen without a watch");
    assert_eq!(m.stats().store_changes_seen, 0);
    // A remount lists the store afresh. (Not the file's cached blocks: the checkpoint of
    // the clean unmount validates them against the store as it is then, changed already;
    // docs/design.md §14 "Changes to the store".)
    let m = m.remount(setup());
    same(read(&m.mnt("new")), b"n", "mnt/new");
    assert_eq!(fs::metadata(m.mnt("f")).unwrap().len(), new.len() as u64);
}

#[test]
fn an_uncached_mounts_own_writes_are_not_counted_as_changes() {
    need_fuse!();
    // No cache: every write goes to the store outside the mount's lock (docs/design.md §4.9),
    // re-stamped once done; the watcher checks such a file only then.
    let setup = Setup {
        capacity_blocks: 0,
        ..Setup::default()
    };
    let m = Mounted::new(setup, |_| {});
    let writers: Vec<_> = (0..4u8)
        .map(|t| {
            let path = m.mnt(&format!("w{t}"));
            std::thread::spawn(move || {
                let f = File::create(&path).unwrap();
                for i in 0..200u64 {
                    f.write_all_at(&content(t, 3000), i * 3000).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    m.create_in_store("sentinel", b"s");
    eventually("the foreign change seen", || {
        m.stats().store_changes_seen > 0
    });
    // Names deferred behind a write in flight are checked with the next batch: a second
    // foreign change, once seen, is counted after them.
    m.create_in_store("sentinel2", b"s");
    eventually("the second foreign change seen", || {
        m.stats().store_changes_seen > 1
    });
    let s = m.stats();
    assert_eq!(
        s.store_changes_seen, 2,
        "the mount's own uncached writes were counted as foreign: {s:?}"
    );
    for t in 0..4u8 {
        let mut want = Vec::new();
        for _ in 0..200 {
            want.extend(content(t, 3000));
        }
        same(read(&m.mnt(&format!("w{t}"))), &want, "mnt/w*");
    }
}

#[test]
fn a_passthrough_file_open_for_writing_at_a_store_change_is_a_conflict_its_image_wins() {
    need_fuse!();
    let old = content(1, 64 << 10);
    let setup = Setup {
        passthrough: true,
        ..Setup::default()
    };
    let m = Mounted::new(setup, |s| fs::write(s.join("p"), &old).unwrap());
    same(read(&m.mnt("p")), &old, "mnt/p"); // cached whole
    let held = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.mnt("p"))
        .unwrap();
    assert!(
        m.stats().passthrough_opens > 0,
        "this kernel has FUSE passthrough (Linux 6.9+) but the mount did not use it"
    );
    held.write_all_at(b"mine", 100).unwrap();
    m.overwrite_in_store("p", &content(2, 64 << 10));
    eventually("the conflict counted", || m.stats().store_conflicts > 0);
    // The mount cannot tell which ranges the kernel wrote: at the close the image is taken
    // whole, as the mount's writes.
    drop(held);
    let mut mine = old.clone();
    mine[100..104].copy_from_slice(b"mine");
    same(read(&m.mnt("p")), &mine, "mnt/p");
    m.state.lock().unwrap().flush_all().unwrap();
    same(fs::read(m.store("p")).ok(), &mine, "store/p");
    assert_eq!(m.stats().store_conflicts, 1);
}
