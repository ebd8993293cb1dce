//! The slot table's memory of its records (docs/design.md §13): per slot, what the newest
//! record names, which copy holds it, its dirty sub-blocks and what the other copy names —
//! about 6 bytes a slot for 4 KiB lines — and, only for slots written since the last sync,
//! what a crash may leave in each copy.
//!
//! A slot whose records are all durable (*settled*) is held in three arrays: a line key, a
//! byte of flags and a dirty mask as wide as the line's sub-blocks. The key is its low 32
//! bits in the array and, in the flags' top 5 bits, the index of its high half (volume and
//! the index's top bits) in a table of 31 the slot table shares ([`Highs`]); a key whose high
//! half the full table lacks sits whole in its stripe's `wide` map. The other copy's line is
//! told by the flags as a relation to the key (none, the same line, or — when the newest
//! record is empty — the key itself); a line that fits none of those (a device left odd by
//! crashes) sits in a per-stripe map. A slot written since the last sync (*unsettled*)
//! keeps both copies' crash states ([`CopyState`]) in its stripe's map until a sync makes
//! them durable, when it settles again. Sequence numbers are the stripe's (a counter per
//! stripe, started above every number on the device): a settled slot needs none, as its newest
//! copy is the one the flags name; an unsettled slot's copies get stand-ins (2 for the
//! newest, 1 for the other) below every number written since the open.

use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{
    AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Mutex, MutexGuard};

/// No line (an empty slot, or a copy never written).
pub(super) const NO_LINE: u64 = u64::MAX;
/// A line that does not fit a key (recovery refuses those): never equal to a served line.
pub(super) const ODD_LINE: u64 = u64::MAX - 1;
/// The stand-in sequence numbers of a settled slot's copies; numbers written are above.
pub(super) const SETTLED_NEWEST_SEQ: u64 = 2;
const SETTLED_OTHER_SEQ: u64 = 1;
/// Hashes a slot number with a multiplication and a shift (the maps are keyed by slots of the
/// table, not by input an attacker chooses, and a record write inserts into one: SipHash
/// would cost more than the rest of the bookkeeping). The shift brings the product's mixed
/// high bits down to where the table picks buckets: the slots of a stripe share their low
/// bits.
#[derive(Default)]
pub(super) struct SlotHasher(u64);

impl Hasher for SlotHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<SlotHasher>>;

/// Lock stripes: record writes of slots in different stripes run at once.
pub(super) const STRIPES: usize = 256;

/// A line as one `u64` for the crash bookkeeping.
pub(super) fn line_key(line: Option<(u32, u64)>) -> u64 {
    match line {
        None => NO_LINE,
        Some((v, i)) if v < 1 << 15 && i < 1 << 48 => (v as u64) << 48 | i,
        Some(_) => ODD_LINE,
    }
}

/// The line of a key that is neither [`NO_LINE`] nor [`ODD_LINE`].
fn key_line(k: u64) -> (u32, u64) {
    ((k >> 48) as u32, k & ((1 << 48) - 1))
}

/// What one copy of a slot's record may hold after a crash: its newest record (if that
/// write landed), the durable one it replaced, one written in between (`mixed`), or a torn
/// one, which recovery ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyState {
    /// The line of the newest record written to this copy, as a [`line_key`], and its
    /// sequence number.
    pub newest: u64,
    pub newest_seq: u64,
    /// The sync epoch it was written in (see `SlotTable::sync`).
    pub epoch: u64,
    /// The line and sequence number of the newest record of this copy known durable when a
    /// later one was written.
    pub durable: u64,
    pub durable_seq: u64,
    /// A record written to this copy after `durable`, and replaced without a sync since,
    /// named a line other than `durable` and `newest`.
    pub mixed: bool,
}

impl CopyState {
    /// A copy holding record `seq` of line key `k`, durable.
    pub fn durable(k: u64, seq: u64) -> Self {
        Self {
            newest: k,
            newest_seq: seq,
            epoch: 0,
            durable: k,
            durable_seq: seq,
            mixed: false,
        }
    }
}

