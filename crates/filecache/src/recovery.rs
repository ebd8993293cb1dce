//! Restart after a crash: the dirty blocks the journal records are written back to the store
//! (each block's newest intact version, cut by the truncates recorded after it) and the
//! truncates it does not record as done are redone, so the store alone is complete again (what a mount does first, and `tiercache flush
//! --file-cache` does for a stopped mount).
//!
//! The journal names files by inode number only, so its blocks are written back only into the
//! store the cache directory records ([`StoreIdentity`]), and the journal is emptied only when
//! every block it holds was written: a block whose file cannot be found keeps the journal.
//! A file the mount itself deleted never leaves such blocks: its `Deleted` record, journaled
//! before the store file goes, voids them (see [`crate::journal`]).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::journal::{self, Journal};
use crate::store::{inode_paths, CacheDir, StoreIdentity};

/// Why the journal of a cache directory was not (wholly) written back.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The store given is not the one the cache directory's blocks came from.
    #[error(
        "cache directory {} belongs to store {} (device {}, root inode {}), not to {} \
         (device {}, root inode {}): its journal names files by inode number, so its dirty \
         blocks would overwrite unrelated files; nothing was written and the journal is kept",
        cache_dir.display(),
        recorded.path.display(),
        recorded.dev,
        recorded.ino,
        given.path.display(),
        given.dev,
        given.ino
    )]
    StoreMismatch {
        /// The cache directory.
        cache_dir: PathBuf,
        /// The store it records.
        recorded: StoreIdentity,
        /// The store given.
        given: StoreIdentity,
    },
    /// Some journaled blocks name files the store does not have; the journal is kept.
    #[error(
        "{unplaced} journaled dirty blocks name files (inode {inodes}) that {} does not \
         have; {}the journal {} is kept. If those files were deleted from the store while it \
         was not mounted, remove the journal to discard their blocks",
        store.display(),
        if *written_back {
            format!("wrote back the other {written} blocks; ")
        } else {
            "nothing was written (the cache directory records no store, so this may not be \
             its store); "
                .to_string()
        },
        journal.display()
    )]
    Unplaced {
        /// The store.
        store: PathBuf,
        /// The journal kept.
        journal: PathBuf,
        /// Blocks that could not be placed.
        unplaced: u64,
        /// Their files' inode numbers (a few).
        inodes: String,
        /// Whether the placeable blocks were written back.
        written_back: bool,
        /// Blocks written back.
        written: u64,
    },
    /// Reading the cache or writing the store failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<RecoveryError> for io::Error {
    fn from(e: RecoveryError) -> io::Error {
        match e {
            RecoveryError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidInput, other),
        }
    }
}

/// Reads at `offset` until `buf` is full or the file ends; returns the bytes read.
pub(crate) fn pread_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Writes back every dirty block the journal of `cache_dir` records into `store`, then empties
/// the journal: after it, the store alone is complete. Returns the blocks written back. The
/// caller holds the cache lock.
///
/// Refuses a store other than the one the cache directory records, and keeps the journal
/// (and fails) when a block's file is not in the store.
pub fn recover(store: &Path, cache: &CacheDir) -> Result<u64, RecoveryError> {
    let given = StoreIdentity::of(store)?;
    let recorded = cache.read_store_identity()?;
    if let Some(recorded) = &recorded {
        if !recorded.same_store(&given) {
            return Err(RecoveryError::StoreMismatch {
                cache_dir: cache.dir.clone(),
                recorded: recorded.clone(),
                given,
            });
        }
    }
    let replay = journal::replay(&cache.journal())?;
    if replay.is_empty() {
        return Ok(0);
    }
    let block_size = cache.read_block_size()?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} has dirty blocks but no geometry file",
                cache.dir.display()
            ),
        )
    })? as u64;
    let blocks = File::open(cache.blocks())?;
    // A truncate the journal does not record as done is redone first; its file may be gone
    // since (nothing to cut then).
    let redo: Vec<(u64, u64)> = replay
        .truncates
        .iter()
        .filter(|t| !t.done)
        .map(|t| (t.file, t.size))
        .collect();
    let wanted: HashSet<u64> = replay
        .blocks
        .iter()
        .map(|v| v[0].key.file)
        .chain(redo.iter().map(|&(file, _)| file))
        .collect();
    let paths = inode_paths(store, &wanted)?;
    // The blocks to write, and those whose file is not there.
    let mut placed = Vec::new();
    let mut unplaced: Vec<u64> = Vec::new();
    for versions in &replay.blocks {
        // The newest version whose data is intact: a power loss may have kept a record and
        // lost its data, or lost a record after which the slot an older one names was reused.
        let mut found = None;
        for r in versions {
            let mut buf = vec![0u8; r.len as usize];
            let n = pread_full(&blocks, &mut buf, r.slot as u64 * block_size)?;
            if n == buf.len() && crc32fast::hash(&buf) == r.crc {
                buf.truncate(replay.bytes_to_write(r, block_size) as usize);
                found = Some((r, buf));
                break;
            }
        }
        let Some((r, buf)) = found else {
            continue; // no version left: the block was clean or cut when its slot was reused
        };
        if buf.is_empty() {
            continue; // wholly past a truncate recorded after it
        }
        match paths.get(&r.key.file) {
            Some(rel) => placed.push((rel, r.key.block, buf)),
            None => unplaced.push(r.key.file),
        }
    }
    let unplaced_error = |written_back: bool, written: u64| {
        let mut files = unplaced.clone();
        files.sort_unstable();
        files.dedup();
        let mut inodes: Vec<String> = files.iter().take(5).map(u64::to_string).collect();
        if files.len() > 5 {
            inodes.push(format!("and {} more", files.len() - 5));
        }
        RecoveryError::Unplaced {
            store: store.to_path_buf(),
            journal: cache.journal(),
            unplaced: unplaced.len() as u64,
            inodes: inodes.join(", "),
            written_back,
            written,
        }
    };
    // Without a recorded identity, missing files are the only sign of a wrong store: then
    // nothing is written.
    if recorded.is_none() && !unplaced.is_empty() {
        return Err(unplaced_error(false, 0));
    }
    let mut files: HashMap<&PathBuf, File> = HashMap::new();
    for (file, size) in &redo {
        if let Some(rel) = paths.get(file) {
            let f = OpenOptions::new().write(true).open(store.join(rel))?;
            f.set_len(*size)?;
            files.insert(rel, f);
        }
    }
    let mut written = 0;
    for (rel, block, buf) in &placed {
        let file = match files.entry(rel) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(OpenOptions::new().write(true).open(store.join(rel))?)
            }
        };
        file.write_all_at(buf, block * block_size)?;
        written += 1;
    }
    for f in files.values() {
        f.sync_data()?;
    }
    if !unplaced.is_empty() {
        return Err(unplaced_error(true, written));
    }
    Journal::create(&cache.journal())?;
    Ok(written)
}

