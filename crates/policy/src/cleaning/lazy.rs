//! Lazy cleaning: flush only when the cache device has been idle for a while (docs/design.md §4.6),
//! so cleaning never takes bandwidth from requests.

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
        (d.dirty_lines > 0 && d.jobs_in_flight == 0).then(|| {
            exec.now
                .saturating_add(self.idle_ns.saturating_sub(exec.cache_idle_ns).max(1))
        })
    }

    /// With foreground I/O on the cache device, `cache_idle_ns` is 0 and the device's queue
    /// holds that I/O, so `poll` answers 0, and `next_poll` is `now + max(idle_ns, 1)`, the
    /// latest it ever answers.
    fn acts_only_on_idle_cache(&self) -> bool {
        true
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

    proptest::proptest! {
        /// The promise of `acts_only_on_idle_cache`, with `k = max(idle_ns, 1)`: on a busy
        /// device no lines and a poll at `now + k` (or none); never a poll later than that.
        #[test]
        fn lazy_keeps_its_promise_about_a_busy_device(
            idle_ns in 0u64..10_000,
            batch in 1u32..64,
            now in 0u64..1 << 40,
            idle in 0u64..20_000,
            queued in 0u32..4,
            dirty_lines in 0u64..100,
            jobs_in_flight in 0u32..3,
        ) {
            let mut c = Lazy { idle_ns, batch };
            proptest::prop_assert!(c.acts_only_on_idle_cache());
            let k = idle_ns.max(1);
            let d = DirtyState { dirty_lines, capacity_lines: 100, jobs_in_flight };
            let any = exec(now, idle, queued);
            let next = c.next_poll(&any, d);
            proptest::prop_assert!(next.is_none_or(|t| t <= now + k), "{next:?}");
            // Foreground I/O on the device: it is not idle, and that I/O is queued on it.
            let busy = exec(now, 0, queued.max(1));
            proptest::prop_assert_eq!(c.poll(&busy, d), 0);
            let next = c.next_poll(&busy, d);
            proptest::prop_assert!(next.is_none() || next == Some(now + k), "{next:?}");
        }
    }
}
