//! Aggressive (periodic) cleaning: every period, a batch of the oldest dirty lines, whatever
//! the load (docs/design.md §4.6).
//!
//! A deviation: the usual description (docs/design.md §4.6) picks the batch LRU-most first; this
//! takes the lines made dirty longest ago (the dirty list's order, O(batch) for every replacement
//! policy). The two differ when a dirty line is read after it was written: it is flushed first here
//! though recently used, and a less recently used dirty line may then be evicted dirty.

use super::{CleaningPolicy, DirtyState};
use crate::cache::ExecutorState;
use tiercache_core::Nanos;

/// Flushes `batch` lines every `period_ns`, on a fixed grid of periods.
#[derive(Debug, Clone)]
pub struct Aggressive {
    period_ns: Nanos,
    batch: u32,
    next_due: Nanos,
}

impl Aggressive {
    /// A batch of `batch` lines every `period_ns` (at least 1 ns), the first at time 0.
    pub fn new(period_ns: Nanos, batch: u32) -> Self {
        Self {
            period_ns: period_ns.max(1),
            batch,
            next_due: 0,
        }
    }
}

impl CleaningPolicy for Aggressive {
    fn poll(&mut self, exec: &ExecutorState, d: DirtyState) -> u32 {
        if d.dirty_lines == 0 || exec.now < self.next_due {
            return 0;
        }
        // Next batch one period after this one, on the period grid.
        // Saturating: a period near u64::MAX (a policy built without config validation)
        // ends at the end of time rather than wrapping to the past.
        let periods = (exec.now - self.next_due) / self.period_ns + 1;
        self.next_due = self
            .next_due
            .saturating_add(periods.saturating_mul(self.period_ns));
        self.batch
    }

    fn next_poll(&self, exec: &ExecutorState, d: DirtyState) -> Option<Nanos> {
        (d.dirty_lines > 0).then(|| self.next_due.max(exec.now.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaning::tests::{dirty, exec};

    #[test]
    fn aggressive_runs_on_its_period_whatever_the_load() {
        let mut c = Aggressive::new(100, 4);
        assert_eq!(c.poll(&exec(0, 0, 50), dirty(5)), 4);
        assert_eq!(c.poll(&exec(50, 0, 50), dirty(5)), 0);
        assert_eq!(c.next_poll(&exec(50, 0, 50), dirty(5)), Some(100));
        assert_eq!(c.poll(&exec(100, 0, 50), dirty(5)), 4);
        assert_eq!(c.poll(&exec(450, 0, 50), dirty(5)), 4);
        assert_eq!(c.next_poll(&exec(450, 0, 0), dirty(5)), Some(500));
    }
}
