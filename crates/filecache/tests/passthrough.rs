//! FUSE passthrough of files the cache holds whole (docs/design.md §14), in process: their
//! reads never reach the mount, what the kernel writes to their images reaches the cache (and
//! its journal) at close and fsync, files cached in part stay on the block path, concurrent
//! opens of one file share its image, a truncate reaches the image, and a mount told not to
//! pass through never does. An image is kept across opens while the file is unchanged, and
//! every other path that changes the file (a write on the block path, a truncate, an
//! eviction, a store change, an unlink or rename over it) makes the next open see the new
//! content; files below the mount's minimum size stay on the block path. Without FUSE the
//! tests are skipped, saying so, except on CI.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tiercache_filecache::{FuseOptions, MountConfig, MountStats, State, Variant};

struct Mounted {
    session: Option<fuser::BackgroundSession>,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

impl Mounted {
    fn new(capacity_blocks: u32, passthrough: bool) -> Mounted {
        Mounted::with_store(capacity_blocks, passthrough, |_| {})
    }

    /// A mount passing through files of at least `min_size` bytes.
    fn with_min_size(capacity_blocks: u32, min_size: u64) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        for d in ["store", "cache", "mnt"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        Mounted::with_options(dir, capacity_blocks, true, min_size)
    }

    /// A mount over a store `setup` fills first.
    fn with_store(
        capacity_blocks: u32,
        passthrough: bool,
        setup: impl FnOnce(&std::path::Path),
    ) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        for d in ["store", "cache", "mnt"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        setup(&dir.path().join("store"));
        Mounted::over(dir, capacity_blocks, passthrough)
    }

    fn over(dir: tempfile::TempDir, capacity_blocks: u32, passthrough: bool) -> Mounted {
        Mounted::with_options(dir, capacity_blocks, passthrough, 0)
    }

