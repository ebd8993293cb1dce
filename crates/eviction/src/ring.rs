//! A CLOCK as a ring of slot numbers scanned in order (docs/design.md §4.4).
//!
//! A clock whose lines only leave at the hand and only enter behind it (CAR's T1 and T2) is a
//! FIFO of slots: a hand step reads the next entry of one contiguous array, and a line going
//! round is written at the tail, where the previous write was. The linked list it replaces
//! touched the hand line's links, its neighbour's and the tail's: random cache lines. Entries
//! are packed at the width the slot numbers need ([`PackedLinks`], entry `i` is link `i % 2`
//! of node `i / 2`), so a ring of `n` entries takes what one link per slot did.
//!
//! The ring knows nothing of residency: a line leaving other than at the hand stays in the
//! ring as a stale entry, which its owner recognises and skips ([`Ring::retain`] purges them
//! when the ring is full).

use crate::packed::PackedLinks;
use crate::Slot;

/// A bounded double-ended queue of slot numbers, packed.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    entries: PackedLinks,
    /// Room, in entries (the slot limit).
    cap: u32,
    /// Index of the front (the hand: oldest) entry.
    head: u32,
    /// Entries held, stale ones included.
    len: u32,
}

impl Ring {
    /// An empty ring of room for `cap` entries naming slots `< values`.
    pub(crate) fn new(cap: usize, values: usize) -> Self {
        Ring {
            entries: PackedLinks::new(cap.div_ceil(2).max(1), values.max(1)),
            cap: cap as u32,
            head: 0,
            len: 0,
        }
    }

    /// Entries held (stale ones included).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the ring has no room for another entry.
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.cap
    }

    /// Array index of the `i`-th entry from the front (`i < cap`).
    #[inline(always)]
    fn index(&self, i: u32) -> u32 {
        let j = self.head + i;
        if j >= self.cap {
            j - self.cap
        } else {
            j
        }
    }

    #[inline(always)]
    fn read(&self, at: u32) -> Slot {
        self.entries.get(at >> 1, (at & 1) as usize)
    }

    #[inline(always)]
    fn write(&mut self, at: u32, slot: Slot) {
        self.entries.set(at >> 1, (at & 1) as usize, slot);
    }

    /// The `i`-th entry from the front, if there are that many.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> Option<Slot> {
        (i < self.len as usize).then(|| self.read(self.index(i as u32)))
    }

    /// The front (hand) entry.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<Slot> {
        self.get(0)
    }

    /// Removes the front entry.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<Slot> {
        let s = self.front()?;
        self.head = self.index(1);
        self.len -= 1;
        Some(s)
    }

    /// Appends `slot` at the back (the newest end). The ring must not be full.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, slot: Slot) {
        debug_assert!(!self.is_full(), "ring full");
        let at = self.index(self.len);
        self.write(at, slot);
        self.len += 1;
    }

    /// Puts `slot` at the front (next under the hand). The ring must not be full.
    pub(crate) fn push_front(&mut self, slot: Slot) {
        debug_assert!(!self.is_full(), "ring full");
        self.head = if self.head == 0 {
            self.cap - 1
        } else {
            self.head - 1
        };
        self.len += 1;
        let at = self.head;
        self.write(at, slot);
    }

    /// Keeps, in order, the entries for which `keep` answers true (called front to back, once
    /// per entry). In place: nothing allocates.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Slot) -> bool) {
        let mut kept = 0;
        for i in 0..self.len {
            let s = self.read(self.index(i));
            if keep(s) {
                let at = self.index(kept);
                self.write(at, s);
                kept += 1;
            }
        }
        self.len = kept;
    }

    /// The same entries in a ring of room for `cap` entries (at least [`Ring::len`]) naming
    /// slots `< values`.
    pub(crate) fn resized(&self, cap: usize, values: usize) -> Self {
        debug_assert!(cap >= self.len());
        let mut out = Ring::new(cap, values);
        for i in 0..self.len as usize {
            out.push_back(self.get(i).expect("within len"));
        }
        out
    }

    /// Hints that the `i`-th entry from the front is read soon.
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        if i < self.cap as usize {
            self.entries.prefetch(self.index(i as u32) >> 1);
        }
    }

    /// Heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.entries.memory_bytes()
    }
}

