//! The executor's event queue: events pop in `(time, seq)` order, `seq` being the order in
//! which they were scheduled, exactly as from one binary heap on `(time, seq)`.
//!
//! Two structures share the work. Many events are scheduled for the current instant (a
//! closed-loop request arrives when its predecessor is acknowledged, a zero-length op completes
//! when issued: two in five of the speed benchmark's events); they go to a FIFO, `now`, at O(1) each way. The rest, future device
//! completions, host CPU steps and timers, go to `later`, a radix heap on their time: the
//! clock never goes back, so an event is filed in the bucket of the highest bit in which its
//! time differs from the clock's (O(1), no comparisons), and only when the buckets below are
//! empty is the lowest non-empty one split around its earliest time. An event moves down at
//! most once per bit, in practice a few times, against the `log n` data-dependent branches a
//! comparison heap spends on every pop.
//!
//! Why the order is the single heap's: the clock only moves forward, to the time of the event
//! popped. Every event in `now` was scheduled while the clock read `clock`, for time `clock`;
//! any event in `later` for that same time was scheduled before the clock reached it (an
//! event scheduled at `clock` for `clock` goes to `now`), so its `seq` is smaller than every
//! `seq` in `now`. Hence: pop `later`'s events at `clock` (`due`, sorted by `seq`), then `now`
//! in FIFO (= `seq`) order, then split `later` again, which moves the clock. The
//! `reference_order` proptest checks this against a `BinaryHeap` on random schedules.

use std::collections::VecDeque;

use tiercache_core::Nanos;

use super::events::{Event, What};

/// Buckets of the radix heap: bucket `b` (1 to 64) holds times whose highest bit differing
/// from the clock's is bit `b - 1`.
const BUCKETS: usize = 65;

/// Events by `(time, seq)`; see the module doc.
#[derive(Debug)]
pub(super) struct EventQueue {
    /// The time of the last event popped: nothing may be scheduled before it.
    clock: Nanos,
    /// Events scheduled so far (the next `seq`).
    seq: u64,
    /// Events scheduled at `clock` for `clock`, in `seq` order.
    now: VecDeque<Event>,
    /// Events of `later` at `clock`, by decreasing `seq` (popped from the end).
    due: Vec<Event>,
    /// Events after `clock`: bucket `b` holds those whose time differs from `clock` first in
    /// bit `b - 1` (bucket 0 unused: such events are in `due`).
    buckets: [Vec<Event>; BUCKETS],
    /// Bit `b - 1` set when bucket `b` is not empty.
    filled: u64,
}

/// The bucket of `time` (after `clock`).
#[inline]
fn bucket(time: Nanos, clock: Nanos) -> usize {
    debug_assert!(time > clock);
    (u64::BITS - (time ^ clock).leading_zeros()) as usize
}

impl EventQueue {
    /// An empty queue at time 0.
    pub(super) fn new() -> Self {
        Self {
            clock: 0,
            seq: 0,
            now: VecDeque::with_capacity(256),
            due: Vec::with_capacity(64),
            buckets: std::array::from_fn(|_| Vec::new()),
            filled: 0,
        }
    }

    /// True when no event is pending.
    pub(super) fn is_empty(&self) -> bool {
        self.now.is_empty() && self.due.is_empty() && self.filled == 0
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
        let e = Event {
            time,
            seq: self.seq,
            what,
        };
        if time == self.clock {
            self.now.push_back(e);
            return;
        }
        let b = bucket(time, self.clock);
        self.buckets[b].push(e);
        self.filled |= 1 << (b - 1);
    }

    /// Removes the earliest event, advancing the clock to its time.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if self.due.is_empty() {
            if let Some(e) = self.now.pop_front() {
                return Some(e);
            }
            if self.filled == 0 {
                return None;
            }
            self.advance();
        }
        self.due.pop()
    }

    /// Moves the clock to the earliest time in `later` (nothing is due and `now` is empty):
    /// splits the lowest non-empty bucket around it, its events at that time becoming `due`.
    fn advance(&mut self) {
        debug_assert!(self.due.is_empty() && self.now.is_empty());
        let b = self.filled.trailing_zeros() as usize + 1;
        let mut events = std::mem::take(&mut self.buckets[b]);
        self.filled &= !(1 << (b - 1));
        let earliest = events.iter().map(|e| e.time).min().expect("filled bucket");
        self.clock = earliest;
        for e in events.drain(..) {
            if e.time == earliest {
                self.due.push(e);
            } else {
                // Every other event of bucket `b` shares the bits above `b - 1` with the new
                // clock and differs from it below: a lower bucket.
                let nb = bucket(e.time, earliest);
                debug_assert!(nb < b);
                self.buckets[nb].push(e);
                self.filled |= 1 << (nb - 1);
            }
        }
        // Keep the emptied bucket's allocation.
        self.buckets[b] = events;
        if self.due.len() > 1 {
            self.due.sort_unstable_by_key(|e| std::cmp::Reverse(e.seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// `(time, seq, id)` of a popped event (every test event is an arrival of task `id`).
    fn key(e: Event) -> (Nanos, u64, u32) {
        match e.what {
            What::Arrive(id) => (e.time, e.seq, id),
            other => panic!("not a test event: {other:?}"),
        }
    }

    proptest! {
        /// Any schedule that never goes back in time pops in the order one binary heap on
        /// `(time, seq)` gives. Each step pops one event (advancing the clock) and schedules
        /// 0–3 events at offsets from the clock, many of them zero, some far ahead (high buckets).
        #[test]
        fn reference_order(steps in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just(0u64), 0u64..4, 0u64..1000, 0u64..1 << 40], 0..4), any::<bool>()),
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
                    reference.push(Reverse((clock + off, seq, id)));
                }
                if pop {
                    let (a, b) = (q.pop().map(key), reference.pop().map(|r| r.0));
                    prop_assert_eq!(a, b);
                    if let Some((time, _, _)) = a {
                        clock = time;
                    }
                }
            }
            loop {
                let (a, b) = (q.pop().map(key), reference.pop().map(|r| r.0));
                prop_assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
            prop_assert!(q.is_empty());
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
