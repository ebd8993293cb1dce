//! The executor's view of the devices: the one narrow interface through which run-time state
//! reaches the policies (SPEC §3). Both executors fill it the same way, in the same units:
//! the simulator from its device models, the engine from its real in-flight counters and
//! measured service times.

use tiercache_core::{Nanos, OpCause, Origin};

/// Load of one device (the cache device, or every backend device together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceLoad {
    /// Device ops queued or in service now, whatever their origin (trims and flushes too).
    pub queued: u32,
    /// Of them, the ops of each origin (indexed by [`Origin::index`]: R, W, P, E).
    pub by_origin: [u32; 4],
    /// Estimated time the device spends on one op, ns: a moving average over recently
    /// completed ops (0 before any completed). The simulator takes it from the model's device
    /// time per op; the engine times each op it runs (wall time of the call, queueing inside
    /// the device included: a real device does not tell the two apart).
    pub service_ns: Nanos,
}

impl DeviceLoad {
    /// Estimated time to drain what is queued now, ns (SPEC §4.8: queue length × service
    /// time).
    pub fn queue_time_ns(&self) -> Nanos {
        u64::from(self.queued).saturating_mul(self.service_ns)
    }

    /// Ops of `origin` queued now.
    pub fn of(&self, origin: Origin) -> u32 {
        self.by_origin[origin.index()]
    }

    /// Counts an op of `cause` entering the device.
    pub fn enter(&mut self, cause: OpCause) {
        self.queued += 1;
        if let Some(o) = cause.origin() {
            self.by_origin[o.index()] += 1;
        }
    }

    /// Counts an op of `cause` leaving the device.
    pub fn leave(&mut self, cause: OpCause) {
        debug_assert!(self.queued > 0, "an op left a device with nothing queued");
        self.queued -= 1;
        if let Some(o) = cause.origin() {
            self.by_origin[o.index()] -= 1;
        }
    }
}

pub use tiercache_core::service_ewma;

/// The executor's view of the devices, given to cleaning and balancing policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExecutorState {
    /// Current time (virtual or real) in ns.
    pub now: Nanos,
    /// Time since the cache device last had foreground I/O (ops of requests, not of flush
    /// jobs) in flight; 0 while it has some.
    pub cache_idle_ns: Nanos,
    /// The cache device.
    pub cache: DeviceLoad,
    /// The backend (every backend device together).
    pub backend: DeviceLoad,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_counts_by_origin_and_drains() {
        let mut l = DeviceLoad::default();
        for c in [
            OpCause::ReadHit,
            OpCause::Promotion,
            OpCause::Clean,
            OpCause::Flush,
        ] {
            l.enter(c);
        }
        assert_eq!(l.queued, 4);
        assert_eq!(l.by_origin, [1, 0, 1, 1]);
        l.service_ns = 10;
        assert_eq!(l.queue_time_ns(), 40);
        for c in [
            OpCause::ReadHit,
            OpCause::Promotion,
            OpCause::Clean,
            OpCause::Flush,
        ] {
            l.leave(c);
        }
        assert_eq!(
            l,
            DeviceLoad {
                service_ns: 10,
                ..DeviceLoad::default()
            }
        );
    }

    #[test]
    fn service_average_starts_at_the_first_sample_and_moves_toward_new_ones() {
        let mut a = service_ewma(0, 1600);
        assert_eq!(a, 1600);
        a = service_ewma(a, 3200);
        assert_eq!(a, 1700);
        for _ in 0..200 {
            a = service_ewma(a, 100);
        }
        assert!((100..=120).contains(&a), "{a}");
    }
}
