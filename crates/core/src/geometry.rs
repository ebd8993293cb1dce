//! Line geometry: how byte ranges map to cache lines and to sub-blocks within a line.
//!
//! A line is a power of two from 512 B to 1 MiB. Each line keeps validity and dirtiness per
//! sub-block in one `u64` bitmap, so a sub-block is `max(512 B, line / 64)`: 512 B sectors up to
//! 32 KiB lines, coarser sub-blocks above (a 1 MiB line tracks 16 KiB sub-blocks). This bounds
//! metadata at a fixed size per line whatever the line size.

use crate::request::VolumeId;
use serde::{Deserialize, Serialize};

/// Most volumes one cache can hold: the volume id is packed into the top 16 bits of a [`LineKey`].
pub const MAX_VOLUMES: u32 = 1 << 16;
/// Bits of a [`LineKey`] that hold the line index within its volume.
const INDEX_BITS: u32 = 48;

/// Identity of one line of backend address space: volume and line index packed in a `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LineKey(pub u64);

impl LineKey {
    /// Line indices are below this (48 bits).
    pub const MAX_INDEX: u64 = 1 << INDEX_BITS;

    /// Packs a volume and a line index. Panics (a programming error) if either is out of range;
    /// [`LineGeometry::check_request`] rejects such requests before they get here.
    pub fn new(volume: VolumeId, index: u64) -> Self {
        assert!(
            volume.0 < MAX_VOLUMES,
            "volume id {} out of range",
            volume.0
        );
        assert!(index < 1 << INDEX_BITS, "line index {index} out of range");
        LineKey(((volume.0 as u64) << INDEX_BITS) | index)
    }

    /// Packs as [`LineKey::new`] does, without its range checks (an index past 48 bits spills
    /// into the volume's bits): for hints such as a prefetch, where any key is harmless.
    #[inline]
    pub fn new_for_hint(volume: VolumeId, index: u64) -> Self {
        LineKey(((volume.0 as u64) << INDEX_BITS) | index)
    }

    /// Volume of this line.
    pub fn volume(self) -> VolumeId {
        VolumeId((self.0 >> INDEX_BITS) as u32)
    }

    /// Line index within its volume.
    pub fn index(self) -> u64 {
        self.0 & ((1 << INDEX_BITS) - 1)
    }
}

/// Why a geometry or request is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// Line size not a power of two in 512 B ..= 1 MiB.
    #[error("line_size {0} must be a power of two from 512 to 1048576 bytes")]
    LineSize(u64),
    /// Volume id beyond [`MAX_VOLUMES`].
    #[error("volume id {0} exceeds the limit of {MAX_VOLUMES} volumes")]
    Volume(u32),
    /// Request reaches beyond the addressable range.
    #[error("request offset {offset} + length {len} exceeds the addressable range")]
    Range {
        /// Offset of the bad request.
        offset: u64,
        /// Length of the bad request.
        len: u64,
    },
}

/// Line size and the derived sub-block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineGeometry {
    line_shift: u32,
    sub_shift: u32,
}

/// Smallest line and sub-block size.
pub const MIN_LINE: u64 = 512;
/// Largest line size.
pub const MAX_LINE: u64 = 1 << 20;

impl LineGeometry {
    /// Geometry for a line size; errors unless it is a power of two in 512 B ..= 1 MiB.
    pub fn new(line_size: u64) -> Result<Self, GeometryError> {
        if !line_size.is_power_of_two() || !(MIN_LINE..=MAX_LINE).contains(&line_size) {
            return Err(GeometryError::LineSize(line_size));
        }
        let line_shift = line_size.trailing_zeros();
        let sub_shift = line_shift.saturating_sub(6).max(9);
        Ok(Self {
            line_shift,
            sub_shift,
        })
    }

    /// Line size in bytes.
    pub fn line_size(&self) -> u64 {
        1 << self.line_shift
    }

    /// Sub-block (tracked sector) size in bytes.
    pub fn sub_size(&self) -> u64 {
        1 << self.sub_shift
    }

    /// Sub-blocks per line (at most 64).
    pub fn subs_per_line(&self) -> u32 {
        1 << (self.line_shift - self.sub_shift)
    }

    /// Bitmap with every sub-block of a line set.
    pub fn full_mask(&self) -> u64 {
        let n = self.subs_per_line();
        if n == 64 {
            u64::MAX
        } else {
            (1u64 << n) - 1
        }
    }

    /// Rejects requests the cache cannot address.
    pub fn check_request(
        &self,
        volume: VolumeId,
        offset: u64,
        len: u64,
    ) -> Result<(), GeometryError> {
        if volume.0 >= MAX_VOLUMES {
            return Err(GeometryError::Volume(volume.0));
        }
        let end = offset
            .checked_add(len)
            .ok_or(GeometryError::Range { offset, len })?;
        if (end.saturating_sub(1) >> self.line_shift) >= 1 << INDEX_BITS {
            return Err(GeometryError::Range { offset, len });
        }
        Ok(())
    }

