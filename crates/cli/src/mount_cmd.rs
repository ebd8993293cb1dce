//! `tiercache mount`: a FUSE file system presenting a slow store directory with its data
//! cached in a fast cache directory (docs/design.md §4.9), and `tiercache flush --file-cache`:
//! write a stopped mount's dirty blocks back to its store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use tiercache_filecache::recovery::{recover, RecoveryError};
use tiercache_filecache::store::{parse_duration, CacheDir, StoreLatency};
use tiercache_filecache::{CleaningConfig, MountConfig, Variant};

use crate::serve_cmd;

/// The most request threads `--request-threads` takes: more only cost memory and switches
/// (the mount's data path shares one state lock, docs/design.md §14).
const MAX_REQUEST_THREADS: usize = 256;

/// Arguments of `tiercache mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// The slow store: a directory (an NFS mount, a slow disk, or slowed by --store-latency).
    pub store: PathBuf,
    /// Where to mount the cached view.
    pub mountpoint: PathBuf,
    /// Directory on fast storage for the cache's block file and journal.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Cache capacity ("256MiB"); 0 mounts the store uncached (every operation goes through).
    #[arg(long, default_value = "256MiB")]
    pub cache_size: String,
    /// Cache block size (a power of two, at least 512 bytes).
    #[arg(long, default_value = "4KiB")]
    pub block_size: String,
    /// Write policy and allocation: wb, wb-around, wt or wt-around.
    #[arg(long, default_value = "wb")]
    pub variant: String,
    /// Latency added to each data operation on the store ("2ms"): emulates a slow store.
    #[arg(long, default_value = "0")]
    pub store_latency: String,
    /// Latency added to each metadata operation on the store (default: --store-latency).
    #[arg(long)]
    pub store_meta_latency: Option<String>,
    /// Bypass the kernel page cache (FOPEN_DIRECT_IO): every read and write reaches the cache,
    /// and each is atomic against the others.
    #[arg(long)]
    pub direct_io: bool,
    /// Do not let the kernel keep pages across opens or buffer writes (FUSE writeback
    /// caching): every write reaches the mount as it is made, every open reads again.
    #[arg(long)]
    pub no_kernel_cache: bool,
    /// Serve every file through the mount: no FUSE passthrough of files the cache holds whole
    /// (docs/design.md §14), and FUSE writeback caching where the kernel cache is on.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Pass through only files of at least this size ("1MiB") at their first open: smaller
    /// ones stay on the block path and the kernel's page cache (docs/design.md §14).
    #[arg(long, value_name = "SIZE")]
    pub passthrough_min_size: Option<String>,
    /// Threads serving the kernel's requests, handed them in order by one reading thread
    /// (docs/design.md §14 "Dispatch"): requests of different files proceed in parallel. 0
    /// serves each on the reading thread, one at a time (the least latency for a single
    /// client on the block path; no parallelism).
    #[arg(long, value_name = "N", default_value_t = tiercache_filecache::REQUEST_THREADS)]
    pub request_threads: usize,
    /// Watch the store (inotify) for changes made behind the mount by other programs on this
    /// machine (docs/design.md §14 "Changes to the store"): a file changed there loses its
    /// clean cached blocks (its dirty ones win, counted as a conflict), names created,
    /// removed or renamed there are seen, and the kernel is told to forget what it cached.
    /// Changes made on another machine to a network store (NFS, sshfs) are not seen. Without
    /// it the mount must be the store's only writer: a change behind it stays unseen.
    #[arg(long)]
    pub watch_store: bool,
    /// How long the kernel may keep names and attributes ("1s", "0" for none). With
    /// --watch-store, changes to the store are invalidated whatever this is.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub cache_timeout: String,
    /// Background cleaner of a write-back cache (docs/design.md §4.6, §4.9): `lazy` writes
    /// dirty blocks back once the mount has served no data request for 1 s, `threshold` while
    /// more than half the cache is dirty (down to a quarter), `none` never (they wait for
    /// eviction, fsync-free unmount or `flush`); or the policy as JSON, e.g.
    /// '{"policy":"lazy","idle_ns":"200ms","batch":64}'.
    #[arg(long, default_value = "lazy", value_name = "POLICY")]
    pub cleaning: String,
    /// Cache-device errors (block file, journal) that switch the mount to pass-through
    /// (degraded mode, docs/design.md §11): each error adds 1 to a score that halves every
    /// `--error-halflife`; at this score the mount degrades. It stays degraded until
    /// SIGUSR1 returns it to service (once its dirty blocks can be read); SIGUSR2 takes it
    /// out of service.
    #[arg(long, default_value = "8")]
    pub error_threshold: f64,
    /// The error score's half-life (`60s`, `500ms`).
    #[arg(long, default_value = "60s")]
    pub error_halflife: String,
    /// Most files with cached blocks at once (docs/design.md §15), checked at every
    /// admission: a file past it is served from the store, uncached. Default: no cap but the
    /// cache's size (each cached file holds at least one block).
    #[arg(long, value_name = "N")]
    pub cache_max_files: Option<u64>,
    /// Write the mount's counters as JSON to this file every second and at exit.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// At unmount, write every dirty block back (the store alone is then complete); without
    /// it dirty blocks stay journaled in the cache for the next mount or `tiercache flush`.
    #[arg(long)]
    pub flush_on_exit: bool,
    /// Unmount after this long (tests, benchmarks); default: until SIGINT, SIGTERM or unmount.
    #[arg(long)]
    pub duration: Option<String>,
    /// `--quiet`: no first line saying what is mounted; `--json`: the mount's final counters
    /// (as `--stats` writes them) as one JSON document on stdout at unmount, instead of the
    /// summary line on stderr.
    #[command(flatten)]
    pub output: crate::output::OutputArgs,
}

