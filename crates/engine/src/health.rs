//! Device health and degraded mode (docs/design.md §11): errors counted per device, op and
//! errno; the first of each kind logged with its offset; once the cache-device error score
//! (each error adds 1, the score halves every `halflife_ns`, bcache's `io_error_halflife`)
//! reaches `engine.on_error.threshold`, the engine serves in pass-through (or halts, with
//! `action = "fail"`) until an operator returns it to service.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use tiercache_core::units::de_nanos;
use tiercache_core::Nanos;

/// What the engine does once cache-device errors pass the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnErrorAction {
    /// Write back the dirty data it can read, and serve every request from the backend
    /// (reads of dirty data the cache cannot read fail: it held the only copy).
    #[default]
    PassThrough,
    /// Halt: every request fails until a restart (fail-stop, for operators who want a cache
    /// error to stop the volume).
    Fail,
}

/// The `[engine.on_error]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnErrorConfig {
    /// The cache-device error score that makes the engine degrade (at least 1): each error
    /// adds 1 (bcache's `io_error_limit`), the score is rounded to whole errors.
    pub threshold: u32,
    /// The score halves every `halflife_ns` (bcache's `io_error_halflife`): a burst of
    /// `threshold` errors degrades, the same spread over many half-lives does not. Older
    /// configurations' `window_ns` is read as this.
    #[serde(deserialize_with = "de_nanos", alias = "window_ns")]
    pub halflife_ns: Nanos,
    /// What happens then.
    pub action: OnErrorAction,
}

impl Default for OnErrorConfig {
    fn default() -> Self {
        Self {
            threshold: 8,
            halflife_ns: 60_000_000_000,
            action: OnErrorAction::PassThrough,
        }
    }
}

impl OnErrorConfig {
    /// Checks the settings, naming the bad one as `(field, reason)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.threshold == 0 {
            return Err((
                "engine.on_error.threshold",
                "must be at least 1 (1: degrade at the first cache-device error)".into(),
            ));
        }
        if self.halflife_ns == 0 {
            return Err(("engine.on_error.halflife_ns", "must be positive".into()));
        }
        Ok(())
    }
}

/// Which device an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceRole {
    /// The cache device (slot data and metadata).
    Cache,
    /// The backend.
    Backend,
}

impl DeviceRole {
    /// Its name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            DeviceRole::Cache => "cache",
            DeviceRole::Backend => "backend",
        }
    }
}

/// The op that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceOp {
    /// A read.
    Read,
    /// A write (trims and write-zeroes included).
    Write,
    /// A flush.
    Flush,
}

impl DeviceOp {
    /// Its name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            DeviceOp::Read => "read",
            DeviceOp::Write => "write",
            DeviceOp::Flush => "flush",
        }
    }
}

/// The error's kind, as operators tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// EIO.
    Eio,
    /// ENOSPC (or EDQUOT): the device's file system is full.
    Enospc,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// The class of `e` (of the device error under a [`CacheDeviceError`], e.g. a lower
    /// engine's, reported to the one above).
    pub fn of(e: &io::Error) -> Self {
        if let Some(inner) = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<CacheDeviceError>())
        {
            return Self::of(&inner.source);
        }
        match errno_of(e) {
            Some(libc::EIO) => ErrorClass::Eio,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorClass::Enospc,
            _ if e.kind() == io::ErrorKind::StorageFull => ErrorClass::Enospc,
            _ => ErrorClass::Other,
        }
    }

    /// Its name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Eio => "eio",
            ErrorClass::Enospc => "enospc",
            ErrorClass::Other => "other",
        }
    }
}

const ROLES: [DeviceRole; 2] = [DeviceRole::Cache, DeviceRole::Backend];
const OPS: [DeviceOp; 3] = [DeviceOp::Read, DeviceOp::Write, DeviceOp::Flush];
const CLASSES: [ErrorClass; 3] = [ErrorClass::Eio, ErrorClass::Enospc, ErrorClass::Other];

