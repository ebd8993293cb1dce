//! Fault injection on the write path: the process "dies" (the journal refuses every record
//! from some point on and the state is dropped) in the middle of overwriting fsync'd dirty
//! blocks; recovery must then give each block its old or its new version, never neither.

use std::path::{Path, PathBuf};

use super::State;
use crate::recovery::recover;
use crate::store::CacheDir;
use crate::{MountConfig, Variant};

const BS: usize = 512;

/// A state under `variant` over a store holding one empty file, `f`, and that file's id.
fn with_one_file(variant: Variant) -> (tempfile::TempDir, State, u64) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    std::fs::write(dir.path().join("store/f"), b"").unwrap();
    let mut st = open_variant(dir.path(), variant);
    let md = std::fs::metadata(dir.path().join("store/f")).unwrap();
    let id = st.remember(PathBuf::from("f"), &md).unwrap();
    (dir, st, id)
}

fn open_variant(dir: &Path, variant: Variant) -> State {
    State::open(MountConfig::new(
        dir.join("store"),
        dir.join("cache"),
        8,
        BS as u32,
        variant,
    ))
    .unwrap()
}

#[test]
fn a_crash_while_overwriting_dirty_blocks_leaves_the_old_or_the_new_version() {
    // Overwrites of 3 fsync'd dirty blocks: whole, partial, and spanning two of them.
    let cases: [(usize, usize); 3] = [(0, BS), (700, 100), (300, 800)];
    for (at, len) in cases {
        // Every crash point the overwrite has: before each of its journal records.
        for appends in 0..=3u64 {
            let (dir, mut st, id) = with_one_file(Variant::WB);
            let old: Vec<u8> = (0..3 * BS).map(|i| (i % 251) as u8).collect();
            st.write(id, 0, &old).unwrap();
            st.fsync(id).unwrap();
            // A second version, also fsync'd, so the blocks have been overwritten once.
            let old: Vec<u8> = old.iter().map(|b| b ^ 0x11).collect();
            st.write(id, 0, &old).unwrap();
            st.fsync(id).unwrap();

            st.journal.as_mut().unwrap().appends_before_crash = Some(appends);
            let mut new = old.clone();
            new[at..at + len].fill(0xEE);
            let done = st.write(id, at as u64, &new[at..at + len]).is_ok();
            drop(st); // the process is gone: nothing more reaches the cache

            let cache = CacheDir::new(&dir.path().join("cache"));
            let recovered = recover(&dir.path().join("store"), &cache).unwrap();
            let mut back = std::fs::read(dir.path().join("store/f")).unwrap();
            back.resize(3 * BS, 0); // a block never written back reads as zeros
            for b in 0..3 {
                let r = b * BS..(b + 1) * BS;
                assert!(
                    back[r.clone()] == old[r.clone()] || back[r.clone()] == new[r.clone()],
                    "write at {at}+{len}, crash after {appends} records: block {b} is neither \
                     version"
                );
                if done {
                    assert_eq!(back[r.clone()], new[r], "a completed write is recovered");
                }
            }
            assert_eq!(recovered, 3);
        }
    }
}

#[test]
fn the_spare_slot_moves_and_reads_follow_it() {
    let (_dir, mut st, id) = with_one_file(Variant::WB);
    st.write(id, 0, &[1u8; BS]).unwrap();
    let first = st.slots.phys(0);
    st.write(id, 10, &[2u8; 5]).unwrap();
    assert_ne!(
        st.slots.phys(0),
        first,
        "a dirty block's new version is written elsewhere"
    );
    // No synced record named the old place (nothing was fsync'd): it is the next spare.
    assert_eq!(st.slots.spare(), Some(first));
    let mut want = vec![1u8; BS];
    want[10..15].fill(2);
    assert_eq!(st.read(id, 0, BS as u32).unwrap(), want);
    // Written back, the block is clean: a later write may go in place.
    st.flush_all().unwrap();
    let slot = st.slots.phys(0);
    st.write(id, 0, &[3u8; 4]).unwrap();
    assert_eq!(st.slots.phys(0), slot);
    want[..4].fill(3);
    assert_eq!(st.read(id, 0, BS as u32).unwrap(), want);
}

#[test]
fn fsync_syncs_the_store_file_written_around_the_cache() {
    let (_dir, mut st, id) = with_one_file(Variant::WB_AROUND);
    // Write misses go around the cache, to the store file.
    st.write(id, 0, &[7u8; 3 * BS]).unwrap();
    assert_eq!(st.stats().store_bytes_written, 3 * BS as u64);
    assert_eq!(st.stats().cached_blocks, 0);
    st.fsync(id).unwrap();
    assert_eq!(st.stats().store_syncs, 1, "fsync synced the store file");
    // Nothing more to sync: a second fsync syncs no store file again.
    st.fsync(id).unwrap();
    assert_eq!(st.stats().store_syncs, 1);
}

#[test]
fn a_crash_during_a_truncate_through_dirty_blocks_leaves_the_old_or_the_new_file() {
    // Cut inside dirty block 1, past dirty block 2 and clean block 3 (in the store only).
    let size = BS + BS / 3;
    for appends in 0..=4u64 {
        let (dir, mut st, id) = with_one_file(Variant::WB);
        let old = super::powerloss_tests::clean_and_dirty_blocks(&mut st, id);
        st.journal.as_mut().unwrap().appends_before_crash = Some(appends);
        let done = st.truncate(id, size as u64).is_ok();
        drop(st); // the process is gone; what it wrote stays (kill -9)

        let cache = CacheDir::new(&dir.path().join("cache"));
        recover(&dir.path().join("store"), &cache).unwrap();
        let back = std::fs::read(dir.path().join("store/f")).unwrap();
        let new = &old[..size];
        assert!(
            back == old || back == new,
            "crash after {appends} records: the file is neither before ({} bytes) nor after \
             the truncate ({size} bytes): {} bytes",
            old.len(),
            back.len()
        );
        if done {
            assert_eq!(back, new, "a completed truncate is recovered");
        }
    }
}
