//! Errors of the mount's cache device (its block file and journal) and a fault injector for
//! them (docs/design.md §11).
//!
//! Every I/O on the block file or the journal that fails is returned as a
//! [`CacheDeviceError`] inside the `io::Error`, so the mount tells a cache-device error (served
//! past the cache, counted, degrading) from a store error (the client's). [`CacheFaults`] is
//! the engine's `FaultDevice` idea for the mount: rules that fail chosen ops of the block file
//! or the journal with EIO or ENOSPC, or stall them (a latency spike), set by tests
//! (`State::set_cache_faults`) while mounted.

use std::fmt;
use std::io;
use std::sync::Mutex;

/// Which file of the cache directory an op touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The block file (cached data).
    Blocks,
    /// The journal of dirty blocks.
    Journal,
}

/// What the op did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A read.
    Read,
    /// A write (an append, for the journal; its rewrite at compaction too).
    Write,
    /// A sync (fdatasync).
    Sync,
}

/// How an op failed, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// EIO.
    Eio,
    /// ENOSPC (or EDQUOT).
    Enospc,
    /// Any other error.
    Other,
}

impl ErrorKind {
    /// The kind of `e`.
    pub fn of(e: &io::Error) -> ErrorKind {
        match e.raw_os_error() {
            Some(libc::EIO) => ErrorKind::Eio,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorKind::Enospc,
            _ => ErrorKind::Other,
        }
    }

    /// The errno this kind injects.
    fn errno(self) -> i32 {
        match self {
            ErrorKind::Eio | ErrorKind::Other => libc::EIO,
            ErrorKind::Enospc => libc::ENOSPC,
        }
    }
}

/// A failed op of the cache device: where, what, at which byte, and the error.
#[derive(Debug)]
pub struct CacheDeviceError {
    /// The file.
    pub target: Target,
    /// The op.
    pub op: Op,
    /// Byte offset in the file (the journal's: its record's).
    pub offset: u64,
    /// The error the file system (or the injector) gave.
    pub source: io::Error,
}

impl fmt::Display for CacheDeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cache device: {:?} {:?} at byte {} failed: {} (errno {})",
            self.target,
            self.op,
            self.offset,
            self.source,
            self.source.raw_os_error().unwrap_or(0)
        )
    }
}

impl std::error::Error for CacheDeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Wraps `source`, an error of `op` on `target` at `offset`, as a cache-device error.
pub fn device_error(target: Target, op: Op, offset: u64, source: io::Error) -> io::Error {
    if is_device_error(&source) {
        return source;
    }
    let kind = source.kind();
    io::Error::new(
        kind,
        CacheDeviceError {
            target,
            op,
            offset,
            source,
        },
    )
}

/// The cache-device error inside `e`, if it is one.
pub fn as_device_error(e: &io::Error) -> Option<&CacheDeviceError> {
    e.get_ref()
        .and_then(|r| r.downcast_ref::<CacheDeviceError>())
}

/// Whether `e` is a cache-device error.
pub fn is_device_error(e: &io::Error) -> bool {
    as_device_error(e).is_some()
}

/// One injection rule: ops of `op` on `target` touching bytes `start..end` fail with `kind`
/// (or, with `stall`, wait that long and then run: a latency spike), after the first `after`
/// matching ops, each with `probability`, at most `count` times.
#[derive(Debug, Clone)]
pub struct FaultRule {
    /// The file.
    pub target: Target,
    /// The op (`None`: any).
    pub op: Option<Op>,
    /// The error.
    pub kind: ErrorKind,
    /// First byte of the range (inclusive).
    pub start: u64,
    /// End of the range (exclusive).
    pub end: u64,
    /// Matching ops let through before the rule fires.
    pub after: u64,
    /// Most times the rule fires (`None`: no limit).
    pub count: Option<u64>,
    /// Chance that a matching op past `after` fails.
    pub probability: f64,
    /// A latency spike instead of an error: the op waits this long, then runs (`kind` is
    /// then unused). `None`: the op fails.
    pub stall: Option<std::time::Duration>,
}

impl FaultRule {
    /// Every `op` (`None`: any) on `target` fails with `kind`.
    pub fn always(target: Target, op: Option<Op>, kind: ErrorKind) -> FaultRule {
        FaultRule {
            target,
            op,
            kind,
            start: 0,
            end: u64::MAX,
            after: 0,
            count: None,
            probability: 1.0,
            stall: None,
        }
    }

    /// Every `op` (`None`: any) on `target` waits `stall` before it runs (a latency spike).
    pub fn latency(target: Target, op: Option<Op>, stall: std::time::Duration) -> FaultRule {
        FaultRule {
            stall: Some(stall),
            ..FaultRule::always(target, op, ErrorKind::Eio)
        }
    }
}

#[derive(Debug)]
struct Rules {
    rules: Vec<(FaultRule, u64, u64)>,
    rng: u64,
}

/// Fault injection on the mount's cache device: a list of [`FaultRule`]s, checked before each
/// op, seeded so a run repeats.
#[derive(Debug)]
pub struct CacheFaults {
    inner: Mutex<Rules>,
}