    /// Line index holding byte `offset`.
    pub fn line_of(&self, offset: u64) -> u64 {
        offset >> self.line_shift
    }

    /// Byte offset where line `index` starts.
    pub fn line_start(&self, index: u64) -> u64 {
        index << self.line_shift
    }

    /// The slices of `[offset, offset+len)` falling in each line, in order.
    /// Empty for `len == 0`.
    pub fn split(&self, offset: u64, len: u64) -> LineSplit {
        LineSplit {
            geo: *self,
            pos: offset,
            end: offset + len,
        }
    }

    /// The one slice of `[offset, offset+len)` when the range lies inside one line: what
    /// [`split`](Self::split) would yield alone, cut directly (most requests are one line).
    /// `None` for an empty range or one crossing a line boundary.
    #[inline]
    pub fn single_line(&self, offset: u64, len: u64) -> Option<LineSlice> {
        let index = self.line_of(offset);
        let start = offset - self.line_start(index);
        let end = start + len;
        (len != 0 && end <= self.line_size()).then_some(LineSlice { index, start, end })
    }

    /// Bitmap of the sub-blocks touched by byte range `[start, end)` within one line
    /// (offsets relative to the line start, `start < end <= line_size`).
    #[inline]
    pub fn touched_mask(&self, start: u64, end: u64) -> u64 {
        debug_assert!(start < end && end <= self.line_size());
        let first = start >> self.sub_shift;
        let last = (end - 1) >> self.sub_shift;
        // Bits first..=last, without branches (this runs for every line of every request):
        // `last` < 64, so both shifts are in range.
        (u64::MAX >> (63 - last)) & (u64::MAX << first)
    }

    /// Bitmap of the sub-blocks entirely covered by `[start, end)` within one line.
    #[inline]
    pub fn covered_mask(&self, start: u64, end: u64) -> u64 {
        debug_assert!(start <= end && end <= self.line_size());
        let first = start.div_ceil(self.sub_size());
        let last = end >> self.sub_shift;
        // Bits first..last (none when last <= first): bits below `last` and from `first` up,
        // each shift of 64 meaning all or none.
        let below_last = u64::MAX.checked_shr(64 - last as u32).unwrap_or(0);
        let from_first = u64::MAX.checked_shl(first as u32).unwrap_or(0);
        below_last & from_first
    }
}

/// Bits `lo..hi` set.
pub fn mask_range(lo: u32, hi: u32) -> u64 {
    debug_assert!(lo <= hi && hi <= 64);
    if hi == lo {
        return 0;
    }
    let width = hi - lo;
    let ones = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    ones << lo
}

/// One line's part of a request: line index and byte range relative to the line start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSlice {
    /// Line index within the volume.
    pub index: u64,
    /// First byte within the line.
    pub start: u64,
    /// One past the last byte within the line.
    pub end: u64,
}

/// Iterator over the [`LineSlice`]s of a byte range.
#[derive(Debug, Clone)]
pub struct LineSplit {
    geo: LineGeometry,
    pos: u64,
    end: u64,
}

impl Iterator for LineSplit {
    type Item = LineSlice;
    fn next(&mut self) -> Option<LineSlice> {
        if self.pos >= self.end {
            return None;
        }
        let index = self.geo.line_of(self.pos);
        let line_start = self.geo.line_start(index);
        let line_end = line_start + self.geo.line_size();
        let stop = self.end.min(line_end);
        let slice = LineSlice {
            index,
            start: self.pos - line_start,
            end: stop - line_start,
        };
        self.pos = stop;
        Some(slice)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.lines_left();
        (n, Some(n))
    }

    /// The lines left, by arithmetic (callers count a request's lines per request).
    fn count(self) -> usize {
        self.lines_left()
    }
}

impl ExactSizeIterator for LineSplit {}

