//! The line table's entries at the narrowest width its keys and line size allow
//! (docs/design.md §13): a line's key and its valid and dirty sub-block masks.
//!
//! Keys are kept in 32 bits while they fit: the line index in the low `shift` bits, the
//! volume above (`shift` starts at 32, volume 0 alone, lines below 2^32: a backend of up to
//! 16 TiB of 4 KiB lines; a key of a higher volume lowers it to leave the volumes their bits,
//! re-encoding every entry, while the largest index seen still fits). Masks are 8 bits
//! (6-byte entries, lines of up to 8 sub-blocks: 4 KiB lines of 512-byte sectors) or 16 bits
//! (8-byte entries). The first key that fits no split widens every entry to the 12-byte form
//! (64-bit key, 16-bit masks), once, as the partition numbers appear only once a line is in a
//! partition other than 0. Lines of more than 16 sub-blocks keep their masks beside the
//! entries (the masks here stay 0).

use tiercache_core::LineKey;
use tiercache_eviction::Slot;

/// 6 bytes: a 32-bit key and 8-bit masks (packed to 2-byte alignment).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(2))]
struct Narrow8 {
    key: u32,
    valid: u8,
    dirty: u8,
}

/// 8 bytes: a 32-bit key and 16-bit masks.
#[derive(Debug, Clone, Copy, Default)]
struct Narrow16 {
    key: u32,
    valid: u16,
    dirty: u16,
}

/// 12 bytes: a 64-bit key and 16-bit masks (packed to 4-byte alignment).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
struct Wide {
    key: u64,
    valid: u16,
    dirty: u16,
}

/// Every slot's entry, in one of three widths.
#[derive(Debug)]
enum Store {
    Narrow8(Vec<Narrow8>),
    Narrow16(Vec<Narrow16>),
    Wide(Vec<Wide>),
}

/// Every slot's entry (see the module doc).
#[derive(Debug)]
pub(super) struct Entries {
    store: Store,
    /// Narrow keys: the line index's bits (the volume is above them).
    shift: u32,
    /// The largest volume and line index placed so far (they bound every key held).
    max_volume: u64,
    max_index: u64,
}

/// Calls `$body` with `$v` bound to the entries' vector, whatever its width.
macro_rules! each {
    ($e:expr, $v:ident => $body:expr) => {
        match $e {
            Store::Narrow8($v) => $body,
            Store::Narrow16($v) => $body,
            Store::Wide($v) => $body,
        }
    };
}

/// Line index bits of a [`LineKey`] (the volume is above them).
const INDEX_BITS: u32 = 48;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// Bits needed for `v`.
fn bits(v: u64) -> u32 {
    u64::BITS - v.leading_zeros()
}

impl Entries {
    /// `slots` empty entries for lines of `mask_bits` sub-blocks kept in the entry (0 when
    /// the masks are kept elsewhere).
    pub(super) fn new(slots: usize, mask_bits: u32) -> Self {
        let store = if mask_bits <= 8 {
            Store::Narrow8(vec![Narrow8::default(); slots])
        } else {
            debug_assert!(mask_bits <= 16);
            Store::Narrow16(vec![Narrow16::default(); slots])
        };
        Entries {
            store,
            shift: 32,
            max_volume: 0,
            max_index: 0,
        }
    }

