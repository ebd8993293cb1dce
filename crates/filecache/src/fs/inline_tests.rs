//! Mount-level tests of the reads and writes served on the reading thread (docs/design.md
//! §14 "Served inline"): with the only request thread held by a read that needs the store
//! (a test gate stands for a slow store), a read of cached blocks and a write over cached
//! blocks of another file still complete, counted in `served_inline`; the held read is not
//! served inline. Without FUSE the tests are skipped, saying so, except on CI.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::{CacheFs, FuseOptions, Gate};
use crate::store::StoreLatency;
use crate::{CleaningConfig, MountConfig, State, Variant};

#[test]
fn cached_requests_are_served_inline_while_a_store_read_is_held() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    // In the store before the mount: nothing of it is cached.
    fs::write(dir.path().join("store/cold"), vec![7u8; 16384]).unwrap();
    let cfg = MountConfig {
        store: dir.path().join("store"),
        cache_dir: dir.path().join("cache"),
        capacity_blocks: 64,
        block_size: 4096,
        variant: Variant::WB,
        latency: StoreLatency::default(),
        // Every read reaches the mount (no page cache), and no passthrough.
        direct_io: true,
        kernel_cache: false,
        cleaning: CleaningConfig::None,
        on_error: Default::default(),
    };
    let state = Arc::new(Mutex::new(State::open(cfg).unwrap()));
    let gate = Arc::new(Gate::default());
    // One request thread: the held read occupies it, so what completes meanwhile was
    // served on the reading thread.
    let options = FuseOptions {
        request_threads: 1,
        ..FuseOptions::default()
    };
    let fs = CacheFs::with_options(state.clone(), options).with_read_gate(gate.clone());
    let mnt = dir.path().join("mnt");
    let session = fuser::spawn_mount(fs, &mnt, &crate::fuse_config(1)).unwrap();

    // The hot file's blocks are admitted dirty by its write (write-back).
    fs::write(mnt.join("hot"), vec![1u8; 8192]).unwrap();
    let hot = OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join("hot"))
        .unwrap();
    let cold = fs::File::open(mnt.join("cold")).unwrap();
    let before = state.lock().unwrap().stats();

    let (cold_tx, cold_rx) = mpsc::channel();
    let cold_reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        cold.read_exact_at(&mut buf, 4096).unwrap();
        cold_tx.send(buf).unwrap();
    });
    // The cold read is handed off and held at the gate.
    while gate.arrived.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (hot_tx, hot_rx) = mpsc::channel();
    let hot_user = std::thread::spawn(move || {
        let mut buf = vec![0u8; 8192];
        hot.read_exact_at(&mut buf, 0).unwrap();
        hot.write_all_at(&[2u8; 4096], 4096).unwrap();
        let mut after = vec![0u8; 8192];
        hot.read_exact_at(&mut after, 0).unwrap();
        hot_tx.send((buf, after)).unwrap();
    });
    // A generous bound, not a measurement: without the inline path this never completes
    // (the only request thread is held), and the gate must open before failing.
    let hot_result = hot_rx.recv_timeout(Duration::from_secs(30));
    let cold_done_meanwhile = cold_rx.try_recv().is_ok();
    let held = state.lock().unwrap().stats();
    gate.open();
    let cold_data = cold_rx.recv().unwrap();
    cold_reader.join().unwrap();
    hot_user.join().unwrap();
    // A read larger than INLINE_MAX_BYTES of cached blocks goes to the pool (its copy and
    // reply would hold up the reading thread): right bytes, nothing counted inline.
    let big_data: Vec<u8> = (0..128 * 1024).map(|i| (i % 251) as u8).collect();
    fs::write(mnt.join("big"), &big_data).unwrap();
    let big_before = state.lock().unwrap().stats();
    let mut big_buf = vec![0u8; big_data.len()];
    fs::File::open(mnt.join("big"))
        .unwrap()
        .read_exact_at(&mut big_buf, 0)
        .unwrap();
    let big_after = state.lock().unwrap().stats();
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    let after = state.lock().unwrap().stats();

    let (hot_read, hot_after) = hot_result.expect("the cached requests completed while held");
    assert!(!cold_done_meanwhile, "the store read was held");
    assert_eq!(hot_read, vec![1u8; 8192]);
    let mut want = vec![1u8; 4096];
    want.extend([2u8; 4096]);
    assert_eq!(hot_after, want);
    // Two reads and a write of the hot file, all inline; the cold read was not.
    assert_eq!(held.served_inline - before.served_inline, 3, "{held:?}");
    assert_eq!(after.served_inline, held.served_inline, "{after:?}");
    assert_eq!(cold_data, vec![7u8; 4096]);
    assert!(big_buf == big_data, "the big read's bytes");
    assert_eq!(
        big_after.core.read_misses, big_before.core.read_misses,
        "the big file was cached: {big_after:?}"
    );
    assert_eq!(
        big_after.served_inline,
        big_before.served_inline,
        "a read over {} bytes was served inline",
        super::inline::INLINE_MAX_BYTES
    );
    assert!(
        after.core.read_misses > before.core.read_misses,
        "{after:?}"
    );
    assert_eq!(
        held.reads - before.reads,
        2,
        "the cold read had not run: {held:?}"
    );
}
