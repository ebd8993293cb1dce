//! The executor's view of the devices: the one narrow interface through which run-time state
//! reaches the policies (docs/design.md §3). Both executors fill it the same way, in the same
//! units: the simulator from its device models, the engine from its real in-flight counters and
//! measured service times.

use tiercache_core::{Nanos, Origin};

/// Load of one device (the cache device, or every backend device together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceLoad {
    /// Device ops queued or in service now, whatever their origin (trims and flushes too).
    pub queued: u32,
    /// Of them, the ops of each origin (indexed by [`Origin::index`]: R, W, P, E).
    pub by_origin: [u32; 4],
    /// Device time per op, ns: the inverse of the device's throughput while busy, a moving
    /// average over recently completed ops (0 before any completed). For a device that serves
    /// several ops at once (an SSD's channels, an array's members) it is far below an op's
    /// latency. The simulator takes it from the model's device time consumed between
    /// completions; the engine measures the wall time between completions while the device
    /// stays busy (an op's own duration when it ran alone). `queued × service_ns` is how long
    /// the queue takes to drain.
    pub service_ns: Nanos,
    /// Latency of one op, ns: a moving average of submission to completion over recently
    /// completed ops (queueing inside the device included; 0 before any completed). The
    /// simulator takes it from its device model (completion − issue), the engine from the wall
    /// time of each op. A request sent to this device now waits about
    /// `queue_time_ns() + latency_ns`.
    pub latency_ns: Nanos,
}

impl DeviceLoad {
    /// Estimated time to drain what is queued now, ns (docs/design.md §4.8: queue length × service
    /// time).
    pub fn queue_time_ns(&self) -> Nanos {
        u64::from(self.queued).saturating_mul(self.service_ns)
    }

    /// Ops of `origin` queued now.
    pub fn of(&self, origin: Origin) -> u32 {
        self.by_origin[origin.index()]
    }

    /// Estimated time until a request sent to this device now completes, ns: its queue's
    /// drain time plus one op's latency.
    pub fn wait_ns(&self) -> Nanos {
        self.queue_time_ns().saturating_add(self.latency_ns)
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
    fn queue_time_is_queued_ops_times_service_and_origins_are_read_by_index() {
        let l = DeviceLoad {
            queued: 4,
            by_origin: [1, 0, 2, 1],
            service_ns: 10,
            latency_ns: 25,
        };
        assert_eq!(l.queue_time_ns(), 40);
        assert_eq!(l.wait_ns(), 65);
        assert_eq!(l.of(Origin::Promotion), 2);
        assert_eq!(l.of(Origin::Write), 0);
        let huge = DeviceLoad {
            queued: u32::MAX,
            service_ns: u64::MAX,
            ..l
        };
        assert_eq!(huge.queue_time_ns(), u64::MAX, "saturates");
        assert_eq!(huge.wait_ns(), u64::MAX, "saturates");
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