/// Bit 0 of a slot's flags: the copy holding the newest record.
const COPY: u8 = 1;
/// Bits 1–2: how the other copy's line relates to the key (see the module doc).
const REL_SHIFT: u8 = 1;
const REL_MASK: u8 = 0b110;
/// Newest record names the key; the other copy no line.
const REL_OTHER_NONE: u8 = 0;
/// Newest record and the other copy name the key.
const REL_OTHER_SAME: u8 = 1;
/// Newest record names no line; the other copy names the key (which may be [`NO_LINE`]).
const REL_NEWEST_NONE: u8 = 2;
/// Newest record names the key; the other copy's line is in the stripe's `others`.
const REL_OTHER_LISTED: u8 = 3;
/// Bits 3–7: which of the table's [`Highs`] the key's high 32 bits are; [`HIGH_LISTED`]: the
/// whole key is in the stripe's `wide` map (the table of high halves was full).
const HIGH_SHIFT: u8 = 3;
const LOW_FLAGS: u8 = (1 << HIGH_SHIFT) - 1;
const HIGH_LISTED: u8 = 31;

/// The high halves of the keys the table holds (docs/design.md §13): a slot's key is its low
/// 32 bits in the keys array and, in 5 bits of its flags, the index of its high half here. A
/// key's high half is its volume and the top 16 bits of its line index, so a few entries
/// serve every slot: 0 (volume 0, lines below 2^32), the empty slot's (all ones), one a
/// volume. Append-only: an index once given names the same value for the table's life.
#[derive(Debug)]
struct Highs {
    values: [AtomicU32; HIGH_LISTED as usize],
    len: AtomicUsize,
    grow: Mutex<()>,
}

impl Highs {
    /// Index 0 is high half 0, index 1 that of [`NO_LINE`] and [`ODD_LINE`].
    fn new() -> Self {
        let h = Highs {
            values: std::array::from_fn(|_| AtomicU32::new(0)),
            len: AtomicUsize::new(2),
            grow: Mutex::new(()),
        };
        h.values[1].store((NO_LINE >> 32) as u32, Relaxed);
        h
    }

    /// The high half at `index` (below [`HIGH_LISTED`]).
    #[inline]
    fn get(&self, index: u8) -> u32 {
        self.values[index as usize].load(Acquire)
    }

    /// The index of `high`, added if new; [`HIGH_LISTED`] when the table is full.
    #[inline]
    fn index(&self, high: u32) -> u8 {
        let find = |n: usize| (0..n).find(|&i| self.values[i].load(Acquire) == high);
        if let Some(i) = find(self.len.load(Acquire)) {
            return i as u8;
        }
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.len.load(Acquire);
        if let Some(i) = find(n) {
            return i as u8;
        }
        if n == self.values.len() {
            return HIGH_LISTED;
        }
        self.values[n].store(high, Release);
        self.len.store(n + 1, Release);
        n as u8
    }
}

/// Dirty masks, as wide as a line's sub-blocks need.
#[derive(Debug)]
enum Masks {
    U8(Box<[AtomicU8]>),
    U16(Box<[AtomicU16]>),
    U32(Box<[AtomicU32]>),
    U64(Box<[AtomicU64]>),
}

/// `zeroed_*(n)`: `n` atomics, zero, in memory the allocator hands out zeroed (`calloc`: a
/// large block is mapped lazily, so its pages are first touched by the threads scanning
/// their slots, not filled by one thread before the scan; docs/design.md §13).
macro_rules! zeroed {
    ($name:ident, $int:ty, $atomic:ty) => {
        pub(super) fn $name(n: usize) -> Box<[$atomic]> {
            const _: () = assert!(
                std::mem::size_of::<$int>() == std::mem::size_of::<$atomic>()
                    && std::mem::align_of::<$int>() == std::mem::align_of::<$atomic>()
            );
            let ints: Box<[$int]> = vec![0; n].into_boxed_slice();
            // SAFETY: the atomic type has the same size and bit validity as the integer
            // (std's documentation) and, asserted above at compile time, the same alignment:
            // the slice's memory is a valid slice of as many atomics, and dropping the box
            // frees it with the layout it was allocated with. `into_raw` gave the box up, so
            // nothing else refers to the memory. Exercised by every recovery
            // (`zeroed_arrays_hold_zeros_and_store` checks them directly).
            unsafe { Box::from_raw(Box::into_raw(ints) as *mut [$atomic]) }
        }
    };
}
zeroed!(zeroed_u8, u8, AtomicU8);
zeroed!(zeroed_u16, u16, AtomicU16);
zeroed!(zeroed_u32, u32, AtomicU32);
zeroed!(zeroed_u64, u64, AtomicU64);

