//! Restart after a crash: the dirty blocks the journal records are written back to the store,
//! so the store alone is complete again (what a mount does first, and `tiercache flush
//! --file-cache` does for a stopped mount).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::journal::{self, Journal};
use crate::store::{inode_paths, CacheDir};

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
pub fn recover(store: &Path, cache: &CacheDir) -> io::Result<u64> {
    let records = journal::replay(&cache.journal())?;
    if records.is_empty() {
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
    let wanted: HashSet<u64> = records.iter().map(|r| r.key.file).collect();
    let paths = inode_paths(store, &wanted)?;
    let mut files: HashMap<u64, File> = HashMap::new();
    let mut written = 0;
    for r in &records {
        let Some(rel) = paths.get(&r.key.file) else {
            continue; // the file is gone: nothing to write back to
        };
        let mut buf = vec![0u8; r.len as usize];
        let n = pread_full(&blocks, &mut buf, r.slot as u64 * block_size)?;
        if n != buf.len() || crc32fast::hash(&buf) != r.crc {
            continue; // the slot was reused after a clean record that did not persist
        }
        let file = match files.entry(r.key.file) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(OpenOptions::new().write(true).open(store.join(rel))?)
            }
        };
        file.write_all_at(&buf, r.key.block * block_size)?;
        written += 1;
    }
    for f in files.values() {
        f.sync_data()?;
    }
    Journal::create(&cache.journal())?;
    Ok(written)
}