/// A cache-device error as the engine's I/O path sees it: tells a request's failure that the
/// backend may serve apart from one it may not (see [`is_cache_error`]).
#[derive(Debug, thiserror::Error)]
#[error("cache device {op} at offset {offset} failed: {source}")]
pub struct CacheDeviceError {
    /// The op.
    pub op: &'static str,
    /// Its offset on the cache device.
    pub offset: u64,
    /// The device's error (errno kept).
    pub source: io::Error,
}

/// The errno of `e`, or of the device error under a [`CacheDeviceError`].
pub fn errno_of(e: &io::Error) -> Option<i32> {
    match e
        .get_ref()
        .and_then(|i| i.downcast_ref::<CacheDeviceError>())
    {
        Some(inner) => errno_of(&inner.source),
        None => e.raw_os_error(),
    }
}

/// Whether `e` is (or wraps) a [`CacheDeviceError`].
pub fn is_cache_error(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<CacheDeviceError>())
}

/// Counts by (device, op, class), in the order of [`HealthStats::errors`].
fn index(role: DeviceRole, op: DeviceOp, class: ErrorClass) -> usize {
    let r = ROLES.iter().position(|x| *x == role).unwrap_or(0);
    let o = OPS.iter().position(|x| *x == op).unwrap_or(0);
    let c = CLASSES.iter().position(|x| *x == class).unwrap_or(0);
    (r * OPS.len() + o) * CLASSES.len() + c
}

const KINDS: usize = 2 * 3 * 3;

/// Where a log line goes (the server's log; standard error by default).
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One device-error count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceErrorCount {
    /// The device.
    pub device: DeviceRole,
    /// The op.
    pub op: DeviceOp,
    /// The error's class.
    pub class: ErrorClass,
    /// How many.
    pub count: u64,
}

/// A snapshot of the engine's health (in [`crate::EngineStats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HealthStats {
    /// Serving in pass-through after cache-device errors.
    pub degraded: bool,
    /// Why, while degraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// Times the engine entered degraded mode.
    pub degraded_entered: u64,
    /// Times an operator returned it to service.
    pub degraded_left: u64,
    /// Nanoseconds from the first cache-device error to the last entry into degraded mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error_to_degraded_ns: Option<u64>,
    /// Requests (pieces) a cache-device error failed that were then served from the backend.
    pub served_past_cache: u64,
    /// Dirty lines a failed plan evicted without writing them back (`dirty_full =
    /// "evict-then-write"` whose cache read failed) that were put back in their slots, dirty.
    pub evictions_kept: u64,
    /// Device errors by device, op and class (every kind, zeros included).
    pub errors: Vec<DeviceErrorCount>,
    /// The last transitions and first-of-a-kind errors, oldest first (at most 32).
    pub events: Vec<String>,
}

impl HealthStats {
    /// Errors of the cache device, all kinds.
    pub fn cache_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|e| e.device == DeviceRole::Cache)
            .map(|e| e.count)
            .sum()
    }

    /// Errors of one kind.
    pub fn count(&self, device: DeviceRole, op: DeviceOp, class: ErrorClass) -> u64 {
        self.errors
            .iter()
            .find(|e| (e.device, e.op, e.class) == (device, op, class))
            .map_or(0, |e| e.count)
    }
}

struct Transitions {
    reason: Option<String>,
    entered: u64,
    left: u64,
    first_error_ns: Option<u64>,
    first_error_to_degraded_ns: Option<u64>,
    events: VecDeque<String>,
}

/// Error counters and the degraded state of one engine.
pub struct Health {
    config: OnErrorConfig,
    counts: [AtomicU64; KINDS],
    logged: [AtomicBool; KINDS],
    /// The cache-device error score and when (ns since `epoch`) it was last brought up to
    /// date.
    score: Mutex<(f64, u64)>,
    degraded: AtomicBool,
    /// A cache-device error was seen since start (or since the last return to service).
    cache_trouble: AtomicBool,
    served_past_cache: AtomicU64,
    evictions_kept: AtomicU64,
    state: Mutex<Transitions>,
    log: RwLock<LogSink>,
    epoch: Instant,
}