    /// Number of entries.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        each!(&self.store, v => v.len())
    }

    /// A narrow key's line key.
    #[inline(always)]
    fn decode(&self, k: u32) -> LineKey {
        let k = u64::from(k);
        LineKey((k >> self.shift) << INDEX_BITS | (k & ((1 << self.shift) - 1)))
    }

    /// `key` as a narrow key at `shift`, if it fits.
    #[inline(always)]
    fn encode(key: LineKey, shift: u32) -> Option<u32> {
        let (volume, index) = (key.0 >> INDEX_BITS, key.0 & INDEX_MASK);
        (bits(index) <= shift && bits(volume) <= 32 - shift)
            .then(|| (volume << shift | index) as u32)
    }

    /// The key of `slot` (meaningful only for a resident slot).
    #[inline(always)]
    pub(super) fn key(&self, slot: Slot) -> LineKey {
        match &self.store {
            Store::Narrow8(v) => self.decode(v[slot as usize].key),
            Store::Narrow16(v) => self.decode(v[slot as usize].key),
            Store::Wide(v) => LineKey(v[slot as usize].key),
        }
    }

    /// The valid and dirty masks of `slot`.
    #[inline(always)]
    pub(super) fn masks(&self, slot: Slot) -> (u64, u64) {
        each!(&self.store, v => {
            let e = v[slot as usize];
            (u64::from(e.valid), u64::from(e.dirty))
        })
    }

    /// Sets the masks of `slot` (which fit the entries' width).
    #[inline(always)]
    pub(super) fn set_masks(&mut self, slot: Slot, valid: u64, dirty: u64) {
        match &mut self.store {
            Store::Narrow8(v) => {
                debug_assert!(valid >> 8 == 0, "more sub-blocks than the entry holds");
                let e = &mut v[slot as usize];
                e.valid = valid as u8;
                e.dirty = dirty as u8;
            }
            Store::Narrow16(v) => {
                debug_assert!(valid >> 16 == 0, "more sub-blocks than the entry holds");
                let e = &mut v[slot as usize];
                e.valid = valid as u16;
                e.dirty = dirty as u16;
            }
            Store::Wide(v) => {
                debug_assert!(valid >> 16 == 0, "more sub-blocks than the entry holds");
                let e = &mut v[slot as usize];
                e.valid = valid as u16;
                e.dirty = dirty as u16;
            }
        }
    }

    /// Places `key` in `slot` with empty masks, first re-encoding (a lower split) or
    /// widening every entry if the key does not fit the narrow keys as they are.
    #[inline]
    pub(super) fn place(&mut self, slot: Slot, key: LineKey) {
        let s = slot as usize;
        let narrow = Self::encode(key, self.shift);
        match (&mut self.store, narrow) {
            (Store::Narrow8(v), Some(k)) => {
                v[s] = Narrow8 {
                    key: k,
                    valid: 0,
                    dirty: 0,
                }
            }
            (Store::Narrow16(v), Some(k)) => {
                v[s] = Narrow16 {
                    key: k,
                    valid: 0,
                    dirty: 0,
                }
            }
            (Store::Wide(v), _) => {
                v[s] = Wide {
                    key: key.0,
                    valid: 0,
                    dirty: 0,
                }
            }
            (_, None) => {
                self.make_room(key);
                self.place(slot, key);
            }
        }
        self.max_volume = self.max_volume.max(key.0 >> INDEX_BITS);
        self.max_index = self.max_index.max(key.0 & INDEX_MASK);
    }

    /// Clears `slot`'s entry (a removed line).
    #[inline]
    pub(super) fn clear(&mut self, slot: Slot) {
        each!(&mut self.store, v => v[slot as usize] = Default::default())
    }

    /// Makes the narrow keys' split leave room for `key` and every key placed so far, or
    /// moves every entry to the 12-byte form if no split does.
    #[cold]
    fn make_room(&mut self, key: LineKey) {
        let volume_bits = bits(self.max_volume.max(key.0 >> INDEX_BITS));
        let index_bits = bits(self.max_index.max(key.0 & INDEX_MASK));
        let old = self.shift;
        if volume_bits + index_bits <= 32 {
            // As many index bits as the volumes leave (the split only ever moves down).
            let shift = 32 - volume_bits;
            debug_assert!(shift < old);
            let re = |k: u32| {
                let line = self.decode(k);
                Self::encode(line, shift).expect("every key held fits the new split")
            };
            match &self.store {
                Store::Narrow8(v) => {
                    let n = v
                        .iter()
                        .map(|e| Narrow8 {
                            key: re(e.key),
                            ..*e
                        })
                        .collect();
                    self.store = Store::Narrow8(n);
                }
                Store::Narrow16(v) => {
                    let n = v
                        .iter()
                        .map(|e| Narrow16 {
                            key: re(e.key),
                            ..*e
                        })
                        .collect();
                    self.store = Store::Narrow16(n);
                }
                Store::Wide(_) => unreachable!("a wide key always fits"),
            }
            self.shift = shift;
            return;
        }
        let wide: Vec<Wide> = match &self.store {
            Store::Narrow8(v) => v
                .iter()
                .map(|e| Wide {
                    key: self.decode(e.key).0,
                    valid: u16::from(e.valid),
                    dirty: u16::from(e.dirty),
                })
                .collect(),
            Store::Narrow16(v) => v
                .iter()
                .map(|e| Wide {
                    key: self.decode(e.key).0,
                    valid: e.valid,
                    dirty: e.dirty,
                })
                .collect(),
            Store::Wide(_) => return,
        };
        self.store = Store::Wide(wide);
    }

    /// Whether the entries are the 12-byte form (for tests).
    #[cfg(test)]
    pub(super) fn is_wide(&self) -> bool {
        matches!(self.store, Store::Wide(_))
    }

    /// Hints that `slot`'s entry is read soon.
    #[inline(always)]
    pub(super) fn prefetch(&self, slot: Slot) {
        each!(&self.store, v => tiercache_core::hint::prefetch(v.as_ptr().wrapping_add(slot as usize)))
    }

    /// Heap bytes once `key` has been placed too (the width the keys held set).
    pub(super) fn bytes_holding(&self, key: LineKey) -> usize {
        let volume_bits = bits(self.max_volume.max(key.0 >> INDEX_BITS));
        let index_bits = bits(self.max_index.max(key.0 & INDEX_MASK));
        match &self.store {
            Store::Wide(_) => self.bytes(),
            _ if volume_bits + index_bits > 32 => self.len() * std::mem::size_of::<Wide>(),
            _ => self.bytes(),
        }
    }

    /// Heap bytes.
    pub(super) fn bytes(&self) -> usize {
        fn bytes_of<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        each!(&self.store, v => bytes_of(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_sizes_are_what_the_budget_says() {
        assert_eq!(std::mem::size_of::<Narrow8>(), 6);
        assert_eq!(std::mem::size_of::<Narrow16>(), 8);
        assert_eq!(std::mem::size_of::<Wide>(), 12);
        assert_eq!(Entries::new(1000, 8).bytes(), 6000);
        assert_eq!(Entries::new(1000, 16).bytes(), 8000);
    }

    #[test]
    fn keys_of_other_volumes_lower_the_split_keeping_every_key() {
        let mut e = Entries::new(4, 8);
        e.place(0, LineKey(5));
        e.set_masks(0, 0b11, 0b01);
        e.place(1, LineKey(3 << 48 | 9));
        assert!(!e.is_wide());
        assert_eq!(e.shift, 30);
        e.place(2, LineKey(200 << 48 | (1 << 20)));
        assert!(!e.is_wide());
        assert_eq!(e.shift, 24);
        assert_eq!(e.bytes_holding(LineKey(1 << 23)), 24);
        assert_eq!(e.bytes_holding(LineKey(1 << 24)), 48);
        assert_eq!(e.key(0), LineKey(5));
        assert_eq!(e.masks(0), (0b11, 0b01));
        assert_eq!(e.key(1), LineKey(3 << 48 | 9));
        assert_eq!(e.key(2), LineKey(200 << 48 | (1 << 20)));
        // An index of 2^24 and volume 200: no split holds both.
        e.place(3, LineKey(1 << 24));
        assert!(e.is_wide());
        for (s, k) in [
            (0, 5),
            (1, 3 << 48 | 9),
            (2, 200 << 48 | (1 << 20)),
            (3, 1 << 24),
        ] {
            assert_eq!(e.key(s), LineKey(k));
        }
    }

    #[test]
    fn a_wide_key_widens_every_entry_keeping_them() {
        for bits in [8, 16] {
            let mut e = Entries::new(4, bits);
            e.place(0, LineKey(7));
            e.set_masks(0, 0b101, 0b100);
            e.place(1, LineKey(u64::from(u32::MAX)));
            assert!(!e.is_wide());
            e.place(2, LineKey(1 << 48 | 3));
            assert!(e.is_wide());
            assert_eq!(e.key(0), LineKey(7));
            assert_eq!(e.masks(0), (0b101, 0b100));
            assert_eq!(e.key(1), LineKey(u64::from(u32::MAX)));
            assert_eq!(e.key(2), LineKey(1 << 48 | 3));
            assert_eq!(e.masks(2), (0, 0));
            assert_eq!(e.bytes(), 48);
            assert_eq!(e.bytes_holding(LineKey(1 << 47)), 48);
        }
    }
}
