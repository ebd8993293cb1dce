//! Block status: a device's bytes as runs of like state ([`Extent`]s), as NBD's
//! `NBD_CMD_BLOCK_STATUS` reports them. Two kinds exist: allocation (holes of a sparse device,
//! [`BlockDevice::allocation`](crate::BlockDevice::allocation)) and a cache's contents
//! (resident and dirty ranges, [`BlockDevice::cache_state`](crate::BlockDevice::cache_state)).

/// A run of bytes sharing one state, reported from the query's offset on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Its length in bytes (never zero in a reply).
    pub len: u64,
    /// Its state: [`HOLE`] and [`ZERO`] for allocation, [`RESIDENT`] and [`DIRTY`] for a
    /// cache's contents (0: allocated data, or not in the cache).
    pub flags: u32,
}

/// Allocation: the range is not allocated (a hole of a sparse file); NBD's `NBD_STATE_HOLE`.
pub const HOLE: u32 = 1;
/// Allocation: the range reads as zeroes; NBD's `NBD_STATE_ZERO`.
pub const ZERO: u32 = 2;
/// Cache contents: the range is held in the cache (a read of it is a hit).
pub const RESIDENT: u32 = 1;
/// Cache contents: the cache holds a newer version than the backend (not written back yet).
pub const DIRTY: u32 = 2;

/// Most extents one query returns: a reply may cover less than asked (the protocol allows
/// it; clients ask again from where it ended), so memory is bounded whatever the range.
pub const MAX_EXTENTS: usize = 1 << 14;

/// Extents under construction: equal neighbours merge, zero lengths are dropped, and
/// [`full`](Self::full) says when [`MAX_EXTENTS`] are held.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Extents(Vec<Extent>);

impl Extents {
    /// No extents yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `len` bytes of state `flags` (merged into the last extent if it has the same).
    pub fn push(&mut self, len: u64, flags: u32) {
        if len == 0 {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.flags == flags => last.len += len,
            _ => self.0.push(Extent { len, flags }),
        }
    }

    /// Whether no more extents should be added (the reply ends here).
    pub fn full(&self) -> bool {
        self.0.len() >= MAX_EXTENTS
    }

    /// Bytes covered.
    pub fn covered(&self) -> u64 {
        self.0.iter().map(|e| e.len).sum()
    }

    /// The extents.
    pub fn into_vec(self) -> Vec<Extent> {
        self.0
    }
}

/// The runs of `a` and `b` combined byte by byte: each byte gets `f(its flags in a, its
/// flags in b)`. Both start at the same offset; the result covers as much as the shorter.
/// The engine uses it to report its dirty bytes as data over the backend's holes, and a
/// two-level cache to join its levels' contents.
pub fn zip_with(a: &[Extent], b: &[Extent], f: impl Fn(u32, u32) -> u32) -> Vec<Extent> {
    let mut out = Extents::new();
    let (mut i, mut j) = (0, 0);
    let mut left_a = a.first().map_or(0, |e| e.len);
    let mut left_b = b.first().map_or(0, |e| e.len);
    while i < a.len() && j < b.len() {
        let n = left_a.min(left_b);
        out.push(n, f(a[i].flags, b[j].flags));
        left_a -= n;
        left_b -= n;
        if left_a == 0 {
            i += 1;
            left_a = a.get(i).map_or(0, |e| e.len);
        }
        if left_b == 0 {
            j += 1;
            left_b = b.get(j).map_or(0, |e| e.len);
        }
    }
    out.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(len: u64, flags: u32) -> Extent {
        Extent { len, flags }
    }

    #[test]
    fn neighbours_of_one_state_merge_and_empty_runs_vanish() {
        let mut x = Extents::new();
        x.push(10, 0);
        x.push(0, 3);
        x.push(5, 0);
        x.push(7, 3);
        assert_eq!(x.covered(), 22);
        assert_eq!(x.into_vec(), vec![e(15, 0), e(7, 3)]);
    }

    /// Dirty bytes become data, the rest keep their state, over unaligned boundaries; the
    /// result is as long as the shorter input.
    #[test]
    fn zipping_combines_byte_by_byte_over_unaligned_runs() {
        let holes = [e(100, 3), e(50, 0), e(100, 3)];
        let dirty = [e(90, 0), e(20, 2), e(130, 0), e(40, 2)];
        let data_where_dirty = |a: u32, b: u32| if b & DIRTY != 0 { 0 } else { a };
        let got = zip_with(&holes, &dirty, data_where_dirty);
        assert_eq!(got, vec![e(90, 3), e(60, 0), e(90, 3), e(10, 0)]);
        assert_eq!(zip_with(&holes, &[], data_where_dirty), vec![]);
    }
}
