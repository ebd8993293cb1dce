//! Ordering of concurrently executing plans.
//!
//! The policy core decides in one order (the order of `access` calls, under its lock) and its
//! plans are correct when executed one after another in that order. Plans run concurrently
//! here, so each plan registers, under the same lock, the locations it reads and writes; a
//! plan starts only after every earlier plan that writes a location it touches, or reads a
//! location it writes, has completed. Conflicting plans thus take effect in decision order and
//! the result equals serial execution; waits point only to earlier plans, so they cannot
//! deadlock.
//!
//! The engine also orders the records plans write (docs/design.md §11, "A line in one
//! slot"): a plan whose record takes a slot from a line writes that line's backend range, so
//! a later plan putting the line in another slot writes its record after; a slot's tag
//! ([`OrderingTable::register_tagged`]) says which line the plan in flight on it will leave
//! there.
//!
//! A plan that fails ends failed, and the plans waiting for it (registered while it was in
//! flight, on locations it touched) learn it and fail unrun, and so on down their own
//! waiters: they were decided on what it was to leave. A plan registered after it ended was
//! decided on the state its failure left (the engine forgets what it was to fill first) and
//! runs. `tests/ordering_schedules.rs` checks both under adversarial thread schedules
//! (shuttle, through [`Completion`]) against one-by-one execution in decision order.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

/// A location: a cache slot, or a backend line (see [`cache_slot`], [`backend_line`]).
pub type Location = u64;

/// The location of a cache slot.
pub fn cache_slot(slot: u32) -> Location {
    (1 << 63) | slot as u64
}

/// The location of a backend line (a packed `LineKey`, whose top bit is always clear).
pub fn backend_line(key: tiercache_core::LineKey) -> Location {
    key.0
}

/// How a registered plan ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    #[default]
    Running,
    Completed,
    /// It failed part-way: what it was to leave in its locations (a cache fill, say) may not
    /// be there, so later plans that counted on it must not run.
    Failed,
}

/// How a plan waits for the plans before it: set once by the thread that ran the plan,
/// waited for by the plans after it. [`Done`] (std's mutex and condition variable) is the
/// engine's; a test may put a model checker's primitives here instead (the randomized-schedule
/// tests in `tests/ordering_schedules.rs` use shuttle's), without touching production builds.
pub trait Completion: Default + Send + Sync + std::fmt::Debug + 'static {
    /// Blocks until [`set`](Self::set) was called; returns what it was given: whether the
    /// plan completed (rather than failed).
    fn wait(&self) -> bool;
    /// Ends the plan, `completed` or failed, and wakes its waiters. Called once per plan.
    fn set(&self, completed: bool);
}

/// Completion of one registered plan.
#[derive(Debug, Default)]
pub struct Done {
    outcome: Mutex<Outcome>,
    cv: Condvar,
    /// Someone waits (or waited) on `cv`: only then does `set` wake it (a wake is a system
    /// call, and most plans have no waiter). Read and written under `outcome`'s lock.
    waited: std::sync::atomic::AtomicBool,
}

impl Done {
    /// Blocks until the plan ended; whether it completed (rather than failed).
    pub fn wait(&self) -> bool {
        let mut d = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        while *d == Outcome::Running {
            self.waited
                .store(true, std::sync::atomic::Ordering::Relaxed);
            d = self.cv.wait(d).unwrap_or_else(|e| e.into_inner());
        }
        *d == Outcome::Completed
    }
}

impl Completion for Done {
    fn wait(&self) -> bool {
        Done::wait(self)
    }

    fn set(&self, completed: bool) {
        let mut d = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        // A ticket is consumed by the one `end` of its plan: a second outcome would be a plan
        // ended twice, its waiters possibly told the wrong one.
        assert_eq!(*d, Outcome::Running, "a plan ended twice");
        *d = if completed {
            Outcome::Completed
        } else {
            Outcome::Failed
        };
        // A waiter sets `waited` under the lock before it sleeps, and the lock is held here:
        // none can be missed.
        if self.waited.load(std::sync::atomic::Ordering::Relaxed) {
            self.cv.notify_all();
        }
    }
}

#[derive(Debug)]
struct LocationState<D> {
    writer: Option<Arc<D>>,
    readers: Vec<Arc<D>>,
    /// What the writers in flight leave here, as the last of them to tag it said (see
    /// [`OrderingTable::register_tagged`]); forgotten when the last writer ends.
    tag: Option<Location>,
}

