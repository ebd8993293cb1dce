//! The partition layout of a multi-tenant cache, journaled on the cache device so that a warm
//! restart puts each volume's recovered lines back into its own partition, at the size it had.
//!
//! Two copies live in the superblock's spare bytes (the superblock itself uses its first
//! 40): copy A at 1024, copy B at 2560, 1536 bytes each. A copy is
//! `magic "TCPARTS1", seq u64, count u32, crc u32, count × (shard u16, volume u32, lines u32)`
//! (little endian; the CRC-32 covers the first 20 bytes and the entries). A write goes to the
//! copy not holding the newest layout, then the device is synced: a torn write damages only
//! that copy, and recovery keeps the other.

use std::io;
use tiercache_blockdev::BlockDevice;

const MAGIC: &[u8; 8] = b"TCPARTS1";
const COPY_AT: [u64; 2] = [1024, 2560];
const COPY_BYTES: usize = 1536;
const HEADER: usize = 24;
const ENTRY: usize = 10;
/// Most partitions (over all shards) a layout can hold.
pub const MAX_ENTRIES: usize = (COPY_BYTES - HEADER) / ENTRY;

/// One partition of one shard: `lines` lines of shard `shard` belong to `volume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PartitionEntry {
    /// Policy shard.
    pub shard: u16,
    /// Volume owning the partition.
    pub volume: u32,
    /// Its capacity in lines.
    pub lines: u32,
}

/// The journal of partition layouts on one cache device.
#[derive(Debug, Default)]
pub struct PartitionLog {
    /// Sequence number of the newest layout (0: none).
    seq: u64,
    /// Copy holding it.
    copy: usize,
}

fn encode(seq: u64, entries: &[PartitionEntry]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER + entries.len() * ENTRY];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..20].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    for (i, e) in entries.iter().enumerate() {
        let at = HEADER + i * ENTRY;
        b[at..at + 2].copy_from_slice(&e.shard.to_le_bytes());
        b[at + 2..at + 6].copy_from_slice(&e.volume.to_le_bytes());
        b[at + 6..at + 10].copy_from_slice(&e.lines.to_le_bytes());
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..20]);
    h.update(&b[HEADER..]);
    b[20..24].copy_from_slice(&h.finalize().to_le_bytes());
    b
}

/// The layout in one copy's bytes, if it holds a whole one.
fn decode(b: &[u8]) -> Option<(u64, Vec<PartitionEntry>)> {
    if &b[0..8] != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let count = u32::from_le_bytes(b[16..20].try_into().ok()?) as usize;
    if count > MAX_ENTRIES {
        return None;
    }
    let end = HEADER + count * ENTRY;
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..20]);
    h.update(&b[HEADER..end]);
    if h.finalize() != u32::from_le_bytes(b[20..24].try_into().ok()?) {
        return None;
    }
    let entries = (0..count)
        .map(|i| {
            let at = HEADER + i * ENTRY;
            PartitionEntry {
                shard: u16::from_le_bytes([b[at], b[at + 1]]),
                volume: u32::from_le_bytes(b[at + 2..at + 6].try_into().unwrap()),
                lines: u32::from_le_bytes(b[at + 6..at + 10].try_into().unwrap()),
            }
        })
        .collect();
    Some((seq, entries))
}

impl PartitionLog {
    /// Reads the newest whole layout on `dev` (`None`: never written, or both copies
    /// damaged).
    pub fn open(dev: &dyn BlockDevice) -> io::Result<(Self, Option<Vec<PartitionEntry>>)> {
        let mut best: Option<(u64, usize, Vec<PartitionEntry>)> = None;
        for (copy, &at) in COPY_AT.iter().enumerate() {
            let mut b = vec![0u8; COPY_BYTES];
            dev.read_at(&mut b, at)?;
            if let Some((seq, entries)) = decode(&b) {
                if best.as_ref().is_none_or(|b| seq > b.0) {
                    best = Some((seq, copy, entries));
                }
            }
        }
        Ok(match best {
            Some((seq, copy, entries)) => (Self { seq, copy }, Some(entries)),
            None => (Self::default(), None),
        })
    }

    /// Journals `entries` as the newest layout and syncs `dev`: durable on return.
    pub fn write(&mut self, dev: &dyn BlockDevice, entries: &[PartitionEntry]) -> io::Result<()> {
        if entries.len() > MAX_ENTRIES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} partitions over all shards: the cache device journals at most {MAX_ENTRIES}",
                    entries.len()
                ),
            ));
        }
        let copy = if self.seq == 0 { 0 } else { 1 - self.copy };
        let bytes = encode(self.seq + 1, entries);
        dev.write_at(&bytes, COPY_AT[copy], false)?;
        dev.flush()?;
        self.seq += 1;
        self.copy = copy;
        Ok(())
    }

    /// Erases both copies (a formatted cache has no layout), durably.
    pub fn clear(&mut self, dev: &dyn BlockDevice) -> io::Result<()> {
        let zeros = vec![0u8; COPY_BYTES];
        for at in COPY_AT {
            dev.write_at(&zeros, at, false)?;
        }
        dev.flush()?;
        *self = Self::default();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    fn layout(n: u32) -> Vec<PartitionEntry> {
        (0..n)
            .map(|i| PartitionEntry {
                shard: (i % 4) as u16,
                volume: i / 4,
                lines: 100 + i,
            })
            .collect()
    }

    /// The newest layout is read back; a torn newest copy leaves the previous one.
    #[test]
    fn newest_whole_layout_survives_a_torn_write() {
        let dev = MemDevice::new(8192);
        let (mut log, none) = PartitionLog::open(&dev).unwrap();
        assert!(none.is_none());
        log.write(&dev, &layout(3)).unwrap();
        log.write(&dev, &layout(5)).unwrap();
        let (mut log, got) = PartitionLog::open(&dev).unwrap();
        assert_eq!(got, Some(layout(5)));
        log.write(&dev, &layout(7)).unwrap();
        // Tear the newest copy (A again: the third write): the second layout is back.
        let mut b = vec![0u8; 8];
        dev.read_at(&mut b, COPY_AT[0] + HEADER as u64).unwrap();
        b[0] ^= 0xff;
        dev.write_at(&b, COPY_AT[0] + HEADER as u64, false).unwrap();
        assert_eq!(PartitionLog::open(&dev).unwrap().1, Some(layout(5)));
        log.clear(&dev).unwrap();
        assert_eq!(PartitionLog::open(&dev).unwrap().1, None);
        assert!(log.write(&dev, &layout(MAX_ENTRIES as u32 + 1)).is_err());
        log.write(&dev, &layout(MAX_ENTRIES as u32)).unwrap();
        assert_eq!(
            PartitionLog::open(&dev).unwrap().1,
            Some(layout(MAX_ENTRIES as u32))
        );
    }
}
