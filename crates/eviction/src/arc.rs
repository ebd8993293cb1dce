//! ARC, the adaptive replacement cache (Megiddo & Modha, FAST '03).
//!
//! Resident slots sit in T1 (seen once recently) or T2 (seen at least twice); the keys of lines
//! evicted from them are remembered in the ghost lists B1 and B2. A target size `p` for T1
//! adapts on ghost hits: a hit in B1 grows it by `max(|B2|/|B1|, 1)`, a hit in B2 shrinks it by
//! `max(|B1|/|B2|, 1)` (floating point, clamped to `0..=c`).
//!
//! This follows libCacheSim `ARC` step for step, object counts standing for sizes:
//! - a miss that hits a ghost adapts `p` and the line enters T2; any other miss enters T1;
//!   a hit moves the slot to the front of T2;
//! - eviction after a ghost hit is REPLACE: take T1's LRU (into B1) when
//!   `|T1| > 0 && (|T1| > p || (|T1| == p && hit was in B2))` or when T2 is empty, else
//!   T2's LRU (into B2);
//! - eviction on a miss in all four lists: if `|T1| + |B1| >= c`, drop B1's LRU and REPLACE
//!   when B1 is not empty, else evict T1's LRU without remembering it; otherwise drop B2's
//!   LRU when the directory holds `2c` entries and REPLACE.
//!
//! The incoming key given to [`Eviction::evict`] is looked up in the ghosts before the victim
//! is chosen, exactly as libCacheSim's lookup precedes its eviction; further evictions for the
//! same incoming key and the following [`Eviction::insert`] reuse that answer. Pinned slots are
//! passed over: the victim is the least recent unpinned slot of the chosen list, or of the
//! other list when all of the chosen one are pinned.
//!
//! The ghosts hold at most `c` keys together; remembering a key when they are full drops the
//! oldest key of the longer ghost list (B1 on a tie). With the core's protocol that never
//! happens unless the capacity shrank ([`Eviction::set_capacity`]) or pinned lines forced an
//! eviction from T2 where ARC would evict from T1. [`Eviction::insert_cold`] is `insert`: ARC
//! places a line by its ghost history.

use crate::ghost::Ghosts;
use crate::list::Lists;
use crate::{Eviction, Slot, NO_INCOMING};
use tiercache_core::LineKey;

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 0;
const B2: usize = 1;

/// Adaptive replacement cache.
#[derive(Debug, Clone)]
pub struct ArcPolicy {
    lists: Lists<2>,
    /// Which of T1/T2 holds each slot.
    in_t2: Vec<bool>,
    /// Key of each resident slot (needed to remember it in a ghost list).
    keys: Vec<u64>,
    ghosts: Ghosts<2>,
    /// Target size of T1, in lines.
    p: f64,
    /// Cache size `c` in lines.
    capacity: usize,
    /// Ghost lookup made by the last `evict`: (incoming key, ghost list it was found in).
    pending: Option<(u64, Option<usize>)>,
}

impl ArcPolicy {
    /// An empty ARC of `capacity` lines over slots `< slot_limit`.
    pub fn new(capacity: usize, slot_limit: usize) -> Self {
        ArcPolicy {
            lists: Lists::new(slot_limit),
            in_t2: vec![false; slot_limit],
            keys: vec![0; slot_limit],
            // The directory holds at most 2c entries and evictions happen with c resident, so
            // B1 + B2 never exceed c (an eviction requested below capacity would drop the
            // oldest ghost of the longer list rather than grow the pool).
            ghosts: Ghosts::new(capacity),
            p: 0.0,
            capacity,
            pending: None,
        }
    }

    /// Current target size of T1 (for tests and diagnostics).
    pub fn target_t1(&self) -> f64 {
        self.p
    }

    /// Sizes |T1|, |T2|, |B1|, |B2|.
    pub fn list_sizes(&self) -> [usize; 4] {
        [
            self.lists.len(T1),
            self.lists.len(T2),
            self.ghosts.len(B1),
            self.ghosts.len(B2),
        ]
    }

