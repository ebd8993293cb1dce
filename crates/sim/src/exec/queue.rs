//! The executor's event queue: events pop in `(time, seq)` order, `seq` being the order in
//! which they were scheduled, exactly as from one binary heap on `(time, seq)`.
//!
//! Three structures share the work. Many events are scheduled for the current instant (a
//! closed-loop request arrives when its predecessor is acknowledged, a zero-length op completes
//! when issued); they go to a FIFO, `now`, at O(1) each way. Events after it go to a calendar:
//! time is cut into days of `2^shift` ns, and the [`DAYS`] days from the clock's on each have
//! a bucket (day mod [`DAYS`]), unsorted, with a bitmap of the non-empty ones. An event is
//! filed once, in O(1); a pop finds the next non-empty bucket through the bitmap and takes
//! its earliest events, usually the bucket's only one. Events beyond the calendar's days wait
//! in `far`, a binary heap, and move into the calendar as the clock's day advances. The day
//! length adapts, the calendar being rebuilt (in O(events), at most once per as many pops as
//! events are queued): longer when most events are beyond it, shorter when a bucket holds
//! many events at distinct times. (A radix heap, used before, refiled an event several times
//! on its way down.)
//!
//! Why the order is the single heap's: the clock only moves forward, to the time of the event
//! popped. Every event in `now` was scheduled while the clock read `clock`, for time `clock`;
//! any other event for that same time was scheduled before the clock reached it (an event
//! scheduled at `clock` for `clock` goes to `now`), so its `seq` is smaller than every `seq` in
//! `now`. Hence: pop the calendar's events at `clock` (`due`, sorted by `seq`), then `now` in
//! FIFO (= `seq`) order, then the calendar's earliest, which moves the clock. Every calendar
//! event lies in a day from the clock's to the calendar's last, each day in its own bucket,
//! and every event of `far` lies after those days; so the first non-empty bucket from the
//! clock's day holds the earliest events. The `reference_order` proptest checks this against
//! a `BinaryHeap` on random schedules.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use tiercache_core::Nanos;

use super::events::{Event, What};

/// Days the calendar holds (a power of two).
const DAYS: usize = 512;
/// Bitmap words of the calendar.
const WORDS: usize = DAYS / 64;
/// Initial day length, log2 ns (1 µs days: a calendar of 512 µs, device latencies' scale).
const INITIAL_SHIFT: u32 = 10;
/// A bucket holding more events than this after its earliest are taken asks for shorter days,
/// if every event lies in the calendar's first quarter (halved days keep them in its first
/// half: a shrink sending events beyond it would make the calendar grow back, and it would
/// swing between the two on a workload mixing near and far events, as a cache device's
/// completions and a disk's queue).
const CROWDED: usize = 16;
/// Calendar pushes and pops that pay for a rebuild, per event the last rebuild refiled (so a
/// rebuild, which refiles at most that many and one per push since, costs a few instructions
/// per push or pop however often the days change), and the least.
const REBUILD_PAYMENT: (usize, usize) = (4, 64);

/// An event of `far`, ordered by `(time, seq)`.
#[derive(Debug, Clone, Copy)]
struct Far(Event);

impl PartialEq for Far {
    fn eq(&self, other: &Self) -> bool {
        self.0.seq == other.0.seq
    }
}
impl Eq for Far {}
impl PartialOrd for Far {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Far {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0.time, self.0.seq).cmp(&(other.0.time, other.0.seq))
    }
}

/// Events by `(time, seq)`; see the module doc.
#[derive(Debug)]
pub(super) struct EventQueue {
    /// The time of the last event popped: nothing may be scheduled before it.
    clock: Nanos,
    /// Events scheduled so far (the next `seq`).
    seq: u64,
    /// Events scheduled at `clock` for `clock`, in `seq` order.
    now: VecDeque<Event>,
    /// Calendar events at `clock`, by decreasing `seq` (popped from the end).
    due: Vec<Event>,
    /// Day length, log2 ns.
    shift: u32,
    /// The clock's day (`clock >> shift`): the calendar holds days `day..day + DAYS`.
    day: u64,
    /// Bucket `d % DAYS` holds the events of day `d`.
    buckets: Box<[Vec<Event>; DAYS]>,
    /// Bit `b` set when bucket `b` is not empty.
    filled: [u64; WORDS],
    /// Events in the calendar.
    in_calendar: usize,
    /// Events after the calendar's last day.
    far: BinaryHeap<Reverse<Far>>,
    /// Calendar pushes and pops since the calendar was last rebuilt (they pay for rebuilds).
    ops_since_rebuild: usize,
    /// Events scheduled into `far` since the calendar was last rebuilt.
    far_filed: usize,
    /// Events the last rebuild refiled.
    last_refiled: usize,
}