/// Per-slot flag bit (shared layout of the policies built on [`Clocks`]): which of the two
/// clocks holds the slot (`0` or `1`).
pub(crate) const LIST: u8 = 1;
/// Per-slot flag bit: the slot is resident (its newest entry in its clock's ring is live).
pub(crate) const RESIDENT: u8 = 8;
/// Bits 1 and 2 of the flag byte are the policy's own (a reference bit, a test period);
/// bits 4–5 and 6–7 count the slot's stale entries in clock 0's and clock 1's ring.
const STALE_SHIFT: u32 = 4;
/// Most stale entries of one slot in one ring before the ring is purged.
const STALE_MAX: u8 = 3;

/// Stale entries of a slot with flags `f` in clock `list`'s ring.
#[inline(always)]
fn stale(f: u8, list: usize) -> u8 {
    f >> (STALE_SHIFT + 2 * list as u32) & 3
}

/// The stale-count bits of flags `f` (kept whatever else becomes of the slot).
#[inline(always)]
pub(crate) fn stale_bits(f: u8) -> u8 {
    f & 0xf0
}

/// Two CLOCKs as [`Ring`]s over slots whose flag bytes the owner keeps (CAR's T1 and T2,
/// CLOCK-Pro's cold and hot clocks). Lines enter at a clock's back (newest end) and leave at
/// its hand (front). A line that leaves otherwise ([`Clocks::remove`]) leaves a stale entry,
/// counted in its flag byte: a slot's stale entries in a ring are older than its live one
/// (entries enter at the back; [`Clocks::push_front`] purges first when that would break
/// it), so the hand drops the first `stale` entries of a slot it meets. A ring that fills or
/// a slot with [`STALE_MAX`] stale entries in it purges the ring: O(ring), nothing allocates.
#[derive(Debug, Clone)]
pub(crate) struct Clocks {
    rings: [Ring; 2],
    /// Live lines in each clock.
    lens: [usize; 2],
}

impl Clocks {
    /// Two empty clocks over slots `< slot_limit`.
    pub(crate) fn new(slot_limit: usize) -> Self {
        Clocks {
            rings: [
                Ring::new(slot_limit, slot_limit),
                Ring::new(slot_limit, slot_limit),
            ],
            lens: [0; 2],
        }
    }

    /// Live lines in clock `list`.
    #[inline(always)]
    pub(crate) fn len(&self, list: usize) -> usize {
        self.lens[list]
    }

    /// The ring of clock `list` (stale entries included: for hints).
    #[inline(always)]
    pub(crate) fn ring(&self, list: usize) -> &Ring {
        &self.rings[list]
    }

    /// The live entries at clock `list`'s hand and after it, for a victim hint: `None` when
    /// the hand's entry is stale (a hint names only a line in the order: the partition's
    /// numbering maps a stale entry's number to no slot), the second dropped when stale. A
    /// slot's stale entries are older than its live one, so an entry is stale exactly when
    /// it is the oldest of its slot's and the slot has a stale count here.
    #[inline(always)]
    pub(crate) fn live_front(&self, flags: &[u8], list: usize) -> Option<(Slot, Option<Slot>)> {
        let ring = &self.rings[list];
        let v = ring.front()?;
        if stale(flags[v as usize], list) != 0 {
            return None;
        }
        // `v` has no stale entry, so the second entry is another slot's oldest here: stale
        // exactly when that slot has a stale count.
        let then = ring.get(1).filter(|&t| stale(flags[t as usize], list) == 0);
        Some((v, then))
    }

    /// Drops every stale entry from clock `list`'s ring (the slots' counts there become 0).
    fn purge(&mut self, flags: &mut [u8], list: usize) {
        let one = 1 << (STALE_SHIFT + 2 * list as u32);
        self.rings[list].retain(|s| {
            let f = &mut flags[s as usize];
            if stale(*f, list) > 0 {
                *f -= one;
                false
            } else {
                true
            }
        });
    }

    /// Appends `slot` at the back of clock `list`; its flags must already say resident in
    /// `list`.
    #[inline]
    pub(crate) fn push(&mut self, flags: &mut [u8], list: usize, slot: Slot) {
        debug_assert_eq!(
            flags[slot as usize] & (RESIDENT | LIST),
            RESIDENT | list as u8
        );
        if self.rings[list].is_full() {
            // Live entries are fewer than the slots (this one is not among them): the rest
            // are stale.
            self.purge(flags, list);
        }
        self.rings[list].push_back(slot);
        self.lens[list] += 1;
    }