    fn with_options(
        dir: tempfile::TempDir,
        capacity_blocks: u32,
        passthrough: bool,
        passthrough_min_size: u64,
    ) -> Mounted {
        let cfg = MountConfig::new(
            dir.path().join("store"),
            dir.path().join("cache"),
            capacity_blocks,
            4096,
            Variant::WB,
        );
        let (session, state) = tiercache_filecache::spawn_mount_with(
            cfg,
            &dir.path().join("mnt"),
            FuseOptions {
                passthrough,
                passthrough_min_size,
                ..FuseOptions::default()
            },
            |_| Ok(()),
        )
        .unwrap();
        Mounted {
            session: Some(session),
            state,
            dir,
        }
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn stats(&self) -> MountStats {
        self.state.lock().unwrap().stats()
    }

    /// Unmounts (a clean unmount: the journal is synced) and mounts the same directories
    /// again.
    fn remount(self, capacity_blocks: u32) -> Mounted {
        self.remount_after(capacity_blocks, |_| {})
    }

    /// [`Mounted::remount`], with `between` run on the store while unmounted.
    fn remount_after(mut self, capacity_blocks: u32, between: impl FnOnce(&Path)) -> Mounted {
        self.unmount();
        between(&self.store());
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        // The old state holds the cache directory's lock.
        drop(self);
        Mounted::over(dir, capacity_blocks, true)
    }

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
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Whether the mount negotiated passthrough: a created file is passed through.
fn passes_through(m: &Mounted) -> bool {
    File::create(m.mnt().join("probe")).unwrap();
    m.stats().passthrough_opens > 0
}

#[test]
fn a_file_held_whole_is_read_and_written_without_the_mount() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(
        passes_through(&m),
        "this kernel has FUSE passthrough (Linux 6.9+) but the mount did not use it"
    );
    // Created empty (held whole): written through its image, brought into the cache at close.
    let data = content(7, 300_000);
    let mut f = File::create(m.mnt().join("a")).unwrap();
    f.write_all(&data).unwrap();
    let before_close = m.stats();
    assert_eq!(before_close.writes, 0, "writes reached the mount");
    drop(f);
    let s = m.stats();
    assert_eq!(s.passthrough_bytes_ingested, data.len() as u64);
    // Write-back: every block of it is dirty in the cache, none in the store yet.
    assert_eq!(s.dirty_blocks, (data.len() as u64).div_ceil(4096));
    assert_eq!(fs::metadata(m.store().join("a")).unwrap().len(), 0);
    // Read back: the open copies it from the cache; the reads themselves do not reach the
    // mount.
    let mut f = File::open(m.mnt().join("a")).unwrap();
    let opened = m.stats();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert!(back == data, "passthrough read differs");
    assert_eq!(m.stats().reads, opened.reads, "reads reached the mount");
    assert_eq!(f.metadata().unwrap().len(), data.len() as u64);
}

#[test]
fn fsync_of_a_passthrough_file_journals_its_writes_and_they_survive_a_remount() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    if !passes_through(&m) {
        panic!("no FUSE passthrough on this kernel");
    }
    let path = m.mnt().join("f");
    let first = content(1, 40_000);
    fs::write(&path, &first).unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let patch = vec![0xEE; 5000];
    f.write_all_at(&patch, 10_000).unwrap();
    f.write_all_at(b"tail", 40_000).unwrap();
    let ingested = m.stats().passthrough_bytes_ingested;
    f.sync_all().unwrap();
    let s = m.stats();
    // Only the blocks that changed were written into the cache: 5000 bytes over blocks 2..=3
    // and the new tail in block 9.
    assert_eq!(s.passthrough_bytes_ingested - ingested, 2 * 4096 + 3140);
    assert!(s.fsyncs >= 1);
    // The size is the image's while it is open.
    assert_eq!(fs::metadata(&path).unwrap().len(), 40_004);
    drop(f);
    let mut want = first.clone();
    want[10_000..15_000].copy_from_slice(&patch);
    want.extend_from_slice(b"tail");
    // The store has none of it (write-back); the remount recovers it from the journal.
    assert_eq!(fs::read(m.store().join("f")).unwrap(), Vec::<u8>::new());
    let m = m.remount(1024);
    assert!(fs::read(m.mnt().join("f")).unwrap() == want);
}

#[test]
fn a_file_cached_in_part_stays_on_the_block_path_until_held_whole() {
    need_fuse!();
    let data = content(3, 64 * 4096);
    let m = Mounted::with_store(1024, true, |store| {
        fs::write(store.join("old"), &data).unwrap()
    });
    if !passes_through(&m) {
        panic!("no FUSE passthrough on this kernel");
    }
    let opens = m.stats().passthrough_opens;
    // Not cached at all: the block path serves it, and reading it whole caches it whole.
    let mut f = File::open(m.mnt().join("old")).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    drop(f);
    assert!(back == data);
    let s = m.stats();
    assert_eq!(
        s.passthrough_opens, opens,
        "an uncached file was passed through"
    );
    assert!(s.reads > 0);
    assert_eq!(s.cached_blocks, 64);
    // Now held whole: the next open passes it through.
    let f = File::open(m.mnt().join("old")).unwrap();
    assert_eq!(m.stats().passthrough_opens, opens + 1);
    let mut half = vec![0u8; 4096];
    f.read_exact_at(&mut half, 4096 * 10).unwrap();
    assert!(half[..] == data[4096 * 10..4096 * 11]);
}

#[test]
fn concurrent_opens_of_one_file_share_its_image_and_a_truncate_reaches_it() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    if !passes_through(&m) {
        panic!("no FUSE passthrough on this kernel");
    }
    let path = m.mnt().join("shared");
    fs::write(&path, content(5, 20_000)).unwrap();
    let reader = File::open(&path).unwrap();
    let writer = OpenOptions::new().write(true).open(&path).unwrap();
    let opens = m.stats().passthrough_opens;
    assert!(opens >= 3, "{opens} passthrough opens");
    writer.write_all_at(b"new bytes", 100).unwrap();
    let mut seen = [0u8; 9];
    reader.read_exact_at(&mut seen, 100).unwrap();
    assert_eq!(
        &seen, b"new bytes",
        "the second open does not share the image"
    );
    writer.set_len(4000).unwrap();
    assert_eq!(reader.metadata().unwrap().len(), 4000);
    drop(writer);
    drop(reader);
    let mut want = content(5, 20_000);
    want[100..109].copy_from_slice(b"new bytes");
    want.truncate(4000);
    assert!(fs::read(&path).unwrap() == want);
    // Flushed to the store, it is the same there.
    let mut st = m.state.lock().unwrap();
    st.flush_all().unwrap();
    drop(st);
    assert!(fs::read(m.store().join("shared")).unwrap() == want);
}

