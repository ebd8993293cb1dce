//! The cache-side journal of dirty blocks: what a restart needs to write back.
//!
//! An append-only file of fixed 40-byte records, each with its own CRC32: `Map` (slot holds
//! dirty `key`, valid bytes, CRC of those bytes) whenever a dirty block's content changes, and
//! `Clean` (slot holds nothing dirty) when it is written back, discarded by a delete or
//! truncate. Every record is written to the file before the operation returns (so it survives
//! the death of the process); `sync` makes it durable (fsync on fsync). Replay keeps the last
//! record per slot, and of the `Map`s of one block only the last: a new version of a dirty
//! block is written to another slot and mapped there before its old slot is reused, so the
//! old slot's record stays valid until the new one exists. A `Map` whose data no longer
//! matches its CRC (the slot was reused after a `Clean` that did not reach the disk) is
//! skipped. Replay stops at the first torn record.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::core::BlockKey;

const MAGIC: u32 = 0x5446_4a31; // "TFJ1"
const RECORD: usize = 40;
const KIND_MAP: u8 = 1;
const KIND_CLEAN: u8 = 2;

/// A dirty block as the journal last recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtyRecord {
    /// Cache slot holding the data.
    pub slot: u32,
    /// The block.
    pub key: BlockKey,
    /// Valid bytes at the start of the slot.
    pub len: u32,
    /// CRC32 of those bytes.
    pub crc: u32,
}

/// The open journal.
pub struct Journal {
    path: PathBuf,
    file: File,
    records: u64,
    /// Test hook: appends that succeed before every later one fails, as if the process died
    /// there (fault-injection tests of the write path).
    #[cfg(test)]
    pub(crate) appends_before_crash: Option<u64>,
}

fn encode(kind: u8, slot: u32, key: BlockKey, len: u32, crc: u32) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    r[4] = kind;
    r[8..12].copy_from_slice(&slot.to_le_bytes());
    r[12..16].copy_from_slice(&len.to_le_bytes());
    r[16..24].copy_from_slice(&key.file.to_le_bytes());
    r[24..32].copy_from_slice(&key.block.to_le_bytes());
    r[32..36].copy_from_slice(&crc.to_le_bytes());
    let own = crc32fast::hash(&r[..36]);
    r[36..40].copy_from_slice(&own.to_le_bytes());
    r
}

