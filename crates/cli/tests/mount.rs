//! `tiercache mount` as a process: kill -9 during writes, then remount — every fsync'd byte reads
//! back and the store's namespace is intact; `tiercache flush --file-cache` completes the store.
//! Mounts are unmounted and processes killed on drop (also when a test fails); every wait has
//! a deadline.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod mount_process;
use mount_process::*;

#[test]
fn kill_9_during_writes_loses_no_fsynced_byte_and_keeps_the_namespace() {
    let Some((_dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    // Every file passed through, the small ones too: the writer's file is open in passthrough
    // mode at the kill, and the closed ones have images kept (docs/design.md §14).
    let all = ["--passthrough-min-size", "0"];
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &all);
    fs::create_dir(mnt.join("inbox")).unwrap();
    // Fsynced files: (name, content) that must survive.
    let mut durable: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    for i in 0..24u64 {
        let name = format!("inbox/msg{i}");
        let len = rng.gen_range(1..40_000);
        let data = content(i, len);
        let mut f = File::create(mnt.join(&name)).unwrap();
        f.write_all(&data).unwrap();
        if i % 2 == 0 {
            f.sync_all().unwrap();
            durable.push((name.clone(), data));
        }
        if i % 6 == 0 {
            // Renamed after the fsync: the data is found under the new name.
            let to = format!("inbox/renamed{i}");
            fs::rename(mnt.join(&name), mnt.join(&to)).unwrap();
            if let Some(d) = durable.iter_mut().find(|(n, _)| *n == name) {
                d.0 = to;
            }
        }
    }
    // One fsynced file is then overwritten in part and fsynced again: the newer bytes count.
    {
        let (name, data) = durable[1].clone();
        let mut f = OpenOptions::new()
            .write(true)
            .open(mnt.join(&name))
            .unwrap();
        let patch = vec![0xAB; data.len().min(5000)];
        f.write_all(&patch).unwrap();
        f.sync_all().unwrap();
        let mut newer = data;
        newer[..patch.len()].copy_from_slice(&patch);
        durable[1].1 = newer;
    }
    // Deleted after being fsynced: must stay deleted, its blocks never written back.
    fs::remove_file(mnt.join(&durable[2].0)).unwrap();
    let deleted = durable.remove(2).0;
    // A writer keeps writing (never fsyncing) while the mount is killed.
    let writer = {
        let path = mnt.join("inbox/busy");
        std::thread::spawn(move || {
            let Ok(mut f) = File::create(&path) else {
                return;
            };
            // Small enough (≤ 512 KiB) to leave the fsynced files' dirty blocks in the 1 MiB
            // cache: the remount must take them from the journal. Slow enough to be writing
            // still when the mount is killed.
            let chunk = vec![0x5A; 8192];
            for _ in 0..64 {
                if f.write_all(&chunk).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // The new file is held whole (it is empty), so it is open in passthrough mode: the kernel
    // writes its image, `passthrough/<store inode>` in the cache directory, which exists
    // while the file is open (docs/design.md §14). The kill comes with it open for writing.
    let image = {
        use std::os::unix::fs::MetadataExt;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !store.join("inbox/busy").exists() {
            assert!(
                Instant::now() < deadline,
                "inbox/busy never reached the store"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let ino = fs::metadata(store.join("inbox/busy")).unwrap().ino();
        cache.join("passthrough").join(ino.to_string())
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        image.is_file() && !writer.is_finished(),
        "the writer's file is not open in passthrough mode at the kill ({} missing)",
        image.display()
    );
    m.kill9();
    writer.join().unwrap();
    assert!(!is_mounted(&mnt));

    // The namespace reached the store before each call returned: all there with no remount.
    for (name, _) in &durable {
        assert!(store.join(name).is_file(), "{name} missing from the store");
    }
    assert!(!store.join(&deleted).exists(), "{deleted} came back");
    assert!(store.join("inbox/busy").is_file());
    // Write-back: the store alone lacks the fsynced data (it is in the cache's journal).
    let incomplete = durable
        .iter()
        .filter(|(name, data)| fs::read(store.join(name)).unwrap() != *data)
        .count();
    assert!(
        incomplete > durable.len() / 2,
        "only {incomplete} files still in the cache"
    );

    // Remount: the journal's dirty blocks are written back; every fsynced byte reads back.
    // The killed mount's image (writes never fsynced, not promised) is gone.
    let kept = fs::read_dir(cache.join("passthrough")).unwrap().count();
    assert!(kept > 1, "no image was kept idle at the kill");
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &all);
    assert!(!image.exists(), "{} outlived the restart", image.display());
    assert_eq!(
        fs::read_dir(cache.join("passthrough")).map_or(0, |d| d.count()),
        0,
        "images of the killed mount outlived the restart"
    );
    for (name, data) in &durable {
        let back = fs::read(mnt.join(name)).unwrap();
        assert!(
            back.len() >= data.len(),
            "{name}: {} < {}",
            back.len(),
            data.len()
        );
        assert!(
            back[..data.len()] == data[..],
            "{name}: fsynced bytes differ after kill -9"
        );
    }
    assert!(!mnt.join(&deleted).exists());
    m.stop();
    // After recovery the store alone holds them (no dirty data was left behind by the
    // recovered blocks; `flush` writes back anything written since).
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["flush", "--file-cache"])
        .arg(&cache)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, data) in &durable {
        let back = fs::read(store.join(name)).unwrap();
        assert!(back[..data.len()] == data[..], "{name}: store after flush");
    }
}

#[test]
fn flush_of_a_missing_file_cache_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["flush", "--file-cache"])
        .arg(dir.path().join("nope"))
        .arg("--store")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--file-cache"), "{err}");
}

#[test]
fn flush_on_exit_leaves_the_store_complete() {
    let Some((_dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &["--flush-on-exit"]);
    let data = content(3, 100_000);
    fs::write(mnt.join("a"), &data).unwrap();
    assert_ne!(
        fs::read(store.join("a")).unwrap(),
        data,
        "write-back: not in the store yet"
    );
    m.stop();
    assert_eq!(fs::read(store.join("a")).unwrap(), data);
}

/// Runs `tiercache flush --file-cache CACHE --store STORE`.
fn flush_file_cache(cache: &Path, store: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["flush", "--file-cache"])
        .arg(cache)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap()
}

#[test]
fn flush_into_another_store_is_refused_and_keeps_the_journal() {
    let Some((dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let other = dir.path().join("other");
    fs::create_dir(&other).unwrap();
    // The other store has files too: the journal's inode numbers could name any of them.
    for i in 0..50 {
        fs::write(other.join(format!("o{i}")), b"unrelated").unwrap();
    }
    let mut m = MountProcess::start(&store, &mnt, &cache, "wb");
    let data = content(4, 50_000);
    fs::write(mnt.join("a"), &data).unwrap();
    m.stop();
    let journal = fs::read(cache.join("journal")).unwrap();
    assert!(!journal.is_empty(), "dirty blocks stay journaled");

    let out = flush_file_cache(&cache, &other);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let canon = |p: &Path| fs::canonicalize(p).unwrap().display().to_string();
    assert!(
        err.contains("--store") && err.contains(&canon(&store)) && err.contains(&canon(&other)),
        "{err}"
    );
    assert_eq!(fs::read(cache.join("journal")).unwrap(), journal);
    for i in 0..50 {
        assert_eq!(fs::read(other.join(format!("o{i}"))).unwrap(), b"unrelated");
    }
    assert_eq!(fs::read_dir(&other).unwrap().count(), 50);

    // Nor does a mount of the other store through that cache start.
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .arg("mount")
        .arg(&other)
        .arg(&mnt)
        .arg("--cache-dir")
        .arg(&cache)
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!is_mounted(&mnt));
    assert_eq!(fs::read(cache.join("journal")).unwrap(), journal);

    // Its own store takes the blocks.
    let out = flush_file_cache(&cache, &store);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(store.join("a")).unwrap(), data);
}

#[test]
fn flush_keeps_the_journal_when_a_files_blocks_cannot_be_placed() {
    let Some((_dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let mut m = MountProcess::start(&store, &mnt, &cache, "wb");
    fs::write(mnt.join("kept"), content(5, 20_000)).unwrap();
    fs::write(mnt.join("gone"), content(6, 20_000)).unwrap();
    m.stop();
    // Deleted from the store while nothing was mounted.
    fs::remove_file(store.join("gone")).unwrap();
    let journal = fs::read(cache.join("journal")).unwrap();
    let out = flush_file_cache(&cache, &store);
    assert!(!out.status.success(), "a block left unwritten is a failure");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("5 journaled dirty blocks"), "{err}");
    assert_eq!(fs::read(cache.join("journal")).unwrap(), journal);
    assert_eq!(fs::read(store.join("kept")).unwrap(), content(5, 20_000));
}

#[test]
fn mount_with_an_unwritable_stats_file_is_refused_before_mounting() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mnt) = (dir.path().join("store"), dir.path().join("mnt"));
    for d in [&store, &mnt] {
        fs::create_dir(d).unwrap();
    }
    for stats in [dir.path().join("no/such/dir/stats.json"), store.clone()] {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .arg("mount")
            .arg(&store)
            .arg(&mnt)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .arg("--stats")
            .arg(&stats)
            .args(["--duration", "3s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--stats") && err.contains(&*stats.to_string_lossy()),
            "{err}"
        );
        assert!(
            !err.contains("tiercache mount: "),
            "it mounted first: {err}"
        );
    }
}

#[test]
fn a_stats_file_failing_during_the_mount_is_a_warning_and_the_flush_still_happens() {
    let Some((dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    let stats = out.join("stats.json");
    let log = dir.path().join("log");
    let mut m = MountProcess::start_logged(
        &store,
        &mnt,
        &cache,
        "wb",
        &["--flush-on-exit", "--stats", stats.to_str().unwrap()],
        Stdio::from(File::create(&log).unwrap()),
    );
    let data = content(7, 30_000);
    fs::write(mnt.join("a"), &data).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stats.exists() {
        assert!(Instant::now() < deadline, "no stats file within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The stats file's directory goes away: the next writes fail.
    fs::remove_dir_all(&out).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        m.running(),
        "the mount ended: {}",
        fs::read_to_string(&log).unwrap()
    );
    assert!(is_mounted(&mnt));
    assert_eq!(fs::read(mnt.join("a")).unwrap(), data);
    let status = m.stop_status();
    let err = fs::read_to_string(&log).unwrap();
    // The final write fails too: the exit says so, after the unmount and the flush.
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("warning: --stats").count(),
        1,
        "warned once: {err}"
    );
    assert!(err.contains("wrote back"), "{err}");
    assert_eq!(fs::read(store.join("a")).unwrap(), data, "flushed at exit");
}

#[test]
fn an_uncached_mount_leaves_no_made_up_cache_directory() {
    let Some((dir, store, _cache, mnt)) = mount_dirs() else {
        return;
    };
    let tmp = dir.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .env("TMPDIR", &tmp)
        .arg("mount")
        .arg(&store)
        .arg(&mnt)
        .args(["--cache-size", "0", "--duration", "500ms"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The operator's signals: SIGUSR2 takes a mount out of service (degraded, served from the
/// store), SIGUSR1 returns it (its dirty blocks written back first); the log and the stats
/// file say so, and nothing written is lost either way.
#[test]
fn sigusr2_degrades_a_mount_and_sigusr1_returns_it_to_service() {
    let Some((dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let stats = dir.path().join("stats.json");
    let log = dir.path().join("log");
    let mut m = MountProcess::start_logged(
        &store,
        &mnt,
        &cache,
        "wb",
        &["--stats", stats.to_str().unwrap()],
        Stdio::from(File::create(&log).unwrap()),
    );
    let signal = |m: &MountProcess, sig| {
        let pid = m.child.as_ref().expect("running").id();
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    };
    let wait_stats = |what: &str, ok: &dyn Fn(&serde_json::Value) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let v = fs::read(&stats)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            if v.as_ref().is_some_and(ok) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: stats {v:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let a = content(1, 20_000);
    fs::write(mnt.join("a"), &a).unwrap();
    signal(&m, libc::SIGUSR2);
    wait_stats("degraded", &|v| v["degraded"] == true);
    let b = content(2, 9_000);
    fs::write(mnt.join("b"), &b).unwrap();
    assert_eq!(fs::read(mnt.join("a")).unwrap(), a);
    signal(&m, libc::SIGUSR1);
    wait_stats("back in service", &|v| {
        v["degraded"] == false && v["returned_to_service"] == 1
    });
    let c = content(3, 12_000);
    fs::write(mnt.join("c"), &c).unwrap();
    for (name, want) in [("a", &a), ("b", &b), ("c", &c)] {
        assert_eq!(&fs::read(mnt.join(name)).unwrap(), want, "{name}");
    }
    m.stop();
    let err = fs::read_to_string(&log).unwrap();
    assert!(err.contains("DEGRADED: operator request: SIGUSR2"), "{err}");
    assert!(err.contains("returned to service"), "{err}");
    let out = flush_file_cache(&cache, &store);
    assert!(out.status.success(), "{out:?}");
    for (name, want) in [("a", &a), ("b", &b), ("c", &c)] {
        assert_eq!(
            &fs::read(store.join(name)).unwrap(),
            want,
            "{name} in the store"
        );
    }
}

#[test]
fn a_clean_restart_is_warm_a_changed_file_is_reread_and_a_kill_9_restarts_cold() {
    let Some((dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i}"), content(100 + i, 1000 + 700 * i as usize)))
        .collect();
    for (name, data) in &files {
        fs::write(store.join(name), data).unwrap();
    }
    let stats = dir.path().join("stats.json");
    let stats_arg = ["--stats", stats.to_str().unwrap()];
    // First mount: every file read once (cached clean), then a clean unmount.
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &stats_arg);
    for (name, data) in &files {
        assert_eq!(&fs::read(mnt.join(name)).unwrap(), data);
    }
    m.stop();
    assert!(
        cache.join("checkpoint").exists(),
        "a clean unmount checkpoints"
    );
    // Changed while unmounted (another size, so the old blocks cannot pass for it).
    let changed = content(999, 5000);
    fs::write(store.join("f3"), &changed).unwrap();

    // Restart: the blocks are back, every read of an unchanged file hits.
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &stats_arg);
    for (name, data) in &files {
        let want = if name == "f3" { &changed } else { data };
        assert_eq!(&fs::read(mnt.join(name)).unwrap(), want, "{name}");
    }
    m.stop();
    let s = exit_stats(&stats);
    let blocks: u64 = files
        .iter()
        .map(|(_, d)| (d.len() as u64).div_ceil(4096))
        .sum();
    assert_eq!(s["restored_blocks"], blocks);
    let f3_blocks = (files[3].1.len() as u64).div_ceil(4096);
    assert_eq!(s["restored_blocks_dropped"], f3_blocks);
    assert_eq!(
        s["core"]["read_misses"],
        changed.len().div_ceil(4096) as u64
    );
    assert!(s["core"]["read_hits"].as_u64().unwrap() >= blocks - f3_blocks);

    // A mount that writes after its restart, fsyncs and is killed: no checkpoint is left to
    // describe the changed blocks file; the next mount starts cold, the data whole.
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &stats_arg);
    assert!(!cache.join("checkpoint").exists(), "taken at mount");
    let new = content(7, 9000);
    let mut f = OpenOptions::new().write(true).open(mnt.join("f5")).unwrap();
    f.write_all(&new).unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.kill9();
    assert!(!cache.join("checkpoint").exists());
    let mut m = MountProcess::start_with(&store, &mnt, &cache, "wb", &stats_arg);
    let mut want = files[5].1.clone();
    want.resize(want.len().max(new.len()), 0);
    want[..new.len()].copy_from_slice(&new);
    assert_eq!(fs::read(mnt.join("f5")).unwrap(), want);
    assert_eq!(&fs::read(mnt.join("f1")).unwrap(), &files[1].1);
    m.stop();
    let s = exit_stats(&stats);
    assert_eq!(s["restored_blocks"], 0);
    assert!(s["recovered_blocks"].as_u64().unwrap() > 0);
}
