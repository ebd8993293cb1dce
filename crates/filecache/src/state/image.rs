//! Per-file images for FUSE passthrough (docs/design.md §14): the cache keeps blocks in one
//! slot file, which the kernel cannot serve a file from, so a file the cache holds whole is
//! copied into an image file of its own on the fast device while it is open in passthrough
//! mode; what the kernel wrote to the image comes back into the cache's data path (and its
//! journal) at close, fsync and the last release.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::State;
use crate::core::BlockKey;
use crate::recovery::pread_full;

/// Bytes copied or compared at a time.
const CHUNK: u64 = 1 << 20;

impl State {
    /// Whether the cache holds every block of regular file `id` and serves them (the mount is
    /// not degraded and none of them is stranded): its image can be built from the cache
    /// alone. An empty file is held whole.
    pub fn holds_whole(&self, id: u64) -> bool {
        let Some(node) = self.nodes.get(&id) else {
            return false;
        };
        if !node.regular || node.unlinked || !self.cached(id) || self.health.degraded {
            return false;
        }
        let blocks = node.size.div_ceil(self.bs());
        // The core's per-file count first (O(log blocks), docs/design.md §14): the stranded
        // blocks' walk below runs only on a mount that has stranded blocks.
        blocks <= crate::core::MAX_BLOCKS_PER_FILE
            && self.core.holds_blocks(id, blocks)
            && !self.past_cache(id, 0..blocks)
    }

    /// Copies file `id`'s content (its size as the mount knows it) into `image` from the
    /// data path; returns the bytes copied.
    pub fn copy_to_image(&mut self, id: u64, image: &File) -> io::Result<u64> {
        let size = self.file_size(id)?;
        image.set_len(size)?;
        let mut at = 0;
        while at < size {
            let len = CHUNK.min(size - at);
            let data = self.read(id, at, len as u32)?;
            image.write_all_at(&data, at)?;
            at += data.len() as u64;
            if data.is_empty() {
                break;
            }
        }
        Ok(size)
    }

    /// Brings `image`, which the kernel wrote in passthrough mode, back into the cache: the
    /// blocks whose bytes differ from what the data path holds are written through it (so a
    /// write-back cache journals them dirty, exactly as writes received one by one), a
    /// shorter image truncates the file. Returns the bytes written.
    pub fn ingest_image(&mut self, id: u64, image: &File) -> io::Result<u64> {
        let len = image.metadata()?.len();
        if len < self.file_size(id)? {
            self.truncate(id, len)?;
        }
        let bs = self.bs();
        let mut written = 0;
        let mut at = 0;
        let mut img = vec![0u8; CHUNK as usize];
        while at < len {
            let n = CHUNK.min(len - at) as usize;
            let got = pread_full(image, &mut img[..n], at)?;
            img[got..n].fill(0);
            let have = match self.peek(id, at, n as u64) {
                Ok(have) => have,
                // The cache cannot be read for the comparison: the chunk is written whole
                // (the data path serves that past the cache, counting the error).
                Err(e) if crate::faults::is_device_error(&e) => Vec::new(),
                Err(e) => return Err(e),
            };
            // Runs of blocks that differ are written as one request each.
            let mut run: Option<usize> = None;
            for b in (0..n).step_by(bs as usize).chain(std::iter::once(n)) {
                let differs = b < n && {
                    let e = (b + bs as usize).min(n);
                    have.get(b..e) != Some(&img[b..e])
                };
                match (differs, run) {
                    (true, None) => run = Some(b),
                    (false, Some(start)) => {
                        self.write(id, at + start as u64, &img[start..b])?;
                        written += (b - start) as u64;
                        run = None;
                    }
                    _ => {}
                }
            }
            at += n as u64;
        }
        Ok(written)
    }

    /// File `id`'s bytes at `offset` (up to `len`, within its size) as a reader sees them,
    /// without asking the core (an ingest's comparison must not promote or reorder blocks):
    /// cached blocks from their slots, the others from the store with the dirty copies the
    /// cache set aside.
    fn peek(&mut self, id: u64, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let size = self.file_size(id)?;
        if offset >= size {
            return Ok(Vec::new());
        }
        let end = (offset + len).min(size);
        let mut out = vec![0u8; (end - offset) as usize];
        let bs = self.bs();
        let blocks = offset / bs..end.div_ceil(bs);
        if !self.cached(id)
            || blocks
                .clone()
                .any(|b| self.core.lookup(BlockKey::new(id, b)).is_none())
        {
            let f = self.store_file(id)?;
            self.cfg.latency.data_op();
            let n = pread_full(&f, &mut out, offset)?;
            out[n..].fill(0);
            self.stats.store_reads += 1;
            self.stats.store_bytes_read += n as u64;
        }
        for block in blocks {
            let key = BlockKey::new(id, block);
            let content = match self.core.lookup(key) {
                Some((slot, _)) => Some(self.slot_data(slot)?),
                None => self.read_copy(key)?,
            };
            let Some(content) = content else { continue };
            let start = block * bs;
            let (lo, hi) = (offset.max(start), end.min(start + bs));
            let dst = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            let from = (lo - start) as usize;
            let avail = content.len().saturating_sub(from).min(dst.len());
            dst[..avail].copy_from_slice(&content[from..from + avail]);
            dst[avail..].fill(0);
        }
        Ok(out)
    }

    /// The version of file `id`'s cached content (`crate::core::FileCache::content_version`):
    /// an image made or ingested at version `v` equals what the cache holds for the file as
    /// long as this is `Some(v)`, since every write, truncate, delete and every block of it
    /// admitted, evicted or dropped gives the file a version never given before.
    pub fn content_version(&self, id: u64) -> Option<u64> {
        self.core.content_version(id)
    }

    /// Counts an open served in passthrough mode.
    pub fn note_passthrough_open(&mut self) {
        self.stats.passthrough_opens += 1;
    }

    /// Counts a passthrough image copied from the cache (`reused`: `false`) or taken as kept.
    pub fn note_image(&mut self, reused: bool) {
        if reused {
            self.stats.passthrough_images_reused += 1;
        } else {
            self.stats.passthrough_images_copied += 1;
        }
    }

    /// Counts an open of a file held whole left on the block path for its size.
    pub fn note_below_min_size(&mut self) {
        self.stats.passthrough_below_min_size += 1;
    }

    /// Counts `bytes` brought in from a passthrough image.
    pub fn note_passthrough_ingested(&mut self, bytes: u64) {
        self.stats.passthrough_bytes_ingested += bytes;
    }
}
