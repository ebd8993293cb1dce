//! Cleaning (flushing) policies, SPEC §4.6: when to write dirty data back and how much.
//!
//! A cleaner only decides *how many* lines to flush now; the cache picks them (least recently
//! written first) and builds the flush jobs.

use crate::cache::ExecutorState;
use crate::config::CleaningConfig;
use tiercache_core::Nanos;

/// What a cleaner sees besides the executor state.
#[derive(Debug, Clone, Copy)]
pub struct DirtyState {
    /// Dirty lines now.
    pub dirty_lines: u64,
    /// Lines in the cache.
    pub capacity_lines: u64,
    /// Flush jobs issued and not yet done.
    pub jobs_in_flight: u32,
}

/// Decides when to clean.
#[derive(Debug, Clone)]
pub struct Cleaner {
    cfg: CleaningConfig,
    next_due: Nanos,
    draining: bool,
}

impl Cleaner {
    /// Cleaner for a configuration.
    pub fn new(cfg: &CleaningConfig) -> Self {
        Self {
            cfg: cfg.clone(),
            next_due: 0,
            draining: false,
        }
    }

    /// Lines to flush now (0 for none).
    pub fn poll(&mut self, exec: &ExecutorState, d: DirtyState) -> u32 {
        if d.dirty_lines == 0 {
            self.draining = false;
            return 0;
        }
        match self.cfg {
            CleaningConfig::None => 0,
            CleaningConfig::Lazy { idle_ns, batch } => {
                let idle = exec.cache_idle_ns >= idle_ns && exec.cache_queue_depth == 0;
                if idle && d.jobs_in_flight == 0 {
                    batch
                } else {
                    0
                }
            }
            CleaningConfig::Aggressive { period_ns, batch } => {
                if exec.now >= self.next_due {
                    // Next batch one period after this one, on the period grid.
                    let periods = (exec.now - self.next_due) / period_ns.max(1) + 1;
                    self.next_due += periods * period_ns.max(1);
                    batch
                } else {
                    0
                }
            }
            CleaningConfig::Threshold { high, low, batch } => {
                let frac = d.dirty_lines as f64 / d.capacity_lines.max(1) as f64;
                if frac > high {
                    self.draining = true;
                } else if frac <= low {
                    self.draining = false;
                }
                if self.draining && d.jobs_in_flight == 0 {
                    batch
                } else {
                    0
                }
            }
        }
    }

    /// When to be polled again if nothing else happens.
    pub fn next_poll(&self, exec: &ExecutorState, d: DirtyState) -> Option<Nanos> {
        if d.dirty_lines == 0 {
            return None;
        }
        match self.cfg {
            CleaningConfig::Lazy { idle_ns, .. } if d.jobs_in_flight == 0 => {
                Some(exec.now + idle_ns.saturating_sub(exec.cache_idle_ns).max(1))
            }
            CleaningConfig::Aggressive { .. } => Some(self.next_due.max(exec.now + 1)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(now: Nanos, idle: Nanos, qd: u32) -> ExecutorState {
        ExecutorState {
            now,
            cache_idle_ns: idle,
            cache_queue_depth: qd,
            backend_queue_depth: 0,
        }
    }
    fn dirty(n: u64) -> DirtyState {
        DirtyState {
            dirty_lines: n,
            capacity_lines: 100,
            jobs_in_flight: 0,
        }
    }

    #[test]
    fn lazy_waits_for_idleness() {
        let mut c = Cleaner::new(&CleaningConfig::Lazy {
            idle_ns: 1000,
            batch: 8,
        });
        assert_eq!(c.poll(&exec(10, 500, 0), dirty(5)), 0);
        assert_eq!(c.poll(&exec(10, 1500, 2), dirty(5)), 0);
        assert_eq!(c.poll(&exec(10, 1500, 0), dirty(5)), 8);
        assert_eq!(c.next_poll(&exec(10, 400, 0), dirty(5)), Some(610));
        assert_eq!(c.poll(&exec(10, 1500, 0), dirty(0)), 0);
    }

    #[test]
    fn aggressive_runs_on_its_period_whatever_the_load() {
        let mut c = Cleaner::new(&CleaningConfig::Aggressive {
            period_ns: 100,
            batch: 4,
        });
        assert_eq!(c.poll(&exec(0, 0, 50), dirty(5)), 4);
        assert_eq!(c.poll(&exec(50, 0, 50), dirty(5)), 0);
        assert_eq!(c.next_poll(&exec(50, 0, 50), dirty(5)), Some(100));
        assert_eq!(c.poll(&exec(100, 0, 50), dirty(5)), 4);
        assert_eq!(c.poll(&exec(450, 0, 50), dirty(5)), 4);
        assert_eq!(c.next_poll(&exec(450, 0, 0), dirty(5)), Some(500));
    }

    #[test]
    fn threshold_has_hysteresis() {
        let mut c = Cleaner::new(&CleaningConfig::Threshold {
            high: 0.5,
            low: 0.2,
            batch: 3,
        });
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(40)), 0);
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(60)), 3);
        assert_eq!(
            c.poll(&exec(0, 0, 0), dirty(40)),
            3,
            "keeps draining down to low"
        );
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(20)), 0);
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(40)), 0);
    }
}