/// Arguments of `tiercache flush`: the block cache of `serve`, or a file cache of `mount`.
#[derive(Debug, Args)]
pub struct FlushAnyArgs {
    /// A block cache (as `serve` ran it).
    #[command(flatten)]
    pub block: serve_cmd::FlushArgs,
    /// A file cache directory (as `mount --cache-dir` used it): write its dirty blocks back to
    /// --store.
    #[arg(long, value_name = "DIR", requires = "store")]
    pub file_cache: Option<PathBuf>,
    /// The store directory of that file cache.
    #[arg(long, value_name = "DIR", requires = "file_cache")]
    pub store: Option<PathBuf>,
}

/// A bad command-line value (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("--{field}: {message}")]
pub struct BadMountArgument {
    /// The option.
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

fn bad(field: &'static str, message: impl ToString) -> anyhow::Error {
    BadMountArgument {
        field,
        message: message.to_string(),
    }
    .into()
}

/// Resolves the arguments into a mount configuration.
pub fn mount_config(args: &MountArgs) -> Result<MountConfig> {
    let cache_size =
        tiercache_core::units::parse_bytes(&args.cache_size).map_err(|e| bad("cache-size", e))?;
    let block_size =
        tiercache_core::units::parse_bytes(&args.block_size).map_err(|e| bad("block-size", e))?;
    if !(512..=(1 << 24)).contains(&block_size) || !block_size.is_power_of_two() {
        return Err(bad(
            "block-size",
            format!("{block_size} is not a power of two between 512 B and 16 MiB"),
        ));
    }
    let capacity = cache_size / block_size;
    if capacity > u32::MAX as u64 / 2 {
        return Err(bad("cache-size", "too many blocks for this block size"));
    }
    if cache_size > 0 && capacity == 0 {
        return Err(bad("cache-size", "smaller than one block"));
    }
    let variant: Variant = args.variant.parse().map_err(|e| bad("variant", e))?;
    let data = parse_duration(&args.store_latency).map_err(|e| bad("store-latency", e))?;
    let meta = match &args.store_meta_latency {
        Some(m) => parse_duration(m).map_err(|e| bad("store-meta-latency", e))?,
        None => data,
    };
    let cache_dir = match (&args.cache_dir, capacity) {
        (Some(d), _) => d.clone(),
        (None, 0) => {
            std::env::temp_dir().join(format!("tiercache-uncached-{}", std::process::id()))
        }
        (None, _) => return Err(bad("cache-dir", "required unless --cache-size 0")),
    };
    Ok(MountConfig {
        store: args.store.clone(),
        cache_dir,
        capacity_blocks: capacity as u32,
        block_size: block_size as u32,
        variant,
        latency: StoreLatency { data, meta },
        direct_io: args.direct_io,
        kernel_cache: !args.no_kernel_cache,
        cleaning: parse_cleaning(&args.cleaning).map_err(|e| bad("cleaning", e))?,
        on_error: tiercache_filecache::state::OnError {
            threshold: if args.error_threshold.is_finite() && args.error_threshold >= 1.0 {
                args.error_threshold
            } else {
                return Err(bad("error-threshold", "must be a number of at least 1"));
            },
            halflife: match parse_duration(&args.error_halflife) {
                Ok(d) if !d.is_zero() => d,
                Ok(_) => return Err(bad("error-halflife", "must be longer than zero")),
                Err(e) => return Err(bad("error-halflife", e)),
            },
        },
    })
}

/// `--cleaning`: a policy's name with the mount's defaults, or the policy as JSON.
fn parse_cleaning(text: &str) -> Result<CleaningConfig, String> {
    Ok(match text.trim() {
        "none" => CleaningConfig::None,
        "lazy" => CleaningConfig::Lazy {
            idle_ns: 1_000_000_000,
            batch: 64,
        },
        "threshold" => CleaningConfig::Threshold {
            high: 0.5,
            low: 0.25,
            batch: 64,
        },
        json if json.starts_with('{') => {
            let cfg: CleaningConfig = serde_json::from_str(json).map_err(|e| e.to_string())?;
            if let CleaningConfig::Threshold { high, low, .. } = cfg {
                if !(0.0..=1.0).contains(&low) || !(low..=1.0).contains(&high) {
                    return Err(format!(
                        "threshold needs 0 <= low <= high <= 1, got low {low} and high {high}"
                    ));
                }
            }
            cfg
        }
        other => {
            return Err(format!(
                "unknown policy {other:?}: none, lazy, threshold, or a JSON policy such as                  '{{\"policy\":\"lazy\",\"idle_ns\":\"200ms\"}}'"
            ))
        }
    })
}

/// Writes the counters to `path` (beside, then renamed over: readers never see half a file).
fn write_stats(path: &Path, stats: &tiercache_filecache::MountStats) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(stats)?)
        .with_context(|| format!("--stats: writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("--stats: renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Checks before mounting that the stats file can be written where `write_stats` writes it.
fn check_stats_path(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(bad("stats", format!("{} is a directory", path.display())));
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, b"")
        .and_then(|()| std::fs::remove_file(&tmp))
        .map_err(|e| {
            bad(
                "stats",
                format!(
                    "{}: cannot write there ({}: {e})",
                    path.display(),
                    tmp.display()
                ),
            )
        })
}

/// The cache directory made up for an uncached mount (`--cache-size 0` without
/// `--cache-dir`): removed when the mount ends, however it ends.
struct MadeUpCacheDir(PathBuf);

impl Drop for MadeUpCacheDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("tiercache mount: removing {} failed: {e}", self.0.display());
            }
        }
    }
}