impl LineSplit {
    /// Lines from `pos` to `end`: those holding its first and last bytes and all between.
    #[inline]
    fn lines_left(&self) -> usize {
        if self.pos >= self.end {
            0
        } else {
            (self.geo.line_of(self.end - 1) - self.geo.line_of(self.pos) + 1) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` and `size_hint` agree with walking the slices.
    #[test]
    fn split_counts_its_slices() {
        for line in [512u64, 4096, 65536] {
            let g = LineGeometry::new(line).unwrap();
            for offset in [0, 1, line - 1, line, 3 * line + 7] {
                for len in [0, 1, line - 1, line, line + 1, 5 * line - 3, 9 * line] {
                    let walked = g.split(offset, len).fold(0, |n, _| n + 1);
                    assert_eq!(g.split(offset, len).count(), walked, "{offset}+{len}");
                    assert_eq!(g.split(offset, len).len(), walked, "{offset}+{len}");
                    let mut it = g.split(offset, len);
                    it.next();
                    assert_eq!(
                        it.len(),
                        walked.saturating_sub(1),
                        "{offset}+{len} after one"
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_bad_line_sizes() {
        for bad in [0, 256, 1000, 3 << 10, 2 << 20] {
            assert_eq!(LineGeometry::new(bad), Err(GeometryError::LineSize(bad)));
        }
    }

    #[test]
    fn sub_blocks_fit_one_word() {
        for shift in 9..=20 {
            let g = LineGeometry::new(1 << shift).unwrap();
            assert!(g.subs_per_line() <= 64);
            assert_eq!(g.sub_size() * g.subs_per_line() as u64, g.line_size());
            assert_eq!(g.full_mask().count_ones(), g.subs_per_line());
        }
        assert_eq!(LineGeometry::new(4096).unwrap().sub_size(), 512);
        assert_eq!(LineGeometry::new(1 << 20).unwrap().sub_size(), 16384);
    }

    #[test]
    fn split_covers_lines_floor_to_floor() {
        let g = LineGeometry::new(4096).unwrap();
        let s: Vec<_> = g.split(4000, 5000).collect();
        // lines floor(4000/4096)=0 ..= floor(8999/4096)=2
        assert_eq!(s.iter().map(|x| x.index).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(s.iter().map(|x| x.end - x.start).sum::<u64>(), 5000);
        assert_eq!(s[0].start, 4000);
        assert_eq!(s[2].end, 9000 - 8192);
        assert!(g.split(10, 0).next().is_none());
    }

    #[test]
    fn masks() {
        let g = LineGeometry::new(4096).unwrap();
        assert_eq!(g.touched_mask(0, 4096), 0xff);
        assert_eq!(g.touched_mask(100, 600), 0b11);
        assert_eq!(g.covered_mask(100, 600), 0);
        assert_eq!(g.covered_mask(0, 1024), 0b11);
        assert_eq!(g.covered_mask(512, 4096), 0xfe);
    }

    /// `single_line` is `split`'s only slice when it has exactly one, and `None` otherwise.
    #[test]
    fn single_line_is_a_split_of_one_slice() {
        for line in [512u64, 4096] {
            let g = LineGeometry::new(line).unwrap();
            for offset in (0..3 * line).step_by(64).chain([line - 1, 2 * line - 1]) {
                for len in [0, 1, 63, 64, line - 1, line, line + 1, 2 * line] {
                    let slices: Vec<LineSlice> = g.split(offset, len).collect();
                    let expected = (slices.len() == 1).then(|| slices[0]);
                    assert_eq!(
                        g.single_line(offset, len),
                        expected,
                        "{line}: {offset}+{len}"
                    );
                }
            }
        }
    }

    /// The masks are those of `mask_range` over the sub-blocks touched and covered, for every
    /// byte range of a line, at the smallest, a middle and the largest line sizes.
    #[test]
    fn masks_match_their_definition() {
        for line in [512u64, 4096, 1 << 20] {
            let g = LineGeometry::new(line).unwrap();
            let sub = g.sub_size();
            // Every range of a small line; around each sub-block boundary of the larger ones.
            let points: Vec<u64> = if line <= 4096 {
                (0..=line).collect()
            } else {
                (0..=line / sub)
                    .flat_map(|k| [k * sub, k * sub + 1, (k * sub).saturating_sub(1)])
                    .filter(|&p| p <= line)
                    .collect()
            };
            for &start in &points {
                for &end in points.iter().filter(|&&e| e > start) {
                    let touched = mask_range((start / sub) as u32, ((end - 1) / sub) as u32 + 1);
                    assert_eq!(
                        g.touched_mask(start, end),
                        touched,
                        "{line}: {start}..{end}"
                    );
                    let (first, last) = (start.div_ceil(sub), end / sub);
                    let covered = if last <= first {
                        0
                    } else {
                        mask_range(first as u32, last as u32)
                    };
                    assert_eq!(
                        g.covered_mask(start, end),
                        covered,
                        "{line}: {start}..{end}"
                    );
                }
            }
        }
    }

    /// In range, the hint's key is the checked one.
    #[test]
    fn a_hint_key_in_range_is_the_key() {
        for (v, i) in [
            (0, 0),
            (7, 123_456_789),
            (MAX_VOLUMES - 1, LineKey::MAX_INDEX - 1),
        ] {
            assert_eq!(
                LineKey::new_for_hint(VolumeId(v), i),
                LineKey::new(VolumeId(v), i)
            );
        }
    }

    #[test]
    fn key_round_trip() {
        let k = LineKey::new(VolumeId(7), 123_456_789);
        assert_eq!(k.volume(), VolumeId(7));
        assert_eq!(k.index(), 123_456_789);
    }

    #[test]
    fn range_checked() {
        let g = LineGeometry::new(512).unwrap();
        assert!(g.check_request(VolumeId(0), u64::MAX, 2).is_err());
        assert!(g.check_request(VolumeId(MAX_VOLUMES), 0, 2).is_err());
        assert!(g.check_request(VolumeId(1), 1 << 40, 4096).is_ok());
    }
}
