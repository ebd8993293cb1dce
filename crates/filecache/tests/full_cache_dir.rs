//! The mount with its cache directory on a file system with 3 MiB free (a tmpfs this test
//! mounts; it needs root and FUSE), the second scenario (docs/design.md §11): a cache
//! larger than the room is refused at mount with an error naming the directory, the size asked
//! and the space free; a cache that fits takes 40 fsynced files of 256 KiB, every one written,
//! read back equal; the dirty blocks the mount reports at unmount are the ones a flush writes.

use std::fs;
use std::io::Write;
use std::path::Path;
use tiercache_filecache::store::{CacheDir, StoreLatency};
use tiercache_filecache::{MountConfig, State, Variant};

fn config(dir: &Path, capacity_blocks: u32) -> MountConfig {
    MountConfig {
        store: dir.join("store"),
        cache_dir: dir.join("cache"),
        capacity_blocks,
        block_size: 4096,
        variant: Variant::WB,
        latency: StoreLatency::default(),
        direct_io: false,
        kernel_cache: true,
        cleaning: tiercache_policy::CleaningConfig::None,
        on_error: Default::default(),
    }
}

fn content(i: usize) -> Vec<u8> {
    (0..256 << 10).map(|j| (i * 31 + j / 4096) as u8).collect()
}

#[test]
fn a_full_cache_directory_is_found_at_mount_and_every_fsynced_file_lands() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    let Some(_small) = tiercache_testsupport::tmpfs(&dir.path().join("cache"), "3m") else {
        return;
    };
    // 32 MiB of cache on 3 MiB: refused, saying why, with nothing left taken.
    let e = State::open(config(dir.path(), 8192))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(&dir.path().join("cache").display().to_string()),
        "{e}"
    );
    assert!(
        e.contains("bytes are free there") && e.contains("needs 35651584 bytes"),
        "{e}"
    );
    assert!(fs::metadata(dir.path().join("cache/blocks")).map_or(0, |m| m.len()) == 0);

    // 680 blocks fit their block file (2.8 MiB with spares) but not the journal beside it.
    let e = State::open(config(dir.path(), 680))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("journal may take 340800 bytes"), "{e}");

    // 2 MiB fits: 40 files of 256 KiB, each written and fsynced, all succeed.
    let mnt = dir.path().join("mnt");
    let (session, state) = tiercache_filecache::spawn_mount(config(dir.path(), 512), &mnt).unwrap();
    let written: Result<(), String> = (|| {
        for i in 0..40 {
            let path = mnt.join(format!("f{i}"));
            let mut f = fs::File::create(&path).map_err(|e| format!("create f{i}: {e}"))?;
            f.write_all(&content(i))
                .map_err(|e| format!("write f{i}: {e}"))?;
            f.sync_all().map_err(|e| format!("fsync f{i}: {e}"))?;
        }
        for i in 0..40 {
            let got = fs::read(mnt.join(format!("f{i}"))).map_err(|e| format!("read f{i}: {e}"))?;
            if got != content(i) {
                return Err(format!("f{i} reads back different"));
            }
        }
        Ok(())
    })();
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status();
    }
    written.unwrap();
    let dirty = state.lock().unwrap().stats().dirty_blocks;
    drop(state);
    // The flush writes back exactly what the mount reported dirty, and the store alone holds
    // every file.
    let cache = CacheDir::new(&dir.path().join("cache"));
    let n = tiercache_filecache::recovery::recover(&dir.path().join("store"), &cache).unwrap();
    assert_eq!(
        n, dirty,
        "dirty blocks reported at unmount = blocks a flush writes back"
    );
    for i in 0..40 {
        assert!(
            fs::read(dir.path().join("store").join(format!("f{i}"))).unwrap() == content(i),
            "f{i} in the store"
        );
    }
}
