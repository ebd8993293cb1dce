//! Several threads writing and reading different files and one shared file through the mount
//! (passed through and on the block path), fsyncing as they go: every read sees the thread's
//! own last writes, and a crash right after the last fsyncs loses nothing acknowledged (the
//! cache and store directories copied at that instant recover to exactly the written
//! contents). Without FUSE the test is skipped, saying so, except on CI.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tiercache_filecache::store::{CacheDir, StoreLatency};
use tiercache_filecache::{CleaningConfig, FuseOptions, MountConfig, Variant};

const THREADS: usize = 4;
const OWN_LEN: usize = 256 << 10;
const REGION: usize = 64 << 10;

/// One thread's run: random writes to its own file and to its region of the shared file,
/// read back and checked each time, fsynced every few; returns both final contents.
fn worker(mnt: &Path, t: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(t as u64);
    let own = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(mnt.join(format!("own{t}")))
        .unwrap();
    let shared = OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join("shared"))
        .unwrap();
    let mut own_model = vec![0u8; OWN_LEN];
    own.set_len(OWN_LEN as u64).unwrap();
    let mut region = vec![0u8; REGION];
    let base = (t * REGION) as u64;
    for i in 0..60u32 {
        let len = rng.gen_range(1..20_000);
        let at = rng.gen_range(0..OWN_LEN - len);
        let fill = (t as u8).wrapping_mul(40).wrapping_add(i as u8) | 1;
        own.write_all_at(&vec![fill; len], at as u64).unwrap();
        own_model[at..at + len].fill(fill);
        let rlen = rng.gen_range(1..8_000);
        let rat = rng.gen_range(0..REGION - rlen);
        shared
            .write_all_at(&vec![fill; rlen], base + rat as u64)
            .unwrap();
        region[rat..rat + rlen].fill(fill);
        let mut back = vec![0u8; len];
        own.read_exact_at(&mut back, at as u64).unwrap();
        assert!(
            back == own_model[at..at + len],
            "thread {t}: own file read {i}"
        );
        let mut back = vec![0u8; REGION];
        shared.read_exact_at(&mut back, base).unwrap();
        assert!(back == region, "thread {t}: shared region read {i}");
        if i % 7 == 6 {
            own.sync_all().unwrap();
            shared.sync_all().unwrap();
        }
    }
    own.sync_all().unwrap();
    shared.sync_all().unwrap();
    (own_model, region)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn run(passthrough: bool) {
    let dir = tempfile::tempdir().unwrap();
    for d in ["store", "cache", "mnt"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    fs::write(dir.path().join("store/shared"), vec![0u8; THREADS * REGION]).unwrap();
    let cfg = MountConfig {
        store: dir.path().join("store"),
        cache_dir: dir.path().join("cache"),
        // Room for about half the data: eviction and write-back run while threads write.
        capacity_blocks: 256,
        block_size: 4096,
        variant: Variant::WB,
        latency: StoreLatency::default(),
        direct_io: false,
        kernel_cache: true,
        cleaning: CleaningConfig::None,
        on_error: Default::default(),
    };
    let mnt = dir.path().join("mnt");
    let (session, state) = tiercache_filecache::spawn_mount_with(
        cfg,
        &mnt,
        FuseOptions {
            passthrough,
            passthrough_min_size: 0,
            ..FuseOptions::default()
        },
        |_| Ok(()),
    )
    .unwrap();
    let mnt = Arc::new(mnt);
    let results: Vec<(Vec<u8>, Vec<u8>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let mnt = mnt.clone();
                s.spawn(move || worker(&mnt, t))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // A crash now: the cache directory as it is (every writer fsynced last and closed its
    // files). The store stays as it is too: nothing writes to it from here to the unmount
    // (no cleaner, no writes, and a clean unmount only syncs the journal); it is kept in
    // place because the journal names its files by inode number.
    let crashed = tempfile::tempdir().unwrap();
    {
        let _quiet = state.lock().unwrap();
        copy_dir(&dir.path().join("cache"), &crashed.path().join("cache"));
    }
    let stats = state.lock().unwrap().stats();
    if session.umount_and_join().is_err() {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&*mnt)
            .status();
    }
    assert!(stats.core.write_backs > 0, "no eviction ran: {stats:?}");
    if passthrough {
        assert!(stats.passthrough_opens > 0, "nothing was passed through");
    }
    drop(state);
    let store = dir.path().join("store");
    tiercache_filecache::recovery::recover(&store, &CacheDir::new(&crashed.path().join("cache")))
        .unwrap();
    let shared = fs::read(store.join("shared")).unwrap();
    for (t, (own, region)) in results.iter().enumerate() {
        let back = fs::read(store.join(format!("own{t}"))).unwrap();
        assert!(
            back == *own,
            "passthrough {passthrough}: own{t} after the crash"
        );
        assert!(
            shared[t * REGION..(t + 1) * REGION] == region[..],
            "passthrough {passthrough}: shared region {t} after the crash"
        );
    }
}

#[test]
fn threads_on_different_files_and_one_shared_file_lose_no_fsynced_byte() {
    if !tiercache_testsupport::fuse() {
        return;
    }
    run(true);
    run(false);
}
