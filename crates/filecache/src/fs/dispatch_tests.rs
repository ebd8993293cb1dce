//! Mount-level tests of the dispatch order (docs/design.md §14 "Dispatch"): the kernel sends
//! a closed file's `RELEASE` without waiting for its reply, so an unlink that follows the
//! close can be read while the release is still being served; the unlink must find the file
//! closed and drop its dirty blocks, not write them back to a store file about to vanish.
//! Each release is held back by a test hook to make that overlap certain. Without FUSE the
//! tests are skipped, saying so, except on CI.

use std::fs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CacheFs, FuseOptions};
use crate::{MountConfig, MountStats, State, Variant};

const FILES: usize = 4;

/// Writes `FILES` files of 8 KiB through a write-back mount (dirty in the cache), closing
/// and at once unlinking each; every release waits 300 ms before it runs. Returns the
/// mount's stats after the unmount (every request served) and what the store still holds.
fn close_then_unlink(ordered: bool) -> (MountStats, usize) {
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    let cfg = MountConfig::new(
        dir.path().join("store"),
        dir.path().join("cache"),
        64,
        4096,
        Variant::WB,
    );
    let state = Arc::new(Mutex::new(State::open(cfg).unwrap()));
    let fs = CacheFs::with_options(state.clone(), FuseOptions::default())
        .with_hooks(Duration::from_millis(300), ordered);
    let mnt = dir.path().join("mnt");
    let session = fuser::spawn_mount(fs, &mnt, &crate::fuse_config(1)).unwrap();
    for i in 0..FILES {
        let path = mnt.join(format!("f{i}"));
        fs::write(&path, vec![i as u8 + 1; 8192]).unwrap();
        fs::remove_file(&path).unwrap();
    }
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    let stats = state.lock().unwrap().stats();
    let left = fs::read_dir(dir.path().join("store")).unwrap().count();
    (stats, left)
}

#[test]
fn an_unlink_after_a_close_waits_for_its_release_and_drops_the_dirty_blocks() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let (stats, left) = close_then_unlink(true);
    assert_eq!(left, 0);
    assert_eq!(stats.files_deleted, FILES as u64);
    assert_eq!(
        stats.core.write_backs_cancelled,
        2 * FILES as u64,
        "{stats:?}"
    );
    assert_eq!(stats.core.write_backs, 0, "{stats:?}");
    assert_eq!(stats.store_bytes_written, 0, "{stats:?}");
    assert_eq!(stats.dirty_blocks, 0);
}

/// The same with the order off: the unlinks overtake the held releases, find the files open
/// and write their dirty blocks back (the hazard the order prevents; this shows the test
/// above can fail).
#[test]
fn without_the_order_an_unlink_overtakes_the_release_and_writes_back() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let (stats, left) = close_then_unlink(false);
    assert_eq!(left, 0);
    assert_eq!(stats.files_deleted, FILES as u64);
    assert!(stats.store_bytes_written > 0, "{stats:?}");
}
