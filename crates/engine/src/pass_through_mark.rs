//! The pass-through mark: a note on the cache device that the engine served requests past the
//! cache (docs/design.md §11), so that a restart does not trust the clean data its records name.
//!
//! Past the cache, a write goes to the backend and drops the cache's copy of its lines; the
//! record saying so is written to a cache device that is failing, and may never land. A
//! restart would then recover the line's older clean copy and serve it over the backend's
//! newer data. So before the first request goes past the cache, the mark is made durable; a
//! recovery that finds it keeps only the dirty sub-blocks of each recovered line (the only
//! copy of acknowledged data: never dropped), writes their records so, and then clears it.
//!
//! It lives in the superblock's spare bytes (the superblock uses its first 40, the partition
//! log 1024 and up): the sector at 512, `magic "TCPTHRU1", runs u64, crc u32` (little endian;
//! the CRC-32 covers the first 16 bytes). A torn or absent mark reads as no mark: it is
//! written and synced before anything it guards happens.

use std::io;
use tiercache_blockdev::BlockDevice;

const MAGIC: &[u8; 8] = b"TCPTHRU1";
/// Where the mark is.
pub const MARK_AT: u64 = 512;
/// One sector: a device with direct I/O writes it whole.
const MARK_BYTES: usize = 512;

/// Reads the mark: `Some(runs)` (the engine runs that served past the cache since it was
/// last cleared) or `None`.
pub fn read(dev: &dyn BlockDevice) -> io::Result<Option<u64>> {
    let mut b = [0u8; MARK_BYTES];
    dev.read_at(&mut b, MARK_AT)?;
    if &b[0..8] != MAGIC {
        return Ok(None);
    }
    let crc = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"));
    if crc32fast::hash(&b[0..16]) != crc {
        return Ok(None);
    }
    Ok(Some(u64::from_le_bytes(
        b[8..16].try_into().expect("8 bytes"),
    )))
}

/// Makes the mark durable, counting one more run past the cache.
pub fn write(dev: &dyn BlockDevice) -> io::Result<()> {
    let runs = read(dev).unwrap_or(None).unwrap_or(0) + 1;
    let mut b = [0u8; MARK_BYTES];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&runs.to_le_bytes());
    let crc = crc32fast::hash(&b[0..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    dev.write_at(&b, MARK_AT, false)?;
    dev.flush()
}

/// Clears the mark durably (the records no longer name clean data of before it).
pub fn clear(dev: &dyn BlockDevice) -> io::Result<()> {
    dev.write_at(&[0u8; MARK_BYTES], MARK_AT, false)?;
    dev.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    #[test]
    fn written_read_counted_and_cleared() {
        let dev = MemDevice::new(8192);
        assert_eq!(read(&dev).unwrap(), None);
        write(&dev).unwrap();
        assert_eq!(read(&dev).unwrap(), Some(1));
        write(&dev).unwrap();
        assert_eq!(read(&dev).unwrap(), Some(2));
        // A torn mark (its checksum fails) is no mark.
        dev.write_at(&[0xff], MARK_AT + 9, false).unwrap();
        assert_eq!(read(&dev).unwrap(), None);
        write(&dev).unwrap();
        clear(&dev).unwrap();
        assert_eq!(read(&dev).unwrap(), None);
        // The superblock's bytes and the partition log's are not touched.
        let mut sb = vec![0u8; 4096];
        dev.read_at(&mut sb, 0).unwrap();
        assert!(sb[..MARK_AT as usize].iter().all(|&x| x == 0));
        assert!(sb[MARK_AT as usize + MARK_BYTES..].iter().all(|&x| x == 0));
    }
}
