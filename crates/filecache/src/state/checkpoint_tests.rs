//! Warm restart (docs/design.md §15): a clean unmount's checkpoint brings the clean blocks
//! back; a torn one, one a crash cut short, or one the mount outlived by writing the blocks
//! file is never used; a store file changed while unmounted is served from the store.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::State;
use crate::{MountConfig, Variant};

const BS: usize = 512;

fn open(dir: &Path, variant: Variant) -> State {
    State::open(MountConfig::new(
        dir.join("store"),
        dir.join("cache"),
        16,
        BS as u32,
        variant,
    ))
    .unwrap()
}

fn content(name: &str, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ name.as_bytes()[0])
        .collect()
}

/// The node id of store file `name`, met as a lookup meets it.
fn meet(st: &mut State, dir: &Path, name: &str) -> u64 {
    let md = std::fs::metadata(dir.join("store").join(name)).unwrap();
    st.remember(PathBuf::from(name), &md).unwrap()
}

/// A store with files `f` (3 blocks less a bit) and `g` (1 block less a bit), both read
/// through a cache that then unmounts cleanly; returns the directory.
fn cached_and_unmounted(variant: Variant) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    for (name, len) in [("f", 3 * BS - 10), ("g", BS - 7)] {
        std::fs::write(dir.path().join("store").join(name), content(name, len)).unwrap();
    }
    let mut st = open(dir.path(), variant);
    for (name, len) in [("f", 3 * BS - 10), ("g", BS - 7)] {
        let id = meet(&mut st, dir.path(), name);
        assert_eq!(st.read(id, 0, len as u32).unwrap(), content(name, len));
    }
    st.sync_journal().unwrap();
    assert!(checkpoint::path(&dir.path().join("cache")).exists());
    dir
}

/// Reads all of `name` after a restart; returns (bytes, block hits, store reads).
fn read_after(st: &mut State, dir: &Path, name: &str, len: usize) -> (Vec<u8>, u64, u64) {
    let before = st.stats();
    let id = meet(st, dir, name);
    let got = st.read(id, 0, len as u32).unwrap();
    let after = st.stats();
    (
        got,
        after.core.read_hits - before.core.read_hits,
        after.store_reads - before.store_reads,
    )
}

#[test]
fn a_clean_unmount_restarts_warm_and_reads_hit() {
    for variant in [Variant::WB, Variant::WT] {
        let dir = cached_and_unmounted(variant);
        let mut st = open(dir.path(), variant);
        assert_eq!(st.stats().restored_blocks, 4);
        // Taken: a crash from here on restarts cold.
        assert!(!checkpoint::path(&dir.path().join("cache")).exists());
        let (got, hits, store_reads) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
        assert_eq!(got, content("f", 3 * BS - 10));
        assert_eq!((hits, store_reads), (3, 0), "{variant}");
        let (got, hits, store_reads) = read_after(&mut st, dir.path(), "g", BS - 7);
        assert_eq!(got, content("g", BS - 7));
        assert_eq!((hits, store_reads), (1, 0));
    }
}

#[test]
fn a_file_changed_while_unmounted_is_read_from_the_store() {
    let dir = cached_and_unmounted(Variant::WB);
    // Same size, new content: the mtime/ctime tell.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let changed: Vec<u8> = content("g", BS - 7).iter().map(|b| !b).collect();
    std::fs::write(dir.path().join("store/g"), &changed).unwrap();
    let mut st = open(dir.path(), Variant::WB);
    let (got, hits, _) = read_after(&mut st, dir.path(), "g", BS - 7);
    assert_eq!(got, changed);
    assert_eq!(hits, 0);
    assert_eq!(st.stats().restored_blocks_dropped, 1);
    // The unchanged file still hits.
    let (got, hits, _) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
    assert_eq!((got, hits), (content("f", 3 * BS - 10), 3));
}