    /// Puts `slot` at clock `list`'s hand (flags as for [`Clocks::push`]): the one entry not
    /// made at a back, so the ring is purged first if the slot has a stale entry there.
    pub(crate) fn push_front(&mut self, flags: &mut [u8], list: usize, slot: Slot) {
        debug_assert_eq!(
            flags[slot as usize] & (RESIDENT | LIST),
            RESIDENT | list as u8
        );
        if stale(flags[slot as usize], list) > 0 || self.rings[list].is_full() {
            self.purge(flags, list);
        }
        self.rings[list].push_front(slot);
        self.lens[list] += 1;
    }

    /// The live line at clock `list`'s hand, stale entries before it dropped; `None` when the
    /// clock holds no live line.
    #[inline]
    pub(crate) fn hand(&mut self, flags: &mut [u8], list: usize) -> Option<Slot> {
        if self.lens[list] == 0 {
            return None;
        }
        loop {
            let s = self.rings[list]
                .front()
                .expect("a live line is in the ring");
            let f = &mut flags[s as usize];
            if stale(*f, list) == 0 {
                debug_assert_eq!(*f & (RESIDENT | LIST), RESIDENT | list as u8);
                return Some(s);
            }
            *f -= 1 << (STALE_SHIFT + 2 * list as u32);
            self.rings[list].pop_front();
        }
    }

    /// Takes the line [`Clocks::hand`] returned off clock `list` (its flags are the caller's
    /// to change: [`RESIDENT`] cleared when it leaves, or the line pushed again).
    #[inline]
    pub(crate) fn pop(&mut self, list: usize) {
        self.rings[list].pop_front();
        self.lens[list] -= 1;
    }

    /// `slot` leaves its clock other than at the hand (if resident): its entry stays, stale;
    /// its flags keep only their stale counts.
    pub(crate) fn remove(&mut self, flags: &mut [u8], slot: Slot) {
        let f = flags[slot as usize];
        if f & RESIDENT == 0 {
            return;
        }
        let list = (f & LIST) as usize;
        if stale(f, list) == STALE_MAX {
            self.purge(flags, list);
        }
        flags[slot as usize] =
            stale_bits(flags[slot as usize]) + (1 << (STALE_SHIFT + 2 * list as u32));
        self.lens[list] -= 1;
    }

    /// The same clocks over slots `< slot_limit` (not fewer than now).
    pub(crate) fn grown(&self, slot_limit: usize) -> Self {
        Clocks {
            rings: [
                self.rings[0].resized(slot_limit, slot_limit),
                self.rings[1].resized(slot_limit, slot_limit),
            ],
            lens: self.lens,
        }
    }

    /// Heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.rings[0].memory_bytes() + self.rings[1].memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    proptest! {
        /// A ring reads back as a `VecDeque` through pushes at both ends, pops, retains and a
        /// resize, wrapping round its array at every width.
        #[test]
        fn ring_matches_a_deque(
            cap in 1usize..20,
            extra in 0usize..(1 << 20),
            ops in prop::collection::vec((0u8..4, any::<u32>()), 0..200),
        ) {
            let values = cap + extra;
            let mut r = Ring::new(cap, values);
            let mut m: VecDeque<u32> = VecDeque::new();
            for (op, x) in ops {
                let s = x % values as u32;
                match op {
                    0 if m.len() < cap => { r.push_back(s); m.push_back(s); }
                    1 if m.len() < cap => { r.push_front(s); m.push_front(s); }
                    2 => prop_assert_eq!(r.pop_front(), m.pop_front()),
                    3 => { r.retain(|e| e % 3 != s % 3); m.retain(|e| e % 3 != s % 3); }
                    _ => {}
                }
                prop_assert_eq!(r.len(), m.len());
                prop_assert_eq!(r.is_full(), m.len() == cap);
                for (i, e) in m.iter().enumerate() {
                    prop_assert_eq!(r.get(i), Some(*e));
                }
                prop_assert_eq!(r.get(m.len()), None);
            }
            let g = r.resized(cap + 3, values + 3);
            for (i, e) in m.iter().enumerate() {
                prop_assert_eq!(g.get(i), Some(*e));
            }
        }
    }
}