#[test]
fn a_mount_told_not_to_pass_through_serves_every_file_itself() {
    need_fuse!();
    let m = Mounted::new(1024, false);
    let data = content(9, 50_000);
    fs::write(m.mnt().join("x"), &data).unwrap();
    assert!(fs::read(m.mnt().join("x")).unwrap() == data);
    let s = m.stats();
    assert_eq!(s.passthrough_opens, 0);
    assert!(s.writes > 0);
}

/// The store inode of `name`: the mount's id of the file.
fn id_of(m: &Mounted, name: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(m.store().join(name)).unwrap().ino()
}

/// Writes `name` through the mount and waits for the kernel's release of it (sent after the
/// close returns): its image is then kept idle, or gone.
fn write_released(m: &Mounted, name: &str, data: &[u8]) {
    fs::write(m.mnt().join(name), data).unwrap();
    wait_released(m, name);
}

/// Waits until no handle of `name` is open in the mount (the kernel sends a release after
/// the close returns).
fn wait_released(m: &Mounted, name: &str) {
    let id = id_of(m, name);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while m
        .state
        .lock()
        .unwrap()
        .nodes
        .get(&id)
        .is_some_and(|n| n.handles > 0)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} was never released"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `name`'s image in the cache directory (kept or open).
fn image_of(m: &Mounted, name: &str) -> PathBuf {
    m.dir
        .path()
        .join("cache/passthrough")
        .join(id_of(m, name).to_string())
}

/// Opens `name` through the mount and reads it whole; asserts it was passed through, and
/// returns its bytes and whether its image was a kept one (no copy).
fn read_passed(m: &Mounted, name: &str) -> (Vec<u8>, bool) {
    let before = m.stats();
    let mut f = File::open(m.mnt().join(name)).unwrap();
    let opened = m.stats();
    assert_eq!(
        opened.passthrough_opens,
        before.passthrough_opens + 1,
        "{name} was not passed through"
    );
    let reused = opened.passthrough_images_reused - before.passthrough_images_reused;
    let copied = opened.passthrough_images_copied - before.passthrough_images_copied;
    assert_eq!(reused + copied, 1, "{name}: one image, kept or copied");
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    drop(f);
    wait_released(m, name);
    (back, reused == 1)
}

#[test]
fn a_reopened_unchanged_file_is_served_by_its_kept_image_without_a_copy() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    let data = content(11, 200_000);
    write_released(&m, "k", &data);
    let copied = m.stats().passthrough_images_copied;
    assert!(image_of(&m, "k").is_file(), "the image was not kept");
    for round in 0..3 {
        let (back, reused) = read_passed(&m, "k");
        assert!(reused, "round {round}: the kept image was copied again");
        assert!(back == data, "round {round}: the kept image differs");
    }
    // Written through the kept image and closed: ingested, and kept again with the new bytes.
    let f = OpenOptions::new()
        .write(true)
        .open(m.mnt().join("k"))
        .unwrap();
    f.write_all_at(b"patched", 150_000).unwrap();
    drop(f);
    wait_released(&m, "k");
    let mut want = data;
    want[150_000..150_007].copy_from_slice(b"patched");
    let (back, reused) = read_passed(&m, "k");
    assert!(reused && back == want);
    assert_eq!(m.stats().passthrough_images_copied, copied);
}

#[test]
fn a_write_on_the_block_path_makes_the_next_open_copy_the_new_content() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    let data = content(12, 100_000);
    write_released(&m, "w", &data);
    assert!(image_of(&m, "w").is_file());
    // The data path's write, as the block path makes it (FUSE write of a file not passed
    // through): the kept image is left in place, and its version is no longer the file's.
    let id = id_of(&m, "w");
    m.state
        .lock()
        .unwrap()
        .write(id, 5000, b"from the block path")
        .unwrap();
    let mut want = data;
    want[5000..5019].copy_from_slice(b"from the block path");
    let (back, reused) = read_passed(&m, "w");
    assert!(!reused, "a stale image was served");
    assert!(
        back == want,
        "the next open does not see the block path's write"
    );
}