// The crash left by a mount's state: needs the mount.
#[cfg(all(test, feature = "fuse"))]
mod tests {
    use super::*;

    use crate::{MountConfig, State, Variant};

    /// A write-back mount of `store` left 3 dirty blocks of file `f` (and 1 of `g`) journaled
    /// in `cache`, as a kill -9 leaves them.
    fn leave_dirty(store: &Path, cache: &Path) {
        std::fs::create_dir_all(store).unwrap();
        let mut st = State::open(MountConfig::new(
            store.to_path_buf(),
            cache.to_path_buf(),
            16,
            512,
            Variant::WB,
        ))
        .unwrap();
        for (name, len) in [("f", 1500), ("g", 100)] {
            std::fs::write(store.join(name), b"").unwrap();
            let md = std::fs::metadata(store.join(name)).unwrap();
            let id = st.remember(PathBuf::from(name), &md).unwrap();
            st.write(id, 0, &vec![0xA5; len]).unwrap();
        }
    }

    #[test]
    fn another_store_is_refused_and_the_journal_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, cache) = (
            dir.path().join("a"),
            dir.path().join("b"),
            CacheDir::new(&dir.path().join("cache")),
        );
        leave_dirty(&a, &cache.dir);
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("other"), b"unrelated").unwrap();
        let journal = std::fs::read(cache.journal()).unwrap();
        assert_eq!(journal::replay(&cache.journal()).unwrap().blocks.len(), 4);
        let err = recover(&b, &cache).unwrap_err();
        assert!(matches!(err, RecoveryError::StoreMismatch { .. }), "{err}");
        let text = err.to_string();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        assert!(
            text.contains(&canon(&a)) && text.contains(&canon(&b)),
            "{text}"
        );
        assert_eq!(std::fs::read(cache.journal()).unwrap(), journal);
        assert_eq!(std::fs::read(b.join("other")).unwrap(), b"unrelated");
        assert_eq!(std::fs::read_dir(&b).unwrap().count(), 1);
        // Its own store takes the blocks.
        assert_eq!(recover(&a, &cache).unwrap(), 4);
        assert_eq!(std::fs::read(a.join("f")).unwrap(), vec![0xA5; 1500]);
        assert!(journal::replay(&cache.journal()).unwrap().is_empty());
    }

    #[test]
    fn a_block_without_its_file_keeps_the_journal_and_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (a, cache) = (
            dir.path().join("a"),
            CacheDir::new(&dir.path().join("cache")),
        );
        leave_dirty(&a, &cache.dir);
        // Deleted from the store behind the cache's back.
        std::fs::remove_file(a.join("g")).unwrap();
        let journal = std::fs::read(cache.journal()).unwrap();
        let err = recover(&a, &cache).unwrap_err();
        match &err {
            RecoveryError::Unplaced {
                unplaced, written, ..
            } => assert_eq!((*unplaced, *written), (1, 3)),
            other => panic!("{other}"),
        }
        assert_eq!(std::fs::read(cache.journal()).unwrap(), journal);
        // The blocks that could be placed were written back.
        assert_eq!(std::fs::read(a.join("f")).unwrap(), vec![0xA5; 1500]);

        // A cache directory that records no store (an older tiercache's) writes nothing then.
        std::fs::remove_file(cache.store_file()).unwrap();
        std::fs::write(a.join("f"), b"").unwrap();
        let err = recover(&a, &cache).unwrap_err();
        assert!(
            matches!(err, RecoveryError::Unplaced { written: 0, .. }),
            "{err}"
        );
        assert_eq!(std::fs::read(a.join("f")).unwrap(), b"");
        assert_eq!(std::fs::read(cache.journal()).unwrap(), journal);
    }
}
