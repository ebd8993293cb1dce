//! Live counters of the engine, readable while it serves.

use crate::slot_table::RecoveryReport;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use tiercache_policy::CacheStats;

/// Counters updated lock-free on the I/O path.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
    pub fua_writes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub errors: AtomicU64,
    pub ordering_waits: AtomicU64,
    pub records_written: AtomicU64,
    pub backend_flushes_before_records: AtomicU64,
    pub slot_invalidations: AtomicU64,
    pub flush_jobs: AtomicU64,
    pub flush_job_failures: AtomicU64,
    pub deferred_plans: AtomicU64,
    pub flushed_lines: AtomicU64,
    pub cache_ops: AtomicU64,
    pub backend_ops: AtomicU64,
    pub demotes: DemoteCounters,
}

/// Demote counters: those this engine sent down, those it received from above.
#[derive(Debug, Default)]
pub(crate) struct DemoteCounters {
    pub sent: AtomicU64,
    pub sent_accepted: AtomicU64,
    pub sent_already_held: AtomicU64,
    pub sent_rejected: AtomicU64,
    pub sent_failed: AtomicU64,
    pub received: AtomicU64,
    pub received_accepted: AtomicU64,
    pub received_already_held: AtomicU64,
    pub received_rejected: AtomicU64,
}

impl DemoteCounters {
    pub fn snapshot(&self) -> DemoteStats {
        let g = |a: &AtomicU64| a.load(Relaxed);
        DemoteStats {
            sent: g(&self.sent),
            sent_accepted: g(&self.sent_accepted),
            sent_already_held: g(&self.sent_already_held),
            sent_rejected: g(&self.sent_rejected),
            sent_failed: g(&self.sent_failed),
            received: g(&self.received),
            received_accepted: g(&self.received_accepted),
            received_already_held: g(&self.received_already_held),
            received_rejected: g(&self.received_rejected),
        }
    }
}

/// Demotes (exclusive caching, docs/design.md §4.7): sent to the level below (clean victims of this
/// cache), and received from a level above. Every demote is accepted, already held,
/// rejected, or (sent only) failed on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DemoteStats {
    /// Clean victims handed to the level below.
    pub sent: u64,
    /// Of them, kept below.
    pub sent_accepted: u64,
    /// Of them, already held below (no data written there).
    pub sent_already_held: u64,
    /// Of them, refused below (no room, or not provably current).
    pub sent_rejected: u64,
    /// Of them, lost on the way (a connection fault): counted, never retried.
    pub sent_failed: u64,
    /// Demotes received from a level above.
    pub received: u64,
    /// Of them, kept (inserted at the evict-last end).
    pub received_accepted: u64,
    /// Of them, already held.
    pub received_already_held: u64,
    /// Of them, refused.
    pub received_rejected: u64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

/// Read and write latency histograms (microseconds).
pub(crate) struct Latencies {
    pub read: Mutex<Histogram<u64>>,
    pub write: Mutex<Histogram<u64>>,
}

impl Latencies {
    pub fn new() -> Self {
        let h = || Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"));
        Self {
            read: h(),
            write: h(),
        }
    }

    pub fn record(h: &Mutex<Histogram<u64>>, us: u64) {
        let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
        h.saturating_record(us.max(1));
    }
}

/// A latency distribution.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Requests measured.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

