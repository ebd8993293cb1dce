//! File-level caching (docs/design.md §4.9): a host-side cache of a slow file store on fast local
//! storage that knows files.
//!
//! - [`core`]: the file-level cache on the project's policy core (`tiercache_policy::Cache`,
//!   docs/design.md §3): (file, block) keys mapped onto the core's lines, LRU, admission on
//!   read miss, the four variants (write-back or write-through × write-allocate or
//!   write-around) as the core's write modes, deletes and truncates freeing blocks and
//!   cancelling their write-back (the core's TRIM). It yields device operations; it does no
//!   I/O.
//! - [`state`], [`fs`], [`journal`], [`store`]: the real executor, a FUSE file system
//!   (`tiercache mount`) presenting a store directory with its data cached in a cache directory;
//!   metadata goes through to the store at once; dirty blocks are journaled so an fsync'd write
//!   survives `kill -9`.
//! - [`workload`]: file-operation streams shaped like a mail, file and web server, run against a
//!   real directory or fed to the simulator.
//! - [`sim`]: the simulator executing those streams on the file-level cache and on the
//!   block-level policy core itself behind a simple file allocator, with and without TRIM.

#![warn(missing_docs)]

#[cfg(feature = "fuse")]
pub mod cleaner;
pub mod core;
pub mod faults;
#[cfg(feature = "fuse")]
pub mod fs;
pub mod fuzzing;
#[cfg(feature = "fuse")]
pub mod inotify;
pub mod journal;
#[cfg(test)]
// Its recorder is driven by the mount's power-loss tests only.
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
mod powerloss;
pub mod recovery;
pub mod sim;
#[cfg(feature = "fuse")]
pub mod state;
pub mod store;
pub mod workload;

pub use crate::core::{
    Allocation, BlockKey, DevOp, FileCache, FileCacheError, FileId, Variant, WritePolicy,
    MAX_BLOCKS_PER_FILE,
};
#[cfg(feature = "fuse")]
pub use crate::fs::{FuseOptions, DEFAULT_CACHE_TIMEOUT, DEFAULT_PASSTHROUGH_MIN_SIZE};
#[cfg(feature = "fuse")]
pub use crate::state::{MountConfig, MountStats, State};
/// The cleaning policies a mount's background cleaner runs (docs/design.md §4.6).
pub use tiercache_policy::CleaningConfig;

#[cfg(feature = "fuse")]
use std::path::Path;
#[cfg(feature = "fuse")]
use std::sync::{Arc, Mutex};

/// Request threads of a mount by default ([`FuseOptions::request_threads`]): one thread reads the kernel's requests in order and hands
/// them to this many (docs/design.md §14 "Dispatch"), so requests on different files proceed
/// in parallel (their store I/O and journal syncs, and everything outside the mount's lock);
/// a request that depends on whether a file is still open waits for the releases read
/// before it.
#[cfg(feature = "fuse")]
pub const REQUEST_THREADS: usize = 4;

/// FUSE session options of a mount read by `threads` fuser threads, each with its own
/// `/dev/fuse` descriptor. The mount uses one ([`spawn_mount_with`]): its requests must be
/// read in the kernel's order for a release to be known before a later unlink is served.
#[cfg(feature = "fuse")]
pub fn fuse_config(threads: usize) -> fuser::Config {
    let mut config = fuser::Config::default();
    config.mount_options.extend([
        fuser::MountOption::FSName("tiercache".to_string()),
        fuser::MountOption::Subtype("tiercache".to_string()),
    ]);
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    config
}

/// Opens the cache over the store (recovering what a crash left) and mounts it at
/// `mountpoint` in a background thread; dropping the session unmounts.
#[cfg(feature = "fuse")]
pub fn spawn_mount(
    cfg: MountConfig,
    mountpoint: &Path,
) -> std::io::Result<(fuser::BackgroundSession, Arc<Mutex<State>>)> {
    spawn_mount_with(cfg, mountpoint, fs::FuseOptions::default(), |_| Ok(()))
}

/// [`spawn_mount`] using the kernel's FUSE features as `options` say, with `prepare` run on the
/// opened state before the file system is mounted (settings that must hold from the first
/// request, such as the cap on cached files).
#[cfg(feature = "fuse")]
pub fn spawn_mount_with(
    cfg: MountConfig,
    mountpoint: &Path,
    options: fs::FuseOptions,
    prepare: impl FnOnce(&mut State) -> std::io::Result<()>,
) -> std::io::Result<(fuser::BackgroundSession, Arc<Mutex<State>>)> {
    let mut state = State::open(cfg)?;
    prepare(&mut state)?;
    let state = Arc::new(Mutex::new(state));
    let fs = fs::CacheFs::with_options(state.clone(), options);
    let watcher = fs.watcher();
    let session = fuser::spawn_mount(fs, mountpoint, &fuse_config(1))?;
    // The kernel is told what to forget through the session's notifier (§14).
    if let Some(watcher) = watcher {
        watcher.start(session.notifier());
    }
    Ok((session, state))
}