impl CacheFaults {
    /// No rules yet; `seed` drives the probabilities.
    pub fn new(seed: u64) -> CacheFaults {
        CacheFaults {
            inner: Mutex::new(Rules {
                rules: Vec::new(),
                rng: seed | 1,
            }),
        }
    }

    /// Adds a rule.
    pub fn add(&self, rule: FaultRule) {
        self.lock().rules.push((rule, 0, 0));
    }

    /// Removes every rule (the device is "fixed").
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// Faults injected so far (errors and latency spikes).
    pub fn fired(&self) -> u64 {
        self.lock().rules.iter().map(|r| r.2).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rules> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks one op of `len` bytes at `offset`: the injected error if a rule fires, as a
    /// cache-device error; a latency spike's rule waits (without holding the rules) and lets
    /// the op run.
    pub fn check(&self, target: Target, op: Op, offset: u64, len: u64) -> io::Result<()> {
        let stall = self.check_locked(target, op, offset, len)?;
        if let Some(d) = stall {
            std::thread::sleep(d);
        }
        Ok(())
    }

    /// [`CacheFaults::check`] under the lock: the error, or the stall to wait.
    fn check_locked(
        &self,
        target: Target,
        op: Op,
        offset: u64,
        len: u64,
    ) -> io::Result<Option<std::time::Duration>> {
        let mut g = self.lock();
        let Rules { rules, rng } = &mut *g;
        for (rule, seen, fired) in rules.iter_mut() {
            let hits_range = offset < rule.end && offset.saturating_add(len.max(1)) > rule.start;
            if rule.target != target || rule.op.is_some_and(|o| o != op) || !hits_range {
                continue;
            }
            *seen += 1;
            if *seen <= rule.after || rule.count.is_some_and(|c| *fired >= c) {
                continue;
            }
            // xorshift64*: deterministic per seed, no dependency.
            *rng ^= *rng >> 12;
            *rng ^= *rng << 25;
            *rng ^= *rng >> 27;
            let draw = (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
            if draw < rule.probability {
                *fired += 1;
                if rule.stall.is_some() {
                    return Ok(rule.stall);
                }
                return Err(device_error(
                    target,
                    op,
                    offset,
                    io::Error::from_raw_os_error(rule.kind.errno()),
                ));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_fire_by_target_op_range_after_and_count() {
        let f = CacheFaults::new(7);
        f.add(FaultRule {
            start: 4096,
            end: 8192,
            after: 1,
            count: Some(2),
            ..FaultRule::always(Target::Blocks, Some(Op::Write), ErrorKind::Enospc)
        });
        assert!(f.check(Target::Blocks, Op::Write, 0, 4096).is_ok());
        assert!(f.check(Target::Journal, Op::Write, 4096, 40).is_ok());
        assert!(f.check(Target::Blocks, Op::Read, 4096, 4096).is_ok());
        assert!(
            f.check(Target::Blocks, Op::Write, 4096, 10).is_ok(),
            "after 1"
        );
        let e = f.check(Target::Blocks, Op::Write, 5000, 10).unwrap_err();
        assert_eq!(e.raw_os_error(), None, "wrapped");
        let d = as_device_error(&e).unwrap();
        assert_eq!(ErrorKind::of(&d.source), ErrorKind::Enospc);
        assert_eq!(d.offset, 5000);
        assert!(f.check(Target::Blocks, Op::Write, 5000, 10).is_err());
        assert!(
            f.check(Target::Blocks, Op::Write, 5000, 10).is_ok(),
            "count 2"
        );
        assert_eq!(f.fired(), 2);
        f.clear();
        assert!(f.check(Target::Blocks, Op::Write, 5000, 10).is_ok());
    }

    /// A latency rule lets the op run (no error) and counts as fired; an error rule after it
    /// still fires.
    #[test]
    fn latency_spikes_delay_and_do_not_fail() {
        let f = CacheFaults::new(1);
        f.add(FaultRule {
            count: Some(1),
            ..FaultRule::latency(
                Target::Blocks,
                Some(Op::Read),
                std::time::Duration::from_millis(1),
            )
        });
        assert!(f.check(Target::Blocks, Op::Read, 0, 512).is_ok());
        assert_eq!(f.fired(), 1);
        assert!(f.check(Target::Blocks, Op::Read, 0, 512).is_ok());
        assert_eq!(f.fired(), 1, "count 1");
    }

    #[test]
    fn probabilities_repeat_with_the_seed() {
        let run = |seed| {
            let f = CacheFaults::new(seed);
            f.add(FaultRule {
                probability: 0.3,
                ..FaultRule::always(Target::Journal, None, ErrorKind::Eio)
            });
            (0..200)
                .map(|i| f.check(Target::Journal, Op::Write, i, 40).is_err())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        let n = run(3).iter().filter(|&&x| x).count();
        assert!((30..90).contains(&n), "{n} of 200 at 0.3");
    }
}
