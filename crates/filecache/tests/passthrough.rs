//! FUSE passthrough of files the cache holds whole (docs/design.md §14), in process: their
//! reads never reach the mount, what the kernel writes to their images reaches the cache (and
//! its journal) at close and fsync, files cached in part stay on the block path, concurrent
//! opens of one file share its image, a truncate reaches the image, and a mount told not to
//! pass through never does. Without FUSE the tests are skipped, saying so, except on CI.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tiercache_filecache::store::StoreLatency;
use tiercache_filecache::{CleaningConfig, FuseOptions, MountConfig, MountStats, State, Variant};

struct Mounted {
    session: Option<fuser::BackgroundSession>,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

impl Mounted {
    fn new(capacity_blocks: u32, passthrough: bool) -> Mounted {
        Mounted::with_store(capacity_blocks, passthrough, |_| {})
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
        let cfg = MountConfig {
            store: dir.path().join("store"),
            cache_dir: dir.path().join("cache"),
            capacity_blocks,
            block_size: 4096,
            variant: Variant::WB,
            latency: StoreLatency::default(),
            direct_io: false,
            kernel_cache: true,
            cleaning: CleaningConfig::None,
            on_error: Default::default(),
        };
        let (session, state) = tiercache_filecache::spawn_mount_with(
            cfg,
            &dir.path().join("mnt"),
            FuseOptions { passthrough },
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
    fn remount(mut self, capacity_blocks: u32) -> Mounted {
        self.unmount();
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
