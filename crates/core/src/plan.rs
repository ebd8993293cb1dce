//! Plans: the device operations the policy core yields for one request or flush job.
//!
//! A plan is a list of [`DevOp`]s grouped into stages. Every op of stage `s` may start once all
//! ops of stage `s - 1` have completed; ops of one stage run in parallel. The request is
//! acknowledged when its last *critical* op completes; non-critical ops (a promotion write after a
//! read miss has already returned its data) continue in the background and still load devices.

/// A plan's stage number. 32 bits: a request evicting lines it filled itself (a long request
/// over a small cache) adds up to 3 stages per such eviction, which a `u8` overflowed past
/// about 85 times the cache's line count (wrapping in release builds, so a victim's
/// write-back could be ordered before the write that dirtied it); a request would need
/// billions of lines to overflow this.
pub type Stage = u32;

use crate::request::VolumeId;
use serde::{Deserialize, Serialize};

/// Which device an op addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Device {
    /// The cache device; offsets are cache-device byte addresses (slot × line size + offset).
    Cache,
    /// The backend; offsets are byte addresses within the op's volume.
    Backend,
}

/// Kind of device I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IoKind {
    /// Read bytes.
    Read,
    /// Write bytes.
    Write,
    /// Discard bytes.
    Trim,
    /// Device cache flush (durability barrier), no data.
    Flush,
}

/// Why an op is issued. Executors account device load by cause (LBICA's R/W/P/E classes, docs/design.md §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpCause {
    /// Application read served from the cache (R).
    ReadHit,
    /// Application read served from the backend (a miss or a bypass).
    ReadMiss,
    /// Application write data going to the cache (W) or, when written through, the backend.
    Write,
    /// Write of missed data into the cache after a read miss (P).
    Promotion,
    /// Backend read of the uncovered part of a partially written sub-block (read-modify-write).
    Fill,
    /// Write-back of dirty data by the cleaner (E).
    Clean,
    /// Write-back of a dirty victim to make room (E, on the request's critical path).
    EvictFlush,
    /// Application trim passed on.
    Trim,
    /// Application flush passed on.
    Flush,
    /// A clean victim handed to the level below (DEMOTE, docs/design.md §4.7): its data is already
    /// there or further down, so the level below may refuse it.
    Demote,
}

/// Where a device op's work comes from, as load balancing classifies the work queued at a
/// device (docs/design.md §4.8: R, W, P, E).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Origin {
    /// An application read (R): served from the cache, or from the backend on a miss.
    Read,
    /// An application write (W), with the reads that fill around a partial one.
    Write,
    /// A promotion (P): missed data written into the cache after a read miss.
    Promotion,
    /// An eviction or flush (E): dirty data read from the cache and written back.
    Eviction,
}

impl Origin {
    /// Every origin, in index order.
    pub const ALL: [Origin; 4] = [
        Origin::Read,
        Origin::Write,
        Origin::Promotion,
        Origin::Eviction,
    ];

    /// Index in arrays kept per origin.
    pub fn index(self) -> usize {
        self as usize
    }

    /// One-letter name (R, W, P, E).
    pub fn letter(self) -> char {
        ['R', 'W', 'P', 'E'][self as usize]
    }
}

/// Weight of a new sample in the executors' service-time moving averages: 1/2^4, about the
/// last few dozen ops.
pub const SERVICE_EWMA_SHIFT: u32 = 4;

/// One step of a service-time moving average: `avg` moved 1/16 of the way to `sample` (the
/// first sample, when `avg` is 0, is taken as it is). Both executors estimate a device's time
/// per op with it.
///
/// In 64 bits: a step down moves by the difference divided rounding up, as an arithmetic
/// shift of the negative difference does (`i128` arithmetic, used before, gives the same).
#[inline]
pub fn service_ewma(avg: u64, sample: u64) -> u64 {
    if avg == 0 {
        sample.max(1)
    } else if sample >= avg {
        avg + ((sample - avg) >> SERVICE_EWMA_SHIFT)
    } else {
        let down = (avg - sample).div_ceil(1 << SERVICE_EWMA_SHIFT);
        (avg - down).max(1)
    }
}

impl OpCause {
    /// The origin of an op of this cause; `None` for trims and flushes, which carry no data.
    pub fn origin(self) -> Option<Origin> {
        match self {
            OpCause::ReadHit | OpCause::ReadMiss => Some(Origin::Read),
            OpCause::Write | OpCause::Fill => Some(Origin::Write),
            OpCause::Promotion => Some(Origin::Promotion),
            OpCause::Clean | OpCause::EvictFlush | OpCause::Demote => Some(Origin::Eviction),
            OpCause::Trim | OpCause::Flush => None,
        }
    }
}

