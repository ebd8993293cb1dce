//! Intrusive doubly linked list over slot numbers (two `u32` links per slot, no allocation).

use tiercache_eviction::Slot;

const NIL: u32 = u32::MAX;

/// A list of slots in insertion order, with O(1) unlink.
#[derive(Debug, Clone)]
pub struct SlotList {
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
}

impl SlotList {
    /// Empty list able to hold slots `0..slots`.
    pub fn new(slots: usize) -> Self {
        Self {
            prev: vec![NIL; slots],
            next: vec![NIL; slots],
            head: NIL,
            tail: NIL,
        }
    }

    /// Appends `slot` (which must not be linked).
    pub fn push_back(&mut self, slot: Slot) {
        let s = slot as usize;
        self.prev[s] = self.tail;
        self.next[s] = NIL;
        if self.tail == NIL {
            self.head = slot;
        } else {
            self.next[self.tail as usize] = slot;
        }
        self.tail = slot;
    }

    /// Unlinks `slot` (which must be linked).
    pub fn unlink(&mut self, slot: Slot) {
        let s = slot as usize;
        let (p, n) = (self.prev[s], self.next[s]);
        if p == NIL {
            debug_assert_eq!(self.head, slot);
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            debug_assert_eq!(self.tail, slot);
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[s] = NIL;
        self.next[s] = NIL;
    }

    /// Slots from the front (oldest) to the back.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                None
            } else {
                let s = cur;
                cur = self.next[s as usize];
                Some(s)
            }
        })
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.prev.capacity() + self.next.capacity()) * 4
    }
}
