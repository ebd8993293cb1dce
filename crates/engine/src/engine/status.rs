//! Block status of a served volume (NBD's `NBD_CMD_BLOCK_STATUS`): what the cache holds of a
//! range (resident and dirty sub-blocks, the `tiercache:state` context) and its allocation
//! (the backend's holes, with what the cache holds dirty reported as data: those bytes are
//! not the backend's yet).

use super::*;
use tiercache_blockdev::extent::{self, Extent, Extents, DIRTY, RESIDENT};

/// Most lines one cache-state query looks up: a query of a whole large volume is answered in
/// parts (the protocol lets a reply cover less than asked), each looking up a bounded number
/// of lines under their shards' locks.
const MAX_LINES_PER_QUERY: u64 = 1 << 16;

impl<C: EngineCore> Inner<C> {
    /// The resident and dirty runs of `len` bytes at `offset` of `volume`, from `offset` on,
    /// covering at least one byte (for `len > 0`) and perhaps less than `len`.
    pub(super) fn cache_state(
        &self,
        volume: u32,
        offset: u64,
        len: u64,
    ) -> io::Result<Vec<Extent>> {
        let size = self
            .volume(volume)
            .map(|v| v.size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such volume"))?;
        tiercache_blockdev::check_range(offset, len, size)?;
        let (line, sub) = (self.geo.line_size(), self.geo.sub_size());
        let end = offset + len;
        let mut out = Extents::new();
        let mut index = offset / line;
        let mut looked = 0;
        while index * line < end && looked < MAX_LINES_PER_QUERY && !out.full() {
            let k = self.shard_layout.shard_of(VolumeId(volume), index);
            let state = self
                .core(&self.shards[k])
                .cache
                .line_state(VolumeId(volume), index);
            looked += 1;
            let start = index * line;
            match state {
                // Not resident: the whole line (cut to the query).
                None => out.push(end.min(start + line) - offset.max(start), 0),
                Some(s) => {
                    for b in 0..self.geo.subs_per_line() {
                        let (lo, hi) = (start + u64::from(b) * sub, start + u64::from(b + 1) * sub);
                        let (lo, hi) = (lo.max(offset), hi.min(end));
                        if lo >= hi {
                            continue;
                        }
                        let bit = 1u64 << b;
                        let mut flags = 0;
                        if s.valid & bit != 0 {
                            flags |= RESIDENT;
                        }
                        if s.dirty & bit != 0 {
                            flags |= DIRTY;
                        }
                        out.push(hi - lo, flags);
                    }
                }
            }
            index += 1;
        }
        Ok(out.into_vec())
    }

    /// The allocation of `len` bytes at `offset` of `volume`: the backend's, where the cache
    /// holds dirty bytes reported as data (the backend's holes there are stale).
    pub(super) fn allocation(&self, volume: u32, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let base = self
            .volume(volume)
            .map(|v| v.base)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such volume"))?;
        let state = self.cache_state(volume, offset, len)?;
        let covered: u64 = state.iter().map(|e| e.len).sum();
        let below = self.backend.allocation(base + offset, covered)?;
        Ok(extent::zip_with(&below, &state, |alloc, cached| {
            if cached & DIRTY != 0 {
                0
            } else {
                alloc
            }
        }))
    }
}