const MAX_EVENTS: usize = 32;

/// `score` after `elapsed_ns` of halving every `halflife_ns`.
pub fn decayed(score: f64, elapsed_ns: u64, halflife_ns: Nanos) -> f64 {
    score * 0.5f64.powf(elapsed_ns as f64 / halflife_ns.max(1) as f64)
}

impl Health {
    /// Healthy, under `config`.
    pub fn new(config: OnErrorConfig) -> Self {
        Self {
            config,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            logged: std::array::from_fn(|_| AtomicBool::new(false)),
            score: Mutex::new((0.0, 0)),
            degraded: AtomicBool::new(false),
            cache_trouble: AtomicBool::new(false),
            served_past_cache: AtomicU64::new(0),
            evictions_kept: AtomicU64::new(0),
            state: Mutex::new(Transitions {
                reason: None,
                entered: 0,
                left: 0,
                first_error_ns: None,
                first_error_to_degraded_ns: None,
                events: VecDeque::new(),
            }),
            log: RwLock::new(Arc::new(|m: &str| eprintln!("tiercache engine: {m}"))),
            epoch: Instant::now(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &OnErrorConfig {
        &self.config
    }

    /// Sends log lines to `sink` from now on.
    pub fn set_log(&self, sink: LogSink) {
        *self.log.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// Logs `msg` and keeps it among the recent events.
    pub fn log(&self, msg: String) {
        let sink = self.log.read().unwrap_or_else(|e| e.into_inner()).clone();
        sink(&msg);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.events.len() == MAX_EVENTS {
            st.events.pop_front();
        }
        st.events.push_back(msg);
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Counts an error of `role`'s `op` at `offset`; logs the first of its kind. Returns
    /// whether cache-device errors now pass the threshold (while not degraded).
    pub fn record(&self, role: DeviceRole, op: DeviceOp, offset: u64, e: &io::Error) -> bool {
        let class = ErrorClass::of(e);
        let i = index(role, op, class);
        self.counts[i].fetch_add(1, Relaxed);
        if !self.logged[i].swap(true, Relaxed) {
            let errno = errno_of(e).map_or("no errno".to_string(), |n| format!("errno {n}"));
            self.log(format!(
                "first {} {} error on the {} device at offset {offset} ({errno}): {e}; \
                 further ones are counted",
                class.name(),
                op.name(),
                role.name()
            ));
        }
        if role != DeviceRole::Cache {
            return false;
        }
        self.cache_trouble.store(true, Relaxed);
        let now = self.now_ns();
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.first_error_ns.get_or_insert(now);
        }
        let mut score = self.score.lock().unwrap_or_else(|e| e.into_inner());
        let (value, at) = *score;
        let value = decayed(value, now.saturating_sub(at), self.config.halflife_ns) + 1.0;
        *score = (value, now);
        // Rounded to whole errors: `threshold` errors within about a half-life reach it (two
        // errors a half-life apart score 1.5), not only ones at the same instant.
        value.round() >= self.config.threshold as f64 && !self.is_degraded()
    }

    /// The cache-device error score now.
    pub fn error_score(&self) -> f64 {
        let (value, at) = *self.score.lock().unwrap_or_else(|e| e.into_inner());
        decayed(
            value,
            self.now_ns().saturating_sub(at),
            self.config.halflife_ns,
        )
    }

    /// Counts a request piece served from the backend after a cache-device error failed it.
    pub fn served_past_cache(&self) {
        self.served_past_cache.fetch_add(1, Relaxed);
    }

    /// Counts a dirty victim put back in its slot after its eviction's write-back failed;
    /// logs the first.
    pub fn eviction_kept(&self, what: impl FnOnce() -> String) {
        if self.evictions_kept.fetch_add(1, Relaxed) == 0 {
            self.log(format!(
                "{}; further ones are counted (health.evictions_kept)",
                what()
            ));
        }
    }

    /// Dirty victims put back in their slots so far (see [`Health::eviction_kept`]).
    pub fn evictions_kept(&self) -> u64 {
        self.evictions_kept.load(Relaxed)
    }

    /// Whether the cache device failed an op since start (or the last return to service).
    pub fn cache_trouble(&self) -> bool {
        self.cache_trouble.load(Relaxed)
    }

    /// Whether the engine serves in pass-through.
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Relaxed)
    }

    /// Enters degraded mode for `reason`; `false` if it already was.
    pub fn enter_degraded(&self, reason: String) -> bool {
        if self.degraded.swap(true, Relaxed) {
            return false;
        }
        let now = self.now_ns();
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.entered += 1;
            st.first_error_to_degraded_ns = st.first_error_ns.map(|t| now.saturating_sub(t));
            st.reason = Some(reason.clone());
        }
        self.log(format!(
            "DEGRADED: {reason}; serving in pass-through from the backend (dirty data it can \
             read is written back); return it to service once the device is fixed"
        ));
        true
    }

    /// Leaves degraded mode (the operator fixed the device); `false` if it was not degraded.
    /// The error score starts again at zero; the counts stay.
    pub fn leave_degraded(&self) -> bool {
        if !self.degraded.swap(false, Relaxed) {
            return false;
        }
        *self.score.lock().unwrap_or_else(|e| e.into_inner()) = (0.0, self.now_ns());
        self.cache_trouble.store(false, Relaxed);
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.left += 1;
            st.reason = None;
            st.first_error_ns = None;
        }
        for l in &self.logged {
            l.store(false, Relaxed);
        }
        self.log("returned to service: the cache device is used again".into());
        true
    }

