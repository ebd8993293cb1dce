//! Mount-level test of the data path off the lock (docs/design.md §14): a miss of one file
//! held in its store read (a test hook in the state stands for a slow store) while, through
//! the mount's request threads, another file's miss, a read of its cached blocks too large
//! to be served inline, and a partial write of it complete with the right bytes. With the
//! store read made under the mount's lock (as before this change) none of them completes
//! until the hold opens, and the test fails. Without FUSE it is skipped, saying so, except
//! on CI.

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::{CacheFs, FuseOptions};
use crate::store::StoreLatency;
use crate::{CleaningConfig, MountConfig, State, Variant};

#[test]
fn a_held_store_read_stalls_no_request_of_another_file() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    let data = |seed: u8| -> Vec<u8> { (0..256 * 1024).map(|i| (i % 251) as u8 ^ seed).collect() };
    let (a_data, b_data) = (data(1), data(2));
    fs::write(dir.path().join("store/a"), &a_data).unwrap();
    fs::write(dir.path().join("store/b"), &b_data).unwrap();
    let a_ino = fs::metadata(dir.path().join("store/a")).unwrap().ino();
    let cfg = MountConfig {
        store: dir.path().join("store"),
        cache_dir: dir.path().join("cache"),
        capacity_blocks: 256,
        block_size: 4096,
        variant: Variant::WB,
        latency: StoreLatency::default(),
        direct_io: true, // every read reaches the mount
        kernel_cache: false,
        cleaning: CleaningConfig::None,
        on_error: Default::default(),
    };
    let state = Arc::new(Mutex::new(State::open(cfg).unwrap()));
    let hold = state.lock().unwrap().hold_store_reads(a_ino);
    let options = FuseOptions {
        passthrough: false,
        request_threads: 4,
        ..FuseOptions::default()
    };
    let fs = CacheFs::with_options(state.clone(), options);
    let mnt = dir.path().join("mnt");
    let session = fuser::spawn_mount(fs, &mnt, &crate::fuse_config(1)).unwrap();
    let a = fs::File::open(mnt.join("a")).unwrap();
    let b = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join("b"))
        .unwrap();
    // b's first 128 KiB cached.
    let mut buf = vec![0u8; 128 * 1024];
    b.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == b_data[..128 * 1024]);

    let held = std::thread::spawn(move || {
        let mut buf = vec![0u8; 8192];
        a.read_exact_at(&mut buf, 4096).unwrap();
        buf
    });
    hold.wait_held();
    let (tx, rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        // Cached, over INLINE_MAX_BYTES: a request thread reads it.
        let mut hit = vec![0u8; 128 * 1024];
        b.read_exact_at(&mut hit, 0).unwrap();
        let mut miss = vec![0u8; 8192];
        b.read_exact_at(&mut miss, 200 * 1024).unwrap();
        // A partial block the cache lacks: its old bytes are read from the store.
        b.write_all_at(&[0xEE; 100], 150 * 1024 + 7).unwrap();
        let mut after = vec![0u8; 4096];
        b.read_exact_at(&mut after, 150 * 1024).unwrap();
        tx.send((hit, miss, after)).unwrap();
    });
    // A generous bound, not a measurement: with the store read under the lock this never
    // completes before the hold opens, which must happen before failing.
    let got = rx.recv_timeout(Duration::from_secs(30));
    // The lock is taken for the counters only if b's requests completed (else a's held read
    // may hold it): the hold opens first either way.
    let stats_held = got.is_ok().then(|| state.lock().unwrap().stats());
    hold.open();
    let a_got = held.join().unwrap();
    other.join().unwrap();
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    let (hit, miss, after) = got.expect("file b's requests waited for a's held store read");
    assert!(hit == b_data[..128 * 1024], "the cached read's bytes");
    assert!(miss == b_data[200 * 1024..208 * 1024], "the miss's bytes");
    let mut want = b_data[150 * 1024..150 * 1024 + 4096].to_vec();
    want[7..107].fill(0xEE);
    assert!(after == want, "the partial write's block");
    assert!(a_got == a_data[4096..4096 * 3], "the held read's bytes");
    // b's miss and its write's fill read the store off the lock while a's read was held.
    let stats_held = stats_held.expect("checked");
    assert!(stats_held.store_reads_unlocked >= 2, "{stats_held:?}");
}