impl Masks {
    fn new(slots: usize, bits: u32) -> Self {
        match bits {
            0..=8 => Masks::U8(zeroed_u8(slots)),
            9..=16 => Masks::U16(zeroed_u16(slots)),
            17..=32 => Masks::U32(zeroed_u32(slots)),
            _ => Masks::U64(zeroed_u64(slots)),
        }
    }

    fn get(&self, i: usize) -> u64 {
        match self {
            Masks::U8(m) => u64::from(m[i].load(Relaxed)),
            Masks::U16(m) => u64::from(m[i].load(Relaxed)),
            Masks::U32(m) => u64::from(m[i].load(Relaxed)),
            Masks::U64(m) => m[i].load(Relaxed),
        }
    }

    /// Stores `v`, which must fit the width (the table checks records against it).
    fn set(&self, i: usize, v: u64) {
        match self {
            Masks::U8(m) => m[i].store(v as u8, Relaxed),
            Masks::U16(m) => m[i].store(v as u16, Relaxed),
            Masks::U32(m) => m[i].store(v as u32, Relaxed),
            Masks::U64(m) => m[i].store(v, Relaxed),
        }
    }

    /// The widest mask held.
    fn max(&self) -> u64 {
        match self {
            Masks::U8(_) => u8::MAX.into(),
            Masks::U16(_) => u16::MAX.into(),
            Masks::U32(_) => u32::MAX.into(),
            Masks::U64(_) => u64::MAX,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Masks::U8(m) => m.len(),
            Masks::U16(m) => m.len() * 2,
            Masks::U32(m) => m.len() * 4,
            Masks::U64(m) => m.len() * 8,
        }
    }
}

/// One lock stripe's share of the slots: what does not fit the arrays.
#[derive(Debug, Default)]
pub(super) struct Stripe {
    /// Slots written since the last sync made them durable: both copies' crash states.
    unsettled: HashMap<u32, [CopyState; 2]>,
    /// Settled slots whose other copy names a line the flags cannot tell.
    others: HashMap<u32, u64>,
    /// Slots whose newest record names a line that does not fit a key, exactly.
    odd: HashMap<u32, (u32, u64)>,
    /// Slots whose key's high half is not in the table's [`Highs`] (it was full): the key.
    wide: HashMap<u32, u64>,
    /// The sequence number of the stripe's next record: a slot is always in the same
    /// stripe, so its records' numbers grow, and stripes do not share a counter.
    next_seq: u64,
}

/// What a slot's key change asks of its stripe's `wide` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WideChange {
    /// Nothing (the key's high half is in the table, and was).
    Keep,
    /// The key's high half is not in the table: the map holds the key.
    Insert(u64),
    /// The slot's key was in the map and is not any more.
    Remove,
}

impl WideChange {
    /// Whether the map must change.
    fn needed(self) -> bool {
        self != WideChange::Keep
    }

    /// Applies the change for `slot` to its stripe's map.
    fn apply(self, slot: u32, wide: &mut HashMap<u32, u64>) {
        match self {
            WideChange::Keep => {}
            WideChange::Insert(k) => {
                wide.insert(slot, k);
            }
            WideChange::Remove => {
                wide.remove(&slot);
            }
        }
    }
}

/// Every slot's state (see the module doc). The arrays are atomics so that a stripe's lock
/// guards its slots' entries without `unsafe`; they are read and written under it only.
#[derive(Debug)]
pub(super) struct Shadow {
    /// The keys' low 32 bits; their high halves are named by the flags (see [`Highs`]).
    keys: Box<[AtomicU32]>,
    highs: Highs,
    flags: Box<[AtomicU8]>,
    dirty: Masks,
    stripes: Box<[Mutex<Stripe>]>,
    /// Most unsettled slots a stripe keeps room for between syncs (see `settle`).
    room: usize,
}

/// A slot's stripe, locked: its state is read and changed through this.
pub(super) struct SlotGuard<'a> {
    shadow: &'a Shadow,
    stripe: MutexGuard<'a, Stripe>,
    slot: u32,
}

impl Shadow {
    /// `slots` slots, each empty in both copies, durable; dirty masks of `mask_bits` bits;
    /// a stripe keeps room for `unsettled_limit` slots.
    pub fn new(slots: u32, mask_bits: u32, unsettled_limit: usize) -> Self {
        let shadow = Self::new_unset(slots, mask_bits, unsettled_limit);
        for slot in 0..slots {
            shadow.reset(slot);
        }
        shadow
    }

