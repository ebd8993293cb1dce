//! Intrusive doubly linked list over slot numbers: two links per slot, packed at the width
//! the table's slots need (`tiercache_eviction::packed`, docs/design.md §13), no allocation.

use tiercache_eviction::packed::{PackedLinks, NO_LINK};
use tiercache_eviction::Slot;

const NIL: u32 = NO_LINK;
/// Link 0 of a slot: towards the front (older); link 1: towards the back.
const PREV: usize = 0;
const NEXT: usize = 1;

/// A list of slots in insertion order, with O(1) unlink.
#[derive(Debug, Clone)]
pub struct SlotList {
    links: PackedLinks,
    head: u32,
    tail: u32,
}

impl SlotList {
    /// Empty list able to hold slots `0..slots`.
    pub fn new(slots: usize) -> Self {
        Self {
            links: PackedLinks::new(slots, slots),
            head: NIL,
            tail: NIL,
        }
    }

    /// Appends `slot` (which must not be linked).
    pub fn push_back(&mut self, slot: Slot) {
        self.links.set_pair(slot, [self.tail, NIL]);
        if self.tail == NIL {
            self.head = slot;
        } else {
            self.links.set(self.tail, NEXT, slot);
        }
        self.tail = slot;
    }

    /// Unlinks `slot` (which must be linked).
    pub fn unlink(&mut self, slot: Slot) {
        let [p, n] = self.links.pair(slot);
        if p == NIL {
            debug_assert_eq!(self.head, slot);
            self.head = n;
        } else {
            self.links.set(p, NEXT, n);
        }
        if n == NIL {
            debug_assert_eq!(self.tail, slot);
            self.tail = p;
        } else {
            self.links.set(n, PREV, p);
        }
        self.links.set_pair(slot, [NIL, NIL]);
    }

    /// Slots from the front (oldest) to the back.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                None
            } else {
                let s = cur;
                cur = self.links.get(s, NEXT);
                Some(s)
            }
        })
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.links.memory_bytes()
    }
}
