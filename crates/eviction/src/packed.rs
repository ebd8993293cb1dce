//! Pairs of list links packed at the width the number of nodes needs (docs/design.md §13).
//!
//! A list over `n` nodes needs links of `ceil(log2(n + 1))` bits (the `+ 1` for "no link"):
//! 18 bits for an engine shard of 2^17 lines (an 8 GiB cache of 4 KiB lines in 16 shards), 26
//! for 2^25 (2 TB). Two links a node, packed back to back in a byte array, take 4.5 and 6.5
//! bytes a node where two `u32` took 8. A link is read with one unaligned 8-byte load (a link
//! of at most 32 bits starting at any bit of a byte ends within the next 8 bytes), shifted
//! and masked; written with a load and a store of the same 8 bytes.

/// "No link", as [`PackedLinks::get`] returns it whatever the width.
pub const NO_LINK: u32 = u32::MAX;

/// Two links (`0` and `1`) for each of `len` nodes, each of `width` bits.
#[derive(Debug, Clone)]
pub struct PackedLinks {
    /// The links, link `k` of node `i` at bit `(2 i + k) * width`; 8 bytes of padding at the
    /// end, so every link is read with one 8-byte load inside the array.
    bytes: Vec<u8>,
    width: u32,
    /// `width` ones: the stored form of [`NO_LINK`].
    mask: u64,
    len: usize,
}

impl PackedLinks {
    /// Width of links able to name nodes `0..values` and [`NO_LINK`].
    pub fn width_for(values: usize) -> u32 {
        (usize::BITS - values.leading_zeros()).max(1)
    }

    /// `len` nodes, every link [`NO_LINK`], wide enough to name nodes `0..values`.
    ///
    /// # Panics
    /// If `values` is `u32::MAX` or more (no width of at most 32 bits has room for them and
    /// for [`NO_LINK`]): a configuration error caught when a table is built.
    pub fn new(len: usize, values: usize) -> Self {
        assert!(
            values < NO_LINK as usize,
            "{values} nodes exceed the u32 link space"
        );
        let width = Self::width_for(values);
        let mask = (1u64 << width) - 1;
        let bits = len as u64 * 2 * u64::from(width);
        let mut p = PackedLinks {
            bytes: vec![0xff; (bits.div_ceil(8) + 8) as usize],
            width,
            mask,
            len,
        };
        // All ones is NO_LINK at any width; keep the padding's bits zero past the last link
        // only for tidiness (they are never read as a link).
        let end = p.bytes.len() - 8;
        p.bytes[end..].fill(0);
        p
    }

    /// Number of nodes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Link width in bits.
    pub fn width(&self) -> u32 {
        self.width
    }

    #[inline(always)]
    fn at(&self, node: u32, k: usize) -> (usize, u32) {
        debug_assert!((node as usize) < self.len && k < 2);
        let bit = (node as u64 * 2 + k as u64) * u64::from(self.width);
        ((bit / 8) as usize, (bit % 8) as u32)
    }

    #[inline(always)]
    fn word(&self, byte: usize) -> u64 {
        let b: [u8; 8] = self.bytes[byte..byte + 8]
            .try_into()
            .expect("8 bytes: the array is padded");
        u64::from_le_bytes(b)
    }

    /// Link `k` (0 or 1) of `node`: a node number, or [`NO_LINK`].
    #[inline(always)]
    pub fn get(&self, node: u32, k: usize) -> u32 {
        let (byte, shift) = self.at(node, k);
        self.unpack(self.word(byte) >> shift & self.mask)
    }

    /// Sets link `k` of `node` to `to` (a node below the width's room, or [`NO_LINK`]).
    #[inline(always)]
    pub fn set(&mut self, node: u32, k: usize, to: u32) {
        debug_assert!(
            to == NO_LINK || u64::from(to) < self.mask,
            "link {to} too wide"
        );
        let (byte, shift) = self.at(node, k);
        let v = u64::from(to) & self.mask;
        let w = self.word(byte) & !(self.mask << shift) | v << shift;
        self.bytes[byte..byte + 8].copy_from_slice(&w.to_le_bytes());
    }

