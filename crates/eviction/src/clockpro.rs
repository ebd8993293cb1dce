//! CLOCK-Pro (Jiang, Chen & Zhang, USENIX ATC '05): CLOCK with LIRS's reuse-distance idea.
//! Lines are *hot* (reused within a short distance) or *cold*; a cold line gets a *test
//! period* during which a reuse proves it hot, and its key outlives its data in the test
//! (a non-resident cold line) so that a reuse soon after its eviction counts too. The share
//! of the cache kept for cold lines, `m_c`, adapts.
//!
//! This is the paper's algorithm with its hands on two clocks instead of one, as the
//! CLOCK-Pro approximations in operating systems do: hot lines in one CLOCK, resident cold
//! lines in another, non-resident test keys in a FIFO of at most `c` keys (so every structure
//! stays a slot-indexed list and every step is O(1) amortised):
//! - a hit sets the line's reference bit;
//! - a miss whose key is a non-resident test key: the test proved a reuse, so `m_c` grows by
//!   one (at most `c`) and the line enters the hot clock; otherwise the line enters the cold
//!   clock in its test period. Either way unreferenced, at its clock's newest end;
//! - an eviction runs the cold hand from the cold clock's oldest line: referenced and in its
//!   test period, the line turns hot (`m_c` + 1) and moves to the hot clock; referenced and not
//!   in test, it starts a test period and goes round again; unreferenced, it leaves, its key
//!   kept as a non-resident test key if it was in its test period;
//! - whenever hot lines exceed `c - m_c`, the hot hand runs: a referenced hot line loses its
//!   bit and goes round; an unreferenced one turns cold (no test period) at the cold clock's
//!   newest end;
//! - a test period that ends without a reuse (a non-resident key pushed out of the FIFO by
//!   newer ones) lowers `m_c` by one (at least 1).
//!
//! `m_c` starts at `c`, libCacheSim's default (`init-ratio-cold=1`).
//!
//! Why the golden test pins a miss-ratio bound against libCacheSim `ClockPro` rather than hits:
//! libCacheSim keeps one clock (ordering hot and cold lines together), runs its test hand
//! on a separate table, and turns a returning non-resident key hot without making it resident
//! (its next access misses again); it also refuses inserts while cold lines exceed their share.
//! Those are implementation choices the paper does not make and this file does not copy.
//!
//! Pinned lines are passed over: the cold hand moves a pinned unreferenced line to the cold
//! clock's newest end unchanged; when no cold line can leave, the hot clock gives its oldest
//! unreferenced unpinned line (bits cleared as the hand passes), else `None`.
//! [`Eviction::insert_cold`] puts the line at the cold hand, unreferenced and not in test: it
//! leaves next without a test key. [`Eviction::insert_demoted`] keeps the default.

use crate::ghost::Ghosts;
use crate::ring::{stale_bits, Clocks, LIST, RESIDENT};
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const COLD: usize = 0;
const HOT: usize = 1;
/// [`ClockPro::flags`] bit: the line is hot (the clock bit of `ring.rs`'s layout).
const IS_HOT: u8 = LIST;
/// [`ClockPro::flags`] bit: the reference bit.
const REFERENCED: u8 = 2;
/// [`ClockPro::flags`] bit: a cold line in its test period.
const IN_TEST: u8 = 4;

/// CLOCK-Pro replacement.
#[derive(Debug, Clone)]
pub struct ClockPro {
    /// The cold and hot clocks, each a ring of slots from its hand to its newest line
    /// (docs/design.md §4.4).
    clocks: Clocks,
    /// Per slot: [`IS_HOT`], [`REFERENCED`], [`IN_TEST`], and [`Clocks`]' residency and stale
    /// counts.
    flags: Vec<u8>,
    /// Key of each resident slot (kept as a test key when it leaves in test).
    keys: Vec<u64>,
    /// Non-resident cold keys in their test period, newest at the front.
    tests: Ghosts<1>,
    /// Target number of resident cold lines.
    cold_target: usize,
    capacity: usize,
    /// Incoming key whose test lookup the last `evict` made, and its answer.
    pending: Option<(u64, bool)>,
}