#[test]
fn a_truncate_by_path_makes_the_next_open_see_the_cut_file() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    let data = content(13, 100_000);
    write_released(&m, "t", &data);
    let image = image_of(&m, "t");
    assert!(image.is_file());
    // truncate(2): a setattr with no open file.
    let path =
        std::ffi::CString::new(m.mnt().join("t").into_os_string().into_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::truncate(path.as_ptr(), 30_001) }, 0);
    assert!(!image.exists(), "the kept image outlived the truncate");
    let (back, reused) = read_passed(&m, "t");
    assert!(!reused);
    assert!(
        back == data[..30_001],
        "the next open does not see the truncate"
    );
}

#[test]
fn an_eviction_of_a_block_makes_the_kept_image_stale() {
    need_fuse!();
    // 64 blocks of cache: "a" (25 blocks) then "b" (50 blocks) do not fit together. Files
    // are created on the block path (below 64 KiB), so only "a" gets an image, which the
    // budget (the cache's 256 KiB) keeps: only its version can make it stale.
    let m = Mounted::with_min_size(64, 64 * 1024);
    let a = content(14, 25 * 4096);
    write_released(&m, "a", &a);
    let (back, reused) = read_passed(&m, "a");
    assert!(!reused && back == a);
    assert!(image_of(&m, "a").is_file());
    let evictions = m.stats().core.evictions;
    write_released(&m, "b", &content(15, 50 * 4096));
    assert!(m.stats().core.evictions > evictions, "nothing was evicted");
    assert!(image_of(&m, "a").is_file(), "the image was not kept idle");
    // Cached in part: the block path serves it (and reading it caches it whole again).
    let opens = m.stats().passthrough_opens;
    assert!(fs::read(m.mnt().join("a")).unwrap() == a);
    wait_released(&m, "a");
    assert_eq!(
        m.stats().passthrough_opens,
        opens,
        "a file cached in part passed through"
    );
    // Whole again, with the same bytes, but not at the version its image was kept at.
    let (back, reused) = read_passed(&m, "a");
    assert!(!reused, "an image kept before an eviction was served");
    assert!(back == a);
}

#[test]
fn a_store_change_while_unmounted_is_seen_and_no_image_outlives_a_restart() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    let data = content(16, 80_000);
    write_released(&m, "s", &data);
    let image = image_of(&m, "s");
    assert!(image.is_file());
    // Written back and clean: the clean unmount's checkpoint keeps its blocks.
    m.state.lock().unwrap().flush_all().unwrap();
    let changed = content(17, 80_000);
    let m = m.remount_after(1024, |store| {
        std::thread::sleep(std::time::Duration::from_millis(20)); // a later mtime
        fs::write(store.join("s"), &changed).unwrap();
    });
    assert!(!image.exists(), "an image outlived the restart");
    assert!(m.stats().restored_blocks > 0, "the restart was cold");
    // The first open finds the store changed: its blocks are dropped, the block path reads
    // the store; then it is held whole and the next open copies the new content.
    assert!(fs::read(m.mnt().join("s")).unwrap() == changed);
    wait_released(&m, "s");
    assert!(m.stats().restored_blocks_dropped > 0);
    let (back, reused) = read_passed(&m, "s");
    assert!(!reused);
    assert!(back == changed, "the store's change is not seen");
}

#[test]
fn an_unlink_or_a_rename_over_removes_the_kept_image() {
    need_fuse!();
    let m = Mounted::new(1024, true);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    // Unlinked, then a new file of that name (the store may give it the same inode number).
    write_released(&m, "u", &content(18, 60_000));
    let image = image_of(&m, "u");
    assert!(image.is_file());
    fs::remove_file(m.mnt().join("u")).unwrap();
    assert!(!image.exists(), "the unlinked file's image was kept");
    let newer = content(19, 60_000);
    write_released(&m, "u", &newer);
    assert!(fs::read(m.mnt().join("u")).unwrap() == newer);
    // Renamed over.
    write_released(&m, "v", &content(20, 60_000));
    let image = image_of(&m, "v");
    assert!(image.is_file());
    let other = content(21, 60_000);
    write_released(&m, "x", &other);
    fs::rename(m.mnt().join("x"), m.mnt().join("v")).unwrap();
    assert!(!image.exists(), "the replaced file's image was kept");
    let (back, _) = read_passed(&m, "v");
    assert!(back == other, "the renamed-over name reads the old file");
}

