//! The partition layout of a multi-tenant cache, journaled on the cache device so that a warm
//! restart puts each volume's recovered lines back into its own partition, at the size it had,
//! and each volume under the write policy it had been given at run time.
//!
//! Two copies live in the superblock's spare bytes (the superblock itself uses its first
//! 40): copy A at 1024, copy B at 2560, 1536 bytes each. A copy is
//! `magic "TCPARTS2", seq u64, count u32, crc u32, policies u32,
//! count × (shard u16, volume u32, lines u32), policies × (volume u32, write policy u8)`
//! (little endian; the CRC-32 covers the first 20 bytes and everything after them from byte
//! 24; write policies are coded as [`policy_code`] says). The first format, `TCPARTS1`, has
//! no `policies` field nor write policies, and is still read. A write goes to the copy not
//! holding the newest layout, then the device is synced: a torn write damages only that copy,
//! and recovery keeps the other.

use std::io;
use tiercache_blockdev::BlockDevice;
use tiercache_policy::WritePolicy;

const MAGIC_V1: &[u8; 8] = b"TCPARTS1";
const MAGIC: &[u8; 8] = b"TCPARTS2";
const COPY_AT: [u64; 2] = [1024, 2560];
const COPY_BYTES: usize = 1536;
/// Header of the first format; the second adds the count of write policies.
const HEADER_V1: usize = 24;
const HEADER: usize = 28;
const ENTRY: usize = 10;
const POLICY: usize = 5;
/// Most partitions (over all shards) a layout without write policies can hold.
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

/// What one layout journals: every shard's partitions, and the write policies volumes were
/// given at run time (by an operator, or by a tenancy mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journaled {
    /// Every shard's own-volume partitions.
    pub partitions: Vec<PartitionEntry>,
    /// Volumes with a write policy of their own: (volume, policy).
    pub write_policies: Vec<(u32, WritePolicy)>,
}

/// The journal of partition layouts on one cache device.
#[derive(Debug, Default)]
pub struct PartitionLog {
    /// Sequence number of the newest layout (0: none).
    seq: u64,
    /// Copy holding it.
    copy: usize,
}

/// The byte a write policy is journaled as (fixed: a journal outlives a build).
pub fn policy_code(p: WritePolicy) -> u8 {
    match p {
        WritePolicy::WriteBack => 0,
        WritePolicy::WriteThrough => 1,
        WritePolicy::WriteAround => 2,
        WritePolicy::WriteOnly => 3,
        WritePolicy::ReadOnly => 4,
        WritePolicy::PassThrough => 5,
        WritePolicy::WriteBackAround => 6,
    }
}

fn policy_of(code: u8) -> Option<WritePolicy> {
    Some(match code {
        0 => WritePolicy::WriteBack,
        1 => WritePolicy::WriteThrough,
        2 => WritePolicy::WriteAround,
        3 => WritePolicy::WriteOnly,
        4 => WritePolicy::ReadOnly,
        5 => WritePolicy::PassThrough,
        6 => WritePolicy::WriteBackAround,
        _ => return None,
    })
}

/// Bytes of a copy holding `j`.
fn encoded_len(j: &Journaled) -> usize {
    HEADER + j.partitions.len() * ENTRY + j.write_policies.len() * POLICY
}

fn encode(seq: u64, j: &Journaled) -> Vec<u8> {
    let mut b = vec![0u8; encoded_len(j)];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..20].copy_from_slice(&(j.partitions.len() as u32).to_le_bytes());
    b[24..28].copy_from_slice(&(j.write_policies.len() as u32).to_le_bytes());
    for (i, e) in j.partitions.iter().enumerate() {
        let at = HEADER + i * ENTRY;
        b[at..at + 2].copy_from_slice(&e.shard.to_le_bytes());
        b[at + 2..at + 6].copy_from_slice(&e.volume.to_le_bytes());
        b[at + 6..at + 10].copy_from_slice(&e.lines.to_le_bytes());
    }
    let base = HEADER + j.partitions.len() * ENTRY;
    for (i, &(v, p)) in j.write_policies.iter().enumerate() {
        let at = base + i * POLICY;
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        b[at + 4] = policy_code(p);
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..20]);
    h.update(&b[24..]);
    b[20..24].copy_from_slice(&h.finalize().to_le_bytes());
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The layout in one copy's bytes (either format), if it holds a whole one.
fn decode(b: &[u8]) -> Option<(u64, Journaled)> {
    let v1 = match &b[0..8] {
        m if m == MAGIC_V1 => true,
        m if m == MAGIC => false,
        _ => return None,
    };
    let seq = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let count = u32_at(b, 16) as usize;
    let (header, policies) = if v1 {
        (HEADER_V1, 0)
    } else {
        (HEADER, u32_at(b, 24) as usize)
    };
    let end = count
        .checked_mul(ENTRY)?
        .checked_add(policies.checked_mul(POLICY)?)?
        .checked_add(header)?;
    if end > b.len() {
        return None;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..20]);
    h.update(&b[24..end]);
    if h.finalize() != u32_at(b, 20) {
        return None;
    }
    let partitions = (0..count)
        .map(|i| {
            let at = header + i * ENTRY;
            PartitionEntry {
                shard: u16::from_le_bytes([b[at], b[at + 1]]),
                volume: u32_at(b, at + 2),
                lines: u32_at(b, at + 6),
            }
        })
        .collect();
    let base = header + count * ENTRY;
    let write_policies = (0..policies)
        .map(|i| {
            let at = base + i * POLICY;
            Some((u32_at(b, at), policy_of(b[at + 4])?))
        })
        .collect::<Option<_>>()?;
    Some((
        seq,
        Journaled {
            partitions,
            write_policies,
        },
    ))
}