/// One device operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevOp {
    /// Target device.
    pub device: Device,
    /// Read, write, trim or flush.
    pub kind: IoKind,
    /// Volume (meaningful for backend ops; for cache ops, the volume the data belongs to).
    pub volume: VolumeId,
    /// Byte offset on the device (cache address or volume address).
    pub offset: u64,
    /// Volume byte address (in `volume`) of the data the op carries: equal to `offset` for
    /// backend ops; for cache ops the volume address of the line bytes at that cache address.
    /// Executors that move real data route it by this address.
    pub vaddr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Stage: runs after every op of the previous stage completed.
    pub stage: Stage,
    /// Whether the request waits for this op before it is acknowledged.
    pub critical: bool,
    /// Why the op is issued.
    pub cause: OpCause,
}

impl DevOp {
    /// An op on the backend over `volume`'s bytes `offset..offset + len`, issued for `cause`:
    /// stage 0 and critical unless said otherwise ([`DevOp::at_stage`], [`DevOp::critical`]).
    #[inline]
    pub fn backend(kind: IoKind, volume: VolumeId, offset: u64, len: u64, cause: OpCause) -> Self {
        Self {
            device: Device::Backend,
            kind,
            volume,
            offset,
            vaddr: offset,
            len,
            stage: 0,
            critical: true,
            cause,
        }
    }

    /// An op on the cache device at cache address `addr`, carrying the `len` bytes of `volume`
    /// at volume address `vaddr`, issued for `cause`: stage 0 and critical unless said otherwise.
    #[inline]
    pub fn cache(
        kind: IoKind,
        volume: VolumeId,
        addr: u64,
        vaddr: u64,
        len: u64,
        cause: OpCause,
    ) -> Self {
        Self {
            device: Device::Cache,
            offset: addr,
            vaddr,
            ..Self::backend(kind, volume, addr, len, cause)
        }
    }

    /// The same op in `stage` (it runs after every op of the stages before).
    #[inline]
    pub fn at_stage(self, stage: Stage) -> Self {
        Self { stage, ..self }
    }

    /// The same op, which the request waits for (`true`) or not before it is acknowledged.
    #[inline]
    pub fn critical(self, critical: bool) -> Self {
        Self { critical, ..self }
    }
}

/// The ops one request (or one flush job) needs, in stages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Ops in non-decreasing stage order.
    pub ops: Vec<DevOp>,
}

impl Plan {
    /// Empty plan (a request served with no device I/O, e.g. a trim of uncached data).
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes all ops, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// Appends an op, merging it into the latest op of the same device in the same stage when
    /// both are of the same kind, volume, criticality and cause and the new one starts where
    /// that one ends. Ops of one stage run concurrently, so the merge may reach past ops of the
    /// other device: a multi-line miss whose victims are read from the cache (write-backs,
    /// demotes) between its fills still reads the backend in one op.
    pub fn push(&mut self, op: DevOp) {
        debug_assert!(op.len > 0 || op.kind == IoKind::Flush);
        if let Some(last) = self.ops.last() {
            debug_assert!(last.stage <= op.stage, "plan stages must not decrease");
        }
        if let Some(prev) = self
            .ops
            .iter_mut()
            .rev()
            .take_while(|o| o.stage == op.stage)
            .find(|o| o.device == op.device)
        {
            if prev.kind == op.kind
                && prev.volume == op.volume
                && prev.critical == op.critical
                && prev.cause == op.cause
                && prev.kind != IoKind::Flush
                && prev.offset + prev.len == op.offset
                && prev.vaddr + prev.len == op.vaddr
            {
                prev.len += op.len;
                return;
            }
        }
        self.ops.push(op);
    }

    /// Number of stages (highest stage + 1), 0 for an empty plan.
    pub fn stages(&self) -> usize {
        self.ops.last().map_or(0, |o| o.stage as usize + 1)
    }