/// Blocks SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 in this thread (and the threads it starts), so
/// the main loop can take them with `sigtimedwait`: the first two unmount cleanly, SIGUSR1
/// returns a degraded mount to service, SIGUSR2 takes it out (docs/design.md §11).
fn block_handled_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the local set we own; pthread_sigmask only
    // reads it. No other memory is involved.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// The signal of `set` taken within `wait`, if one came.
fn signal_within(set: &libc::sigset_t, wait: Duration) -> Option<libc::c_int> {
    let timeout = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` is an initialised signal set and `timeout` a valid timespec, both alive
    // for the call; a null siginfo pointer is allowed.
    let rc = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    (rc > 0).then_some(rc)
}

/// The operator's SIGUSR1 (return to service) or SIGUSR2 (take out of service) on a mount.
fn service_signal(state: &std::sync::Mutex<tiercache_filecache::State>, sig: libc::c_int) {
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    if sig == libc::SIGUSR2 {
        st.take_out_of_service("SIGUSR2");
        return;
    }
    match st.return_to_service() {
        Ok(true) => {}
        Ok(false) => eprintln!("tiercache mount: SIGUSR1: not degraded, nothing to do"),
        Err(e) => eprintln!("tiercache mount: SIGUSR1: cannot return to service: {e}"),
    }
}

/// Runs `tiercache mount`.
pub fn run(args: MountArgs) -> Result<()> {
    let cfg = mount_config(&args)?;
    let duration = match &args.duration {
        Some(d) => Some(parse_duration(d).map_err(|e| bad("duration", e))?),
        None => None,
    };
    if !args.mountpoint.is_dir() {
        bail!("mountpoint {}: not a directory", args.mountpoint.display());
    }
    if let Some(path) = &args.stats {
        check_stats_path(path)?;
    }
    let _made_up = args
        .cache_dir
        .is_none()
        .then(|| MadeUpCacheDir(cfg.cache_dir.clone()));
    let signals = block_handled_signals();
    let variant = cfg.variant;
    let capacity = cfg.capacity_blocks as u64 * cfg.block_size as u64;
    if args.cache_max_files == Some(0) {
        return Err(bad(
            "cache-max-files",
            "must be at least 1 (--cache-size 0 mounts the store uncached)",
        ));
    }
    if args.request_threads > MAX_REQUEST_THREADS {
        return Err(bad(
            "request-threads",
            format!("must be at most {MAX_REQUEST_THREADS}"),
        ));
    }
    let max_files = args.cache_max_files;
    let passthrough_min_size = match &args.passthrough_min_size {
        Some(s) => {
            tiercache_core::units::parse_bytes(s).map_err(|e| bad("passthrough-min-size", e))?
        }
        None => tiercache_filecache::DEFAULT_PASSTHROUGH_MIN_SIZE,
    };
    let cache_timeout = parse_duration(&args.cache_timeout).map_err(|e| bad("cache-timeout", e))?;
    let options = tiercache_filecache::FuseOptions {
        passthrough: !args.no_passthrough,
        passthrough_min_size,
        request_threads: args.request_threads,
        watch_store: args.watch_store,
        cache_timeout,
    };
    let prepare = |st: &mut tiercache_filecache::State| match max_files {
        Some(n) => st.set_max_files(n),
        None => Ok(()),
    };
    let (session, state) =
        match tiercache_filecache::spawn_mount_with(cfg, &args.mountpoint, options, prepare) {
            Ok(mounted) => mounted,
            Err(e) => {
                // The cache directory belongs to another store: the user's choice of STORE or
                // --cache-dir is wrong (exit 2), and nothing was touched.
                let inner = e.get_ref().and_then(|i| i.downcast_ref::<RecoveryError>());
                if let Some(mismatch @ RecoveryError::StoreMismatch { .. }) = inner {
                    return Err(bad(
                        "cache-dir",
                        format!("STORE {}: {mismatch}", args.store.display()),
                    ));
                }
                return Err(anyhow::Error::new(e).context(format!(
                    "mounting {} on {}",
                    args.store.display(),
                    args.mountpoint.display()
                )));
            }
        };
    {
        let st = state.lock().unwrap_or_else(|p| p.into_inner());
        let recovered = st.stats().recovered_blocks;
        let cache = if capacity == 0 {
            "uncached".to_string()
        } else {
            format!(
                "a {variant} cache of {}{} (LRU)",
                size_text(capacity),
                args.cache_dir
                    .as_ref()
                    .map_or_else(String::new, |d| format!(" in {}", d.display()))
            )
        };
        if !args.output.quiet {
            eprintln!(
                "tiercache mount: {} on {}, {cache}{}; Ctrl-C or `fusermount3 -u {}` unmounts",
                args.store.display(),
                args.mountpoint.display(),
                if recovered > 0 {
                    format!("; wrote back {recovered} dirty blocks a crash left")
                } else {
                    String::new()
                },
                args.mountpoint.display(),
            );
        }
    }
    let started = Instant::now();
    let mut last_stats = Instant::now();
    let mut stats_failing = false;
    loop {
        match signal_within(&signals, Duration::from_millis(200)) {
            Some(sig @ (libc::SIGUSR1 | libc::SIGUSR2)) => service_signal(&state, sig),
            Some(_) => break,
            None => {}
        }
        if session.guard.is_finished() || duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(path) = args.stats.as_deref() {
            if last_stats.elapsed() >= Duration::from_secs(1) {
                let stats = state.lock().unwrap_or_else(|p| p.into_inner()).stats();
                // A failed write costs the counters, not the mount: warn once per failure.
                match write_stats(path, &stats) {
                    Ok(()) => stats_failing = false,
                    Err(e) if !stats_failing => {
                        stats_failing = true;
                        eprintln!("tiercache mount: warning: {}", crate::errors::render(&e));
                    }
                    Err(_) => {}
                }
                last_stats = Instant::now();
            }
        }
    }
    let unmounted = if session.guard.is_finished() {
        session.join()
    } else {
        session.umount_and_join()
    };
    let flushed = if args.flush_on_exit {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        let flushed = st
            .flush_all()
            .context("writing dirty blocks back at unmount");
        // Everything is clean now: the checkpoint for a warm restart takes it all in.
        if flushed.is_ok() {
            if let Err(e) = st.write_checkpoint() {
                eprintln!("tiercache mount: writing the checkpoint failed: {e}");
            }
        }
        drop(st);
        if let Ok(n) = &flushed {
            eprintln!("tiercache mount: wrote back {n} dirty blocks");
        }
        flushed.map(|_| ())
    } else {
        Ok(())
    };
    let stats = state.lock().unwrap_or_else(|p| p.into_inner()).stats();
    let stats_written = match args.stats.as_deref() {
        Some(path) => write_stats(path, &stats),
        None => Ok(()),
    };
    if args.output.json {
        println!("{}", serde_json::to_string(&stats)?);
    } else {
        eprintln!(
        "tiercache mount: unmounted; {} reads, {} writes, block hits {} of {} reads, {} write-backs, {} blocks freed by deletes ({} write-backs cancelled), {} dirty blocks left journaled (`tiercache flush --file-cache` writes them back)",
        stats.reads,
        stats.writes,
        stats.core.read_hits,
        stats.core.read_hits + stats.core.read_misses,
        stats.core.write_backs,
        stats.core.freed_by_delete,
        stats.core.write_backs_cancelled,
        stats.dirty_blocks
    );
    }
    unmounted.context("the FUSE session ended with an error")?;
    flushed?;
    stats_written
}

/// Bytes in the largest binary unit that divides them (`256 MiB`), else in bytes.
fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

/// Runs `tiercache flush`: a file cache when `--file-cache` is given, else the block cache.
pub fn flush(args: FlushAnyArgs) -> Result<()> {
    let (Some(cache_dir), Some(store)) = (&args.file_cache, &args.store) else {
        return serve_cmd::flush(args.block);
    };
    if !cache_dir.join("geometry").exists() {
        bail!(
            "--file-cache {}: not a tiercache mount's cache directory (no geometry file)",
            cache_dir.display()
        );
    }
    if !store.is_dir() {
        bail!("--store {}: not a directory", store.display());
    }
    let cache = CacheDir::new(cache_dir);
    let _lock = cache.lock()?;
    let n = match recover(store, &cache) {
        Ok(n) => n,
        Err(e @ RecoveryError::StoreMismatch { .. }) => return Err(bad("store", e)),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "writing back --file-cache {} into --store {}",
                cache_dir.display(),
                store.display()
            )))
        }
    };
    if args.block.output.json {
        println!(
            "{}",
            serde_json::json!({"written_back_blocks": n, "store": store})
        );
    } else {
        eprintln!(
            "tiercache flush: wrote back {n} dirty blocks; {} alone is complete",
            store.display()
        );
    }
    Ok(())
}
