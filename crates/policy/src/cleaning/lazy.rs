//! Lazy cleaning: flush only when the cache device has been idle for a while (SPEC §4.6), so
//! cleaning never takes bandwidth from requests.

use super::{CleaningPolicy, DirtyState};
use crate::cache::ExecutorState;
use tiercache_core::Nanos;

/// Flushes `batch` lines once the cache device has had no foreground I/O for `idle_ns` and
/// nothing is queued on it, one job at a time.
#[derive(Debug, Clone)]
pub struct Lazy {
    /// Idle time before cleaning starts.
    pub idle_ns: Nanos,
    /// Lines per flush job.
    pub batch: u32,
}

impl CleaningPolicy for Lazy {
    fn poll(&mut self, exec: &ExecutorState, d: DirtyState) -> u32 {
        let idle = exec.cache_idle_ns >= self.idle_ns && exec.cache.queued == 0;
        if d.dirty_lines > 0 && idle && d.jobs_in_flight == 0 {
            self.batch
        } else {
            0
        }
    }

    fn next_poll(&self, exec: &ExecutorState, d: DirtyState) -> Option<Nanos> {
        (d.dirty_lines > 0 && d.jobs_in_flight == 0)
            .then(|| exec.now + self.idle_ns.saturating_sub(exec.cache_idle_ns).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaning::tests::{dirty, exec};

    #[test]
    fn lazy_waits_for_idleness() {
        let mut c = Lazy {
            idle_ns: 1000,
            batch: 8,
        };
        assert_eq!(c.poll(&exec(10, 500, 0), dirty(5)), 0);
        assert_eq!(c.poll(&exec(10, 1500, 2), dirty(5)), 0);
        assert_eq!(c.poll(&exec(10, 1500, 0), dirty(5)), 8);
        assert_eq!(c.next_poll(&exec(10, 400, 0), dirty(5)), Some(610));
        assert_eq!(c.poll(&exec(10, 1500, 0), dirty(0)), 0);
    }
}