#[test]
fn a_file_below_the_minimum_size_stays_on_the_block_path() {
    need_fuse!();
    let m = Mounted::with_min_size(1024, 64 * 1024);
    let small = content(22, 10_000);
    let large = content(23, 100_000);
    write_released(&m, "small", &small);
    write_released(&m, "large", &large);
    // Both were created empty: below the size, on the block path.
    let s = m.stats();
    assert_eq!(s.passthrough_opens, 0);
    assert!(s.writes > 0, "writes did not reach the mount");
    let below = s.passthrough_below_min_size;
    // Held whole now: the small one stays on the block path, the large one passes through.
    let mut f = File::open(m.mnt().join("small")).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    drop(f);
    assert!(back == small);
    let s = m.stats();
    assert_eq!(s.passthrough_opens, 0, "a small file was passed through");
    assert_eq!(s.passthrough_below_min_size, below + 1);
    let (back, _) = read_passed(&m, "large");
    assert!(back == large);
}

#[test]
fn kept_images_past_those_held_open_are_reused_by_path_and_never_stale() {
    need_fuse!();
    // More kept images than the mount holds open and registered (64): the older ones are
    // kept by path alone, and every one is taken again without a copy while its file is
    // unchanged, held or not.
    let m = Mounted::with_min_size(1024, 0);
    assert!(passes_through(&m), "no FUSE passthrough on this kernel");
    let files: Vec<(String, Vec<u8>)> = (0..70u8)
        .map(|i| (format!("h{i}"), content(i, 5000 + i as usize)))
        .collect();
    for (name, data) in &files {
        write_released(&m, name, data);
        assert!(
            image_of(&m, name).is_file(),
            "{name}: its image was not kept"
        );
    }
    // The oldest (held by path now) is changed on the block path: its image is stale.
    let id = id_of(&m, "h0");
    m.state.lock().unwrap().write(id, 10, b"changed").unwrap();
    let copied = m.stats().passthrough_images_copied;
    for (i, (name, data)) in files.iter().enumerate() {
        let (back, reused) = read_passed(&m, name);
        if i == 0 {
            let mut want = data.clone();
            want[10..17].copy_from_slice(b"changed");
            assert!(!reused && back == want, "h0: a stale image was served");
        } else {
            assert!(reused, "{name}: its kept image was copied again");
            assert!(&back == data, "{name}: its kept image differs");
        }
    }
    assert_eq!(m.stats().passthrough_images_copied, copied + 1);
}

/// A handle opened read-only is answered with `FOPEN_NOFLUSH`, so its close sends no
/// `FUSE_FLUSH` (counted in `MountStats::flushes`), passed through or on the block path; a
/// writable handle's close still does. (With passthrough negotiated the kernel has no
/// writeback caching, under which it would flush regardless.)
#[test]
fn a_read_only_close_sends_no_flush_and_a_writable_close_does() {
    need_fuse!();
    for (min_size, passed) in [(0, true), (u64::MAX, false)] {
        let m = Mounted::with_min_size(1024, min_size);
        // Negotiated on both mounts (the same kernel); only the first passes files through.
        if passed {
            assert!(
                passes_through(&m),
                "this kernel has FUSE passthrough (Linux 6.9+) but the mount did not use it"
            );
        }
        let data = content(3, 20_000);
        fs::write(m.mnt().join("r"), &data).unwrap();
        let before = m.stats();
        for _ in 0..3 {
            assert!(fs::read(m.mnt().join("r")).unwrap() == data);
        }
        let after_reads = m.stats();
        assert_eq!(
            after_reads.flushes, before.flushes,
            "passed {passed}: read-only closes flushed"
        );
        assert_eq!(
            after_reads.passthrough_opens > before.passthrough_opens,
            passed,
            "passed {passed}: the reads' mode"
        );
        drop(
            OpenOptions::new()
                .write(true)
                .open(m.mnt().join("r"))
                .unwrap(),
        );
        assert_eq!(
            m.stats().flushes,
            before.flushes + 1,
            "passed {passed}: a writable close must flush"
        );
    }
}
