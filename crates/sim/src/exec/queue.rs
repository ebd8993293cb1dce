//! The executor's event queue: events pop in `(time, seq)` order, `seq` being the order in
//! which they were scheduled, exactly as from one binary heap on `(time, seq)`.
//!
//! Two structures share the work. Half of all events are scheduled for the current instant (a
//! closed-loop request arrives when its predecessor is acknowledged, a zero-length op completes
//! when issued); they go to a FIFO, `now`, at O(1) each way. The rest, future device
//! completions and timers, go to `later`, a 4-ary min-heap on the packed key
//! `time << 64 | seq`: half the depth of a binary heap, one 128-bit comparison per child.
//!
//! Why the order is the single heap's: the clock only moves forward, to the time of the event
//! popped. Every event in `now` was scheduled while the clock read `clock`, for time `clock`;
//! any event in `later` for that same time was scheduled before the clock reached it (an
//! event scheduled at `clock` for `clock` goes to `now`), so its `seq` is smaller than every
//! `seq` in `now`. Hence: pop `later` while its minimum is at `clock`, then `now` in FIFO
//! (= `seq`) order, then `later` again, which moves the clock. The `reference_order` proptest
//! checks this against a `BinaryHeap` on random schedules.

use std::collections::VecDeque;

use tiercache_core::Nanos;

use super::events::{Event, What};

/// A future event: packed `(time, seq)` key and what it does.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u128,
    what: What,
}

impl Entry {
    fn event(self) -> Event {
        Event {
            time: (self.key >> 64) as Nanos,
            seq: self.key as u64,
            what: self.what,
        }
    }
}

/// Children per node of the `later` heap.
const ARITY: usize = 4;

/// Events by `(time, seq)`; see the module doc.
#[derive(Debug)]
pub(super) struct EventQueue {
    /// The time of the last event popped: nothing may be scheduled before it.
    clock: Nanos,
    /// Events scheduled so far (the next `seq`).
    seq: u64,
    /// Events for `clock`, in `seq` order.
    now: VecDeque<Event>,
    /// Every other event: a 4-ary min-heap on `key`.
    later: Vec<Entry>,
}

impl EventQueue {
    /// An empty queue at time 0.
    pub(super) fn new() -> Self {
        Self {
            clock: 0,
            seq: 0,
            now: VecDeque::with_capacity(256),
            later: Vec::with_capacity(1024),
        }
    }

    /// Events scheduled since the start.
    #[cfg(test)]
    pub(super) fn scheduled(&self) -> u64 {
        self.seq
    }

    /// True when no event is pending.
    pub(super) fn is_empty(&self) -> bool {
        self.now.is_empty() && self.later.is_empty()
    }

    /// Schedules `what` at `time` (not before the last event popped).
    #[inline]
    pub(super) fn push(&mut self, time: Nanos, what: What) {
        assert!(
            time >= self.clock,
            "event scheduled at {time} ns, before the clock ({} ns)",
            self.clock
        );
        self.seq += 1;
        if time == self.clock {
            self.now.push_back(Event {
                time,
                seq: self.seq,
                what,
            });
            return;
        }
        self.later.push(Entry {
            key: (u128::from(time) << 64) | u128::from(self.seq),
            what,
        });
        self.sift_up(self.later.len() - 1);
    }

    /// Removes the earliest event, advancing the clock to its time.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        let later_due = self
            .later
            .first()
            .is_some_and(|e| (e.key >> 64) as Nanos == self.clock);
        if !later_due {
            if let Some(e) = self.now.pop_front() {
                return Some(e);
            }
        }
        let top = self.pop_later()?;
        self.clock = (top.key >> 64) as Nanos;
        Some(top.event())
    }

    fn pop_later(&mut self) -> Option<Entry> {
        let last = self.later.pop()?;
        if self.later.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.later[0], last);
        self.sift_down(0);
        Some(top)
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let h = &mut self.later;
        let e = h[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if h[parent].key <= e.key {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = e;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let h = &mut self.later;
        let n = h.len();
        let e = h[i];
        loop {
            let first = i * ARITY + 1;
            if first >= n {
                break;
            }
            // The smallest child; comparisons on keys only, selected without branches where
            // the compiler can.
            let mut best = first;
            let end = (first + ARITY).min(n);
            for c in first + 1..end {
                if h[c].key < h[best].key {
                    best = c;
                }
            }
            if e.key <= h[best].key {
                break;
            }
            h[i] = h[best];
            i = best;
        }
        h[i] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;

    proptest! {
        /// Any schedule that never goes back in time pops in the order one binary heap on
        /// `(time, seq)` gives. Each step pops one event (advancing the clock) and schedules
        /// 0–3 events at offsets from the clock, many of them zero.
        #[test]
        fn reference_order(steps in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just(0u64), 0u64..4, 0u64..1000], 0..4), any::<bool>()),
            1..300,
        )) {
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            let mut clock = 0;
            let mut id = 0u32;
            for (offsets, pop) in steps {
                for off in offsets {
                    seq += 1;
                    id += 1;
                    q.push(clock + off, What::Arrive(id));
                    reference.push(Event { time: clock + off, seq, what: What::Arrive(id) });
                }
                if pop {
                    let (a, b) = (q.pop(), reference.pop());
                    prop_assert_eq!(a, b);
                    if let Some(e) = a {
                        clock = e.time;
                    }
                }
            }
            loop {
                let (a, b) = (q.pop(), reference.pop());
                prop_assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
            prop_assert!(q.is_empty());
            prop_assert_eq!(q.scheduled(), seq);
        }
    }

    #[test]
    #[should_panic(expected = "before the clock")]
    fn scheduling_in_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.push(10, What::Poll);
        q.pop();
        q.push(9, What::Poll);
    }
}