impl<D> Default for LocationState<D> {
    fn default() -> Self {
        Self {
            writer: None,
            readers: Vec::new(),
            tag: None,
        }
    }
}

/// A registered plan: what it touches and whom it waits for.
#[derive(Debug)]
pub struct Ticket<D: Completion = Done> {
    done: Arc<D>,
    reads: Vec<Location>,
    writes: Vec<Location>,
    waits: Vec<Arc<D>>,
    predecessor_failed: bool,
    /// Its place in decision order (see [`OrderingTable::next_seq`]).
    seq: u64,
}

impl<D: Completion> Ticket<D> {
    /// The plan's place in its table's decision order: plans registered later have larger
    /// numbers.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Blocks until every earlier conflicting plan ended. Returns how many it waited for.
    pub fn wait_turn(&mut self) -> usize {
        let n = self.waits.len();
        for w in self.waits.drain(..) {
            self.predecessor_failed |= !w.wait();
        }
        n
    }

    /// Whether an earlier conflicting plan it waited for failed: this plan was decided on
    /// the state that one was to leave, so it must not run (and should end failed too).
    pub fn predecessor_failed(&self) -> bool {
        self.predecessor_failed
    }
}

/// The table of in-flight plans by location. Use under the policy core's lock.
#[derive(Debug)]
pub struct OrderingTable<D: Completion = Done> {
    locations: HashMap<Location, LocationState<D>>,
    /// Plans registered and not ended yet.
    in_flight: usize,
    /// Plans registered so far: the next one's [`Ticket::seq`].
    registered: u64,
}

impl<D: Completion> OrderingTable<D> {
    /// Heap bytes of the table (its buckets; the waiters' vectors are per plan in flight).
    pub fn memory_bytes(&self) -> usize {
        self.locations.capacity() * (std::mem::size_of::<(Location, LocationState<D>)>() + 1)
    }
}

impl<D: Completion> Default for OrderingTable<D> {
    fn default() -> Self {
        Self {
            locations: HashMap::new(),
            in_flight: 0,
            registered: 0,
        }
    }
}

impl<D: Completion> OrderingTable<D> {
    /// The [`Ticket::seq`] the next plan registered gets: every plan in flight now was
    /// decided before anything done now under the same lock.
    pub fn next_seq(&self) -> u64 {
        self.registered
    }

    /// Registers a plan reading `reads` and writing `writes` (duplicates allowed).
    pub fn register(&mut self, reads: Vec<Location>, writes: Vec<Location>) -> Ticket<D> {
        self.register_tagged(reads, writes, &[])
    }

    /// As [`register`](Self::register), and tags some of the written locations with what the
    /// plan leaves there (the engine: a cache slot with the line its record names), until the
    /// location's last writer in flight ends ([`tag`](Self::tag)). A written location the plan
    /// does not tag keeps the tag of the writers before it. A tag must name a location written.
    pub fn register_tagged(
        &mut self,
        mut reads: Vec<Location>,
        mut writes: Vec<Location>,
        tags: &[(Location, Location)],
    ) -> Ticket<D> {
        writes.sort_unstable();
        writes.dedup();
        reads.sort_unstable();
        reads.dedup();
        reads.retain(|r| writes.binary_search(r).is_err());
        let done = Arc::new(D::default());
        let mut waits: Vec<Arc<D>> = Vec::new();
        for &r in &reads {
            let st = self.locations.entry(r).or_default();
            if let Some(w) = &st.writer {
                waits.push(w.clone());
            }
            st.readers.push(done.clone());
        }
        for &w in &writes {
            let st = self.locations.entry(w).or_default();
            if let Some(prev) = st.writer.replace(done.clone()) {
                waits.push(prev);
            }
            waits.append(&mut st.readers);
        }
        for &(at, tag) in tags {
            // Written above, so held until this plan ends.
            let st = self
                .locations
                .get_mut(&at)
                .expect("a tagged location the plan does not write");
            st.tag = Some(tag);
        }
        waits.sort_unstable_by_key(|d| Arc::as_ptr(d) as usize);
        waits.dedup_by(|a, b| Arc::ptr_eq(a, b));
        self.in_flight += 1;
        self.registered += 1;
        Ticket {
            done,
            reads,
            writes,
            waits,
            predecessor_failed: false,
            seq: self.registered - 1,
        }
    }

