//! Warm restart (docs/design.md §15): a checkpoint of the cache's index of clean blocks,
//! written at a clean unmount, so the next mount starts with the blocks it had instead of an
//! empty cache, in time bounded by the checkpoint's size and the journal's length (neither
//! the cached files nor the store are scanned).
//!
//! The checkpoint lists, for every clean block, its place in the blocks file, its valid bytes
//! and its key, and for every file with such blocks a validator of its store file (size,
//! modification and change time, as `stat` gave them when the checkpoint was written). It is
//! written beside, synced, and renamed over (the blocks file, journal and written-back store
//! files synced first), and it ends in a CRC32 of all of it: a torn or damaged checkpoint is
//! refused whole, and the mount starts cold, which is always correct (the journal alone
//! brings back the dirty blocks, as it does after a crash).
//!
//! A checkpoint describes the blocks file as it was when written; it stays valid only while
//! nothing writes the blocks file. So a mount takes it (reads it, then removes it durably)
//! before it serves anything, and a mount that wrote one and goes on removes it before its
//! first write to the blocks file: a crash after that restarts cold. What the mount cannot
//! see is a change to the store while it was not mounted: a restored file's validator is
//! compared with the store file's when the mount first meets the file (its lookup or create,
//! which `stat` it anyway), and a file that changed (or a new file reusing the inode number,
//! whose change time differs) has its blocks dropped then. A file with dirty blocks at the
//! checkpoint is left out (a restart's recovery writes them back, changing the store file),
//! and so are blocks of files the mount does not know by path (unlinked ones).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::State;
use crate::core::{BlockKey, FileCache, FileId, MAX_BLOCKS_PER_FILE};

/// The checkpoint's name in the cache directory.
pub(super) const FILE_NAME: &str = "checkpoint";
const MAGIC: &[u8; 8] = b"TCWARM01";
const HEADER: usize = 8 + 16 + 16;
const FILE_RECORD: usize = 32;
const BLOCK_RECORD: usize = 24;

/// The checkpoint of cache directory `dir`.
pub(super) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// What a store file was when its blocks were checkpointed: a file whose `stat` differs
/// changed since (or is another file under the same inode number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Validator {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Validator {
    /// The validator of a store file's metadata.
    pub(super) fn of(md: &std::fs::Metadata) -> Validator {
        Validator {
            size: md.len(),
            mtime_ns: md.mtime() * 1_000_000_000 + md.mtime_nsec(),
            ctime_ns: md.ctime() * 1_000_000_000 + md.ctime_nsec(),
        }
    }
}

/// The geometry a checkpoint is for: one of another geometry is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    /// Block size in bytes.
    pub block_size: u32,
    /// Core slots.
    pub capacity: u32,
    /// Slots of the blocks file (capacity and spares).
    pub total: u32,
}

/// One checkpointed clean block: where it lies in the blocks file, its valid bytes, its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub phys: u32,
    pub valid: u32,
    pub key: BlockKey,
}

/// A checkpoint's content.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Checkpoint {
    pub files: HashMap<FileId, Validator>,
    pub entries: Vec<Entry>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The bytes of checkpoint `cp` for `geo`.
