//! Threshold cleaning: flush while dirty data exceeds a high watermark, down to a low one
//! (docs/design.md §4.6).

use super::{CleaningPolicy, DirtyState};
use crate::cache::ExecutorState;
use tiercache_core::Nanos;

/// Starts draining when dirty lines exceed `high` of the capacity and keeps draining, one job
/// of `batch` lines at a time, until they are at or below `low` (hysteresis).
#[derive(Debug, Clone)]
pub struct Threshold {
    high: f64,
    low: f64,
    batch: u32,
    draining: bool,
}

impl Threshold {
    /// Watermarks as fractions of the cache's lines.
    pub fn new(high: f64, low: f64, batch: u32) -> Self {
        Self {
            high,
            low,
            batch,
            draining: false,
        }
    }
}

impl CleaningPolicy for Threshold {
    fn poll(&mut self, _exec: &ExecutorState, d: DirtyState) -> u32 {
        if d.dirty_lines == 0 {
            self.draining = false;
            return 0;
        }
        let frac = d.dirty_lines as f64 / d.capacity_lines.max(1) as f64;
        if frac > self.high {
            self.draining = true;
        } else if frac <= self.low {
            self.draining = false;
        }
        if self.draining && d.jobs_in_flight == 0 {
            self.batch
        } else {
            0
        }
    }

    /// Driven by writes and job completions, never by time.
    fn next_poll(&self, _exec: &ExecutorState, _d: DirtyState) -> Option<Nanos> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaning::tests::{dirty, exec};

    #[test]
    fn threshold_has_hysteresis() {
        let mut c = Threshold::new(0.5, 0.2, 3);
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

    #[test]
    fn an_emptied_cache_stops_draining() {
        let mut c = Threshold::new(0.5, 0.2, 3);
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(60)), 3);
        assert_eq!(c.poll(&exec(0, 0, 0), dirty(0)), 0);
        assert_eq!(
            c.poll(&exec(0, 0, 0), dirty(40)),
            0,
            "between the marks after emptying"
        );
    }
}