    /// A stored link as a node number or [`NO_LINK`].
    #[inline(always)]
    fn unpack(&self, v: u64) -> u32 {
        if v == self.mask {
            NO_LINK
        } else {
            v as u32
        }
    }

    /// Both links of `node`: one load when they share 8 bytes (links of up to 28 bits).
    #[inline(always)]
    pub fn pair(&self, node: u32) -> [u32; 2] {
        let (byte, shift) = self.at(node, 0);
        if shift + 2 * self.width > 64 {
            return [self.get(node, 0), self.get(node, 1)];
        }
        let x = self.word(byte) >> shift;
        [
            self.unpack(x & self.mask),
            self.unpack(x >> self.width & self.mask),
        ]
    }

    /// Sets both links of `node`: one load and one store when they share 8 bytes (a second
    /// store overlapping the first would stall the load between them).
    #[inline(always)]
    pub fn set_pair(&mut self, node: u32, links: [u32; 2]) {
        let (byte, shift) = self.at(node, 0);
        if shift + 2 * self.width > 64 {
            self.set(node, 0, links[0]);
            self.set(node, 1, links[1]);
            return;
        }
        let both = self.mask << self.width | self.mask;
        let v = (u64::from(links[0]) & self.mask) | (u64::from(links[1]) & self.mask) << self.width;
        let w = self.word(byte) & !(both << shift) | v << shift;
        self.bytes[byte..byte + 8].copy_from_slice(&w.to_le_bytes());
    }

    /// The same links over `len` nodes (more or fewer; new ones unlinked), wide enough for
    /// nodes `0..values`.
    pub fn resized(&self, len: usize, values: usize) -> Self {
        let mut out = PackedLinks::new(len, values);
        for n in 0..self.len.min(len) as u32 {
            out.set_pair(n, self.pair(n));
        }
        out
    }

    /// Hints that `node`'s links are touched soon.
    #[inline(always)]
    pub fn prefetch(&self, node: u32) {
        if (node as usize) < self.len {
            let (byte, _) = self.at(node, 0);
            tiercache_core::hint::prefetch(self.bytes.as_ptr().wrapping_add(byte));
        }
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn widths_and_sizes() {
        assert_eq!(PackedLinks::width_for(1), 1);
        assert_eq!(PackedLinks::width_for(2), 2);
        assert_eq!(PackedLinks::width_for((1 << 17) + 1), 18);
        assert_eq!(PackedLinks::width_for((1 << 25) + 1), 26);
        assert_eq!(PackedLinks::width_for(u32::MAX as usize - 1), 32);
        // 2^17 nodes of 18-bit pairs: 4.5 bytes a node, and the padding.
        assert_eq!(
            PackedLinks::new(1 << 17, (1 << 17) + 1).memory_bytes(),
            (1 << 17) * 9 / 2 + 8
        );
    }

    proptest! {
        /// Packed links read back as a plain array of `[u32; 2]` over random writes, at every
        /// width, the first and last nodes included, and through a resize.
        #[test]
        fn packed_links_match_an_array(
            len in 1usize..40,
            extra in 0usize..(1 << 20),
            writes in prop::collection::vec((any::<u32>(), 0usize..2, any::<u32>(), any::<bool>()), 0..200),
            grow in 0usize..10,
        ) {
            let values = len + extra;
            let mut p = PackedLinks::new(len, values);
            let mut m = vec![[NO_LINK; 2]; len];
            for (node, k, to, none) in writes {
                let node = node % len as u32;
                let to = if none { NO_LINK } else { to % values as u32 };
                p.set(node, k, to);
                m[node as usize][k] = to;
                for (i, pair) in m.iter().enumerate() {
                    prop_assert_eq!(p.pair(i as u32), *pair);
                }
            }
            let q = p.resized(len + grow, values + grow);
            for (i, pair) in m.iter().enumerate() {
                prop_assert_eq!(q.pair(i as u32), *pair);
            }
            for i in len..len + grow {
                prop_assert_eq!(q.pair(i as u32), [NO_LINK; 2]);
            }
        }
    }

    #[test]
    #[should_panic(expected = "exceed the u32 link space")]
    fn too_many_nodes_is_refused() {
        let _ = PackedLinks::new(1, u32::MAX as usize);
    }
}