    /// As [`new`](Self::new), every slot *unset* (its arrays zero, not yet a state): each
    /// must be [`restore`](Self::restore)d or [`reset`](Self::reset) before the table uses
    /// it. Recovery sets every slot it scans, so the arrays' pages are first written by the
    /// scanning threads, in parallel, rather than filled by one thread before the scan
    /// (docs/design.md §13).
    pub fn new_unset(slots: u32, mask_bits: u32, unsettled_limit: usize) -> Self {
        let n = slots as usize;
        Self {
            keys: zeroed_u32(n),
            highs: Highs::new(),
            flags: zeroed_u8(n),
            dirty: Masks::new(n, mask_bits),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            room: unsettled_limit,
        }
    }

    /// Recovery: `slot` holds no record in either copy (an unset slot, or one with no
    /// state in any stripe's maps).
    pub fn reset(&self, slot: u32) {
        let i = slot as usize;
        self.keys[i].store(NO_LINE as u32, Relaxed);
        // The next record goes to copy 0, as on a device never written; the key is NO_LINE
        // (high half 1).
        self.flags[i].store(
            COPY | REL_NEWEST_NONE << REL_SHIFT | 1 << HIGH_SHIFT,
            Relaxed,
        );
        self.dirty.set(i, 0);
    }

    /// Numbers the next records of every stripe from `first` on.
    pub fn start_sequence(&mut self, first: u64) {
        for s in self.stripes.iter_mut() {
            s.get_mut().unwrap_or_else(|e| e.into_inner()).next_seq = first;
        }
    }

