//! The cache-side journal of dirty blocks: what a restart needs to write back.
//!
//! An append-only file of fixed 40-byte records, each with its own CRC32: `Map` (slot holds
//! dirty `key`, valid bytes, CRC of those bytes) whenever a dirty block's content changes,
//! `Clean` (slot holds nothing dirty) when it is written back, discarded by a delete or
//! truncate, and `Truncate`/`Truncated` around a truncate that cuts journaled data. Every
//! record is written to the file before the operation returns (so it survives the death of
//! the process); `sync` makes it durable (fsync on fsync). Replay stops at the first torn
//! record.
//!
//! Replay keeps, per slot, its last record; a `Clean` also drops every older version of the
//! block its slot held. Of the `Map`s of one block all those whose slot was not recorded
//! again are kept, newest first ([`Replay::blocks`]): a new version of a dirty block is
//! written to another slot and mapped there, and recovery takes the newest version whose data
//! matches its CRC. After a power loss a record may be on disk while the data it names is
//! not (the kernel writes the two files back in any order), or a slot that an older record
//! names may have been reused after a newer record that never reached the disk: the older
//! version is then the one to recover. The state never reuses a slot that a synced record
//! names before the record that gives it up is synced, so the fsync'd version is always among
//! them. A `Clean` after a write-back gives the block up in favour of the store's copy, so
//! when a synced record names a version of the block the state syncs the store file before
//! appending it: a power loss never keeps the `Clean` without the written-back data.
//!
//! A truncate that cuts journaled data first records `Truncate` (file, new size), synced,
//! then cuts the store file, then records `Truncated` (file). A `Truncate` without its
//! `Truncated` is redone by recovery (the store file may or may not have been cut), and every
//! version recorded before a `Truncate` is cut at its size when written back.
//!
//! A file that loses its last name (unlink, rename over it) is first recorded `Deleted`
//! (file), before its store file goes: replay then drops every version and truncate of the
//! file recorded before it. Without it, a crash between the unlink and the `Clean`s of the
//! file's dirty blocks left records naming a file the store no longer has (recovery failed,
//! the mount would not start), or, once a new file reused the inode number, naming that new
//! file (recovery would have written the deleted file's blocks into it). Records after the
//! `Deleted` name the file that reuses the number.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::core::BlockKey;
use crate::faults::{device_error, CacheFaults, Op, Target};

const MAGIC: u32 = 0x5446_4a31; // "TFJ1"
const RECORD: usize = 40;
const KIND_MAP: u8 = 1;
const KIND_CLEAN: u8 = 2;
const KIND_TRUNCATE: u8 = 3;
const KIND_TRUNCATED: u8 = 4;
const KIND_DELETED: u8 = 5;

/// The most bytes the journal of a cache of `capacity_blocks` takes on its file system: the
/// records it holds before the mount compacts it (`4 × capacity + 4096`, see
/// `State::maybe_compact`), those a request adds past that, and the compacted copy written
/// beside it (one record per block) before it replaces the journal.
pub fn max_bytes(capacity_blocks: u32) -> u64 {
    let c = capacity_blocks as u64;
    (4 * c + 4096 + 1024 + c) * RECORD as u64
}

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
    /// Position of the record in the journal (0 for the first): which truncates follow it.
    pub seq: u64,
}

/// A truncate the journal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncateRecord {
    /// The file (store inode number).
    pub file: u64,
    /// Its new size in bytes.
    pub size: u64,
    /// Position of the record in the journal.
    pub seq: u64,
    /// Whether the journal records the store file as cut (`Truncated`); if not, recovery cuts
    /// it.
    pub done: bool,
}

/// What a journal leaves for recovery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// Per dirty block, the versions recorded, newest first: the first whose data matches its
    /// CRC is the one to write back.
    pub blocks: Vec<Vec<DirtyRecord>>,
    /// Truncates, in journal order.
    pub truncates: Vec<TruncateRecord>,
}

