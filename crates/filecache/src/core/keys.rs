//! (file, block) onto the policy core's key space (docs/design.md §4.9).
//!
//! The core knows lines as (volume, line index). Each file with cached blocks is given an
//! *extent*: [`MAX_BLOCKS_PER_FILE`] consecutive line indices of one volume, block `b` of the
//! file being line `extent base + b`. Extents are numbered across volumes (extent `e` lies in
//! volume `e / per_volume`), handed out when a file is first mapped (the last given back first) and
//! given back when the file has no cached block left (after a delete, a truncate, evictions,
//! or a request that cached nothing), so the extents in use never exceed the cached blocks
//! plus one. A reverse table (extent → file) names the file of any line the core reports.

use std::collections::HashMap;

use tiercache_core::{VolumeId, MAX_VOLUMES};

use super::{BlockKey, FileCacheError, FileId};

/// Bits of a line index addressing a block within its file's extent.
const BLOCK_BITS: u32 = 32;

/// Blocks a file may have in the cache: block indices at or past this are refused with
/// [`FileCacheError::BlockOutOfRange`] (16 TiB of 4 KiB blocks).
pub const MAX_BLOCKS_PER_FILE: u64 = 1 << BLOCK_BITS;

/// The extents of the files that have cached blocks.
#[derive(Debug)]
pub(super) struct Extents {
    /// Extents per volume: the core's line indices are below 2^48, and a line's byte address
    /// (index × line size) must stay below 2^63 (`LineGeometry::check_request`).
    per_volume: u64,
    /// File of each extent in use, by extent number.
    owner: Vec<Option<FileId>>,
    /// Extent of each mapped file.
    of_file: HashMap<FileId, u64>,
    /// Extents given back, reused before new ones (last given back first: deterministic).
    free: Vec<u64>,
    /// Most files mapped at once (the user's cap, at most the key space's).
    cap: u64,
}

impl Extents {
    /// The extents of a core with lines of `line_size` bytes (a power of two).
    pub(super) fn new(line_size: u64) -> Self {
        let index_bits = 48.min(63 - line_size.trailing_zeros());
        Extents {
            per_volume: 1 << (index_bits - BLOCK_BITS),
            owner: Vec::new(),
            of_file: HashMap::new(),
            free: Vec::new(),
            cap: u64::MAX,
        }
    }

    /// Most files that may have cached blocks at once.
    pub(super) fn max_files(&self) -> u64 {
        (self.per_volume * MAX_VOLUMES as u64).min(self.cap)
    }

    /// Caps the files mapped at once at `cap` (the key space's limit stays if lower); files
    /// mapped already stay.
    pub(super) fn set_cap(&mut self, cap: u64) {
        self.cap = cap;
    }

    /// Files mapped now.
    pub(super) fn mapped(&self) -> usize {
        self.of_file.len()
    }

    /// The extent of `file`, if mapped.
    pub(super) fn get(&self, file: FileId) -> Option<u64> {
        self.of_file.get(&file).copied()
    }

    /// The extent of `file`, mapping it first if it has none.
    pub(super) fn get_or_map(&mut self, file: FileId) -> Result<u64, FileCacheError> {
        if let Some(e) = self.get(file) {
            return Ok(e);
        }
        // The hard cap, checked at every admission of a new file.
        if self.of_file.len() as u64 >= self.cap {
            return Err(FileCacheError::TooManyFiles {
                max: self.max_files(),
            });
        }
        let e = match self.free.pop() {
            Some(e) => e,
            None if (self.owner.len() as u64) < self.max_files() => {
                self.owner.push(None);
                self.owner.len() as u64 - 1
            }
            None => {
                return Err(FileCacheError::TooManyFiles {
                    max: self.max_files(),
                })
            }
        };
        self.owner[e as usize] = Some(file);
        self.of_file.insert(file, e);
        Ok(e)
    }

    /// Gives `file`'s extent back (it has no cached block left).
    pub(super) fn unmap(&mut self, file: FileId) {
        if let Some(e) = self.of_file.remove(&file) {
            self.owner[e as usize] = None;
            self.free.push(e);
        }
    }

    /// The core's line holding `block` of the file mapped to `extent`.
    pub(super) fn line(&self, extent: u64, block: u64) -> (VolumeId, u64) {
        debug_assert!(block < MAX_BLOCKS_PER_FILE);
        let volume = VolumeId((extent / self.per_volume) as u32);
        (volume, ((extent % self.per_volume) << BLOCK_BITS) | block)
    }

    /// The block a core line holds, if its extent is mapped.
    pub(super) fn key_of(&self, volume: VolumeId, index: u64) -> Option<BlockKey> {
        let extent = volume.0 as u64 * self.per_volume + (index >> BLOCK_BITS);
        let file = (*self.owner.get(extent as usize)?)?;
        Some(BlockKey::new(file, index & (MAX_BLOCKS_PER_FILE - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_map_back_to_their_blocks_and_extents_are_reused() {
        let mut x = Extents::new(4096);
        assert_eq!(x.max_files(), 1 << 32);
        let a = x.get_or_map(7).unwrap();
        let b = x.get_or_map(9).unwrap();
        assert_ne!(a, b);
        let (v, i) = x.line(b, 5);
        assert_eq!(x.key_of(v, i), Some(BlockKey::new(9, 5)));
        x.unmap(7);
        assert_eq!(x.key_of(x.line(a, 0).0, x.line(a, 0).1), None);
        assert_eq!(x.get_or_map(11).unwrap(), a, "a freed extent is reused");
    }

    #[test]
    fn extents_spill_into_further_volumes_within_the_core_range() {
        // 1 MiB lines: line indices stay below 2^43, so 2^11 extents a volume.
        let x = Extents::new(1 << 20);
        let (v, i) = x.line((1 << 11) + 3, MAX_BLOCKS_PER_FILE - 1);
        assert_eq!(v, VolumeId(1));
        assert!(i < 1 << 43);
        assert!(tiercache_core::LineGeometry::new(1 << 20)
            .unwrap()
            .check_request(v, i << 20, 1 << 20)
            .is_ok());
        let last = x.line(x.max_files() - 1, MAX_BLOCKS_PER_FILE - 1);
        assert_eq!(last.0, VolumeId(MAX_VOLUMES - 1));
        assert!(tiercache_core::LineGeometry::new(1 << 20)
            .unwrap()
            .check_request(last.0, last.1 << 20, 1 << 20)
            .is_ok());
    }
}