    /// Slots written since a sync last settled them.
    #[cfg(test)]
    pub fn unsettled(&self) -> usize {
        self.stripes
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).unsettled.len())
            .sum()
    }

    /// The widest dirty mask a slot may hold.
    pub fn mask_max(&self) -> u64 {
        self.dirty.max()
    }

    /// Heap bytes (the arrays, and the stripes' maps as allocated now).
    pub fn memory_bytes(&self) -> usize {
        let maps: usize = self
            .stripes
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.unsettled.capacity() * (4 + std::mem::size_of::<[CopyState; 2]>() + 1)
                    + s.others.capacity() * (4 + 8 + 1)
                    + s.odd.capacity() * (4 + 16 + 1)
                    + s.wide.capacity() * (4 + 8 + 1)
            })
            .sum();
        self.keys.len() * 4
            + self.flags.len()
            + self.dirty.bytes()
            + std::mem::size_of_val(&*self.stripes)
            + maps
    }

    /// Slot `i`'s key (its stripe is `st`, locked).
    #[inline]
    fn key(&self, i: usize, st: &Stripe) -> u64 {
        let h = self.flags[i].load(Relaxed) >> HIGH_SHIFT;
        if h == HIGH_LISTED {
            st.wide[&(i as u32)]
        } else {
            u64::from(self.highs.get(h)) << 32 | u64::from(self.keys[i].load(Relaxed))
        }
    }

    /// Sets slot `i`'s key to `k` and its copy and relation bits to `low`; returns what the
    /// slot's stripe's `wide` map must do (the caller holds or takes the stripe's lock).
    #[inline]
    #[must_use]
    fn set_key(&self, i: usize, k: u64, low: u8) -> WideChange {
        let was = self.flags[i].load(Relaxed) >> HIGH_SHIFT;
        let h = self.highs.index((k >> 32) as u32);
        self.keys[i].store(k as u32, Relaxed);
        self.flags[i].store(low | h << HIGH_SHIFT, Relaxed);
        if h == HIGH_LISTED {
            WideChange::Insert(k)
        } else if was == HIGH_LISTED {
            WideChange::Remove
        } else {
            WideChange::Keep
        }
    }

    /// Sets slot `i`'s copy and relation bits to `low`, its key unchanged.
    #[inline]
    fn set_low_flags(&self, i: usize, low: u8) {
        let f = self.flags[i].load(Relaxed);
        self.flags[i].store(f & !LOW_FLAGS | low, Relaxed);
    }

    /// Locks `slot`'s stripe.
    pub fn lock(&self, slot: u32) -> SlotGuard<'_> {
        SlotGuard {
            shadow: self,
            stripe: self.stripes[slot as usize % STRIPES]
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
            slot,
        }
    }

    /// Settles every unsettled slot whose copies were both written in epochs up to
    /// `durable`: their records are durable. A copy written after the one the flags name as
    /// newest (a write that failed, which may have landed) keeps its slot unsettled.
    pub fn settle(&self, durable: u64) {
        for stripe in self.stripes.iter() {
            let mut st = stripe.lock().unwrap_or_else(|e| e.into_inner());
            if st.unsettled.is_empty() {
                continue;
            }
            let Stripe {
                unsettled,
                others,
                wide,
                ..
            } = &mut *st;
            unsettled.retain(|&slot, copies| {
                let i = slot as usize;
                let copy = (self.flags[i].load(Relaxed) & COPY) as usize;
                let (newest, other) = (&copies[copy], &copies[1 - copy]);
                if newest.epoch > durable
                    || other.epoch > durable
                    || other.newest_seq > newest.newest_seq
                {
                    return true;
                }
                let (n, o) = (newest.newest, other.newest);
                let rel = if n == NO_LINE {
                    // Settled, the slot's key is the other copy's line.
                    self.set_key(i, o, copy as u8 | REL_NEWEST_NONE << REL_SHIFT)
                        .apply(slot, wide);
                    REL_NEWEST_NONE
                } else if o == NO_LINE {
                    REL_OTHER_NONE
                } else if o == n && n != ODD_LINE {
                    REL_OTHER_SAME
                } else {
                    others.insert(slot, o);
                    REL_OTHER_LISTED
                };
                self.set_low_flags(i, copy as u8 | rel << REL_SHIFT);
                false
            });
            // Room for the stripe's share of the limit stays (refilling it after each sync
            // would cost the writes that do); more, left by a burst, is given back.
            let keep = self.room + 8;
            if unsettled.capacity() > 2 * keep.max(unsettled.len()) {
                unsettled.shrink_to(keep.max(unsettled.len()));
            }
        }
    }

    /// Recovery: `slot`'s newest record is in `copy` and names `newest` with `dirty`; the
    /// other copy names `other` (a [`line_key`]). Both durable. Slots are restored by several
    /// threads at once (each its own slots): the arrays are atomics, and a stripe is locked
    /// only for what its maps hold (an odd line, another copy the flags cannot tell).
    pub fn restore(&self, slot: u32, copy: u8, newest: Option<(u32, u64)>, other: u64, dirty: u64) {
        let i = slot as usize;
        let n = line_key(newest);
        let stripe = || {
            self.stripes[i % STRIPES]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
        };
        if n == ODD_LINE {
            stripe()
                .odd
                .insert(slot, newest.expect("an odd key is a line"));
        }
        let (k, rel) = if n == NO_LINE {
            (other, REL_NEWEST_NONE)
        } else if other == NO_LINE {
            (n, REL_OTHER_NONE)
        } else if other == n && n != ODD_LINE {
            (n, REL_OTHER_SAME)
        } else {
            stripe().others.insert(slot, other);
            (n, REL_OTHER_LISTED)
        };
        let change = self.set_key(i, k, copy | rel << REL_SHIFT);
        if change.needed() {
            change.apply(slot, &mut stripe().wide);
        }
        self.dirty.set(i, dirty & self.dirty.max());
    }
}