impl PartitionLog {
    /// Reads the newest whole layout on `dev` (`None`: never written, or both copies
    /// damaged).
    pub fn open(dev: &dyn BlockDevice) -> io::Result<(Self, Option<Journaled>)> {
        let mut best: Option<(u64, usize, Journaled)> = None;
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

    /// Journals `layout` as the newest and syncs `dev`: durable on return.
    pub fn write(&mut self, dev: &dyn BlockDevice, layout: &Journaled) -> io::Result<()> {
        if encoded_len(layout) > COPY_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} partitions over all shards and {} volume write policies: the cache \
                     device journals at most {} bytes of them",
                    layout.partitions.len(),
                    layout.write_policies.len(),
                    COPY_BYTES - HEADER
                ),
            ));
        }
        let copy = if self.seq == 0 { 0 } else { 1 - self.copy };
        let bytes = encode(self.seq + 1, layout);
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

    fn layout(n: u32) -> Journaled {
        Journaled {
            partitions: (0..n)
                .map(|i| PartitionEntry {
                    shard: (i % 4) as u16,
                    volume: i / 4,
                    lines: 100 + i,
                })
                .collect(),
            write_policies: vec![(1, WritePolicy::ReadOnly), (7, WritePolicy::WriteThrough)],
        }
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
        let mut full = layout(MAX_ENTRIES as u32);
        assert!(log.write(&dev, &full).is_err(), "no room for the policies");
        full.write_policies.clear();
        log.write(&dev, &full).unwrap();
        assert_eq!(PartitionLog::open(&dev).unwrap().1, Some(full.clone()));
        full.partitions.push(full.partitions[0]);
        assert!(log.write(&dev, &full).is_err());
    }

    /// A copy of the first format (`TCPARTS1`: partitions only), as an older build wrote it,
    /// still loads, with no write policies; the next write is of the second format and wins.
    #[test]
    fn a_layout_of_the_first_format_still_loads() {
        let dev = MemDevice::new(8192);
        let old = layout(6).partitions;
        let mut b = vec![0u8; HEADER_V1 + old.len() * ENTRY];
        b[0..8].copy_from_slice(MAGIC_V1);
        b[8..16].copy_from_slice(&3u64.to_le_bytes());
        b[16..20].copy_from_slice(&(old.len() as u32).to_le_bytes());
        for (i, e) in old.iter().enumerate() {
            let at = HEADER_V1 + i * ENTRY;
            b[at..at + 2].copy_from_slice(&e.shard.to_le_bytes());
            b[at + 2..at + 6].copy_from_slice(&e.volume.to_le_bytes());
            b[at + 6..at + 10].copy_from_slice(&e.lines.to_le_bytes());
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&b[0..20]);
        h.update(&b[HEADER_V1..]);
        b[20..24].copy_from_slice(&h.finalize().to_le_bytes());
        dev.write_at(&b, COPY_AT[0], false).unwrap();
        let (mut log, got) = PartitionLog::open(&dev).unwrap();
        assert_eq!(
            got,
            Some(Journaled {
                partitions: old,
                write_policies: Vec::new(),
            })
        );
        log.write(&dev, &layout(2)).unwrap();
        assert_eq!(PartitionLog::open(&dev).unwrap().1, Some(layout(2)));
    }
}
