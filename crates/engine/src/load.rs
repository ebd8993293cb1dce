//! Device load as the engine measures it, for [`ExecutorState`]: ops in flight on a device by
//! origin (R, W, P, E), and two moving averages: an op's wall time (its latency) and the wall
//! time between completions while the device stays busy (device time per op, the inverse of
//! its throughput) — the same quantities the simulator reads off its device models.
//!
//! [`ExecutorState`]: tiercache_policy::ExecutorState

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tiercache_core::{service_ewma, OpCause};
use tiercache_policy::DeviceLoad;

/// Ops in flight on one device and their service time and latency, updated lock-free by the
/// threads running ops.
#[derive(Debug)]
pub(crate) struct LoadMeter {
    /// Time zero of the meter's clock (the `_at` fields are ns since then).
    epoch: Instant,
    queued: AtomicU32,
    by_origin: [AtomicU32; 4],
    /// Moving average of the wall time between an op's completion and the previous one, or
    /// its own start if later (the device was idle in between), ns; 0 before the first op ends.
    service_ns: AtomicU64,
    /// Moving average of an op's wall time, ns (0 before the first op ends).
    latency_ns: AtomicU64,
    /// When the last op completed, ns since `epoch`.
    last_finish_at: AtomicU64,
}

impl Default for LoadMeter {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            queued: AtomicU32::new(0),
            by_origin: Default::default(),
            service_ns: AtomicU64::new(0),
            latency_ns: AtomicU64::new(0),
            last_finish_at: AtomicU64::new(0),
        }
    }
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
            latency_ns: self.latency_ns.load(Relaxed),
        }
    }

    /// Ns since the meter's epoch at `t` (0 for an instant before it).
    fn since_epoch(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch)
            .as_nanos()
            .min(u128::from(u64::MAX)) as u64
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
        let now = Instant::now();
        let took = now
            .saturating_duration_since(self.started)
            .as_nanos()
            .min(u128::from(u64::MAX)) as u64;
        let (start_at, now_at) = (m.since_epoch(self.started), m.since_epoch(now));
        // Device time this op accounts for: since the previous completion while the device
        // stayed busy, or since its own start when the device was idle before it. Ops that
        // overlap share the device's time, so at queue depth n this is about latency / n.
        let prev = m.last_finish_at.fetch_max(now_at, Relaxed);
        let service = now_at.saturating_sub(prev.max(start_at));
        // Concurrent updates may lose a sample to each other: an estimate, not a count.
        m.latency_ns
            .store(service_ewma(m.latency_ns.load(Relaxed), took), Relaxed);
        m.service_ns
            .store(service_ewma(m.service_ns.load(Relaxed), service), Relaxed);
        if let Some(o) = self.cause.origin() {
            m.by_origin[o.index()].fetch_sub(1, Relaxed);
        }
        m.queued.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_by_origin_while_in_flight_and_times_ops() {
        let m = LoadMeter::default();
        {
            let _a = m.enter(OpCause::ReadHit);
            let _b = m.enter(OpCause::Promotion);
            let _c = m.enter(OpCause::Flush);
            let l = m.load();
            assert_eq!((l.queued, l.by_origin), (3, [1, 0, 1, 0]));
            std::thread::sleep(Duration::from_millis(2));
        }
        let l = m.load();
        assert_eq!((l.queued, l.by_origin), (0, [0; 4]));
        assert!(l.latency_ns >= 2_000_000, "{}", l.latency_ns);
    }

    #[test]
    fn overlapping_ops_share_the_device_time_but_each_has_its_latency() {
        // 32 ops that run together for 4 ms and end at once: each took 4 ms (latency), but
        // the device completed 32 in 4 ms, so the first completion accounts for the whole
        // stretch and the other 31 for (almost) none of it.
        let m = LoadMeter::default();
        let ops: Vec<InFlight<'_>> = (0..32).map(|_| m.enter(OpCause::ReadHit)).collect();
        std::thread::sleep(Duration::from_millis(4));
        drop(ops);
        let l = m.load();
        assert!(l.latency_ns >= 4_000_000, "latency {}", l.latency_ns);
        assert!(
            l.service_ns < l.latency_ns / 2,
            "service {} latency {}",
            l.service_ns,
            l.latency_ns
        );
        // Ops alone on an idle device: the device time of each is its own duration, the same
        // as its latency, not the idle time since the previous completion (which would add
        // 20 ms / 16 to the average).
        let m = LoadMeter::default();
        for _ in 0..2 {
            let op = m.enter(OpCause::Write);
            std::thread::sleep(Duration::from_millis(1));
            drop(op);
            std::thread::sleep(Duration::from_millis(20));
        }
        let l = m.load();
        assert!(
            l.service_ns <= l.latency_ns + 100_000,
            "service {} latency {}",
            l.service_ns,
            l.latency_ns
        );
    }
}