fn u32_at(r: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(r[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(r: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads a journal file: the dirty blocks it leaves, by slot. A missing file is empty.
pub fn replay(path: &Path) -> io::Result<Vec<DirtyRecord>> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    let mut by_slot: BTreeMap<u32, DirtyRecord> = BTreeMap::new();
    let mut by_key: HashMap<BlockKey, u32> = HashMap::new();
    for r in bytes.chunks_exact(RECORD) {
        if u32_at(r, 0) != MAGIC || crc32fast::hash(&r[..36]) != u32_at(r, 36) {
            break; // a torn tail: nothing after it was acknowledged by an fsync
        }
        let slot = u32_at(r, 8);
        // Whatever the slot held before is gone.
        if let Some(old) = by_slot.remove(&slot) {
            by_key.remove(&old.key);
        }
        match r[4] {
            KIND_MAP => {
                let key = BlockKey::new(u64_at(r, 16), u64_at(r, 24));
                // A newer version of the block supersedes the one in its previous slot.
                if let Some(previous) = by_key.insert(key, slot) {
                    by_slot.remove(&previous);
                }
                by_slot.insert(
                    slot,
                    DirtyRecord {
                        slot,
                        key,
                        len: u32_at(r, 12),
                        crc: u32_at(r, 32),
                    },
                );
            }
            KIND_CLEAN => {}
            _ => break,
        }
    }
    Ok(by_slot.into_values().collect())
}

impl Journal {
    /// Creates (or empties) the journal at `path`.
    pub fn create(path: &Path) -> io::Result<Journal> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        file.sync_all()?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            records: 0,
            #[cfg(test)]
            appends_before_crash: None,
        })
    }

    /// Records that `slot` now holds dirty `key`: `data` is its valid content.
    pub fn map(&mut self, slot: u32, key: BlockKey, data: &[u8]) -> io::Result<()> {
        let r = encode(
            KIND_MAP,
            slot,
            key,
            data.len() as u32,
            crc32fast::hash(data),
        );
        self.append(&r)
    }

    /// Records that `slot` holds nothing dirty any more.
    pub fn clean(&mut self, slot: u32) -> io::Result<()> {
        let r = encode(KIND_CLEAN, slot, BlockKey::new(0, 0), 0, 0);
        self.append(&r)
    }

    fn append(&mut self, r: &[u8; RECORD]) -> io::Result<()> {
        #[cfg(test)]
        if let Some(left) = self.appends_before_crash.as_mut() {
            if *left == 0 {
                return Err(io::Error::other("injected crash before a journal record"));
            }
            *left -= 1;
        }
        self.file.write_all(r)?;
        self.records += 1;
        Ok(())
    }

    /// Records written since the journal was created or compacted.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Makes every record written so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Replaces the journal by one holding only `live` (the dirty blocks now): written beside,
    /// synced, then renamed over, so a crash leaves either the old or the new journal.
    pub fn compact(&mut self, live: &[(u32, BlockKey, Vec<u8>)]) -> io::Result<()> {
        let tmp = self.path.with_extension("compact");
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)?;
        let mut buf = Vec::with_capacity(live.len() * RECORD);
        for (slot, key, data) in live {
            buf.extend_from_slice(&encode(
                KIND_MAP,
                *slot,
                *key,
                data.len() as u32,
                crc32fast::hash(data),
            ));
        }
        f.write_all(&buf)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        self.records = live.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_keeps_last_record_per_slot_and_stops_at_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        j.map(0, BlockKey::new(5, 1), b"abc").unwrap();
        j.map(1, BlockKey::new(5, 2), b"def").unwrap();
        j.clean(0).unwrap();
        j.map(1, BlockKey::new(5, 2), b"defg").unwrap();
        j.map(2, BlockKey::new(6, 0), b"x").unwrap();
        drop(j);
        // Tear the last record.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        let live = replay(&path).unwrap();
        assert_eq!(
            live,
            vec![DirtyRecord {
                slot: 1,
                key: BlockKey::new(5, 2),
                len: 4,
                crc: crc32fast::hash(b"defg")
            }]
        );
    }

    #[test]
    fn a_newer_map_of_a_block_supersedes_its_old_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        let (a, b) = (BlockKey::new(3, 0), BlockKey::new(3, 1));
        j.map(0, a, b"v1").unwrap();
        j.map(5, a, b"v2").unwrap(); // copy-on-write: slot 0 is now free
        j.map(0, b, b"w1").unwrap(); // slot 0 reused for another block
        j.map(7, b, b"w2").unwrap();
        j.map(0, a, b"v3").unwrap(); // and for a again
        let live = replay(&path).unwrap();
        let got: Vec<(u32, BlockKey)> = live.iter().map(|r| (r.slot, r.key)).collect();
        assert_eq!(got, vec![(0, a), (7, b)]);
        assert_eq!(live[0].crc, crc32fast::hash(b"v3"));
    }

    #[test]
    fn compaction_keeps_only_live_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        for i in 0..100 {
            j.map(i % 3, BlockKey::new(1, i as u64), b"zz").unwrap();
        }
        j.compact(&[(4, BlockKey::new(9, 9), b"live".to_vec())])
            .unwrap();
        j.map(5, BlockKey::new(9, 10), b"more").unwrap();
        let live = replay(&path).unwrap();
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].key, BlockKey::new(9, 9));
        assert_eq!(j.records(), 2);
    }
}