impl LatencySummary {
    pub(crate) fn of(h: &Mutex<Histogram<u64>>) -> Self {
        let h = h.lock().unwrap_or_else(|e| e.into_inner());
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// A latency distribution as cumulative buckets, as Prometheus histograms count.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyBuckets {
    /// Upper bounds in µs, ascending (a last, infinite bucket is `count`).
    pub le_us: Vec<u64>,
    /// Requests at or below each bound.
    pub cumulative: Vec<u64>,
    /// Requests measured.
    pub count: u64,
    /// Sum of their latencies in µs (from the histogram's mean: within its 3 digits).
    pub sum_us: f64,
}

/// Bucket bounds (µs): 10 µs to 10 s, 1-2.5-5 steps.
const BUCKET_BOUNDS_US: [u64; 19] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

impl LatencyBuckets {
    pub(crate) fn of(h: &Mutex<Histogram<u64>>) -> Self {
        let h = h.lock().unwrap_or_else(|e| e.into_inner());
        let cumulative = BUCKET_BOUNDS_US
            .iter()
            .map(|&b| {
                if h.is_empty() {
                    0
                } else {
                    h.count_between(0, b)
                }
            })
            .collect();
        Self {
            le_us: BUCKET_BOUNDS_US.to_vec(),
            cumulative,
            count: h.len(),
            sum_us: h.mean() * h.len() as f64,
        }
    }
}

/// A snapshot of the engine's counters.
#[derive(Debug, Clone, Serialize)]
pub struct EngineStats {
    /// The policy core's counters (hits, misses, promotions, evictions, bypasses by reason...).
    pub cache: CacheStats,
    /// The devices as the policies see them now (ops queued by origin, service times).
    pub executor: tiercache_policy::ExecutorState,
    /// What the load balancer saw and decided at its last poll (none without one).
    pub balancer: Option<tiercache_policy::BalanceReport>,
    /// The write policy the load balancer has in force (`None`: the configured one).
    pub balanced_write_policy: Option<tiercache_policy::WritePolicy>,
    /// Lines the cache holds.
    pub capacity_lines: u64,
    /// Lines holding data now.
    pub resident_lines: u64,
    /// Lines holding dirty data now.
    pub dirty_lines: u64,
    /// Application reads served.
    pub reads: u64,
    /// Application writes served.
    pub writes: u64,
    /// Bytes read by the application.
    pub read_bytes: u64,
    /// Bytes written by the application.
    pub write_bytes: u64,
    /// Writes with FUA.
    pub fua_writes: u64,
    /// FLUSH requests.
    pub flushes: u64,
    /// TRIM / WRITE_ZEROES requests.
    pub trims: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Plans that waited for an earlier conflicting plan.
    pub ordering_waits: u64,
    /// Metadata records written to the cache device.
    pub records_written: u64,
    /// Backend syncs made before writing a plan's records, because the records drop dirty
    /// data whose new version the plan wrote to the backend.
    pub backend_flushes_before_records: u64,
    /// Slots whose old record was made durably empty before reuse.
    pub slot_invalidations: u64,
    /// Background flush jobs run.
    pub flush_jobs: u64,
    /// Flush jobs that failed (the backend failed); their lines stayed dirty, to be retried.
    pub flush_job_failures: u64,
    /// Reads answered before their plan finished (cache fills completed in the background).
    pub deferred_plans: u64,
    /// Lines written back by them.
    pub flushed_lines: u64,
    /// Ops issued to the cache device.
    pub cache_ops: u64,
    /// Ops issued to the backend.
    pub backend_ops: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Backend operations in flight now (the backend's queue depth, as the cleaner sees it).
    pub backend_in_flight: u64,
    /// Write-back work not finished now: the flusher's jobs issued and not yet done (their
    /// lines count as clean but are not on the backend yet, nor in `flushed_lines`) and reads'
    /// plans finishing in the background. Zero with no client and no cleaner means `dirty_lines`
    /// and `flushed_lines` hold still: what is dirty is exactly what a full flush writes back.
    pub write_backs_in_flight: u64,
    /// What start-up recovery found.
    pub recovery: RecoveryReport,
    /// Why the engine stopped serving, if it did: a policy core's lock was poisoned,
    /// `engine.on_error.action = "fail"` was reached, or a dirty line it had to evict could
    /// neither be written back nor put back in its slot, so the only copy of acknowledged data
    /// is on the cache device (a restart recovers it). Every request since was answered with
    /// an error.
    pub halted: Option<String>,
    /// Device errors by device, op and errno, and the degraded state (docs/design.md §11).
    pub health: crate::health::HealthStats,
    /// A remote backend's connection, fault and retry counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_link: Option<tiercache_blockdev::RemoteStats>,
    /// Demotes sent down and received from above.
    pub demotes: DemoteStats,
    /// Read latency.
    pub read_latency: LatencySummary,
    /// Write latency.
    pub write_latency: LatencySummary,
}
