//! `tiercache mount`'s options as a process: refusals that name the option, the request
//! threads, the store watch and the kernel cache timeout.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod mount_process;
use mount_process::*;

#[test]
fn mount_rejects_a_bad_cleaning_policy_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, said) in [
        ("sometimes", "sometimes"),
        (
            r#"{"policy":"threshold","high":0.2,"low":0.5,"batch":4}"#,
            "low",
        ),
        (r#"{"policy":"lazy","idle":3}"#, "idle"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .arg("mount")
            .arg(dir.path())
            .arg(dir.path())
            .args(["--cache-dir", "/tmp/x", "--cleaning", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--cleaning") && err.contains(said),
            "{bad}: {err}"
        );
    }
}

#[test]
fn mount_rejects_a_bad_error_threshold_or_halflife_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    for (option, bad, said) in [
        ("--error-threshold", "0.5", "at least 1"),
        ("--error-threshold", "NaN", "at least 1"),
        ("--error-threshold", "many", "many"),
        ("--error-halflife", "0", "longer than zero"),
        ("--error-halflife", "soon", "soon"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .arg("mount")
            .arg(dir.path())
            .arg(dir.path())
            .args(["--cache-dir", "/tmp/x", option, bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{option} {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(option) && err.contains(said),
            "{option} {bad}: {err}"
        );
    }
}

#[test]
fn mount_rejects_a_bad_variant_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .arg("mount")
        .arg(dir.path())
        .arg(dir.path())
        .args(["--cache-dir", "/tmp/x", "--variant", "wx"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--variant") && err.contains("wx"), "{err}");
}

#[test]
fn mount_rejects_a_zero_file_cap_naming_the_option() {
    let Some((_dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    assert_refused_naming(
        &store,
        &mnt,
        &cache,
        &["--cache-max-files", "0"],
        "cache-max-files",
    );
}

/// `tiercache mount` with `args` exits 2 before mounting, its error naming `option`.
fn assert_refused_naming(store: &Path, mnt: &Path, cache: &Path, args: &[&str], option: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .arg("mount")
        .arg(store)
        .arg(mnt)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(option));
    assert!(!is_mounted(mnt));
}

/// `--request-threads 0` serves every request on the reading thread: files written, some
/// unlinked and read back reach the store as left, with the flush on exit; more threads than
/// the limit are refused naming the option.
#[test]
fn a_mount_without_request_threads_serves_on_the_reading_thread_and_too_many_are_refused() {
    let Some((_dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let mut m = MountProcess::start_with(
        &store,
        &mnt,
        &cache,
        "wb",
        &["--flush-on-exit", "--request-threads", "0"],
    );
    let files: Vec<(String, Vec<u8>)> = (0..8u64)
        .map(|i| (format!("f{i}"), content(40 + i, 3000 + 7000 * i as usize)))
        .collect();
    for (name, data) in &files {
        fs::write(mnt.join(name), data).unwrap();
    }
    for (name, _) in &files[..2] {
        fs::remove_file(mnt.join(name)).unwrap();
    }
    for (name, data) in &files[2..] {
        assert_eq!(&fs::read(mnt.join(name)).unwrap(), data, "{name}");
    }
    m.stop();
    let mut left: Vec<String> = fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let want: Vec<String> = files[2..].iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(left, want);
    for (name, data) in &files[2..] {
        assert_eq!(&fs::read(store.join(name)).unwrap(), data, "{name}");
    }
    assert_refused_naming(
        &store,
        &mnt,
        &cache,
        &["--request-threads", "100000"],
        "request-threads",
    );
}

/// `--watch-store` (docs/design.md §14 "Changes to the store"): a file rewritten in the store
/// behind the mount is read with its new content, though the kernel may keep attributes for
/// 60 s (`--cache-timeout`), and the change is counted; a bad timeout is refused naming the
/// option.
#[test]
fn a_watched_mount_sees_a_file_rewritten_in_the_store_and_a_bad_timeout_is_refused() {
    let Some((dir, store, cache, mnt)) = mount_dirs() else {
        return;
    };
    let old = content(61, 10_000);
    fs::write(store.join("f"), &old).unwrap();
    let stats = dir.path().join("stats.json");
    let mut m = MountProcess::start_with(
        &store,
        &mnt,
        &cache,
        "wb",
        &[
            "--watch-store",
            "--cache-timeout",
            "60s",
            "--stats",
            stats.to_str().unwrap(),
        ],
    );
    assert!(fs::read(mnt.join("f")).unwrap() == old);
    let new = content(62, 23_000);
    fs::write(store.join("f"), &new).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::read(mnt.join("f")).ok().as_ref() != Some(&new) {
        assert!(Instant::now() < deadline, "the change not seen within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    m.stop();
    let s = exit_stats(&stats);
    assert!(s["store_changes_seen"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["store_conflicts"], 0);
    assert_refused_naming(
        &store,
        &mnt,
        &cache,
        &["--cache-timeout", "soon"],
        "cache-timeout",
    );
}
