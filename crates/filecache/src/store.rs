//! The slow store: a directory, optionally slowed by a fixed latency per operation, and the
//! cache directory's layout (block file, journal, geometry, store identity, lock).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Added latency per store operation: how a local directory is made to behave like a networked
/// file store or a slow disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreLatency {
    /// Per data operation (one read or write call, any size).
    pub data: Duration,
    /// Per namespace or attribute operation (lookup, create, unlink, rename, mkdir, setattr…).
    pub meta: Duration,
}

impl StoreLatency {
    /// Pays the latency of one data operation.
    pub fn data_op(&self) {
        if !self.data.is_zero() {
            std::thread::sleep(self.data);
        }
    }

    /// Pays the latency of one metadata operation.
    pub fn meta_op(&self) {
        if !self.meta.is_zero() {
            std::thread::sleep(self.meta);
        }
    }
}

/// A duration that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad duration {0:?}: expected a number with a unit (ns, us, ms, s), e.g. \"2ms\"")]
pub struct BadDuration(pub String);

/// Parses `"2ms"`, `"150us"`, `"0"`, `"1s"`.
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| BadDuration(text.to_string()))?;
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| BadDuration(text.to_string()))?;
    let nanos = match unit {
        "ns" => value,
        "us" | "µs" => value * 1e3,
        "ms" => value * 1e6,
        "s" => value * 1e9,
        _ => return Err(BadDuration(text.to_string())),
    };
    if !nanos.is_finite() || nanos < 0.0 {
        return Err(BadDuration(text.to_string()));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// The files of a cache directory.
#[derive(Debug, Clone)]
pub struct CacheDir {
    /// The directory.
    pub dir: PathBuf,
}

impl CacheDir {
    /// The layout under `dir`.
    pub fn new(dir: &Path) -> Self {
        CacheDir {
            dir: dir.to_path_buf(),
        }
    }
    /// Cached block data: slot × block size, a few slots more than the capacity (the spares
    /// a dirty block's new version is written to).
    pub fn blocks(&self) -> PathBuf {
        self.dir.join("blocks")
    }
    /// The dirty-block journal.
    pub fn journal(&self) -> PathBuf {
        self.dir.join("journal")
    }
    /// The block size the blocks file and journal were written with.
    pub fn geometry(&self) -> PathBuf {
        self.dir.join("geometry")
    }
    /// The identity of the store the journal's blocks belong to ([`StoreIdentity`]).
    pub fn store_file(&self) -> PathBuf {
        self.dir.join("store")
    }
    /// Held (flock) by whoever uses the cache.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("lock")
    }

    /// Takes the cache's exclusive lock, or says who holds it.
    pub fn lock(&self) -> io::Result<File> {
        std::fs::create_dir_all(&self.dir)?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.lock_path())?;
        // SAFETY: flock on a valid open descriptor owned by `f`; no memory is involved.
        let rc = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if rc != 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "cache directory {} is in use by another tiercache mount or flush",
                    self.dir.display()
                ),
            ));
        }
        Ok(f)
    }

    /// The recorded block size, if any.
    pub fn read_block_size(&self) -> io::Result<Option<u32>> {
        match std::fs::read_to_string(self.geometry()) {
            Ok(text) => {
                let value = text
                    .trim()
                    .strip_prefix("block_size=")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{}: expected block_size=N", self.geometry().display()),
                        )
                    })?;
                Ok(Some(value))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records the block size.
    pub fn write_block_size(&self, block_size: u32) -> io::Result<()> {
        std::fs::write(self.geometry(), format!("block_size={block_size}\n"))?;
        File::open(self.geometry())?.sync_all()
    }

    /// The store this cache directory was last used with, if it records one (cache
    /// directories written before identities were recorded do not).
    pub fn read_store_identity(&self) -> io::Result<Option<StoreIdentity>> {
        match std::fs::read(self.store_file()) {
            Ok(bytes) => StoreIdentity::parse(&bytes).map(Some).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: expected dev=N, ino=N and path=P lines",
                        self.store_file().display()
                    ),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records `id` as the store of this cache directory: written beside, synced and renamed
    /// over, so a crash leaves the old or the new identity, never a torn one.
    pub fn write_store_identity(&self, id: &StoreIdentity) -> io::Result<()> {
        let tmp = self.dir.join("store.tmp");
        let mut f = File::create(&tmp)?;
        f.write_all(&id.encode())?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.store_file())?;
        File::open(&self.dir)?.sync_all()
    }
}

