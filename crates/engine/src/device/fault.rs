//! A device that fails or stalls on purpose (docs/design.md §11): fault injection as a test
//! tool and for demonstrations (`engine.cache_faults`, `engine.backend_faults`).
//!
//! Each [`FaultRule`] picks ops by kind (read, write, flush, any) and byte range, skips the
//! first `after` of them, then fires on each with `probability` (a seeded generator, so a run
//! repeats), at most `count` times: EIO, ENOSPC, or a latency spike before the op runs. A
//! failed op moves no data. Rules can be replaced or cleared while the device serves
//! ([`FaultDevice::set_rules`]): the "device was fixed" step of a test.

use serde::{Deserialize, Serialize};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, DemoteReply, RemoteStats};
use tiercache_core::units::{de_bytes, de_nanos, de_opt_bytes};
use tiercache_core::Nanos;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The op fails with EIO (a medium or transport error).
    Eio,
    /// The op fails with ENOSPC (a file system with no room for a sparse file's block).
    Enospc,
    /// The op waits `latency_ns` first, then runs.
    Latency,
}

/// Which ops a rule picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultOp {
    /// Reads.
    Read,
    /// Writes (write-zeroes and trims too: they change the device).
    Write,
    /// Flushes.
    Flush,
    /// Every op.
    Any,
}

/// One fault: which ops, where, when, and what happens (a `[[engine.cache_faults]]` entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Which ops.
    pub op: FaultOp,
    /// What happens to them.
    pub kind: FaultKind,
    /// First byte of the range whose ops are picked (an op overlapping it is). Default 0.
    #[serde(default, deserialize_with = "de_bytes")]
    pub start: u64,
    /// End of that range (exclusive); default: the device's end.
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub end: Option<u64>,
    /// Picked ops let through before the rule fires.
    #[serde(default)]
    pub after: u64,
    /// Times the rule fires at most; default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Chance each picked op (past `after`) is hit. Default 1.
    #[serde(default = "one")]
    pub probability: f64,
    /// A latency spike's length.
    #[serde(default, deserialize_with = "de_nanos")]
    pub latency_ns: Nanos,
}

fn one() -> f64 {
    1.0
}

impl FaultRule {
    /// A rule failing every `op` anywhere with `kind` (narrow it with the other fields).
    pub fn new(op: FaultOp, kind: FaultKind) -> Self {
        Self {
            op,
            kind,
            start: 0,
            end: None,
            after: 0,
            count: None,
            probability: 1.0,
            latency_ns: 0,
        }
    }

    /// The same rule on `start..end` only.
    pub fn range(mut self, start: u64, end: u64) -> Self {
        self.start = start;
        self.end = Some(end);
        self
    }

    /// The same rule, firing only after `n` picked ops.
    pub fn after(mut self, n: u64) -> Self {
        self.after = n;
        self
    }

    /// The same rule, firing at most `n` times.
    pub fn count(mut self, n: u64) -> Self {
        self.count = Some(n);
        self
    }

    /// The same rule, hitting each picked op with chance `p`.
    pub fn probability(mut self, p: f64) -> Self {
        self.probability = p;
        self
    }

    /// Checks the rule, naming the bad field as `(field, reason)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(0.0..=1.0).contains(&self.probability) {
            return Err((
                "probability",
                format!("{}: must be within 0..=1", self.probability),
            ));
        }
        if self.end.is_some_and(|e| e <= self.start) {
            return Err((
                "end",
                format!("{:?} is not past start {}", self.end, self.start),
            ));
        }
        if self.kind == FaultKind::Latency && self.latency_ns == 0 {
            return Err(("latency_ns", "a latency fault needs a length".into()));
        }
        if self.kind == FaultKind::Latency && self.latency_ns > 60_000_000_000 {
            return Err(("latency_ns", "at most 60 s".into()));
        }
        Ok(())
    }

    fn picks(&self, op: FaultOp, offset: u64, len: u64) -> bool {
        let kind_ok = self.op == FaultOp::Any || self.op == op;
        let end = self.end.unwrap_or(u64::MAX);
        // A flush has no range: it is picked wherever the rule's range lies.
        let range_ok = op == FaultOp::Flush || (offset < end && offset + len.max(1) > self.start);
        kind_ok && range_ok
    }
}

/// A rule and how far it got.
struct Armed {
    rule: FaultRule,
    seen: u64,
    fired: u64,
}

/// Wraps a device so the ops [`FaultRule`]s pick fail or stall; everything else passes through.
pub struct FaultDevice<D> {
    inner: D,
    rules: Mutex<Vec<Armed>>,
    /// splitmix64 state: the same seed fires on the same ops.
    rng: Mutex<u64>,
    injected: Arc<AtomicU64>,
}