impl SlotGuard<'_> {
    fn flags(&self) -> u8 {
        self.shadow.flags[self.slot as usize].load(Relaxed)
    }

    fn rel(&self) -> u8 {
        (self.flags() & REL_MASK) >> REL_SHIFT
    }

    /// The copy holding the newest record.
    pub fn copy(&self) -> u8 {
        self.flags() & COPY
    }

    /// The newest record's line, as a [`line_key`].
    pub fn newest_key(&self) -> u64 {
        if self.rel() == REL_NEWEST_NONE {
            NO_LINE
        } else {
            self.shadow.key(self.slot as usize, &self.stripe)
        }
    }

    /// The newest record's line.
    pub fn line(&self) -> Option<(u32, u64)> {
        match self.newest_key() {
            NO_LINE => None,
            ODD_LINE => self.stripe.odd.get(&self.slot).copied(),
            k => Some(key_line(k)),
        }
    }

    /// Whether the stripe holds its share of unsettled slots (a sync should come first).
    pub fn crowded(&self) -> bool {
        self.stripe.unsettled.len() >= self.shadow.room
    }

    /// A sequence number for the slot's next record, above all its earlier ones.
    pub fn next_seq(&mut self) -> u64 {
        let n = self.stripe.next_seq;
        self.stripe.next_seq += 1;
        n
    }

    /// The newest record's dirty sub-blocks.
    pub fn dirty(&self) -> u64 {
        self.shadow.dirty.get(self.slot as usize)
    }

    /// Both copies' crash states (a settled slot's, rebuilt: both durable).
    pub fn copies(&self) -> [CopyState; 2] {
        if let Some(c) = self.stripe.unsettled.get(&self.slot) {
            return *c;
        }
        let k = self.shadow.key(self.slot as usize, &self.stripe);
        let (newest, other) = match self.rel() {
            REL_OTHER_NONE => (k, NO_LINE),
            REL_OTHER_SAME => (k, k),
            REL_NEWEST_NONE => (NO_LINE, k),
            _ => (k, self.stripe.others[&self.slot]),
        };
        let copy = self.copy() as usize;
        let mut c = [CopyState::durable(other, SETTLED_OTHER_SEQ); 2];
        c[copy] = CopyState::durable(newest, SETTLED_NEWEST_SEQ);
        c
    }

    /// The slot's copies for a record write about to start (the slot is unsettled from now
    /// until a sync settles it).
    pub fn copies_mut(&mut self) -> &mut [CopyState; 2] {
        if !self.stripe.unsettled.contains_key(&self.slot) {
            let c = self.copies();
            self.stripe.others.remove(&self.slot);
            // The relation bits now only say whether the newest record names a line.
            let i = self.slot as usize;
            let newest = c[self.copy() as usize].newest;
            let rel = if newest == NO_LINE {
                REL_NEWEST_NONE
            } else {
                REL_OTHER_NONE
            };
            self.shadow
                .set_key(i, newest, self.copy() | rel << REL_SHIFT)
                .apply(self.slot, &mut self.stripe.wide);
            self.stripe.unsettled.insert(self.slot, c);
        }
        self.stripe
            .unsettled
            .get_mut(&self.slot)
            .expect("inserted above")
    }

    /// A record written to `copy` landed: it is the newest, naming `line` with `dirty`.
    pub fn written(&mut self, copy: u8, line: Option<(u32, u64)>, dirty: u64) {
        let i = self.slot as usize;
        let k = line_key(line);
        if k == ODD_LINE {
            self.stripe
                .odd
                .insert(self.slot, line.expect("an odd key is a line"));
        } else {
            self.stripe.odd.remove(&self.slot);
        }
        let rel = if k == NO_LINE {
            REL_NEWEST_NONE
        } else {
            REL_OTHER_NONE
        };
        self.shadow
            .set_key(i, k, copy | rel << REL_SHIFT)
            .apply(self.slot, &mut self.stripe.wide);
        self.shadow.dirty.set(i, dirty);
    }
}

#[cfg(test)]
mod zeroed_tests {
    use super::*;

    /// The zeroed arrays read zero everywhere, take stores and drop (freeing what
    /// `vec!` allocated); a shadow of unset slots each reset is the shadow `new` makes.
    #[test]
    fn zeroed_arrays_hold_zeros_and_store() {
        let n = (1 << 20) + 3;
        let a = zeroed_u32(n);
        assert_eq!(a.len(), n);
        assert!(a.iter().all(|x| x.load(Relaxed) == 0));
        a[n - 1].store(7, Relaxed);
        assert_eq!(a[n - 1].load(Relaxed), 7);
        let (b, c, d) = (zeroed_u8(5), zeroed_u16(0), zeroed_u64(9));
        b[4].store(3, Relaxed);
        d[8].store(u64::MAX, Relaxed);
        assert_eq!(
            (b[4].load(Relaxed), c.len(), d[8].load(Relaxed)),
            (3, 0, u64::MAX)
        );
        for bits in [8, 16, 32, 64] {
            let unset = Shadow::new_unset(100, bits, 10);
            for slot in 0..100 {
                unset.reset(slot);
            }
            assert_eq!(
                format!("{unset:?}"),
                format!("{:?}", Shadow::new(100, bits, 10))
            );
        }
    }
}