    /// A snapshot.
    pub fn stats(&self) -> HealthStats {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut errors = Vec::with_capacity(KINDS);
        for role in ROLES {
            for op in OPS {
                for class in CLASSES {
                    errors.push(DeviceErrorCount {
                        device: role,
                        op,
                        class,
                        count: self.counts[index(role, op, class)].load(Relaxed),
                    });
                }
            }
        }
        HealthStats {
            degraded: self.is_degraded(),
            degraded_reason: st.reason.clone(),
            degraded_entered: st.entered,
            degraded_left: st.left,
            first_error_to_degraded_ns: st.first_error_to_degraded_ns,
            served_past_cache: self.served_past_cache.load(Relaxed),
            evictions_kept: self.evictions_kept.load(Relaxed),
            errors,
            events: st.events.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(cfg: OnErrorConfig) -> Health {
        let h = Health::new(cfg);
        h.set_log(Arc::new(|_| {}));
        h
    }

    /// The threshold counts cache errors only, by their score; the first error of each
    /// kind is logged once; entering and leaving are logged and counted.
    #[test]
    fn threshold_window_and_transitions() {
        let h = quiet(OnErrorConfig {
            threshold: 3,
            ..OnErrorConfig::default()
        });
        let eio = io::Error::from_raw_os_error(libc::EIO);
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(!h.record(DeviceRole::Backend, DeviceOp::Read, 0, &eio));
        assert!(!h.record(DeviceRole::Backend, DeviceOp::Read, 0, &eio));
        assert!(!h.record(DeviceRole::Cache, DeviceOp::Write, 4096, &full));
        assert!(!h.record(DeviceRole::Cache, DeviceOp::Write, 8192, &full));
        assert!(h.record(DeviceRole::Cache, DeviceOp::Read, 0, &eio));
        let s = h.stats();
        assert_eq!(
            s.count(DeviceRole::Cache, DeviceOp::Write, ErrorClass::Enospc),
            2
        );
        assert_eq!(
            s.count(DeviceRole::Backend, DeviceOp::Read, ErrorClass::Eio),
            2
        );
        assert_eq!(s.cache_errors(), 3);
        // One line per kind: backend read EIO, cache write ENOSPC, cache read EIO.
        assert_eq!(s.events.len(), 3, "{:?}", s.events);
        assert!(s.events[1].contains("offset 4096") && s.events[1].contains("errno 28"));
        assert!(h.enter_degraded("test".into()));
        assert!(!h.enter_degraded("again".into()));
        assert!(
            !h.record(DeviceRole::Cache, DeviceOp::Read, 0, &eio),
            "already degraded"
        );
        assert!(h.stats().first_error_to_degraded_ns.is_some());
        assert!(h.leave_degraded());
        let s = h.stats();
        assert_eq!(
            (s.degraded, s.degraded_entered, s.degraded_left),
            (false, 1, 1)
        );
        assert!(s.events.iter().any(|e| e.contains("DEGRADED: test")));
        assert!(s.events.last().unwrap().contains("returned to service"));
        // The score starts again at zero.
        assert!(!h.record(DeviceRole::Cache, DeviceOp::Read, 0, &eio));
        assert!(h.error_score() <= 1.0);
    }

    /// Old errors fade: after many half-lives an error counts for almost nothing.
    #[test]
    fn old_errors_fade_with_the_half_life() {
        let h = quiet(OnErrorConfig {
            threshold: 2,
            halflife_ns: 1,
            ..OnErrorConfig::default()
        });
        let eio = io::Error::from_raw_os_error(libc::EIO);
        assert!(!h.record(DeviceRole::Cache, DeviceOp::Read, 0, &eio));
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(!h.record(DeviceRole::Cache, DeviceOp::Read, 0, &eio));
    }

    /// The decay itself: halves per half-life, exactly; a burst reaches the threshold where
    /// the same errors a half-life apart each do not.
    #[test]
    fn the_score_halves_every_half_life() {
        let h = 1_000;
        assert_eq!(decayed(8.0, 0, h), 8.0);
        assert!((decayed(8.0, h, h) - 4.0).abs() < 1e-12);
        assert!((decayed(8.0, 3 * h, h) - 1.0).abs() < 1e-12);
        // One error per half-life converges to 2 (1 + 1/2 + 1/4 + ...): never 3.
        let mut s = 0.0;
        for _ in 0..20 {
            s = decayed(s, h, h) + 1.0;
        }
        assert!(s < 2.0 && s > 1.99, "{s}");
        // Three at once reach 3.
        let burst = (0..3).fold(0.0, |s, _| decayed(s, 0, h) + 1.0);
        assert!(burst >= 3.0);
    }

    /// Older configurations' `window_ns` is read as the half-life; `halflife_ns` of zero is
    /// refused, naming the field.
    #[test]
    fn config_reads_halflife_and_the_old_window_name() {
        let c: OnErrorConfig = serde_json::from_str(r#"{"halflife_ns": "10s"}"#).unwrap();
        assert_eq!(c.halflife_ns, 10_000_000_000);
        let c: OnErrorConfig = serde_json::from_str(r#"{"window_ns": "2s"}"#).unwrap();
        assert_eq!(c.halflife_ns, 2_000_000_000);
        let c = OnErrorConfig {
            halflife_ns: 0,
            ..OnErrorConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "engine.on_error.halflife_ns");
    }

    #[test]
    fn wrapped_cache_errors_are_recognised() {
        let e = io::Error::other(CacheDeviceError {
            op: "read",
            offset: 3,
            source: io::Error::from_raw_os_error(libc::EIO),
        });
        assert!(is_cache_error(&e));
        assert_eq!(
            ErrorClass::of(&e),
            ErrorClass::Eio,
            "the errno under the wrapper"
        );
        assert!(!is_cache_error(&io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(
            ErrorClass::of(&io::Error::from_raw_os_error(libc::EDQUOT)),
            ErrorClass::Enospc
        );
    }
}
