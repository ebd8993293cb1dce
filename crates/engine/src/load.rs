//! Device load as the engine measures it, for [`ExecutorState`]: ops in flight on a device by
//! origin (R, W, P, E) and a moving average of the time each op took, the same quantities the
//! simulator reads off its device models.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tiercache_core::{service_ewma, OpCause};
use tiercache_policy::DeviceLoad;

/// Ops in flight on one device and their service time, updated lock-free by the threads
/// running ops.
#[derive(Debug, Default)]
pub(crate) struct LoadMeter {
    queued: AtomicU32,
    by_origin: [AtomicU32; 4],
    /// Moving average of an op's wall time, ns (0 before the first op ends).
    service_ns: AtomicU64,
}

impl LoadMeter {
    /// Counts an op of `cause` from now until the guard is dropped, and times it.
    pub fn enter(&self, cause: OpCause) -> InFlight<'_> {
        self.queued.fetch_add(1, Relaxed);
        if let Some(o) = cause.origin() {
            self.by_origin[o.index()].fetch_add(1, Relaxed);
        }
        InFlight {
            meter: self,
            cause,
            started: Instant::now(),
        }
    }

    /// Ops in flight now.
    pub fn queued(&self) -> u32 {
        self.queued.load(Relaxed)
    }

    /// A snapshot (each counter read once; they may be a moment apart).
    pub fn load(&self) -> DeviceLoad {
        DeviceLoad {
            queued: self.queued.load(Relaxed),
            by_origin: std::array::from_fn(|i| self.by_origin[i].load(Relaxed)),
            service_ns: self.service_ns.load(Relaxed),
        }
    }
}

/// An op in flight on a metered device.
pub(crate) struct InFlight<'a> {
    meter: &'a LoadMeter,
    cause: OpCause,
    started: Instant,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let m = self.meter;
        let took = self.started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        // Concurrent updates may lose a sample to each other: an estimate, not a count.
        let avg = m.service_ns.load(Relaxed);
        m.service_ns.store(service_ewma(avg, took), Relaxed);
        if let Some(o) = self.cause.origin() {
            m.by_origin[o.index()].fetch_sub(1, Relaxed);
        }
        m.queued.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_origin_while_in_flight_and_times_ops() {
        let m = LoadMeter::default();
        {
            let _a = m.enter(OpCause::ReadHit);
            let _b = m.enter(OpCause::Promotion);
            let _c = m.enter(OpCause::Flush);
            let l = m.load();
            assert_eq!((l.queued, l.by_origin), (3, [1, 0, 1, 0]));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let l = m.load();
        assert_eq!((l.queued, l.by_origin), (0, [0; 4]));
        assert!(l.service_ns >= 1_000_000, "{}", l.service_ns);
    }
}