impl Replay {
    /// Whether recovery has nothing to do: no dirty block and no truncate to redo.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.truncates.iter().all(|t| t.done)
    }

    /// The newest version of each dirty block.
    pub fn latest(&self) -> Vec<DirtyRecord> {
        self.blocks.iter().map(|v| v[0]).collect()
    }

    /// Bytes of `r` recovery writes back: its valid bytes, cut at the size of any truncate of
    /// its file recorded after it (`block_size` places the block).
    pub fn bytes_to_write(&self, r: &DirtyRecord, block_size: u64) -> u32 {
        let start = r.key.block * block_size;
        self.truncates
            .iter()
            .filter(|t| t.file == r.key.file && t.seq > r.seq)
            .fold(r.len, |len, t| {
                len.min(t.size.saturating_sub(start).min(u32::MAX as u64) as u32)
            })
    }
}

/// The open journal.
pub struct Journal {
    path: PathBuf,
    file: File,
    records: u64,
    /// Records appended since the journal was created (compaction does not reset it): the
    /// sequence number of the next record.
    appended: u64,
    /// `appended` when the journal was last made durable: records numbered below it are on
    /// disk whatever happens.
    synced: u64,
    /// Test hook: appends that succeed before every later one fails, as if the process died
    /// there (fault-injection tests of the write path).
    #[cfg(test)]
    pub(crate) appends_before_crash: Option<u64>,
    /// Faults injected into its writes and syncs (docs/design.md §11).
    faults: Option<std::sync::Arc<CacheFaults>>,
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

/// Reads a journal file: the dirty blocks and truncates it leaves. A missing file is empty.
pub fn replay(path: &Path) -> io::Result<Replay> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Replay::default()),
        Err(e) => return Err(e),
    }
    // The live record of each slot, and each block's live versions (their slots), oldest
    // first.
    let mut by_slot: BTreeMap<u32, DirtyRecord> = BTreeMap::new();
    let mut by_key: HashMap<BlockKey, Vec<u32>> = HashMap::new();
    let mut truncates: Vec<TruncateRecord> = Vec::new();
    for (seq, r) in bytes.chunks_exact(RECORD).enumerate() {
        let seq = seq as u64;
        if u32_at(r, 0) != MAGIC || crc32fast::hash(&r[..36]) != u32_at(r, 36) {
            break; // a torn tail: nothing after it was acknowledged by an fsync
        }
        let slot = u32_at(r, 8);
        let (a, b) = (u64_at(r, 16), u64_at(r, 24));
        match r[4] {
            KIND_MAP => {
                // Whatever the slot held before is gone.
                if let Some(old) = by_slot.remove(&slot) {
                    if let Some(slots) = by_key.get_mut(&old.key) {
                        slots.retain(|&s| s != slot);
                        if slots.is_empty() {
                            by_key.remove(&old.key);
                        }
                    }
                }
                let key = BlockKey::new(a, b);
                by_key.entry(key).or_default().push(slot);
                by_slot.insert(
                    slot,
                    DirtyRecord {
                        slot,
                        key,
                        len: u32_at(r, 12),
                        crc: u32_at(r, 32),
                        seq,
                    },
                );
            }
            KIND_CLEAN => {
                // The block is clean (written back) or gone: none of its versions is needed.
                if let Some(old) = by_slot.remove(&slot) {
                    for s in by_key.remove(&old.key).unwrap_or_default() {
                        by_slot.remove(&s);
                    }
                }
            }
            KIND_TRUNCATE => truncates.push(TruncateRecord {
                file: a,
                size: b,
                seq,
                done: false,
            }),
            KIND_DELETED => {
                // The file is gone: nothing recorded of it so far may reach the store (its
                // inode number may name another file by now).
                let keys: Vec<BlockKey> = by_key.keys().filter(|k| k.file == a).copied().collect();
                for key in keys {
                    for s in by_key.remove(&key).unwrap_or_default() {
                        by_slot.remove(&s);
                    }
                }
                truncates.retain(|t| t.file != a);
            }
            KIND_TRUNCATED => {
                for t in truncates.iter_mut().filter(|t| t.file == a) {
                    t.done = true;
                }
            }
            _ => break,
        }
    }
    let mut blocks: Vec<Vec<DirtyRecord>> = by_key
        .into_values()
        .map(|slots| slots.iter().rev().map(|s| by_slot[s]).collect())
        .collect();
    blocks.sort_by_key(|v: &Vec<DirtyRecord>| v[0].slot);
    Ok(Replay { blocks, truncates })
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
            appended: 0,
            synced: 0,
            #[cfg(test)]
            appends_before_crash: None,
            faults: None,
        })
    }

    /// Injects `faults` into this journal's writes and syncs (`None`: no more).
    pub fn set_faults(&mut self, faults: Option<std::sync::Arc<CacheFaults>>) {
        self.faults = faults;
    }

    fn check(&self, op: Op, offset: u64, len: u64) -> io::Result<()> {
        match &self.faults {
            Some(f) => f.check(Target::Journal, op, offset, len),
            None => Ok(()),
        }
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

    /// Records that the store file `file` is about to be cut to `size` bytes: recovery redoes
    /// the cut until [`Journal::truncated`] follows, and cuts every version of the file's blocks
    /// recorded before it at `size`.
    pub fn truncate(&mut self, file: u64, size: u64) -> io::Result<()> {
        let r = encode(KIND_TRUNCATE, 0, BlockKey::new(file, size), 0, 0);
        self.append(&r)
    }

    /// Records that the store file `file` was cut (durably) as its last `truncate` said.
    pub fn truncated(&mut self, file: u64) -> io::Result<()> {
        let r = encode(KIND_TRUNCATED, 0, BlockKey::new(file, 0), 0, 0);
        self.append(&r)
    }

    /// Records that the store file `file` is about to lose its last name: every version and
    /// truncate of the file recorded so far is void (recovery must not write them, neither
    /// into a store that no longer has the file nor into a new file that reuses its number).
    pub fn deleted(&mut self, file: u64) -> io::Result<()> {
        let r = encode(KIND_DELETED, 0, BlockKey::new(file, 0), 0, 0);
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
        let at = self.records * RECORD as u64;
        self.check(Op::Write, at, RECORD as u64)?;
        #[cfg(test)]
        crate::powerloss::write(&self.path, at, r);
        self.file
            .write_all(r)
            .map_err(|e| device_error(Target::Journal, Op::Write, at, e))?;
        self.records += 1;
        self.appended += 1;
        Ok(())
    }

    /// Records written since the journal was created or compacted.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The sequence number the next record gets (numbers never restart, compaction or not).
    pub fn next_seq(&self) -> u64 {
        self.appended
    }

    /// Records numbered below this are durable.
    pub fn synced_seq(&self) -> u64 {
        self.synced
    }

    /// Makes every record written so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        let at = self.records * RECORD as u64;
        self.check(Op::Sync, 0, at)?;
        self.file
            .sync_data()
            .map_err(|e| device_error(Target::Journal, Op::Sync, 0, e))?;
        self.synced = self.appended;
        #[cfg(test)]
        crate::powerloss::sync(&self.path);
        Ok(())
    }

    /// Replaces the journal by one holding only `live` (the dirty blocks now): written beside,
    /// synced, then renamed over, so a crash leaves either the old or the new journal.
    pub fn compact(&mut self, live: &[(u32, BlockKey, Vec<u8>)]) -> io::Result<()> {
        let records: Vec<(u32, BlockKey, u32, u32)> = live
            .iter()
            .map(|(slot, key, data)| (*slot, *key, data.len() as u32, crc32fast::hash(data)))
            .collect();
        self.rewrite(&records)
    }

    /// Replaces the journal by one holding a `Map` record per entry of `records` (slot, block,
    /// valid bytes, CRC of those bytes), as [`Journal::compact`] does: the mount's way of
    /// keeping only the dirty blocks it could not write back when its journal fails.
    pub fn rewrite(&mut self, records: &[(u32, BlockKey, u32, u32)]) -> io::Result<()> {
        let tmp = self.path.with_extension("compact");
        let fail = |op, e| device_error(Target::Journal, op, 0, e);
        let mut buf = Vec::with_capacity(records.len() * RECORD);
        for &(slot, key, len, crc) in records {
            buf.extend_from_slice(&encode(KIND_MAP, slot, key, len, crc));
        }
        self.check(Op::Write, 0, buf.len() as u64)?;
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| fail(Op::Write, e))?;
        f.write_all(&buf).map_err(|e| fail(Op::Write, e))?;
        f.sync_all().map_err(|e| fail(Op::Sync, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| fail(Op::Write, e))?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| fail(Op::Sync, e))?;
        }
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| fail(Op::Write, e))?;
        self.records = records.len() as u64;
        // Every live block is now named by a durable record, and nothing else is named.
        self.synced = self.appended;
        Ok(())
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
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
        let live = replay(&path).unwrap().latest();
        assert_eq!(
            live,
            vec![DirtyRecord {
                slot: 1,
                key: BlockKey::new(5, 2),
                len: 4,
                crc: crc32fast::hash(b"defg"),
                seq: 3,
            }]
        );
    }

    #[test]
    fn a_newer_map_of_a_block_comes_first_and_older_ones_stay_until_their_slot_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        let (a, b) = (BlockKey::new(3, 0), BlockKey::new(3, 1));
        j.map(0, a, b"v1").unwrap();
        j.map(5, a, b"v2").unwrap(); // copy-on-write: slot 0 is now free
        j.map(0, b, b"w1").unwrap(); // slot 0 reused for another block
        j.map(7, b, b"w2").unwrap();
        j.map(0, a, b"v3").unwrap(); // and for a again
        let live = replay(&path).unwrap().latest();
        let got: Vec<(u32, BlockKey)> = live.iter().map(|r| (r.slot, r.key)).collect();
        assert_eq!(got, vec![(0, a), (7, b)]);
        assert_eq!(live[0].crc, crc32fast::hash(b"v3"));
        // Should slot 0's data not match (a power loss kept the record, not the data), v2 in
        // slot 5 is next; w1 went with its slot's reuse.
        let all = replay(&path).unwrap().blocks;
        let slots = |v: &Vec<DirtyRecord>| v.iter().map(|r| r.slot).collect::<Vec<_>>();
        assert_eq!(
            all.iter().map(slots).collect::<Vec<_>>(),
            vec![vec![0, 5], vec![7]]
        );
        // A clean of the block's slot drops every version of it.
        j.clean(0).unwrap();
        let got: Vec<BlockKey> = replay(&path)
            .unwrap()
            .latest()
            .iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(got, vec![b]);
    }

    #[test]
    fn a_truncate_cuts_older_versions_and_is_redone_until_recorded_done() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        let (k1, k2) = (BlockKey::new(4, 1), BlockKey::new(4, 2));
        j.map(0, k1, &[1; 100]).unwrap();
        j.map(1, k2, &[2; 100]).unwrap();
        j.truncate(4, 130).unwrap(); // block size 100: 30 bytes of block 1 stay
        j.map(2, k2, &[3; 10]).unwrap(); // written after the truncate: whole
        let r = replay(&path).unwrap();
        assert!(!r.is_empty());
        assert_eq!(
            r.truncates,
            vec![TruncateRecord {
                file: 4,
                size: 130,
                seq: 2,
                done: false
            }]
        );
        let latest = r.latest();
        let cut: Vec<u32> = latest.iter().map(|d| r.bytes_to_write(d, 100)).collect();
        assert_eq!(cut, vec![30, 10]);
        j.truncated(4).unwrap();
        let r = replay(&path).unwrap();
        assert!(r.truncates[0].done);
        // Done or not, versions older than the truncate stay cut.
        assert_eq!(r.bytes_to_write(&r.latest()[0], 100), 30);
        assert_eq!(r.bytes_to_write(&r.blocks[1][1], 100), 0);
    }

    #[test]
    fn a_deleted_record_voids_the_files_earlier_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut j = Journal::create(&path).unwrap();
        j.map(0, BlockKey::new(4, 0), b"old").unwrap();
        j.map(1, BlockKey::new(4, 1), b"old").unwrap();
        j.map(2, BlockKey::new(5, 0), b"other").unwrap();
        j.truncate(4, 10).unwrap();
        j.deleted(4).unwrap();
        let r = replay(&path).unwrap();
        assert_eq!(
            r.latest().iter().map(|d| d.key).collect::<Vec<_>>(),
            [BlockKey::new(5, 0)]
        );
        assert!(
            r.truncates.is_empty(),
            "a deleted file's truncate is not redone"
        );
        // A new file reusing inode number 4: its records count.
        j.map(3, BlockKey::new(4, 0), b"new").unwrap();
        let keys: Vec<BlockKey> = replay(&path)
            .unwrap()
            .latest()
            .iter()
            .map(|d| d.key)
            .collect();
        assert_eq!(keys, [BlockKey::new(5, 0), BlockKey::new(4, 0)]);
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
        let live = replay(&path).unwrap().latest();
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].key, BlockKey::new(9, 9));
        assert_eq!(j.records(), 2);
    }
}