    /// The plan of `ticket` completed: wakes its waiters and forgets it.
    pub fn complete(&mut self, ticket: Ticket<D>) {
        self.end(ticket, true)
    }

    /// The plan of `ticket` failed: as [`complete`](Self::complete), but its waiters learn
    /// it failed ([`Ticket::predecessor_failed`]).
    pub fn fail(&mut self, ticket: Ticket<D>) {
        self.end(ticket, false)
    }

    /// The plan of `ticket` ended, `completed` or failed.
    pub fn end(&mut self, ticket: Ticket<D>, completed: bool) {
        // Registration counted it: ending more plans than were registered means a ticket of
        // another table, whose locations this table never held.
        assert!(self.in_flight > 0, "a plan ended that was never in flight");
        // A plan ends after its turn: ending one that never waited would wake its successors
        // while the plans it conflicts with may still run, out of decision order.
        assert!(
            ticket.waits.is_empty(),
            "a plan ended before waiting its turn"
        );
        self.in_flight -= 1;
        for r in &ticket.reads {
            if let Some(st) = self.locations.get_mut(r) {
                st.readers.retain(|d| !Arc::ptr_eq(d, &ticket.done));
                if st.writer.is_none() && st.readers.is_empty() {
                    self.locations.remove(r);
                }
            }
        }
        for w in &ticket.writes {
            // A location written stays registered until its writer ends: a later writer of it
            // waits for this plan, so it cannot have ended and removed the entry first.
            let st = self
                .locations
                .get_mut(w)
                .expect("a written location left the table before its writer ended");
            if st
                .writer
                .as_ref()
                .is_some_and(|d| Arc::ptr_eq(d, &ticket.done))
            {
                // The last writer in flight ended (it waited for every earlier one): what
                // they left is no longer in flight.
                st.writer = None;
                st.tag = None;
            }
            if st.writer.is_none() && st.readers.is_empty() {
                self.locations.remove(w);
            }
        }
        // Every location is held by some plan in flight.
        debug_assert!(self.in_flight > 0 || self.locations.is_empty());
        ticket.done.set(completed);
    }

    /// Whether a plan registered now to read (or, with `writing`, write) `loc` would wait
    /// for one in flight.
    pub fn would_wait(&self, loc: Location, writing: bool) -> bool {
        self.locations
            .get(&loc)
            .is_some_and(|st| st.writer.is_some() || (writing && !st.readers.is_empty()))
    }

    /// The tag of `loc`'s writers in flight (see [`register_tagged`](Self::register_tagged)):
    /// `None` when no writer in flight tagged it.
    pub fn tag(&self, loc: Location) -> Option<Location> {
        self.locations.get(&loc).and_then(|st| st.tag)
    }

    /// Locations with plans in flight.
    pub fn len(&self) -> usize {
        self.locations.len()
    }