#[test]
fn a_torn_checkpoint_starts_cold_and_serves_the_store() {
    let dir = cached_and_unmounted(Variant::WB);
    let path = checkpoint::path(&dir.path().join("cache"));
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 5).unwrap();
    drop(f);
    let mut st = open(dir.path(), Variant::WB);
    assert_eq!(st.stats().restored_blocks, 0);
    assert!(!path.exists());
    let (got, hits, store_reads) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
    assert_eq!(got, content("f", 3 * BS - 10));
    assert_eq!(hits, 0);
    assert!(store_reads > 0);
}

#[test]
fn a_crash_while_writing_a_checkpoint_keeps_the_previous_one() {
    let dir = cached_and_unmounted(Variant::WB);
    let mut st = open(dir.path(), Variant::WB);
    // Checkpoint A (nothing written since the restart), then a crash half-way through B.
    assert_eq!(st.write_checkpoint().unwrap(), 4);
    let a = std::fs::read(checkpoint::path(&dir.path().join("cache"))).unwrap();
    for keep in [0, 10, a.len() / 2, a.len() - 1] {
        st.checkpoint_crash_after = Some(keep);
        assert!(st.write_checkpoint().is_err());
        assert_eq!(
            std::fs::read(checkpoint::path(&dir.path().join("cache"))).unwrap(),
            a
        );
    }
    drop(st); // the crash
    let mut st = open(dir.path(), Variant::WB);
    assert_eq!(st.stats().restored_blocks, 4);
    let (got, hits, _) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
    assert_eq!((got, hits), (content("f", 3 * BS - 10), 3));

    // With no previous checkpoint, a crash mid-write leaves none: cold, correct.
    st.checkpoint_crash_after = Some(a.len() / 2);
    assert!(st.write_checkpoint().is_err());
    drop(st);
    let mut st = open(dir.path(), Variant::WB);
    assert_eq!(st.stats().restored_blocks, 0);
    let (got, hits, _) = read_after(&mut st, dir.path(), "g", BS - 7);
    assert_eq!((got, hits), (content("g", BS - 7), 0));
}

#[test]
fn a_mount_that_writes_after_its_checkpoint_retires_it_and_a_crash_restarts_cold() {
    let dir = cached_and_unmounted(Variant::WB);
    let mut st = open(dir.path(), Variant::WB);
    st.write_checkpoint().unwrap();
    let path = checkpoint::path(&dir.path().join("cache"));
    assert!(path.exists());
    // A write to the cache (fills and overwrites slots): the checkpoint goes first.
    let id = meet(&mut st, dir.path(), "f");
    let new = vec![0x5A; 2 * BS];
    st.write(id, 100, &new).unwrap();
    assert!(!path.exists());
    st.fsync(id).unwrap();
    drop(st); // kill -9
    let mut st = open(dir.path(), Variant::WB);
    assert_eq!(st.stats().restored_blocks, 0);
    assert!(st.stats().recovered_blocks > 0);
    let mut want = content("f", 3 * BS - 10);
    want[100..100 + 2 * BS].copy_from_slice(&new);
    let (got, _, _) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
    assert_eq!(got, want);
}

#[test]
fn dirty_files_are_left_out_and_their_data_comes_back_by_the_journal() {
    let dir = cached_and_unmounted(Variant::WB);
    let mut st = open(dir.path(), Variant::WB);
    let id = meet(&mut st, dir.path(), "g");
    st.write(id, 0, b"dirty").unwrap();
    // f is not met by this mount: its restored blocks are carried into the next checkpoint.
    st.sync_journal().unwrap(); // clean unmount with g dirty
    drop(st);
    let mut st = open(dir.path(), Variant::WB);
    assert_eq!(st.stats().recovered_blocks, 1);
    assert_eq!(st.stats().restored_blocks, 3, "f only");
    let mut want = content("g", BS - 7);
    want[..5].copy_from_slice(b"dirty");
    let (got, hits, _) = read_after(&mut st, dir.path(), "g", BS - 7);
    assert_eq!((got, hits), (want, 0));
    let (_, hits, _) = read_after(&mut st, dir.path(), "f", 3 * BS - 10);
    assert_eq!(hits, 3);
}
