//! A remote NBD export as the backend (host-side caching of a network volume, SPEC §4.7).

use super::Device;
use std::io;
use tiercache_nbd::{Remote, RemoteStats};

/// The backend over NBD: a pooled client with retries, stall timeouts and reconnection.
/// Its [`epoch`](Device::epoch) counts connection losses, so a flush covers writes only if no
/// connection that carried them died.
pub struct NbdBackend(pub Remote);

impl Device for NbdBackend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Ok(self.0.read(buf, offset)?)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        Ok(self.0.write(data, offset, false)?)
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        Ok(self.0.write_many(writes)?)
    }
    fn sync(&self) -> io::Result<()> {
        Ok(self.0.flush_since(self.0.epoch())?)
    }
    fn epoch(&self) -> u64 {
        self.0.epoch()
    }
    fn sync_since(&self, epoch: u64) -> io::Result<()> {
        Ok(self.0.flush_since(epoch)?)
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        Ok(self.0.trim(offset, len)?)
    }
    fn len(&self) -> u64 {
        self.0.size()
    }
    fn takes_demotes(&self) -> bool {
        self.0.demote_enabled()
    }
    fn demote(&self, data: &[u8], offset: u64) -> io::Result<tiercache_nbd::DemoteReply> {
        Ok(self.0.demote(data, offset)?)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        Some(self.0.stats())
    }
}
