//! One device: a FIFO queue in front of identical channels, with IOPS and bandwidth ceilings.

use crate::*;

pub(crate) const PS_PER_NS: u128 = 1000;

/// Ops between two [`Disk::prune_idle`] calls: often enough that idle channels do not pile up
/// in the heap, rarely enough that the pass costs a few instructions per op.
const PRUNE_EVERY: u64 = 256;

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
    /// Free times of the channels used (min-heap); a channel enters it at an op, and leaves
    /// once free in a [`Disk::prune_idle`] pass, so its size is bounded by the ops submitted
    /// and about the ops in service, not by `channels`. A channel not in it is free at 0 or
    /// at a time already past: an op taking it starts at its `now`. A lone channel skips the
    /// heap.
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
    /// The same costs in 64-bit picoseconds, by [`IoKind`] (`None` when one does not fit):
    /// `submit` works in 64 bits while its figures fit, which is every op of a run shorter
    /// than 213 days, and falls back to the 128-bit path otherwise (same result).
    pub(crate) narrow: Option<[NarrowCosts; 4]>,
}

/// One kind's costs in 64-bit picoseconds (see [`Disk::narrow`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NarrowCosts {
    base_ps: u64,
    /// Base time of a sequential op (`base_ps` when the kind has none).
    seq_base_ps: u64,
    xfer_ps_per_byte: u64,
    spacing_ps: u64,
    bw_ps_per_byte: u64,
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
        let mut d = Self {
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
            narrow: None,
        };
        d.narrow = d.narrow_costs();
        d
    }

    /// The costs of each kind in 64 bits, if they all fit.
    fn narrow_costs(&self) -> Option<[NarrowCosts; 4]> {
        let ps = |ns: Nanos| ns.checked_mul(PS_PER_NS as u64);
        let seq = |base: Nanos| match self.p.seq_base_ns {
            Some(s) => ps(s),
            None => ps(base),
        };
        let fit = |v: u128| u64::try_from(v).ok();
        let rw = |base: Nanos, xfer: u128, spacing: u128, bw: u128| {
            Some(NarrowCosts {
                base_ps: ps(base)?,
                seq_base_ps: seq(base)?,
                xfer_ps_per_byte: fit(xfer)?,
                spacing_ps: fit(spacing)?,
                bw_ps_per_byte: fit(bw)?,
            })
        };
        let fixed = |ns: Nanos| {
            let base_ps = ps(ns)?;
            Some(NarrowCosts {
                base_ps,
                seq_base_ps: base_ps,
                xfer_ps_per_byte: 0,
                spacing_ps: 0,
                bw_ps_per_byte: 0,
            })
        };
        let costs = [
            rw(
                self.p.read_base_ns,
                self.read_xfer_ps_per_byte,
                self.read_spacing_ps,
                self.read_bw_ps_per_byte,
            )?,
            rw(
                self.p.write_base_ns,
                self.write_xfer_ps_per_byte,
                self.write_spacing_ps,
                self.write_bw_ps_per_byte,
            )?,
            fixed(self.p.trim_ns)?,
            fixed(self.p.flush_ns)?,
        ];
        debug_assert!(IoKind::Read as usize == 0 && IoKind::Flush as usize == 3);
        Some(costs)
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
    #[inline(always)]
    pub fn submit(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        if self.ops.is_multiple_of(PRUNE_EVERY) && self.p.channels > 1 {
            self.prune_idle(now);
        }
        if let Some(costs) = &self.narrow {
            let c = costs[kind as usize];
            if let Some(end) = self.submit_narrow(c, now, kind, offset, len) {
                return end;
            }
        }
        self.submit_wide(now, kind, offset, len)
    }

    /// Whether an op at `now` takes a channel never used (pushed on the heap) rather than the
    /// heap's earliest free one: only when none in the heap is free by `now`. An op starts at
    /// `now` on either, so which it takes changes no result, and reusing a free one keeps the
    /// heap from growing back to `channels` entries after [`Disk::prune_idle`].
    #[inline(always)]
    fn takes_fresh(&self, now: Nanos) -> bool {
        self.channels.len() < self.p.channels as usize
            && self.channels.peek().is_none_or(|top| top.0 > now)
    }

    /// Drops the channels free by `now` from the heap (every [`PRUNE_EVERY`] ops): they are
    /// free for every later op too (`now` never goes back), as a channel never used, so the
    /// heap holds about the channels busy at once, not `channels` (60 on an NVMe SSD, most
    /// of them idle under a light load), and each op sifts through a shorter heap.
    #[cold]
    #[inline(never)]
    fn prune_idle(&mut self, now: Nanos) {
        self.channels.retain(|free| free.0 > now);
    }

    /// `submit` in 64-bit picoseconds; `None` (and nothing changed) when a figure would not
    /// fit, for [`Disk::submit_wide`] to take. Every step is the wide path's: where nothing
    /// saturates the two agree exactly.
    #[inline(always)]
    fn submit_narrow(
        &mut self,
        c: NarrowCosts,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
    ) -> Option<Nanos> {
        let base = if offset == self.last_end {
            c.seq_base_ps
        } else {
            c.base_ps
        };
        let service = base.checked_add(len.checked_mul(c.xfer_ps_per_byte)?)?;
        let gap = c.spacing_ps.max(len.checked_mul(c.bw_ps_per_byte)?);
        let multi = self.p.channels > 1;
        let fresh = multi && self.takes_fresh(now);
        let chan_free = if !multi {
            self.single_free
        } else if fresh {
            0
        } else {
            self.channels
                .peek()
                .expect("every channel is in the heap")
                .0
        };
        let gate = u64::try_from(self.gate_ps).ok()?;
        let start_ps = now.max(chan_free).checked_mul(PS_PER_NS as u64)?.max(gate);
        let new_gate = start_ps.checked_add(gap)?;
        // Rounded up as `(ps + 999) / 1000`, a multiply and shifts, where `div_ceil` also
        // tests the remainder; an end within 999 ps of `u64::MAX` takes the wide path.
        let end = start_ps
            .checked_add(service)?
            .checked_add(PS_PER_NS as u64 - 1)?
            / PS_PER_NS as u64;
        self.gate_ps = u128::from(new_gate);
        if !multi {
            self.single_free = end;
        } else if fresh {
            self.channels.push(Reverse(end));
        } else if let Some(mut top) = self.channels.peek_mut() {
            top.0 = end;
        }
        let share = service / u64::from(self.p.channels);
        self.cost_ps = self.cost_ps.saturating_add(u128::from(share.max(gap)));
        self.count_op(kind, offset, len);
        Some(end)
    }

    /// Counts a submitted op and remembers where it ended (the next op's seek distance).
    #[inline]
    fn count_op(&mut self, kind: IoKind, offset: u64, len: u64) {
        self.last_end = offset.saturating_add(len);
        self.ops += 1;
        match kind {
            IoKind::Read => self.reads += 1,
            IoKind::Write => self.writes += 1,
            _ => {}
        }
    }

    /// `submit` in 128-bit picoseconds, saturating.
    #[cold]
    #[inline(never)]
    fn submit_wide(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
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
        let fresh = multi && self.takes_fresh(now);
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
        self.count_op(kind, offset, len);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Everything `submit` changes, to compare two disks.
    fn state(d: &Disk) -> (Vec<Nanos>, Nanos, u128, u64, u128, u64, u64, u64) {
        let mut chans: Vec<Nanos> = d.channels.iter().map(|r| r.0).collect();
        chans.sort_unstable();
        (
            chans,
            d.single_free,
            d.gate_ps,
            d.last_end,
            d.cost_ps,
            d.ops,
            d.reads,
            d.writes,
        )
    }

    fn kind(k: u8) -> IoKind {
        [IoKind::Read, IoKind::Write, IoKind::Trim, IoKind::Flush][k as usize % 4]
    }

    /// An end a picosecond past a whole nanosecond rounds up to the next; one on it does not.
    #[test]
    fn ends_round_up_to_whole_nanoseconds() {
        let p = DiskParams {
            read_base_ns: 10,
            read_ns_per_byte: 0.001,
            channels: 1,
            ..DiskParams::default()
        };
        // 1 ps per byte on a 10 ns base: `len` ps past 10 ns.
        for (len, end) in [(0, 10), (1, 11), (999, 11), (1000, 11), (1001, 12)] {
            let mut narrow = Disk::new(p);
            let mut wide = Disk::new(p);
            wide.narrow = None;
            assert_eq!(narrow.submit(0, IoKind::Read, 0, len), end, "{len} B");
            assert_eq!(wide.submit(0, IoKind::Read, 0, len), end, "{len} B");
        }
    }

    /// The model in its plainest form: every channel's free time in a list, an op taking the
    /// first free one, all in 128-bit picoseconds (figures that never saturate).
    struct Plain {
        free: Vec<Nanos>,
        gate_ps: u128,
        last_end: u64,
    }

    impl Plain {
        fn submit(&mut self, d: &Disk, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
            let seq = offset == self.last_end;
            let (base, xfer, spacing, bw) = match kind {
                IoKind::Read => (
                    d.p.read_base_ns,
                    d.read_xfer_ps_per_byte,
                    d.read_spacing_ps,
                    d.read_bw_ps_per_byte,
                ),
                IoKind::Write => (
                    d.p.write_base_ns,
                    d.write_xfer_ps_per_byte,
                    d.write_spacing_ps,
                    d.write_bw_ps_per_byte,
                ),
                IoKind::Trim => (d.p.trim_ns, 0, 0, 0),
                IoKind::Flush => (d.p.flush_ns, 0, 0, 0),
            };
            let base = match (seq, d.p.seq_base_ns, kind) {
                (true, Some(s), IoKind::Read | IoKind::Write) => s,
                _ => base,
            };
            let service = base as u128 * PS_PER_NS + len as u128 * xfer;
            let gap = spacing.max(len as u128 * bw);
            let (i, &free) = self
                .free
                .iter()
                .enumerate()
                .min_by_key(|&(_, f)| *f)
                .unwrap();
            let start = (now.max(free) as u128 * PS_PER_NS).max(self.gate_ps);
            self.gate_ps = start + gap;
            let end = (start + service).div_ceil(PS_PER_NS) as Nanos;
            self.free[i] = end;
            self.last_end = offset + len;
            end
        }
    }

    /// The disk the proptests draw: reads as given, writes at a third of the base latency
    /// and half the per-byte cost and ceilings.
    fn test_params(
        channels: u32,
        base: u64,
        seq_base: Option<u64>,
        per_byte: f64,
        iops: f64,
        bandwidth: u64,
    ) -> DiskParams {
        DiskParams {
            read_base_ns: base,
            write_base_ns: base / 3,
            seq_base_ns: seq_base,
            read_ns_per_byte: per_byte,
            write_ns_per_byte: per_byte / 2.0,
            channels,
            read_iops: iops,
            write_iops: iops / 2.0,
            read_bandwidth: bandwidth,
            write_bandwidth: bandwidth / 2,
            trim_ns: base / 7,
            flush_ns: 1000,
            ..DiskParams::default()
        }
    }

    proptest! {
        /// A heap of the channels used, pruned of the free ones, gives every op the end a list
        /// of all channels' free times gives, under light load (idle channels) and heavy, over
        /// several prune passes.
        #[test]
        fn channel_heap_matches_a_plain_list(
            channels in prop_oneof![Just(1u32), 2u32..6, 9u32..15, Just(60)],
            base in prop_oneof![0u64..20_000, 0u64..200_000],
            seq_base in proptest::option::of(0u64..10_000),
            per_byte in 0.0f64..2.0,
            iops in prop_oneof![Just(0.0f64), 1e3f64..1e6],
            bandwidth in prop_oneof![Just(0u64), 1u64..10_000_000_000],
            ops in proptest::collection::vec((prop_oneof![0u64..100, 0u64..3_000, 0u64..200_000], 0u8..4, 0u64..64, 0u64..65_536), 1..1200),
        ) {
            let p = test_params(channels, base, seq_base, per_byte, iops, bandwidth);
            let mut disk = Disk::new(p);
            let mut plain = Plain { free: vec![0; channels as usize], gate_ps: 0, last_end: u64::MAX };
            let mut now = 0u64;
            for (dt, k, block, len) in ops {
                now += dt;
                let (kind, offset) = (kind(k), block * 4096);
                let expected = plain.submit(&disk, now, kind, offset, len);
                prop_assert_eq!(disk.submit(now, kind, offset, len), expected);
                prop_assert!(disk.channels.len() <= channels as usize);
            }
        }


                /// The 64-bit path gives what the 128-bit one gives, op for op, including on devices
        /// whose figures overflow 64 bits part-way (the fallback) or from the start.
        #[test]
        fn narrow_path_matches_wide(
            channels in prop_oneof![Just(1u32), 2u32..6, Just(60)],
            base in prop_oneof![0u64..200_000, Just(u64::MAX / 2000), Just(u64::MAX / 100)],
            seq_base in proptest::option::of(0u64..10_000),
            per_byte in prop_oneof![0.0f64..2.0, Just(1e12)],
            iops in prop_oneof![Just(0.0f64), 1e3f64..1e6, Just(1e-6)],
            bandwidth in prop_oneof![Just(0u64), 1u64..10_000_000_000],
            ops in proptest::collection::vec((0u64..50_000, 0u8..4, 0u64..64, 0u64..65_536), 1..200),
        ) {
            let p = test_params(channels, base, seq_base, per_byte, iops, bandwidth);
            let mut narrow = Disk::new(p);
            let mut wide = Disk::new(p);
            wide.narrow = None;
            let mut now = 0u64;
            for (dt, k, block, len) in ops {
                now = now.saturating_add(dt);
                let (kind, offset) = (kind(k), block * 4096);
                let a = narrow.submit(now, kind, offset, len);
                let b = wide.submit(now, kind, offset, len);
                prop_assert_eq!(a, b);
                prop_assert_eq!(state(&narrow), state(&wide));
            }
        }
    }
}
