//! One device: a FIFO queue in front of identical channels, with IOPS and bandwidth ceilings.

use crate::*;

pub(crate) const PS_PER_NS: u128 = 1000;

/// Runtime state of one single device.
#[derive(Debug, Clone)]
pub struct Disk {
    pub(crate) p: DiskParams,
    /// Picoseconds per op and per byte for the ceilings and transfer, precomputed.
    pub(crate) read_spacing_ps: u128,
    pub(crate) write_spacing_ps: u128,
    pub(crate) read_bw_ps_per_byte: u128,
    pub(crate) write_bw_ps_per_byte: u128,
    pub(crate) read_xfer_ps_per_byte: u128,
    pub(crate) write_xfer_ps_per_byte: u128,
    /// Free times of the channels used so far (min-heap); a channel enters it at its first
    /// op, so its size is bounded by the ops submitted, not by `channels`. A lone channel
    /// skips the heap.
    pub(crate) channels: BinaryHeap<Reverse<Nanos>>,
    pub(crate) single_free: Nanos,
    /// Earliest start allowed by the IOPS and bandwidth ceilings, ps.
    pub(crate) gate_ps: u128,
    /// Byte after the last op, for sequential detection.
    pub(crate) last_end: u64,
    /// Capacity consumed, ps: per op the largest of its channel share, IOPS spacing and
    /// bandwidth time.
    pub(crate) cost_ps: u128,
    /// Ops submitted.
    pub ops: u64,
    /// Reads submitted.
    pub reads: u64,
    /// Writes submitted.
    pub writes: u64,
}

pub(crate) fn spacing_ps(iops: f64) -> u128 {
    if iops > 0.0 {
        (1e12 / iops).round() as u128
    } else {
        0
    }
}

pub(crate) fn bw_ps(bw: u64) -> u128 {
    if bw > 0 {
        (1e12 / bw as f64).round() as u128
    } else {
        0
    }
}

impl Disk {
    /// A device at rest.
    pub fn new(p: DiskParams) -> Self {
        Self {
            read_spacing_ps: spacing_ps(p.read_iops),
            write_spacing_ps: spacing_ps(p.write_iops),
            read_bw_ps_per_byte: bw_ps(p.read_bandwidth),
            write_bw_ps_per_byte: bw_ps(p.write_bandwidth),
            read_xfer_ps_per_byte: (p.read_ns_per_byte * 1000.0).round() as u128,
            write_xfer_ps_per_byte: (p.write_ns_per_byte * 1000.0).round() as u128,
            p,
            channels: BinaryHeap::new(),
            single_free: 0,
            gate_ps: 0,
            last_end: u64::MAX,
            cost_ps: 0,
            ops: 0,
            reads: 0,
            writes: 0,
        }
    }

    /// Parameters.
    pub fn params(&self) -> &DiskParams {
        &self.p
    }

    /// Service time of an op once it holds a channel, ps.
    pub(crate) fn service_ps(&self, kind: IoKind, offset: u64, len: u64) -> u128 {
        let seq = offset == self.last_end;
        let base = |b: Nanos| match (seq, self.p.seq_base_ns) {
            (true, Some(s)) => s,
            _ => b,
        };
        // A per-byte time of u128::MAX ps (a huge `ns_per_byte`, saturated) must not wrap.
        match kind {
            IoKind::Read => (base(self.p.read_base_ns) as u128 * PS_PER_NS)
                .saturating_add((len as u128).saturating_mul(self.read_xfer_ps_per_byte)),
            IoKind::Write => (base(self.p.write_base_ns) as u128 * PS_PER_NS)
                .saturating_add((len as u128).saturating_mul(self.write_xfer_ps_per_byte)),
            IoKind::Trim => self.p.trim_ns as u128 * PS_PER_NS,
            IoKind::Flush => self.p.flush_ns as u128 * PS_PER_NS,
        }
    }

    /// Submits an op at `now` (calls must come in non-decreasing `now`); returns its completion
    /// time, [`Nanos::MAX`] when that lies at or beyond it (times saturate, never wrap).
    pub fn submit(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        let service = self.service_ps(kind, offset, len);
        let (spacing, bw) = match kind {
            IoKind::Read => (
                self.read_spacing_ps,
                (len as u128).saturating_mul(self.read_bw_ps_per_byte),
            ),
            IoKind::Write => (
                self.write_spacing_ps,
                (len as u128).saturating_mul(self.write_bw_ps_per_byte),
            ),
            IoKind::Trim | IoKind::Flush => (0, 0),
        };
        let gap = spacing.max(bw);
        // The op takes the channel free first; its free time becomes the op's end. A channel
        // never used yet is free at 0, so while some are left the op takes a new one;
        // otherwise that is one sift of the heap's top (not a pop and a push).
        let multi = self.p.channels > 1;
        let fresh = multi && self.channels.len() < self.p.channels as usize;
        let mut earliest = if multi && !fresh {
            self.channels.peek_mut()
        } else {
            None
        };
        let chan_free = match &earliest {
            Some(top) => top.0,
            None if fresh => 0,
            None => self.single_free,
        };
        let start_ps = (now.max(chan_free) as u128 * PS_PER_NS).max(self.gate_ps);
        self.gate_ps = start_ps.saturating_add(gap);
        // Round up so an op never completes before its modelled time.
        let end = ps_to_ns_ceil(start_ps.saturating_add(service));
        match &mut earliest {
            Some(top) => top.0 = end,
            None if fresh => {}
            None => self.single_free = end,
        }
        drop(earliest);
        if fresh {
            self.channels.push(Reverse(end));
        }
        self.cost_ps = self
            .cost_ps
            .saturating_add(div_u128(service, u64::from(self.p.channels)).max(gap));
        self.last_end = offset.saturating_add(len);
        self.ops += 1;
        match kind {
            IoKind::Read => self.reads += 1,
            IoKind::Write => self.writes += 1,
            _ => {}
        }
        end
    }
}

/// `ps` in whole nanoseconds, rounded up, saturating at [`Nanos::MAX`] (beyond 584 years: a
/// device setting out of all proportion, which the executor reports). A 128-bit division is a
/// library call; times that fit in 64 bits (213 days of picoseconds) take the 64-bit one, with
/// the same result.
#[inline]
pub(crate) fn ps_to_ns_ceil(ps: u128) -> Nanos {
    match u64::try_from(ps) {
        Ok(p) => p.div_ceil(PS_PER_NS as u64),
        Err(_) => Nanos::try_from(ps.div_ceil(PS_PER_NS)).unwrap_or(Nanos::MAX),
    }
}

/// `a / b` for a nonzero `b`, in 64 bits when `a` fits (same result as the 128-bit division).
#[inline]
pub(crate) fn div_u128(a: u128, b: u64) -> u128 {
    match u64::try_from(a) {
        Ok(a) => u128::from(a / b),
        Err(_) => a / u128::from(b),
    }
}