impl<D: BlockDevice> FaultDevice<D> {
    /// `inner` under `rules`, drawing chances from `seed`.
    pub fn new(inner: D, rules: Vec<FaultRule>, seed: u64) -> Self {
        Self {
            inner,
            rules: Mutex::new(arm(rules)),
            rng: Mutex::new(seed),
            injected: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Replaces the rules (an empty list: the device is fixed).
    pub fn set_rules(&self, rules: Vec<FaultRule>) {
        *self.rules.lock().unwrap_or_else(|e| e.into_inner()) = arm(rules);
    }

    /// Faults injected so far (latency spikes included).
    pub fn injected(&self) -> u64 {
        self.injected.load(Relaxed)
    }

    /// A handle to the count of faults injected, readable after the device moved.
    pub fn injected_counter(&self) -> Arc<AtomicU64> {
        self.injected.clone()
    }

    /// The device under the faults.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn next_chance(&self) -> f64 {
        let mut s = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Applies the rules to one op: `Err` to fail it, after any latency spike.
    fn check(&self, op: FaultOp, offset: u64, len: u64) -> io::Result<()> {
        let mut stall = 0;
        let mut fail = None;
        {
            let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
            for a in rules.iter_mut() {
                if !a.rule.picks(op, offset, len) {
                    continue;
                }
                a.seen += 1;
                if a.seen <= a.rule.after || a.rule.count.is_some_and(|c| a.fired >= c) {
                    continue;
                }
                if a.rule.probability < 1.0 && self.next_chance() >= a.rule.probability {
                    continue;
                }
                a.fired += 1;
                self.injected.fetch_add(1, Relaxed);
                match a.rule.kind {
                    FaultKind::Latency => stall = stall.max(a.rule.latency_ns),
                    FaultKind::Eio => fail = fail.or(Some(libc::EIO)),
                    FaultKind::Enospc => fail = fail.or(Some(libc::ENOSPC)),
                }
            }
        }
        if stall > 0 {
            std::thread::sleep(Duration::from_nanos(stall));
        }
        match fail {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }
}

fn arm(rules: Vec<FaultRule>) -> Vec<Armed> {
    rules
        .into_iter()
        .map(|rule| Armed {
            rule,
            seen: 0,
            fired: 0,
        })
        .collect()
}

impl<D: BlockDevice> BlockDevice for FaultDevice<D> {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check(FaultOp::Read, offset, buf.len() as u64)?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.check(FaultOp::Write, offset, data.len() as u64)?;
        self.inner.write_at(data, offset, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.check(FaultOp::Flush, 0, 0)?;
        self.inner.flush()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(FaultOp::Write, offset, len)?;
        self.inner.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.check(FaultOp::Write, offset, len)?;
        self.inner.write_zeroes(offset, len, fua)
    }
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.check(FaultOp::Flush, 0, 0)?;
        self.inner.flush_since(epoch)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.inner.link_stats()
    }
    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        offset: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        self.check(FaultOp::Write, offset, data.len() as u64)?;
        self.inner.demote_at(data, offset, still_valid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_blockdev::MemDevice;

    fn errno(r: io::Result<()>) -> Option<i32> {
        r.err().and_then(|e| e.raw_os_error())
    }

    /// A range rule hits only ops overlapping it, after `after` picked ops, `count` times; a
    /// failed write moves no data; cleared rules let everything through.
    #[test]
    fn rules_pick_by_kind_range_after_and_count() {
        let d = FaultDevice::new(
            MemDevice::new(1 << 16),
            vec![FaultRule::new(FaultOp::Write, FaultKind::Enospc)
                .range(8192, 16384)
                .after(1)
                .count(2)],
            1,
        );
        let b = [7u8; 4096];
        assert_eq!(errno(d.write_at(&b, 0, false)), None, "outside the range");
        assert_eq!(
            errno(d.write_at(&b, 8192, false)),
            None,
            "the first is let through"
        );
        assert_eq!(errno(d.write_at(&b, 12288, false)), Some(libc::ENOSPC));
        assert_eq!(
            errno(d.write_at(&b, 4096 + 2048, false)),
            Some(libc::ENOSPC)
        );
        assert_eq!(errno(d.write_at(&b, 8192, false)), None, "count reached");
        let mut got = [0u8; 4096];
        d.read_at(&mut got, 12288).unwrap();
        assert_eq!(got, [0u8; 4096], "the failed write left nothing");
        assert_eq!(d.injected(), 2);
        d.set_rules(vec![FaultRule::new(FaultOp::Read, FaultKind::Eio)]);
        assert_eq!(errno(d.read_at(&mut got, 0)), Some(libc::EIO));
        d.write_at(&b, 12288, false).unwrap();
        d.set_rules(Vec::new());
        d.read_at(&mut got, 12288).unwrap();
        assert_eq!(got, b);
    }

    /// The same seed fires on the same ops; a probability hits about its share.
    #[test]
    fn probability_is_seeded() {
        let run = |seed| {
            let d = FaultDevice::new(
                MemDevice::new(1 << 16),
                vec![FaultRule::new(FaultOp::Any, FaultKind::Eio).probability(0.25)],
                seed,
            );
            let mut b = [0u8; 512];
            (0..400)
                .map(|i| d.read_at(&mut b, (i % 64) * 512).is_err())
                .collect::<Vec<_>>()
        };
        let a = run(9);
        assert_eq!(a, run(9));
        assert_ne!(a, run(10));
        let hits = a.iter().filter(|x| **x).count();
        assert!((50..150).contains(&hits), "{hits} of 400 at p = 0.25");
    }

    #[test]
    fn bad_rules_name_their_field() {
        let r = FaultRule::new(FaultOp::Any, FaultKind::Eio).probability(1.5);
        assert_eq!(r.validate().unwrap_err().0, "probability");
        let r = FaultRule::new(FaultOp::Any, FaultKind::Latency);
        assert_eq!(r.validate().unwrap_err().0, "latency_ns");
        let r = FaultRule::new(FaultOp::Any, FaultKind::Eio).range(10, 10);
        assert_eq!(r.validate().unwrap_err().0, "end");
    }
}
