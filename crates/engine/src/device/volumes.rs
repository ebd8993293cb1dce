//! Several volumes' backends as one device: each volume's backend is laid at its own base
//! address, so the engine addresses a backend op of volume `v` at `base(v) + offset`.

use std::io;
use std::sync::Arc;
use tiercache_blockdev::{check_range, BlockDevice, RemoteStats};

/// One volume's backend in a [`VolumeSet`].
struct Member {
    volume: u32,
    base: u64,
    dev: Arc<dyn BlockDevice>,
}

/// The backends of several volumes, end to end. An op never crosses two members: the engine
/// keeps every backend op inside its volume.
pub struct VolumeSet {
    members: Vec<Member>,
    len: u64,
}

/// A volume listed twice.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("volume {0} has two backends")]
pub struct DuplicateVolume(pub u32);

impl VolumeSet {
    /// The backends of `volumes` (volume id, device), laid out in the order given.
    pub fn new(volumes: Vec<(u32, Arc<dyn BlockDevice>)>) -> Result<Self, DuplicateVolume> {
        let mut members: Vec<Member> = Vec::with_capacity(volumes.len());
        let mut base = 0u64;
        for (volume, dev) in volumes {
            if members.iter().any(|m| m.volume == volume) {
                return Err(DuplicateVolume(volume));
            }
            let len = dev.size();
            members.push(Member { volume, base, dev });
            base += len;
        }
        Ok(Self { members, len: base })
    }

    /// `(volume, base address, size)` of each member.
    pub fn extents(&self) -> Vec<(u32, u64, u64)> {
        self.members
            .iter()
            .map(|m| (m.volume, m.base, m.dev.size()))
            .collect()
    }

    /// The member holding `len` bytes at `addr` and the address inside it.
    fn route(&self, addr: u64, len: u64) -> io::Result<(&Member, u64)> {
        let i = self.members.partition_point(|m| m.base <= addr);
        let m = i
            .checked_sub(1)
            .map(|i| &self.members[i])
            .filter(|m| check_range(addr - m.base, len, m.dev.size()).is_ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("backend range {addr}+{len} is not inside one volume's backend"),
                )
            })?;
        Ok((m, addr - m.base))
    }
}

impl BlockDevice for VolumeSet {
    fn size(&self) -> u64 {
        self.len
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let (m, at) = self.route(offset, buf.len() as u64)?;
        m.dev.read_at(buf, at)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        let (m, at) = self.route(offset, data.len() as u64)?;
        m.dev.write_at(data, at, fua)
    }
    fn flush(&self) -> io::Result<()> {
        for m in &self.members {
            m.dev.flush()?;
        }
        Ok(())
    }
    /// The sum of the members' epochs: it grows whenever one of them may have lost writes.
    fn epoch(&self) -> u64 {
        self.members.iter().map(|m| m.dev.epoch()).sum()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.flush()?;
        if self.epoch() != epoch {
            return Err(io::Error::other(
                "a volume's backend may have lost writes since they completed",
            ));
        }
        Ok(())
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.members.iter().find_map(|m| m.dev.link_stats())
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let (m, at) = self.route(offset, len)?;
        m.dev.trim(at, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        let (m, at) = self.route(offset, len)?;
        m.dev.write_zeroes(at, len, fua)
    }
    /// Every member zeroes fast (the question is asked of the whole set).
    fn fast_zeroes(&self) -> bool {
        self.members.iter().all(|m| m.dev.fast_zeroes())
    }
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        let (m, at) = self.route(offset, len)?;
        m.dev.allocation(at, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    /// Each volume's bytes land in its own device; ranges across two volumes are refused.
    #[test]
    fn ops_route_to_their_volume() {
        let (a, b) = (
            Arc::new(MemDevice::new(8192)),
            Arc::new(MemDevice::new(4096)),
        );
        let set =
            VolumeSet::new(vec![(3, a.clone() as Arc<dyn BlockDevice>), (1, b.clone())]).unwrap();
        assert_eq!(set.extents(), vec![(3, 0, 8192), (1, 8192, 4096)]);
        set.write_at(b"aa", 8191, false).unwrap_err();
        set.write_at(b"xy", 8192 + 10, false).unwrap();
        set.write_at(b"pq", 100, false).unwrap();
        assert_eq!(&b.snapshot()[10..12], b"xy");
        assert_eq!(&a.snapshot()[100..102], b"pq");
        let mut got = [0u8; 2];
        set.read_at(&mut got, 8202).unwrap();
        assert_eq!(&got, b"xy");
        set.read_at(&mut got, 8192 + 4095).unwrap_err();
        assert_eq!(set.size(), 12288);
        // A length that overflows past the address space is refused, not wrapped.
        set.trim(100, u64::MAX - 50).unwrap_err();
        assert_eq!(
            VolumeSet::new(vec![(1, a as Arc<dyn BlockDevice>), (1, b)]).err(),
            Some(DuplicateVolume(1))
        );
    }
}