    /// Whether no plan is in flight.
    pub fn is_empty(&self) -> bool {
        self.locations.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Mutex as StdMutex;

    #[test]
    fn readers_share_writers_wait() {
        let mut t: OrderingTable = OrderingTable::default();
        let mut a = t.register(vec![1], vec![]);
        let mut b = t.register(vec![1], vec![]);
        assert_eq!(
            a.wait_turn() + b.wait_turn(),
            0,
            "readers do not wait for readers"
        );
        let mut c = t.register(vec![], vec![1]);
        assert_eq!(c.waits.len(), 2, "a writer waits for both readers");
        let mut d = t.register(vec![1], vec![]);
        assert_eq!(d.waits.len(), 1, "a reader waits for the writer");
        t.complete(a);
        t.complete(b);
        assert_eq!(c.wait_turn(), 2);
        t.complete(c);
        assert_eq!(d.wait_turn(), 1);
        t.complete(d);
        assert!(t.is_empty());
    }

    #[test]
    fn a_tag_lasts_while_its_location_has_writers_in_flight() {
        let mut t: OrderingTable = OrderingTable::default();
        let mut a = t.register_tagged(vec![], vec![1, 7], &[(1, 70)]);
        assert_eq!((t.tag(1), t.tag(7)), (Some(70), None));
        // A later writer that tags nothing keeps the tag; one that tags replaces it.
        let mut b = t.register(vec![], vec![1]);
        assert_eq!(t.tag(1), Some(70));
        let mut c = t.register_tagged(vec![], vec![1], &[(1, 71)]);
        assert_eq!(t.tag(1), Some(71));
        assert_eq!(a.wait_turn(), 0);
        t.complete(a);
        assert_eq!(t.tag(1), Some(71), "later writers are still in flight");
        b.wait_turn();
        t.complete(b);
        c.wait_turn();
        t.complete(c);
        assert_eq!(t.tag(1), None, "no writer in flight: nothing tagged");
        // Readers alone hold no tag.
        let mut r = t.register(vec![1], vec![]);
        assert_eq!(t.tag(1), None);
        r.wait_turn();
        t.complete(r);
        assert!(t.is_empty());
    }

    #[test]
    fn a_failure_reaches_the_plans_that_waited_for_it_and_no_others() {
        let mut t: OrderingTable = OrderingTable::default();
        let fill = t.register(vec![], vec![1]);
        let mut hit = t.register(vec![1], vec![]);
        let mut other = t.register(vec![2], vec![3]);
        t.fail(fill);
        assert_eq!(hit.wait_turn(), 1);
        assert!(hit.predecessor_failed());
        assert_eq!(other.wait_turn(), 0);
        assert!(!other.predecessor_failed());
        assert!(!t.would_wait(1, false), "readers do not hold readers up");
        assert!(t.would_wait(1, true) && t.would_wait(2, true) && t.would_wait(3, false));
        assert!(!t.would_wait(4, true));
        // Passed on: a plan waiting for one that ended failed learns it too.
        let mut next = t.register(vec![], vec![1]);
        t.fail(hit);
        next.wait_turn();
        assert!(next.predecessor_failed());
        let mut after = t.register(vec![1], vec![]);
        t.complete(next);
        after.wait_turn();
        assert!(
            !after.predecessor_failed(),
            "completed plans pass on nothing"
        );
        t.complete(other);
        t.complete(after);
        assert!(t.is_empty());
    }

    proptest! {
        /// Random plans (each adds its id to some cells after reading others) run by threads
        /// with random delays end in the same state as running them one by one.
        #[test]
        fn concurrent_execution_equals_serial(plans in proptest::collection::vec(
            (proptest::collection::vec(0u64..6, 0..3), proptest::collection::vec(0u64..6, 0..3), 0u64..300), 1..24)) {
            let run_serial = || {
                let mut cells = [0u64; 6];
                for (i, (reads, writes, _)) in plans.iter().enumerate() {
                    let seen: u64 = reads.iter().map(|&r| cells[r as usize]).sum();
                    for &w in writes {
                        cells[w as usize] = cells[w as usize].wrapping_mul(31).wrapping_add(i as u64 + seen);
                    }
                }
                cells
            };
            let table = StdMutex::new(OrderingTable::<Done>::default());
            let cells = StdMutex::new([0u64; 6]);
            std::thread::scope(|s| {
                let mut handles = Vec::new();
                for (i, (reads, writes, delay)) in plans.iter().enumerate() {
                    // Registration happens in plan order, as under the core's lock.
                    let mut ticket = table.lock().unwrap().register(reads.clone(), writes.clone());
                    let (table, cells) = (&table, &cells);
                    handles.push(s.spawn(move || {
                        ticket.wait_turn();
                        std::thread::sleep(std::time::Duration::from_micros(*delay));
                        let seen: u64 = reads.iter().map(|&r| cells.lock().unwrap()[r as usize]).sum();
                        std::thread::sleep(std::time::Duration::from_micros(*delay / 2));
                        {
                            let mut c = cells.lock().unwrap();
                            let mut ws = writes.clone();
                            ws.sort_unstable();
                            ws.dedup();
                            // Repeated writes in one plan apply once per listed write, as serially.
                            for &w in writes {
                                c[w as usize] = c[w as usize].wrapping_mul(31).wrapping_add(i as u64 + seen);
                            }
                        }
                        table.lock().unwrap().complete(ticket);
                    }));
                }
                for h in handles { h.join().unwrap(); }
            });
            prop_assert_eq!(*cells.lock().unwrap(), run_serial());
            prop_assert!(table.lock().unwrap().is_empty());
        }
    }
}