impl ClockPro {
    /// An empty CLOCK-Pro of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        let capacity = capacity.min(slot_limit);
        ClockPro {
            clocks: Clocks::new(slot_limit),
            flags: vec![0; slot_limit],
            keys: vec![0; slot_limit],
            tests: Ghosts::new(capacity),
            cold_target: capacity,
            capacity,
            pending: None,
        }
    }

    /// Hot lines, resident cold lines, non-resident test keys, and the cold target `m_c`.
    pub fn sizes(&self) -> [usize; 4] {
        [
            self.clocks.len(HOT),
            self.clocks.len(COLD),
            self.tests.total_len(),
            self.cold_target,
        ]
    }

    /// Looks `key` up (and removes it) among the non-resident test keys.
    fn look_up(&mut self, key: LineKey) -> bool {
        let found = self.tests.remove(key).is_some();
        if found {
            self.cold_target = (self.cold_target + 1).min(self.capacity);
        }
        found
    }

    /// Keeps `key` as a non-resident test key; the oldest one's test ends unreused when the
    /// FIFO is full, lowering the cold target.
    fn keep_test_key(&mut self, key: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.tests.total_len() >= self.capacity {
            self.tests.pop_back(0);
            self.cold_target = self.cold_target.saturating_sub(1).max(1);
        }
        self.tests.push_front(0, LineKey(key));
    }

    /// Runs the hot hand until hot lines fit in `c - m_c` (or every hot line was passed).
    fn balance_hot(&mut self) {
        let hot_limit = self.capacity - self.cold_target.min(self.capacity);
        // Each line's bit is cleared at most once: two passes find an unreferenced line.
        let mut steps = 2 * self.clocks.len(HOT);
        while self.clocks.len(HOT) > hot_limit && steps > 0 {
            steps -= 1;
            let Some(hand) = self.clocks.hand(&mut self.flags, HOT) else {
                return;
            };
            self.clocks.pop(HOT);
            let f = &mut self.flags[hand as usize];
            if *f & REFERENCED != 0 {
                *f = stale_bits(*f) | RESIDENT | IS_HOT;
                self.clocks.push(&mut self.flags, HOT, hand);
            } else {
                *f = stale_bits(*f) | RESIDENT;
                self.clocks.push(&mut self.flags, COLD, hand);
            }
        }
    }

    /// The cold hand: the victim, or `None` when every cold line is pinned and unreferenced.
    fn run_cold(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        let mut passed_pinned = 0;
        while let Some(hand) = self.clocks.hand(&mut self.flags, COLD) {
            let f = self.flags[hand as usize];
            let kept = stale_bits(f) | RESIDENT;
            if f & REFERENCED != 0 {
                self.clocks.pop(COLD);
                if f & IN_TEST != 0 {
                    self.flags[hand as usize] = kept | IS_HOT;
                    self.clocks.push(&mut self.flags, HOT, hand);
                    self.cold_target = (self.cold_target + 1).min(self.capacity);
                    self.balance_hot();
                } else {
                    self.flags[hand as usize] = kept | IN_TEST;
                    self.clocks.push(&mut self.flags, COLD, hand);
                }
                passed_pinned = 0;
            } else if pinned(hand) {
                if passed_pinned >= self.clocks.len(COLD) {
                    return None;
                }
                passed_pinned += 1;
                self.clocks.pop(COLD);
                self.clocks.push(&mut self.flags, COLD, hand);
            } else {
                self.clocks.pop(COLD);
                self.flags[hand as usize] = stale_bits(f);
                if f & IN_TEST != 0 {
                    self.keep_test_key(self.keys[hand as usize]);
                }
                return Some(hand);
            }
        }
        None
    }

    /// The hot clock's oldest unreferenced unpinned line (when no cold line can leave).
    fn evict_hot(&mut self, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        for _ in 0..2 * self.clocks.len(HOT) {
            let hand = self.clocks.hand(&mut self.flags, HOT)?;
            self.clocks.pop(HOT);
            let f = &mut self.flags[hand as usize];
            if *f & REFERENCED == 0 && !pinned(hand) {
                *f = stale_bits(*f);
                return Some(hand);
            }
            *f = stale_bits(*f) | RESIDENT | IS_HOT;
            self.clocks.push(&mut self.flags, HOT, hand);
        }
        None
    }

    fn enter(&mut self, slot: Slot, key: LineKey, was_test: bool) {
        self.keys[slot as usize] = key.0;
        let kept = stale_bits(self.flags[slot as usize]) | RESIDENT;
        if was_test {
            self.flags[slot as usize] = kept | IS_HOT;
            self.clocks.push(&mut self.flags, HOT, slot);
            self.balance_hot();
        } else {
            self.flags[slot as usize] = kept | IN_TEST;
            self.clocks.push(&mut self.flags, COLD, slot);
        }
    }
}