    /// Looks `key` up in B1/B2; on a hit adapts `p` and forgets the ghost entry.
    fn ghost_lookup(&mut self, key: LineKey) -> Option<usize> {
        let list = self.ghosts.remove(key)?;
        let (b1, b2) = (self.ghosts.len(B1) as f64, self.ghosts.len(B2) as f64);
        let c = self.capacity as f64;
        if list == B1 {
            // Sizes before the removal.
            let delta = (b2 / (b1 + 1.0)).max(1.0);
            self.p = (self.p + delta).min(c);
        } else {
            let delta = (b1 / (b2 + 1.0)).max(1.0);
            self.p = (self.p - delta).max(0.0);
        }
        Some(list)
    }

    /// The REPLACE choice: the list to evict from, T1 or T2.
    fn replace_list(&self, hit_in_b2: bool) -> usize {
        let t1 = self.lists.len(T1);
        let t1f = t1 as f64;
        let take_t1 =
            (t1 > 0 && (t1f > self.p || (t1f == self.p && hit_in_b2))) || self.lists.len(T2) == 0;
        if take_t1 {
            T1
        } else {
            T2
        }
    }

    /// Least recent unpinned slot of `list`, else of the other list.
    fn pick(&self, list: usize, pinned: &dyn Fn(Slot) -> bool) -> Option<(usize, Slot)> {
        let other = 1 - list;
        self.lists
            .oldest_unpinned(list, pinned)
            .map(|s| (list, s))
            .or_else(|| {
                self.lists
                    .oldest_unpinned(other, pinned)
                    .map(|s| (other, s))
            })
    }

    /// Unlinks `slot` from `list` and, if `remember`, puts its key at the front of the
    /// matching ghost list (T1 → B1, T2 → B2).
    fn evict_slot(&mut self, list: usize, slot: Slot, remember: bool) {
        self.lists.unlink(list, slot);
        if remember {
            let ghost = if list == T1 { B1 } else { B2 };
            self.ghosts
                .push_front(ghost, LineKey(self.keys[slot as usize]));
        }
    }
}

