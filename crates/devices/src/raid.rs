//! Arrays: RAID-0 striping and RAID-5 with rotating parity and the small-write penalty.

use crate::*;

/// The storage behind a link.
// One per device and matched on every op: keep the disk inline rather than boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum Store {
    None,
    Disk(Disk),
    Array(Array),
    /// Every op takes this long (ns), however many are in flight.
    Constant(Nanos),
    /// A positional disk that queues and reorders (boxed: its queues and cache are large, and
    /// its ops take the executor's tagged path, not the per-op match).
    Queued(Box<QueuedDisk>),
    /// A RAID-0 array of positional disks (the tagged path, as `Queued`).
    QueuedArray(Box<QueuedArray>),
}

/// Runtime state of an array.
#[derive(Debug, Clone)]
pub(crate) struct Array {
    pub(crate) level: RaidLevel,
    pub(crate) members: Vec<Disk>,
    pub(crate) unit: u64,
}

impl Array {
    pub(crate) fn n(&self) -> u64 {
        self.members.len() as u64
    }

    pub(crate) fn data_per_stripe(&self) -> u64 {
        let data_members = match self.level {
            RaidLevel::Raid0 => self.n(),
            RaidLevel::Raid5 => self.n() - 1,
        };
        // `DeviceConfig::resolve` caps members and stripe unit so this stays below 2^38.
        data_members
            .checked_mul(self.unit)
            .expect("members × stripe_unit overflows: the configuration was not resolved")
    }

    /// Member holding data chunk `d` of `stripe`, and the parity member.
    pub(crate) fn place(&self, stripe: u64, d: u64) -> (usize, usize) {
        match self.level {
            RaidLevel::Raid0 => (d as usize, usize::MAX),
            RaidLevel::Raid5 => {
                // Left-symmetric layout: parity rotates backwards, data follows it.
                let n = self.n();
                let parity = (n - 1 - stripe % n) as usize;
                (((parity as u64 + 1 + d) % n) as usize, parity)
            }
        }
    }

    /// Whether a write needs a read phase (some stripe only partly written, RAID-5).
    pub(crate) fn needs_reads(&self, offset: u64, len: u64) -> bool {
        if self.level != RaidLevel::Raid5 || len == 0 {
            return false;
        }
        let dps = self.data_per_stripe();
        offset % dps + len % dps != 0
    }

    pub(crate) fn phases(&self, kind: IoKind, offset: u64, len: u64) -> u8 {
        if kind == IoKind::Write && self.needs_reads(offset, len) {
            2
        } else {
            1
        }
    }

    /// Runs phase `phase` of a logical op; returns when its last member op completes.
    pub(crate) fn submit_phase(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        phase: u8,
    ) -> Nanos {
        let mut done = now;
        if matches!(kind, IoKind::Trim | IoKind::Flush) || len == 0 {
            // Barriers and discards go to every member.
            for m in &mut self.members {
                done = done.max(m.submit(now, kind, 0, 0));
            }
            return done;
        }
        let dps = self.data_per_stripe();
        let unit = self.unit;
        let rmw = kind == IoKind::Write && self.needs_reads(offset, len);
        let reading_phase = rmw && phase == 0;
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let stripe = pos / dps;
            let stripe_start = stripe * dps;
            // The last stripe of the byte range may end past u64::MAX: no `stripe_start + dps`.
            let stripe_end = stripe_start + dps.min(end - stripe_start);
            let full = pos == stripe_start && end - stripe_start >= dps;
            // Union of the in-chunk byte ranges touched in this stripe (the parity range).
            let (mut plo, mut phi) = (u64::MAX, 0);
            while pos < stripe_end {
                let d = (pos - stripe_start) / unit;
                let within = (pos - stripe_start) % unit;
                let n = (unit - within).min(stripe_end - pos);
                let (member, _) = self.place(stripe, d);
                let moff = stripe * unit + within;
                plo = plo.min(within);
                phi = phi.max(within + n);
                let write_now = kind == IoKind::Write && !reading_phase;
                if kind == IoKind::Read || write_now || (reading_phase && !full) {
                    let k = if write_now {
                        IoKind::Write
                    } else {
                        IoKind::Read
                    };
                    done = done.max(self.members[member].submit(now, k, moff, n));
                }
                pos += n;
            }
            if self.level == RaidLevel::Raid5 && kind == IoKind::Write && (!reading_phase || !full)
            {
                let (_, parity) = self.place(stripe, 0);
                let k = if reading_phase {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                done =
                    done.max(self.members[parity].submit(now, k, stripe * unit + plo, phi - plo));
            }
        }
        done
    }
}