/// Which directory a store is: the journal names files by inode number only, so its blocks
/// may only ever be written back into the store they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreIdentity {
    /// `st_dev` of the store's root.
    pub dev: u64,
    /// Inode number of the store's root.
    pub ino: u64,
    /// Canonical path of the store's root.
    pub path: PathBuf,
}

impl StoreIdentity {
    /// The identity of the store directory at `store`.
    pub fn of(store: &Path) -> io::Result<StoreIdentity> {
        let path = std::fs::canonicalize(store)?;
        let md = std::fs::metadata(&path)?;
        Ok(StoreIdentity {
            dev: md.dev(),
            ino: md.ino(),
            path,
        })
    }

    /// Whether `other` is the same directory: the same root inode on the same device, or at
    /// the same path (a network file system remounted after a reboot may get another device
    /// number, but keeps its root inode). A directory recreated at the same path has another
    /// root inode and is refused.
    pub fn same_store(&self, other: &StoreIdentity) -> bool {
        self.ino == other.ino && (self.dev == other.dev || self.path == other.path)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = format!("dev={}\nino={}\npath=", self.dev, self.ino).into_bytes();
        out.extend_from_slice(self.path.as_os_str().as_bytes());
        out.push(b'\n');
        out
    }

    fn parse(bytes: &[u8]) -> Option<StoreIdentity> {
        let text = bytes.strip_suffix(b"\n")?;
        let mut parts = text.splitn(3, |&b| b == b'\n');
        let num = |line: &[u8], key: &str| -> Option<u64> {
            std::str::from_utf8(line.strip_prefix(key.as_bytes())?)
                .ok()?
                .parse()
                .ok()
        };
        let dev = num(parts.next()?, "dev=")?;
        let ino = num(parts.next()?, "ino=")?;
        let path = PathBuf::from(OsStr::from_bytes(parts.next()?.strip_prefix(b"path=")?));
        Some(StoreIdentity { dev, ino, path })
    }
}

/// Maps store inode numbers to paths (relative to `root`) by walking the tree: how a restart
/// finds the files its journal names (files are named by inode so renames do not matter).
/// Only the root's file system is walked: a mount never serves files on another one.
pub fn inode_paths(
    root: &Path,
    wanted: &std::collections::HashSet<u64>,
) -> io::Result<std::collections::HashMap<u64, PathBuf>> {
    let dev = std::fs::metadata(root)?.dev();
    let mut found = std::collections::HashMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&rel))? {
            let entry = entry?;
            let md = entry.metadata()?;
            let path = rel.join(entry.file_name());
            if md.dev() != dev {
                continue;
            }
            if md.is_dir() {
                stack.push(path);
            } else if md.is_file() && wanted.contains(&md.ino()) {
                found.insert(md.ino(), path);
            }
        }
        if found.len() == wanted.len() {
            break;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_reject_garbage() {
        assert_eq!(parse_duration("2ms").unwrap(), Duration::from_millis(2));
        assert_eq!(parse_duration("150us").unwrap(), Duration::from_micros(150));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("2").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("2 hours").is_err());
    }

    #[test]
    fn a_store_identity_round_trips_and_tells_stores_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a\nodd"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let cache = CacheDir::new(&dir.path().join("cache"));
        std::fs::create_dir(&cache.dir).unwrap();
        assert_eq!(cache.read_store_identity().unwrap(), None);
        let ida = StoreIdentity::of(&a).unwrap();
        cache.write_store_identity(&ida).unwrap();
        assert_eq!(cache.read_store_identity().unwrap(), Some(ida.clone()));
        // The same directory by another spelling is the same store; another one is not.
        assert!(ida.same_store(&StoreIdentity::of(&a.join("../a\nodd")).unwrap()));
        assert!(!ida.same_store(&StoreIdentity::of(&b).unwrap()));
        // Same path, another root inode (recreated): another store. Another device number at
        // the same path and root inode (a remounted network store): the same.
        let recreated = StoreIdentity {
            ino: ida.ino + 1,
            ..ida.clone()
        };
        assert!(!ida.same_store(&recreated));
        let remounted = StoreIdentity {
            dev: ida.dev + 1,
            ..ida.clone()
        };
        assert!(ida.same_store(&remounted));
        std::fs::write(cache.store_file(), "garbage").unwrap();
        assert!(cache.read_store_identity().is_err());
    }
}
