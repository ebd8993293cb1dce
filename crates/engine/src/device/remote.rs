//! A remote NBD export as the backend (host-side caching of a network volume, docs/design.md §4.7).

use std::io;
use tiercache_blockdev::{BlockDevice, DemoteReply, RemoteStats};
use tiercache_nbd::Remote;

/// The backend over NBD: a pooled client with retries, stall timeouts and reconnection.
/// Its [`epoch`](BlockDevice::epoch) counts connection losses, so a flush covers writes only if
/// no connection that carried them died.
pub struct NbdBackend(pub Remote);

impl BlockDevice for NbdBackend {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Ok(self.0.read(buf, offset)?)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        Ok(self.0.write(data, offset, fua)?)
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        Ok(self.0.write_many(writes)?)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(self.0.flush_since(self.0.epoch())?)
    }
    fn epoch(&self) -> u64 {
        self.0.epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        Ok(self.0.flush_since(epoch)?)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        Ok(self.0.trim(offset, len)?)
    }
    /// The remote's holes, where it reports them (`base:allocation`); all data otherwise.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        tiercache_blockdev::check_range(offset, len, self.0.size())?;
        Ok(self.0.allocation(offset, len))
    }
    fn takes_demotes(&self) -> bool {
        self.0.demote_enabled()
    }
    /// Sends the line over the link; the remote server runs its own race check (its ledger of
    /// what this session read), so `still_valid` is not consulted here.
    fn demote_at(
        &self,
        data: &[u8],
        offset: u64,
        _still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        Ok(self.0.demote(data, offset)?)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        Some(self.0.stats())
    }
}