impl EventQueue {
    /// An empty queue at time 0.
    pub(super) fn new() -> Self {
        Self {
            clock: 0,
            seq: 0,
            now: VecDeque::with_capacity(256),
            due: Vec::with_capacity(64),
            shift: INITIAL_SHIFT,
            day: 0,
            buckets: Box::new(std::array::from_fn(|_| Vec::new())),
            filled: [0; WORDS],
            in_calendar: 0,
            far: BinaryHeap::new(),
            ops_since_rebuild: 0,
            far_filed: 0,
            last_refiled: 0,
        }
    }

    /// True when no event is pending.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.now.is_empty() && self.due.is_empty() && self.in_calendar == 0 && self.far.is_empty()
    }

    /// True when no event is queued for the clock's instant: an event scheduled now would be
    /// popped next (the calendar's events at the clock are all `due` once it got there).
    #[inline]
    pub(super) fn none_due(&self) -> bool {
        self.due.is_empty() && self.now.is_empty()
    }

    /// Schedules `what` at `time` (not before the last event popped).
    #[inline(always)]
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
        self.ops_since_rebuild += 1;
        if !self.file(e) {
            self.far_filed += 1;
            if self.far_filed > self.ops_since_rebuild / 32 + 16 {
                // More than about one event in 64 lies beyond the calendar: longer days.
                self.rebuild(self.shift + 1);
            }
        }
    }

    /// Puts `e` (after the clock) in its bucket, or in `far`; false for `far`.
    #[inline(always)]
    fn file(&mut self, e: Event) -> bool {
        let d = e.time >> self.shift;
        // `d >= self.day`: the event is not before the clock.
        if d - self.day < DAYS as u64 {
            let b = d as usize % DAYS;
            self.buckets[b].push(e);
            self.filled[b / 64] |= 1 << (b % 64);
            self.in_calendar += 1;
            true
        } else {
            self.file_far(e);
            false
        }
    }

    #[inline(never)]
    fn file_far(&mut self, e: Event) {
        self.far.push(Reverse(Far(e)));
    }

    /// Removes the earliest event, advancing the clock to its time.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if let Some(e) = self.due.pop() {
            return Some(e);
        }
        if let Some(e) = self.now.pop_front() {
            return Some(e);
        }
        self.advance()
    }

    /// Moves the clock to the earliest calendar or `far` event (nothing is due and `now` is
    /// empty) and returns it; the other events at that time become `due`.
    #[inline(always)]
    fn advance(&mut self) -> Option<Event> {
        debug_assert!(self.due.is_empty() && self.now.is_empty());
        if self.in_calendar == 0 {
            // Jump to the earliest far event's day.
            let Reverse(Far(first)) = *self.far.peek()?;
            self.set_clock(first.time);
        }
        self.ops_since_rebuild += 1;
        let b = self.first_filled();
        let bucket = &mut self.buckets[b];
        let e = if bucket.len() == 1 {
            let e = bucket.pop().expect("filled bucket");
            self.filled[b / 64] &= !(1 << (b % 64));
            e
        } else {
            // One pass finds the earliest time, where it is, and whether another event shares
            // it; usually none does, and the event leaves the bucket as the loop below would
            // take it (one `swap_remove`), without going through `due`.
            let (mut earliest, mut at, mut tie) = (bucket[0].time, 0, false);
            for (i, e) in bucket.iter().enumerate().skip(1) {
                if e.time < earliest {
                    (earliest, at, tie) = (e.time, i, false);
                } else if e.time == earliest {
                    tie = true;
                }
            }
            let e = if tie {
                let mut i = 0;
                while i < bucket.len() {
                    if bucket[i].time == earliest {
                        self.due.push(bucket.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                if bucket.is_empty() {
                    self.filled[b / 64] &= !(1 << (b % 64));
                }
                self.due.sort_unstable_by_key(|e| Reverse(e.seq));
                self.due.pop().expect("the earliest event")
            } else {
                // The bucket held another event: it is not empty.
                bucket.swap_remove(at)
            };
            let crowded = bucket.len() > CROWDED;
            if crowded && self.shift > 0 && self.far.is_empty() && self.last_day() < DAYS / 4 {
                self.in_calendar -= self.due.len() + 1;
                self.set_clock(e.time);
                // Many events at distinct times share a day: shorter days.
                self.rebuild(self.shift - 1);
                return Some(e);
            }
            e
        };
        self.in_calendar -= self.due.len() + 1;
        self.set_clock(e.time);
        Some(e)
    }

    /// The first non-empty bucket from the clock's day on (the calendar is not empty).
    #[inline]
    fn first_filled(&self) -> usize {
        let start = self.day as usize % DAYS;
        let (w, bit) = (start / 64, start % 64);
        let here = self.filled[w] & (!0u64 << bit);
        if here != 0 {
            return w * 64 + here.trailing_zeros() as usize;
        }
        for k in 1..=WORDS {
            let i = (w + k) % WORDS;
            // Back at the first word: only the bits before `start` are left.
            let bits = if i == w {
                self.filled[i] & !(!0u64 << bit)
            } else {
                self.filled[i]
            };
            if bits != 0 {
                return i * 64 + bits.trailing_zeros() as usize;
            }
        }
        unreachable!("the calendar holds an event")
    }

    /// The last non-empty day of the calendar, counted from the clock's (0 when empty).
    fn last_day(&self) -> usize {
        let start = self.day as usize % DAYS;
        let (w, bit) = (start / 64, start % 64);
        let mut last = 0;
        for (i, &word) in self.filled.iter().enumerate() {
            // The clock's word holds the first days (from `start` up) and the last (below it).
            let parts = if i == w {
                [word & (!0u64 << bit), word & !(!0u64 << bit)]
            } else {
                [word, 0]
            };
            for bits in parts.into_iter().filter(|&b| b != 0) {
                let b = i * 64 + 63 - bits.leading_zeros() as usize;
                last = last.max((b + DAYS - start) % DAYS);
            }
        }
        last
    }

    /// Sets the clock (not back), moving the far events of the days it brings into the
    /// calendar.
    #[inline(always)]
    fn set_clock(&mut self, time: Nanos) {
        debug_assert!(time >= self.clock);
        self.clock = time;
        self.day = time >> self.shift;
        if !self.far.is_empty() {
            self.migrate();
        }
    }

    /// Moves the far events now within the calendar's days into it.
    #[inline(never)]
    fn migrate(&mut self) {
        while let Some(Reverse(Far(e))) = self.far.peek() {
            if (e.time >> self.shift) - self.day >= DAYS as u64 {
                break;
            }
            let Reverse(Far(e)) = self.far.pop().expect("peeked");
            self.file(e);
        }
    }

    /// Refiles every calendar and far event with days of `2^shift` ns, unless fewer pushes
    /// and pops than [`REBUILD_PAYMENT`] asks came since the last rebuild (so rebuilds cost
    /// O(1) a push or pop).
    #[cold]
    fn rebuild(&mut self, shift: u32) {
        let (per_event, least) = REBUILD_PAYMENT;
        if self.ops_since_rebuild < per_event * self.last_refiled + least || shift >= u64::BITS {
            return;
        }
        self.ops_since_rebuild = 0;
        self.last_refiled = self.in_calendar + self.far.len();
        self.far_filed = 0;
        let mut all: Vec<Event> = self.far.drain().map(|Reverse(Far(e))| e).collect();
        for b in self.buckets.iter_mut() {
            all.append(b);
        }
        self.filled = [0; WORDS];
        self.in_calendar = 0;
        self.shift = shift;
        self.day = self.clock >> shift;
        for e in all {
            self.file(e);
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
            1..600,
        )) {
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            let mut clock = 0;
            let mut id = 0u32;
            for (offsets, pop) in steps {
                // `none_due` says exactly that nothing is queued for the clock's instant (the
                // executor then runs an arrival at it without queueing it).
                let due_now = reference.peek().is_some_and(|r: &Reverse<(Nanos, u64, u32)>| r.0 .0 == clock);
                prop_assert_eq!(q.none_due(), !due_now);
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
            drain_against(&mut q, &mut reference);
        }
    }

    /// Pops everything left, checking each against the reference.
    fn drain_against(q: &mut EventQueue, reference: &mut BinaryHeap<Reverse<(Nanos, u64, u32)>>) {
        loop {
            let (a, b) = (q.pop().map(key), reference.pop().map(|r| r.0));
            assert_eq!(a, b);
            if a.is_none() {
                break;
            }
        }
        assert!(q.is_empty());
    }

    /// Days grow while most events lie beyond the calendar and shrink when many distinct
    /// times crowd one bucket; the order stays the reference's throughout.
    #[test]
    fn days_adapt_and_keep_the_order() {
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        let (mut seq, mut id, mut clock) = (0u64, 0u32, 0u64);
        let mut push = |q: &mut EventQueue, r: &mut BinaryHeap<_>, t: Nanos| {
            seq += 1;
            id += 1;
            q.push(t, What::Arrive(id));
            r.push(Reverse((t, seq, id)));
        };
        // Far events, a millisecond apart and more, with pops between: the days lengthen.
        for i in 0..3000u64 {
            push(&mut q, &mut reference, clock + 1_000_000 + i * 997);
            if i % 2 == 1 {
                let (a, b) = (q.pop().map(key), reference.pop().map(|r| r.0));
                assert_eq!(a, b);
                clock = a.expect("queued").0;
            }
        }
        let long = q.shift;
        assert!(long > INITIAL_SHIFT, "days grew: shift {long}");
        // The far events leave; then many distinct times within one long day: the days
        // shorten.
        while let Some(a) = q.pop().map(key) {
            assert_eq!(Some(a), reference.pop().map(|r| r.0));
            clock = a.0;
        }
        for _ in 0..100 {
            for i in 0..64 {
                push(&mut q, &mut reference, clock + 1 + i * 3);
            }
            for _ in 0..64 {
                let (a, b) = (q.pop().map(key), reference.pop().map(|r| r.0));
                assert_eq!(a, b);
                clock = a.expect("queued").0;
            }
        }
        assert!(
            q.shift < long,
            "days shrank: shift {} after {long}",
            q.shift
        );
        drain_against(&mut q, &mut reference);
    }

    /// The last non-empty day, counted from the clock's, wherever the clock's bucket lies.
    #[test]
    fn last_day_counts_from_the_clock() {
        for clock_day in [0u64, 5, 63, 64, 300, 511, 512, 1000] {
            for offsets in [
                vec![1u64],
                vec![1, 70],
                vec![3, 200, 511],
                vec![64, 128, 450],
            ] {
                let mut q = EventQueue::new();
                let day = 1u64 << INITIAL_SHIFT;
                q.push(clock_day * day, What::Poll(0));
                q.pop();
                for &o in &offsets {
                    q.push((clock_day + o) * day, What::Poll(0));
                }
                let expected = *offsets.iter().max().unwrap() as usize;
                assert_eq!(q.last_day(), expected, "clock day {clock_day}, {offsets:?}");
            }
        }
    }

    /// Times near the end of time file without overflow.
    #[test]
    fn times_near_the_end_of_time() {
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        for (i, t) in [Nanos::MAX - 1, 5, Nanos::MAX - 1, 1 << 63, 6]
            .into_iter()
            .enumerate()
        {
            q.push(t, What::Arrive(i as u32));
            reference.push(Reverse((t, i as u64 + 1, i as u32)));
        }
        drain_against(&mut q, &mut reference);
    }

    #[test]
    #[should_panic(expected = "before the clock")]
    fn scheduling_in_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.push(10, What::Poll(0));
        q.pop();
        q.push(9, What::Poll(0));
    }
}