impl Eviction for ClockPro {
    fn name(&self) -> &'static str {
        "clock-pro"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        let was_test = match self.pending.take() {
            Some((k, found)) if k == key.0 => found,
            _ => self.look_up(key),
        };
        self.enter(slot, key, was_test);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        self.flags[slot as usize] |= REFERENCED;
    }

    /// The slot's entry stays in its ring, stale (skipped by the hand; `ring.rs`).
    fn remove(&mut self, slot: Slot) {
        self.clocks.remove(&mut self.flags, slot);
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        if incoming != NO_INCOMING {
            let found = match self.pending {
                Some((k, found)) if k == incoming.0 => found,
                _ => self.look_up(incoming),
            };
            self.pending = Some((incoming.0, found));
        }
        self.run_cold(pinned).or_else(|| self.evict_hot(pinned))
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.tests.prefetch(key);
    }

    fn len(&self) -> usize {
        self.clocks.len(COLD) + self.clocks.len(HOT)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `c` becomes `lines` (at most the slot limit); `m_c` is clamped to it and the test keys
    /// are bounded by it (oldest dropped). Hot lines above the new `c - m_c` turn cold; the
    /// caller evicts the excess.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.flags.len());
        self.cold_target = self.cold_target.min(self.capacity);
        self.tests.set_limit(self.capacity);
        self.balance_hot();
    }

    /// At the cold hand, unreferenced and not in test: the next victim, leaving no test key.
    /// A test key of the same line counts as a reuse (`m_c` + 1) as on any miss, but the line
    /// still enters cold.
    fn insert_cold(&mut self, slot: Slot, key: LineKey) {
        if !matches!(self.pending.take(), Some((k, _)) if k == key.0) {
            self.look_up(key);
        }
        self.keys[slot as usize] = key.0;
        self.flags[slot as usize] = stale_bits(self.flags[slot as usize]) | RESIDENT;
        self.clocks.push_front(&mut self.flags, COLD, slot);
    }

    fn memory_bytes(&self) -> usize {
        self.clocks.memory_bytes()
            + self.flags.capacity()
            + self.keys.capacity() * 8
            + self.tests.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.flags.len() {
            self.clocks = self.clocks.grown(slot_limit);
            self.flags.resize(slot_limit, 0);
            self.keys.resize(slot_limit, 0);
        }
    }

    /// A hit sets a bit in the slot's flag byte: that is what to load.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        tiercache_core::hint::prefetch(self.flags.as_ptr().wrapping_add(slot as usize));
    }

    /// The cold hand's entry and the one after it (a guess: a referenced line goes round or
    /// turns hot, a stale entry is skipped). Also starts loading the next entry's key, the
    /// test bucket the victim's key goes to, with the test FIFO full the key its end drops,
    /// and the ring a few entries on.
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let list = if self.clocks.len(COLD) > 0 { COLD } else { HOT };
        let ring = self.clocks.ring(list);
        let (v, then) = self.clocks.live_front(&self.flags, list)?;
        ring.prefetch(16);
        if let Some(t) = then {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
        }
        self.tests.prefetch(LineKey(self.keys[v as usize]));
        if self.tests.total_len() >= self.capacity {
            self.tests.prefetch_oldest(0);
        }
        Some((v, then))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNPINNED: &dyn Fn(Slot) -> bool = &|_| false;

    #[test]
    fn reuse_in_test_turns_a_line_hot() {
        let mut p = ClockPro::new(4, 4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        assert_eq!(p.sizes(), [0, 4, 0, 4]);
        p.hit(0);
        // Line 0 was reused in its test: hot (m_c stays at c = 4, so the hot hand turns it
        // cold again at once, without a test period); line 1 leaves, its key kept in test.
        assert_eq!(p.evict(LineKey(10), UNPINNED), Some(1));
        p.insert(1, LineKey(10));
        assert_eq!(p.sizes(), [0, 4, 1, 4]);
        // Key 1 returns within its test: it enters hot, after the hand lowers nothing.
        let v = p.evict(LineKey(1), UNPINNED).unwrap();
        assert_eq!(v, 2);
        p.insert(v, LineKey(1));
        assert_eq!(p.sizes()[2], 1, "key 2 kept in test, key 1 left it");
    }

    #[test]
    fn unreused_tests_lower_the_cold_target() {
        let mut p = ClockPro::new(4, 4);
        for s in 0..4 {
            p.insert(s, LineKey(s as u64));
        }
        for k in 10..20u64 {
            let v = p.evict(LineKey(k), UNPINNED).unwrap();
            p.insert(v, LineKey(k));
        }
        // Ten test keys entered a FIFO of four: six tests ended unreused.
        assert_eq!(p.sizes()[2], 4);
        assert_eq!(p.sizes()[3], 1, "at least 1");
    }

    #[test]
    fn all_pinned_gives_none() {
        let mut p = ClockPro::new(3, 3);
        for s in 0..3 {
            p.insert(s, LineKey(s as u64));
        }
        assert_eq!(p.evict(LineKey(9), &|_| true), None);
        assert_eq!(p.evict(LineKey(9), &|s| s != 2), Some(2));
    }
}
