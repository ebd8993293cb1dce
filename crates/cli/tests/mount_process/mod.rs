//! A `tiercache mount` process for the mount tests (`mount.rs`, `mount_options.rs`): started
//! over temporary directories, unmounted and killed on drop, every wait with a deadline.
//! Each test binary uses a part of it.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub fn is_mounted(mnt: &Path) -> bool {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy().to_string();
    text.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|m| m == want))
}

/// One `tiercache mount` process; killed and lazily unmounted on drop.
pub struct MountProcess {
    pub child: Option<Child>,
    mnt: PathBuf,
}

impl MountProcess {
    pub fn start(store: &Path, mnt: &Path, cache: &Path, variant: &str) -> MountProcess {
        MountProcess::start_with(store, mnt, cache, variant, &[])
    }

    pub fn start_with(
        store: &Path,
        mnt: &Path,
        cache: &Path,
        variant: &str,
        extra: &[&str],
    ) -> MountProcess {
        MountProcess::start_logged(store, mnt, cache, variant, extra, Stdio::inherit())
    }

    /// A mount whose stderr goes to `stderr`.
    pub fn start_logged(
        store: &Path,
        mnt: &Path,
        cache: &Path,
        variant: &str,
        extra: &[&str],
        stderr: Stdio,
    ) -> MountProcess {
        let child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .arg("mount")
            .arg(store)
            .arg(mnt)
            .arg("--cache-dir")
            .arg(cache)
            .args(["--cache-size", "1MiB", "--variant", variant])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut m = MountProcess {
            child: Some(child),
            mnt: mnt.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !is_mounted(mnt) {
            if let Some(status) = m.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("tiercache mount exited early: {status}");
            }
            assert!(Instant::now() < deadline, "mount did not appear in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        m
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
        lazy_unmount(&self.mnt);
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        let status = self.stop_status();
        assert!(status.success(), "tiercache mount exit: {status}");
    }

    /// SIGTERM and wait for the exit; its status.
    pub fn stop_status(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = c.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("tiercache mount did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if is_mounted(&self.mnt) {
            lazy_unmount(&self.mnt);
        }
        status
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

pub fn lazy_unmount(mnt: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mnt)
        .stderr(Stdio::null())
        .status();
    if is_mounted(mnt) {
        let _ = Command::new("umount").arg("-l").arg(mnt).status();
    }
}

impl Drop for MountProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A temporary directory holding `store`, `cache` and `mnt` (in that order after it); `None`
/// (the test is skipped, and says so) without FUSE, and a failure on CI.
pub fn mount_dirs() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
    if !tiercache_testsupport::fuse() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (store, cache, mnt) = (
        dir.path().join("store"),
        dir.path().join("cache"),
        dir.path().join("mnt"),
    );
    for d in [&store, &cache, &mnt] {
        fs::create_dir(d).unwrap();
    }
    Some((dir, store, cache, mnt))
}

pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

/// The mount's counters as the `--stats` file has them at exit.
pub fn exit_stats(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}
