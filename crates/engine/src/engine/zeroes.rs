//! WRITE_ZEROES through the cache (NBD's `NBD_CMD_WRITE_ZEROES`, fast zero included). Where
//! the backend zeroes without writing (a file on a file system that punches holes or zeroes
//! ranges: [`BlockDevice::fast_zeroes`]), the whole sub-blocks of the range go through one
//! trim-like plan whose backend op zeroes ([`Client::Zeroes`]): the cache drops its copies,
//! dirty ones included (they are being overwritten), the backend zeroes the range, ordered
//! with other requests as any plan is, and a record dropping dirty data becomes durable only
//! after the backend's zeroes do (as for a write to the backend). The partial sub-blocks at
//! the ends, and every range where the backend has no fast zeroing, are written as zeroes
//! through the cache. A zeroed range counts as a trim in the volume's counters.

use super::*;

impl Engine {
    /// Whether [`zero_volume`](Self::zero_volume) zeroes without writing the zeroes: the
    /// backend zeroes fast.
    pub(super) fn zeroes_fast(&self) -> bool {
        self.inner.backend.fast_zeroes()
    }

    /// Makes `len` bytes at `offset` of `volume` read as zeroes (durable on return with
    /// `fua`).
    pub(super) fn zero_volume(
        &self,
        volume: u32,
        offset: u64,
        len: u64,
        fua: bool,
    ) -> io::Result<()> {
        let sub = self.inner.geo.sub_size();
        let end = offset.saturating_add(len);
        let (from, to) = (offset.next_multiple_of(sub).min(end), end / sub * sub);
        if from >= to || !self.zeroes_fast() || !self.inner.in_volume(volume, offset, len) {
            // Out of range: the write path refuses it as any write.
            return self.write_zero_bytes(volume, offset, len, fua);
        }
        self.write_zero_bytes(volume, offset, from - offset, false)?;
        self.write_zero_bytes(volume, to, end - to, false)?;
        self.inner
            .request(volume, Op::Trim, from, to - from, Client::Zeroes, fua)
    }

    /// Writes `len` zero bytes at `offset` of `volume`, a MiB at a time (the last with
    /// `fua`).
    fn write_zero_bytes(&self, volume: u32, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        if len == 0 {
            return Ok(());
        }
        let zeros = vec![0u8; CHUNK.min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at);
            self.write_volume(
                volume,
                &zeros[..n as usize],
                offset + at,
                fua && at + n == len,
            )?;
            at += n;
        }
        Ok(())
    }
}