impl Eviction for ArcPolicy {
    fn name(&self) -> &'static str {
        "arc"
    }

    fn insert(&mut self, slot: Slot, key: LineKey) {
        let ghost_hit = match self.pending.take() {
            Some((k, found)) if k == key.0 => found,
            _ => self.ghost_lookup(key),
        };
        self.keys[slot as usize] = key.0;
        let list = if ghost_hit.is_some() { T2 } else { T1 };
        self.in_t2[slot as usize] = list == T2;
        self.lists.push_front(list, slot);
    }

    #[inline]
    fn hit(&mut self, slot: Slot) {
        let from = if self.in_t2[slot as usize] { T2 } else { T1 };
        self.in_t2[slot as usize] = true;
        self.lists.move_to_front(from, T2, slot);
    }

    fn remove(&mut self, slot: Slot) {
        if self.lists.is_linked(slot) {
            let list = if self.in_t2[slot as usize] { T2 } else { T1 };
            self.lists.unlink(list, slot);
        }
    }

    fn evict(&mut self, incoming: LineKey, pinned: &dyn Fn(Slot) -> bool) -> Option<Slot> {
        // Several evictions for one incoming line (the core freeing more room) share the
        // first lookup, as libCacheSim's eviction loop shares its lookup flags. Evictions for
        // no line (a shrink) look nothing up and leave a pending lookup alone.
        let ghost_hit = if incoming == NO_INCOMING {
            None
        } else {
            let found = match self.pending {
                Some((k, found)) if k == incoming.0 => found,
                _ => self.ghost_lookup(incoming),
            };
            self.pending = Some((incoming.0, found));
            found
        };
        if let Some(ghost) = ghost_hit {
            let (list, slot) = self.pick(self.replace_list(ghost == B2), pinned)?;
            self.evict_slot(list, slot, true);
            return Some(slot);
        }
        // Miss in all four lists (case IV).
        let (t1, b1) = (self.lists.len(T1), self.ghosts.len(B1));
        let (t2, b2) = (self.lists.len(T2), self.ghosts.len(B2));
        if t1 + b1 >= self.capacity {
            if b1 > 0 {
                let (list, slot) = self.pick(self.replace_list(false), pinned)?;
                self.ghosts.pop_back(B1);
                self.evict_slot(list, slot, true);
                Some(slot)
            } else {
                // T1 alone fills the cache: its LRU leaves without a ghost.
                let (list, slot) = self.pick(T1, pinned)?;
                self.evict_slot(list, slot, list == T2);
                Some(slot)
            }
        } else {
            let (list, slot) = self.pick(self.replace_list(false), pinned)?;
            if t1 + b1 + t2 + b2 >= 2 * self.capacity {
                self.ghosts.pop_back(B2);
            }
            self.evict_slot(list, slot, true);
            Some(slot)
        }
    }

    #[inline]
    fn prefetch_incoming(&self, key: LineKey) {
        self.ghosts.prefetch(key);
    }

    /// A hit reads the slot's list flag and moves its links: both are loaded.
    #[inline]
    fn prefetch(&self, slot: Slot) {
        self.lists.prefetch(slot);
        tiercache_core::hint::prefetch(self.in_t2.as_ptr().wrapping_add(slot as usize));
    }

    /// The least recent line of the list a miss without a ghost hit would evict from, and the
    /// line after it (a guess: a ghost hit may choose the other list). Also starts loading the
    /// next line's key, the ghost bucket the victim's key goes to, and the ghost key the miss
    /// would drop (B1's oldest when `|T1| + |B1| >= c`, else B2's).
    #[inline]
    fn victim_hint(&self) -> Option<(Slot, Option<Slot>)> {
        let (t1, b1) = (self.lists.len(T1), self.ghosts.len(B1));
        let list = if t1 + b1 >= self.capacity && b1 == 0 {
            T1
        } else {
            self.replace_list(false)
        };
        let v = self
            .lists
            .back(list)
            .or_else(|| self.lists.back(1 - list))?;
        let then = self.lists.newer(v);
        if let Some(t) = then {
            tiercache_core::hint::prefetch(self.keys.as_ptr().wrapping_add(t as usize));
        }
        self.ghosts.prefetch(LineKey(self.keys[v as usize]));
        self.ghosts
            .prefetch_oldest(if t1 + b1 >= self.capacity { B1 } else { B2 });
        Some((v, then))
    }

    fn len(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    /// `c` becomes `lines` (at most the slot limit); the target `p` is clamped to it and the
    /// ghosts B1 + B2 are bounded by it (dropping the oldest keys of the longer list). T1 and
    /// T2 shrink through the caller's evictions.
    fn set_capacity(&mut self, lines: usize) {
        self.capacity = lines.min(self.in_t2.len());
        self.p = self.p.min(self.capacity as f64);
        self.ghosts.set_limit(self.capacity);
    }

    fn memory_bytes(&self) -> usize {
        self.lists.memory_bytes()
            + self.in_t2.capacity()
            + self.keys.capacity() * 8
            + self.ghosts.memory_bytes()
    }

    fn grow_slots(&mut self, slot_limit: usize) {
        if slot_limit > self.in_t2.len() {
            self.lists.grow(slot_limit);
            self.in_t2.resize(slot_limit, false);
            self.keys.resize(slot_limit, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(p: &mut ArcPolicy, keys: impl IntoIterator<Item = u64>) {
        for k in keys {
            p.insert(k as Slot, LineKey(k));
        }
    }

    #[test]
    fn ghost_hits_adapt_the_target_and_enter_t2() {
        let mut p = ArcPolicy::new(4, 8);
        fill(&mut p, 0..4);
        assert_eq!(p.list_sizes(), [4, 0, 0, 0]);
        // |T1| = c and B1 empty: T1's LRU leaves without a ghost.
        assert_eq!(p.evict(LineKey(10), &|_| false), Some(0));
        p.insert(0, LineKey(10));
        assert_eq!(p.list_sizes(), [4, 0, 0, 0]);
        p.hit(1); // 1 → T2
                  // |T1| + |B1| = 3 < c: REPLACE takes T1's LRU (2) into B1.
        assert_eq!(p.evict(LineKey(11), &|_| false), Some(2));
        p.insert(2, LineKey(11));
        assert_eq!(p.list_sizes(), [3, 1, 1, 0]);
        // Key 2 comes back: a B1 hit raises p by max(|B2|/|B1|, 1) = 1 and it enters T2.
        let victim = p.evict(LineKey(2), &|_| false).unwrap();
        assert_eq!(p.target_t1(), 1.0);
        p.insert(victim, LineKey(2));
        assert_eq!(p.list_sizes(), [2, 2, 1, 0]);
    }

    #[test]
    fn repeated_evictions_for_one_ghost_key_keep_its_ghost_hit() {
        let mut p = ArcPolicy::new(4, 8);
        fill(&mut p, 0..4);
        p.hit(3);
        assert_eq!(p.evict(LineKey(10), &|_| false), Some(0));
        p.insert(0, LineKey(10));
        // Key 1 goes to B1; then key 1 returns and the core frees two slots for it.
        assert_eq!(p.evict(LineKey(20), &|_| false), Some(1));
        p.insert(1, LineKey(20));
        let a = p.evict(LineKey(1), &|_| false).unwrap();
        let b = p.evict(LineKey(1), &|_| false).unwrap();
        assert_ne!(a, b);
        p.insert(a, LineKey(1));
        // It entered T2 (with 3) although the second eviction found no ghost entry left.
        assert_eq!(p.list_sizes()[1], 2);
    }

    #[test]
    fn b2_hit_lowers_the_target_but_not_below_zero() {
        let mut p = ArcPolicy::new(2, 4);
        fill(&mut p, 0..2);
        p.hit(0);
        p.hit(1);
        // T2 = [1, 0]; T1 empty → REPLACE takes T2's LRU (0) into B2.
        assert_eq!(p.evict(LineKey(5), &|_| false), Some(0));
        p.insert(0, LineKey(5));
        let v = p.evict(LineKey(0), &|_| false).unwrap();
        assert_eq!(p.target_t1(), 0.0);
        p.insert(v, LineKey(0));
        assert_eq!(p.list_sizes()[1], 2);
    }

    #[test]
    fn shrinking_clamps_the_target_and_the_ghosts() {
        let mut p = ArcPolicy::new(4, 8);
        fill(&mut p, 0..4);
        // As in the test above: key 2 goes to B1 and comes back, p grows to 1.
        assert_eq!(p.evict(LineKey(10), &|_| false), Some(0));
        p.insert(0, LineKey(10));
        p.hit(1);
        assert_eq!(p.evict(LineKey(11), &|_| false), Some(2));
        p.insert(2, LineKey(11));
        let v = p.evict(LineKey(2), &|_| false).unwrap();
        p.insert(v, LineKey(2));
        assert_eq!(p.target_t1(), 1.0);
        p.set_capacity(0);
        assert_eq!((p.capacity(), p.target_t1()), (0, 0.0));
        assert_eq!(
            p.list_sizes()[2] + p.list_sizes()[3],
            0,
            "no ghost beyond c"
        );
        // The caller evicts the excess; every slot can still leave.
        let mut left = 0;
        while p.evict(crate::NO_INCOMING, &|_| false).is_some() {
            left += 1;
        }
        assert_eq!((left, p.len()), (4, 0));
        // Growing back past the slot limit is clamped to it.
        p.set_capacity(100);
        assert_eq!(p.capacity(), 8);
    }

    #[test]
    fn directory_stays_within_two_c() {
        let c = 16;
        let mut p = ArcPolicy::new(c, c);
        let mut slot_key = [u64::MAX; 16];
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (x >> 33) % 64;
            if let Some(s) = slot_key.iter().position(|&k| k == key) {
                p.hit(s as Slot);
            } else {
                let s = if (i as usize) < c {
                    i as Slot
                } else {
                    p.evict(LineKey(key), &|_| false).unwrap()
                };
                slot_key[s as usize] = key;
                p.insert(s, LineKey(key));
            }
            let [t1, t2, b1, b2] = p.list_sizes();
            assert!(t1 + t2 <= c && t1 + b1 <= c && t1 + t2 + b1 + b2 <= 2 * c);
            assert!((0.0..=c as f64).contains(&p.target_t1()));
        }
    }
}
