//! How the mount uses the kernel's FUSE features.

/// Files smaller than this stay on the block path by default (docs/design.md §14, where the
/// measurements that chose it are).
pub const DEFAULT_PASSTHROUGH_MIN_SIZE: u64 = 1 << 20;

/// How long the kernel may keep entries and attributes by default (docs/design.md §14 "The
/// kernel's caches").
pub const DEFAULT_CACHE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How the mount uses the kernel's FUSE features (beside [`crate::MountConfig`], which is
/// the cache's).
#[derive(Debug, Clone)]
pub struct FuseOptions {
    /// Open files the cache holds whole in FUSE passthrough mode (docs/design.md §14), where
    /// the kernel has it (Linux 6.9+) and the mount may register backing files
    /// (CAP_SYS_ADMIN). The kernel then turns off FUSE writeback caching for the mount
    /// (the two exclude each other), so writes on the block path reach the mount as made.
    pub passthrough: bool,
    /// Files smaller than this (bytes, at their first open) stay on the block path and the
    /// kernel's page cache even when the cache holds them whole: for them an image's copy,
    /// comparison and removal cost more than the round trips passthrough saves.
    pub passthrough_min_size: u64,
    /// Request threads the reading thread hands requests to (docs/design.md §14
    /// "Dispatch"); 0 serves every request on the reading thread, one at a time, in the
    /// kernel's order (no hand-off: the least latency for one client, no parallelism).
    pub request_threads: usize,
    /// Watch the store for changes made behind the mount (inotify; docs/design.md §14
    /// "Changes to the store"): a file changed, created, removed or renamed there by someone
    /// else is seen by the mount and the kernel is told to forget what it cached of it. Off
    /// by default: the mount is then the store's only writer.
    pub watch_store: bool,
    /// How long the kernel may keep entries and attributes (its dentry and attribute
    /// timeouts).
    pub cache_timeout: std::time::Duration,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            passthrough: true,
            passthrough_min_size: DEFAULT_PASSTHROUGH_MIN_SIZE,
            request_threads: crate::REQUEST_THREADS,
            watch_store: false,
            cache_timeout: DEFAULT_CACHE_TIMEOUT,
        }
    }
}