pub(super) fn encode(geo: Geometry, cp: &Checkpoint) -> Vec<u8> {
    let mut b = Vec::with_capacity(
        HEADER + cp.files.len() * FILE_RECORD + cp.entries.len() * BLOCK_RECORD + 4,
    );
    b.extend_from_slice(MAGIC);
    for v in [geo.block_size, geo.capacity, geo.total, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&(cp.files.len() as u64).to_le_bytes());
    b.extend_from_slice(&(cp.entries.len() as u64).to_le_bytes());
    let mut files: Vec<(&FileId, &Validator)> = cp.files.iter().collect();
    files.sort_unstable_by_key(|(f, _)| **f);
    for (file, v) in files {
        b.extend_from_slice(&file.to_le_bytes());
        b.extend_from_slice(&v.size.to_le_bytes());
        b.extend_from_slice(&v.mtime_ns.to_le_bytes());
        b.extend_from_slice(&v.ctime_ns.to_le_bytes());
    }
    for e in &cp.entries {
        b.extend_from_slice(&e.phys.to_le_bytes());
        b.extend_from_slice(&e.valid.to_le_bytes());
        b.extend_from_slice(&e.key.file.to_le_bytes());
        b.extend_from_slice(&e.key.block.to_le_bytes());
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Parses checkpoint bytes written for `geo`; the error says why they are not used. Memory is
/// bounded by the bytes' length (counts are checked against it before anything is allocated).
pub(super) fn decode(b: &[u8], geo: Geometry) -> Result<Checkpoint, String> {
    if b.len() < HEADER + 4 || &b[..8] != MAGIC {
        return Err("not a checkpoint (too short or bad magic)".into());
    }
    let body = b.len() - 4;
    if crc32fast::hash(&b[..body]) != u32_at(b, body) {
        return Err("checksum mismatch (torn or damaged)".into());
    }
    let found = Geometry {
        block_size: u32_at(b, 8),
        capacity: u32_at(b, 12),
        total: u32_at(b, 16),
    };
    if found != geo {
        return Err(format!(
            "written for {} slots of {} B ({} in the blocks file), the mount has {} of {} B ({})",
            found.capacity, found.block_size, found.total, geo.capacity, geo.block_size, geo.total
        ));
    }
    let (nfiles, nentries) = (u64_at(b, 24), u64_at(b, 32));
    let expected = nfiles
        .checked_mul(FILE_RECORD as u64)
        .and_then(|f| nentries.checked_mul(BLOCK_RECORD as u64)?.checked_add(f))
        .and_then(|r| r.checked_add((HEADER + 4) as u64));
    if expected != Some(b.len() as u64) {
        return Err(format!(
            "{nfiles} files and {nentries} blocks do not fill its {} bytes",
            b.len()
        ));
    }
    if nentries > geo.capacity as u64 {
        return Err(format!(
            "{nentries} blocks, more than the {} slots",
            geo.capacity
        ));
    }
    let mut files = HashMap::with_capacity(nfiles as usize);
    let mut at = HEADER;
    for _ in 0..nfiles {
        let v = Validator {
            size: u64_at(b, at + 8),
            mtime_ns: u64_at(b, at + 16) as i64,
            ctime_ns: u64_at(b, at + 24) as i64,
        };
        if files.insert(u64_at(b, at), v).is_some() {
            return Err(format!("file {} listed twice", u64_at(b, at)));
        }
        at += FILE_RECORD;
    }
    let mut entries = Vec::with_capacity(nentries as usize);
    let mut phys_seen = vec![false; geo.total as usize];
    let mut keys = HashSet::with_capacity(nentries as usize);
    for i in 0..nentries {
        let e = Entry {
            phys: u32_at(b, at),
            valid: u32_at(b, at + 4),
            key: BlockKey::new(u64_at(b, at + 8), u64_at(b, at + 16)),
        };
        at += BLOCK_RECORD;
        let bad = |why: &str| Err(format!("block {i} ({:?}): {why}", e));
        if e.phys >= geo.total || std::mem::replace(&mut phys_seen[e.phys as usize], true) {
            return bad("slot out of range or listed twice");
        }
        if e.valid == 0 || e.valid > geo.block_size {
            return bad("valid bytes out of range");
        }
        if e.key.block >= MAX_BLOCKS_PER_FILE || !files.contains_key(&e.key.file) {
            return bad("block out of range or its file not listed");
        }
        if !keys.insert(e.key) {
            return bad("listed twice");
        }
        entries.push(e);
    }
    Ok(Checkpoint { files, entries })
}

/// Writes `bytes` as the checkpoint of cache directory `dir`: beside, synced, renamed over,
/// the directory synced, so a crash leaves the old checkpoint (or none) or the new one whole.
pub(super) fn write(dir: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path(dir))?;
    File::open(dir)?.sync_all()
}

/// Removes the checkpoint of cache directory `dir` durably (none: nothing to do).
pub(super) fn remove(dir: &Path) -> io::Result<()> {
    match std::fs::remove_file(path(dir)) {
        Ok(()) => File::open(dir)?.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl State {
    fn geometry(&self) -> Geometry {
        Geometry {
            block_size: self.cfg.block_size,
            capacity: self.cfg.capacity_blocks,
            total: self.cfg.capacity_blocks + super::slots::spare_slots(self.cfg.capacity_blocks),
        }
    }

    /// The checkpoint of the cache now: its clean blocks of files that have no dirty block
    /// and that the mount knows by path (each file's validator read from the store) or
    /// restored and has not met since (their validator carried over).
    fn checkpoint_now(&self) -> Checkpoint {
        let mut dirty_files: HashSet<FileId> = self.stranded.keys().map(|k| k.file).collect();
        let mut clean = Vec::new();
        for slot in 0..self.cfg.capacity_blocks {
            match self.core.slot_state(slot) {
                Some((key, true)) => {
                    dirty_files.insert(key.file);
                }
                Some((key, false)) if self.valid[slot as usize] > 0 => clean.push((slot, key)),
                _ => {}
            }
        }
        let mut cp = Checkpoint::default();
        let mut unknown: HashSet<FileId> = HashSet::new();
        for (slot, key) in clean {
            if dirty_files.contains(&key.file) || unknown.contains(&key.file) {
                continue;
            }
            if !cp.files.contains_key(&key.file) {
                // A restored file not met since keeps its validator: it is checked when met.
                if let Some(v) = self.warm.get(&key.file) {
                    cp.files.insert(key.file, *v);
                    cp.entries.push(Entry {
                        phys: self.slots.phys(slot),
                        valid: self.valid[slot as usize],
                        key,
                    });
                    continue;
                }
                let md = self
                    .nodes
                    .get(&key.file)
                    .filter(|n| n.regular && !n.unlinked)
                    .and_then(|n| std::fs::symlink_metadata(self.store_path(&n.path)).ok())
                    .filter(|md| md.ino() == key.file && md.dev() == self.root_dev);
                match md {
                    Some(md) => {
                        cp.files.insert(key.file, Validator::of(&md));
                    }
                    None => {
                        unknown.insert(key.file);
                        continue;
                    }
                }
            }
            cp.entries.push(Entry {
                phys: self.slots.phys(slot),
                valid: self.valid[slot as usize],
                key,
            });
        }
        cp
    }

    /// Writes the checkpoint (a clean unmount): the blocks file, written-back store files and
    /// journal are synced first, as the checkpoint names their content. Returns the blocks
    /// checkpointed. A degraded mount, or one without a cache, writes none.
    pub fn write_checkpoint(&mut self) -> io::Result<u64> {
        if self.cfg.capacity_blocks == 0 || self.health.degraded {
            return Ok(0);
        }
        self.sync_journal_raw()?;
        let cp = self.checkpoint_now();
        let bytes = encode(self.geometry(), &cp);
        #[cfg(test)]
        if let Some(keep) = self.checkpoint_crash_after.take() {
            // A crash in the middle of writing the checkpoint: part of it beside, no rename.
            let tmp = self.cfg.cache_dir.join(format!("{FILE_NAME}.tmp"));
            std::fs::write(tmp, &bytes[..keep.min(bytes.len())])?;
            return Err(io::Error::other(
                "injected crash while writing the checkpoint",
            ));
        }
        write(&self.cfg.cache_dir, &bytes)?;
        self.checkpoint_on_disk = true;
        Ok(cp.entries.len() as u64)
    }

    /// The blocks file is about to change: a checkpoint this mount wrote no longer describes
    /// it, and goes first.
    pub(super) fn retire_checkpoint(&mut self) -> io::Result<()> {
        if self.checkpoint_on_disk {
            remove(&self.cfg.cache_dir)?;
            self.checkpoint_on_disk = false;
        }
        Ok(())
    }

    /// At open, before anything is served: takes the cache directory's checkpoint (it is
    /// removed durably, as serving will change the blocks file) and restores its blocks as
    /// clean. A checkpoint that is torn, damaged or of another geometry is reported and the
    /// cache starts cold.
    pub(super) fn restore_checkpoint(&mut self) -> io::Result<()> {
        let dir = self.cfg.cache_dir.clone();
        let bytes = match std::fs::read(path(&dir)) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        remove(&dir)?;
        if self.cfg.capacity_blocks == 0 {
            return Ok(());
        }
        let cp = match decode(&bytes, self.geometry()) {
            Ok(cp) => cp,
            Err(why) => {
                eprintln!(
                    "tiercache mount: the checkpoint {} is not used ({why}); the cache starts \
                     cold",
                    path(&dir).display()
                );
                return Ok(());
            }
        };
        // Core slot i takes the checkpoint's i-th block; into a fresh core, swapped in only
        // when every block is in.
        let mut core = FileCache::with_cleaning(
            self.cfg.capacity_blocks,
            self.cfg.variant,
            self.cfg.block_size as u64,
            if self.cfg.variant.is_write_back() {
                self.cfg.cleaning.clone()
            } else {
                tiercache_policy::CleaningConfig::None
            },
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        core.set_max_files(self.core.max_files());
        for (slot, e) in cp.entries.iter().enumerate() {
            if let Err(err) = core.restore(slot as u32, e.key, false) {
                eprintln!(
                    "tiercache mount: the checkpoint {} is not used (block {slot}: {err}); \
                     the cache starts cold",
                    path(&dir).display()
                );
                return Ok(());
            }
        }
        let placed: Vec<u32> = cp.entries.iter().map(|e| e.phys).collect();
        self.slots = super::slots::Slots::with_placement(self.cfg.capacity_blocks, &placed);
        for (slot, e) in cp.entries.iter().enumerate() {
            self.valid[slot] = e.valid;
        }
        self.core = core;
        self.stats.restored_blocks = cp.entries.len() as u64;
        self.warm = cp.files;
        Ok(())
    }

    /// The mount meets store file `id` (metadata `md`) for the first time: if the checkpoint
    /// restored blocks of it and the file changed since (or `id` is another file now), they
    /// are dropped.
    pub(super) fn check_restored(&mut self, id: FileId, md: &std::fs::Metadata) -> io::Result<()> {
        let Some(v) = self.warm.remove(&id) else {
            return Ok(());
        };
        if md.is_file() && v == Validator::of(md) {
            return Ok(());
        }
        let mut ops = Vec::new();
        self.core.delete_file(id, &mut ops);
        self.stats.restored_blocks_dropped += ops.len() as u64;
        self.execute(&ops, 0, &mut [], None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            block_size: 4096,
            capacity: 16,
            total: 17,
        }
    }

    fn sample() -> Checkpoint {
        let mut cp = Checkpoint::default();
        let v = Validator {
            size: 5000,
            mtime_ns: 7,
            ctime_ns: -3,
        };
        cp.files.insert(9, v);
        cp.files.insert(4, v);
        cp.entries.push(Entry {
            phys: 16,
            valid: 4096,
            key: BlockKey::new(9, 0),
        });
        cp.entries.push(Entry {
            phys: 0,
            valid: 904,
            key: BlockKey::new(9, 1),
        });
        cp.entries.push(Entry {
            phys: 3,
            valid: 1,
            key: BlockKey::new(4, 0),
        });
        cp
    }

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let cp = sample();
        assert_eq!(decode(&encode(geo(), &cp), geo()).unwrap(), cp);
    }

    #[test]
    fn every_torn_or_flipped_checkpoint_is_refused() {
        let bytes = encode(geo(), &sample());
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], geo()).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert!(decode(&b, geo()).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn another_geometry_or_an_inconsistent_list_is_refused() {
        let bytes = encode(geo(), &sample());
        let other = Geometry {
            capacity: 32,
            total: 34,
            ..geo()
        };
        assert!(decode(&bytes, other)
            .unwrap_err()
            .contains("the mount has 32"));
        // Checksummed but wrong: a slot twice, a block of an unlisted file, bad valid bytes.
        let mut cp = sample();
        cp.entries[1].phys = 16;
        assert!(decode(&encode(geo(), &cp), geo())
            .unwrap_err()
            .contains("twice"));
        let mut cp = sample();
        cp.entries[2].key = BlockKey::new(5, 0);
        assert!(decode(&encode(geo(), &cp), geo())
            .unwrap_err()
            .contains("not listed"));
        let mut cp = sample();
        cp.entries[0].valid = 4097;
        assert!(decode(&encode(geo(), &cp), geo())
            .unwrap_err()
            .contains("valid"));
        let mut cp = sample();
        cp.entries[0].phys = 17;
        assert!(decode(&encode(geo(), &cp), geo()).is_err());
    }

    #[test]
    fn counts_larger_than_the_bytes_allocate_nothing() {
        let mut bytes = encode(geo(), &sample());
        bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode(&bytes, geo()).unwrap_err().contains("do not fill"));
    }
}