    /// Bytes moved by ops matching a predicate.
    pub fn bytes(&self, mut f: impl FnMut(&DevOp) -> bool) -> u64 {
        self.ops.iter().filter(|o| f(o)).map(|o| o.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 64-bit moving average is the signed 128-bit formula it replaced.
    #[test]
    fn service_ewma_matches_the_wide_formula() {
        let wide = |avg: u64, sample: u64| {
            if avg == 0 {
                sample.max(1)
            } else {
                let a = avg as i128 + ((sample as i128 - avg as i128) >> SERVICE_EWMA_SHIFT);
                a.max(1) as u64
            }
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mix magnitudes: small values, values near a power of two, and the extremes.
            match x % 4 {
                0 => x % 64,
                1 => x >> (x % 64),
                2 => u64::MAX - x % 64,
                _ => x,
            }
        };
        for _ in 0..200_000 {
            let (a, s) = (next(), next());
            assert_eq!(service_ewma(a, s), wide(a, s), "avg {a}, sample {s}");
        }
        for a in 0..40 {
            for s in 0..40 {
                assert_eq!(service_ewma(a, s), wide(a, s), "avg {a}, sample {s}");
            }
        }
    }

    #[test]
    fn op_builder_defaults_and_setters() {
        let b = DevOp::backend(IoKind::Write, VolumeId(2), 8192, 4096, OpCause::Clean);
        assert_eq!(
            (b.device, b.offset, b.vaddr, b.len),
            (Device::Backend, 8192, 8192, 4096)
        );
        assert_eq!((b.stage, b.critical, b.volume), (0, true, VolumeId(2)));
        let c = DevOp::cache(IoKind::Read, VolumeId(2), 65536, 8192, 512, OpCause::Clean)
            .at_stage(3)
            .critical(false);
        assert_eq!(
            (c.device, c.offset, c.vaddr, c.len),
            (Device::Cache, 65536, 8192, 512)
        );
        assert_eq!((c.stage, c.critical, c.kind), (3, false, IoKind::Read));
    }

    /// Plans hold many ops and the simulator copies them: 32-bit stages fit the padding an
    /// op had with 8-bit ones.
    #[test]
    fn an_op_is_40_bytes() {
        assert_eq!(std::mem::size_of::<DevOp>(), 40);
    }

    fn op(offset: u64, len: u64, stage: Stage) -> DevOp {
        DevOp {
            device: Device::Backend,
            kind: IoKind::Read,
            volume: VolumeId(0),
            offset,
            vaddr: offset,
            len,
            stage,
            critical: true,
            cause: OpCause::ReadMiss,
        }
    }

    #[test]
    fn backend_reads_merge_past_cache_ops_of_the_same_stage() {
        // A two-line miss whose victims are read from the cache between its fills.
        let v = VolumeId(0);
        let mut p = Plan::default();
        p.push(DevOp::cache(
            IoKind::Read,
            v,
            40960,
            0,
            4096,
            OpCause::Demote,
        ));
        p.push(DevOp::backend(IoKind::Read, v, 0, 4096, OpCause::ReadMiss));
        p.push(DevOp::cache(
            IoKind::Read,
            v,
            8192,
            0,
            4096,
            OpCause::Demote,
        ));
        p.push(DevOp::backend(
            IoKind::Read,
            v,
            4096,
            4096,
            OpCause::ReadMiss,
        ));
        // Not past a stage boundary, and never into an op of another cause.
        p.push(DevOp::backend(IoKind::Read, v, 8192, 4096, OpCause::ReadMiss).at_stage(1));
        p.push(DevOp::cache(IoKind::Write, v, 40960, 0, 4096, OpCause::Promotion).at_stage(1));
        p.push(DevOp::backend(IoKind::Read, v, 12288, 4096, OpCause::Clean).at_stage(1));
        let shape: Vec<(Device, Stage, u64, u64)> = p
            .ops
            .iter()
            .map(|o| (o.device, o.stage, o.offset, o.len))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Device::Cache, 0, 40960, 4096),
                (Device::Backend, 0, 0, 8192),
                (Device::Cache, 0, 8192, 4096),
                (Device::Backend, 1, 8192, 4096),
                (Device::Cache, 1, 40960, 4096),
                (Device::Backend, 1, 12288, 4096),
            ]
        );
    }

    #[test]
    fn contiguous_ops_merge_within_a_stage_only() {
        let mut p = Plan::new();
        p.push(op(0, 4096, 0));
        p.push(op(4096, 4096, 0));
        p.push(op(8192, 4096, 1));
        p.push(op(20000, 10, 1));
        assert_eq!(p.ops.len(), 3);
        assert_eq!(p.ops[0].len, 8192);
        assert_eq!(p.stages(), 2);
        assert_eq!(p.bytes(|o| o.stage == 1), 4106);
    }
}
