//! A RAID-0 array of queueing disks (docs/design.md §5.1): each logical op is cut into
//! stripe-unit pieces, each piece goes to its member's queue (where shortest positioning
//! time first and the write cache act as on a lone drive), and the op completes when its last
//! piece does. Members are independent drives, so a queue spread over them is served in
//! parallel. RAID-5 (whose small writes read before they write) is not modelled over queueing
//! members, nor a power cut of their caches.

use std::collections::{BTreeMap, BTreeSet};

use crate::*;

/// A logical op in flight: its tag, its pieces not yet known done, and the latest
/// completion among those known.
#[derive(Debug, Clone, Copy)]
struct Pending {
    tag: u64,
    left: u32,
    end: Nanos,
}

/// Runtime state of a RAID-0 array of queueing disks.
#[derive(Debug, Clone)]
pub struct QueuedArray {
    members: Vec<QueuedDisk>,
    unit: u64,
    /// Logical ops in flight by the id their pieces carry at the members.
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
    /// The wakes the members asked for: (time, member).
    wakes: BTreeSet<(Nanos, usize)>,
    /// The earliest wake asked of the executor and not delivered yet.
    armed_at: Option<Nanos>,
    /// The members' completions (scratch).
    scratch: Vec<(u64, Nanos)>,
}

impl QueuedArray {
    /// `members` drives of parameters `p` (with a geometry), striped by `unit` bytes.
    pub fn new(p: DiskParams, members: u32, unit: u64) -> Self {
        Self {
            members: (0..members).map(|_| QueuedDisk::new(p)).collect(),
            unit,
            pending: BTreeMap::new(),
            next_id: 0,
            wakes: BTreeSet::new(),
            armed_at: None,
            scratch: Vec::new(),
        }
    }

    /// The member drives.
    pub fn members(&self) -> &[QueuedDisk] {
        &self.members
    }

    /// The pieces of an op: (member, member offset, length). Barriers and discards of no
    /// length go to every member.
    fn pieces(&self, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
        let n = self.members.len() as u64;
        if len == 0 {
            return (0..self.members.len()).map(|m| (m, 0, 0)).collect();
        }
        let dps = n * self.unit;
        let mut out = Vec::new();
        let (mut pos, end) = (offset, offset.saturating_add(len));
        while pos < end {
            let stripe = pos / dps;
            let within_stripe = pos - stripe * dps;
            let member = within_stripe / self.unit;
            let within = within_stripe % self.unit;
            let piece = (self.unit - within).min(end - pos);
            out.push((member as usize, stripe * self.unit + within, piece));
            pos += piece;
        }
        out
    }

    /// Submits an op at `now` (calls in non-decreasing `now`), as [`QueuedDisk::submit`]:
    /// `(tag, completion)` goes to `done` once every piece's completion is known.
    pub fn submit(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        tag: u64,
        done: &mut Vec<(u64, Nanos)>,
    ) {
        let pieces = self.pieces(offset, len);
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(
            id,
            Pending {
                tag,
                left: pieces.len() as u32,
                end: now,
            },
        );
        for (m, moff, n) in pieces {
            self.members[m].submit(now, kind, moff, n, id, &mut self.scratch);
            if let Some(w) = self.members[m].wake_request() {
                self.wakes.insert((w, m));
            }
        }
        self.settle(done);
    }

    /// The executor's wake at `now`: every member whose head is due takes its next piece of
    /// work; completions go to `done` as in `submit`.
    pub fn wake(&mut self, now: Nanos, done: &mut Vec<(u64, Nanos)>) {
        if self.armed_at.is_some_and(|a| a <= now) {
            self.armed_at = None;
        }
        while let Some(&(t, m)) = self.wakes.first() {
            if t > now {
                break;
            }
            self.wakes.pop_first();
            self.members[m].wake(now, &mut self.scratch);
            if let Some(w) = self.members[m].wake_request() {
                self.wakes.insert((w, m));
            }
        }
        self.settle(done);
    }

    /// When the executor should call [`QueuedArray::wake`]: the earliest member wake, if it
    /// is earlier than the one asked for already (a later one asked before stays scheduled
    /// and finds nothing due, or what came due since).
    pub fn wake_request(&mut self) -> Option<Nanos> {
        let &(t, _) = self.wakes.first()?;
        if self.armed_at.is_some_and(|a| a <= t) {
            return None;
        }
        self.armed_at = Some(t);
        Some(t)
    }

    /// Runs one op to its completion, each piece on its member as if the member held nothing
    /// else the caller waits on ([`QueuedDisk::run_one`]).
    pub fn run_one(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        let mut end = now;
        for (m, moff, n) in self.pieces(offset, len) {
            end = end.max(self.members[m].run_one(now, kind, moff, n));
        }
        end
    }

    /// Counts the members' completions against their logical ops.
    fn settle(&mut self, done: &mut Vec<(u64, Nanos)>) {
        for (id, end) in self.scratch.drain(..) {
            let p = self
                .pending
                .get_mut(&id)
                .expect("a piece of an op in flight");
            p.left -= 1;
            p.end = p.end.max(end);
            if p.left == 0 {
                done.push((p.tag, p.end));
                self.pending.remove(&id);
            }
        }
    }

    /// Device time of the members, ps: their mean.
    pub(crate) fn cost_ps(&self) -> u128 {
        crate::disk::div_u128(
            self.members.iter().map(|m| m.cost_ps).sum::<u128>(),
            self.members.len() as u64,
        )
    }

    /// Pieces of work the members' heads started.
    pub(crate) fn dispatched(&self) -> u64 {
        self.members.iter().map(|m| m.dispatched).sum()
    }

    /// Media reads and writes of the members.
    pub(crate) fn member_ops(&self) -> (u64, u64) {
        self.members
            .iter()
            .fold((0, 0), |(r, w), m| (r + m.reads, w + m.writes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of 4 KiB-aligned offsets below `span`.
    fn offsets(n: usize, span: u64) -> Vec<u64> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % (span / 4096)) * 4096
            })
            .collect()
    }

    /// Closed loop of `depth` random 4 KiB reads in flight over `span` bytes on the device of
    /// `text` through the executor's tagged path; returns (ops per second, each op's
    /// completion count).
    fn closed_loop(text: &str, depth: usize, ops: usize, span: u64) -> (f64, Vec<u32>) {
        let r = crate::limit_tests::resolve(text).unwrap();
        let mut d = DeviceModel::from_resolved("d", &r);
        assert!(d.is_queued());
        let offs = offsets(ops, span);
        let mut completions = vec![0u32; ops];
        let mut pending = std::collections::BinaryHeap::new();
        let mut wakes = std::collections::BinaryHeap::new();
        let mut done = Vec::new();
        let (mut next, mut finished, mut now) = (0usize, 0usize, 0u64);
        let submit = |d: &mut DeviceModel, now: Nanos, next: &mut usize, done: &mut Vec<_>| {
            let o = offs[*next];
            d.start_queued(
                now,
                IoKind::Read,
                o,
                4096,
                OpCause::ReadMiss,
                *next as u64,
                done,
            );
            *next += 1;
        };
        while next < depth {
            submit(&mut d, 0, &mut next, &mut done);
        }
        while finished < ops {
            for (tag, end) in done.drain(..) {
                pending.push(std::cmp::Reverse((end, tag)));
            }
            if let Some(w) = d.wake_request() {
                wakes.push(std::cmp::Reverse(w));
            }
            let c = pending.peek().map(|r| r.0 .0);
            let w = wakes.peek().map(|r| r.0);
            match (c, w) {
                (Some(c), w) if w.is_none_or(|w| c <= w) => {
                    let std::cmp::Reverse((end, tag)) = pending.pop().unwrap();
                    now = end;
                    completions[tag as usize] += 1;
                    finished += 1;
                    if next < ops {
                        submit(&mut d, now, &mut next, &mut done);
                    }
                }
                (_, Some(w)) => {
                    wakes.pop();
                    now = now.max(w);
                    d.wake(now, &mut done);
                }
                _ => panic!("{finished} of {ops} done and nothing pending"),
            }
        }
        (ops as f64 / (now as f64 / 1e9), completions)
    }

    /// Four queued HDDs striped serve a deep queue of random reads over 400 GiB at more than
    /// twice one drive's IOPS at queue depth 32 (3.7× here: each member takes a quarter of
    /// the queue, so SPTF picks among fewer commands, over a quarter of the span, so seeks are
    /// shorter); at queue depth 1 the array serves one op at a time, gaining only the shorter
    /// seeks (1.4× here). Every op completes once.
    #[test]
    fn an_array_of_queued_disks_serves_more_random_iops_at_depth_than_one() {
        let span = 400u64 << 30;
        let one = "d = 'hdd-c2-sas'";
        let four = "d = { raid = 'raid0', members = 4, member = 'hdd-c2-sas' }";
        let (one_qd32, c1) = closed_loop(one, 32, 4000, span);
        let (four_qd32, c4) = closed_loop(four, 32, 4000, span);
        let (one_qd1, _) = closed_loop(one, 1, 1000, span);
        let (four_qd1, _) = closed_loop(four, 1, 1000, span);
        eprintln!(
            "QD32: one {one_qd32:.0} IOPS, four {four_qd32:.0}; QD1: one {one_qd1:.0}, four {four_qd1:.0}"
        );
        assert!(
            c1.iter().chain(&c4).all(|&n| n == 1),
            "each op completes once"
        );
        assert!(
            four_qd32 > 2.0 * one_qd32,
            "QD32: four {four_qd32:.0} IOPS vs one {one_qd32:.0}"
        );
        assert!(four_qd32 < 4.0 * one_qd32);
        assert!(
            four_qd1 < 1.5 * one_qd1,
            "QD1: four {four_qd1:.0} IOPS vs one {one_qd1:.0}"
        );
        // Deterministic.
        assert_eq!(closed_loop(four, 32, 4000, span).0, four_qd32);
    }

    /// An op over several stripe units completes with its last piece, and the pieces cover
    /// it exactly.
    #[test]
    fn pieces_cover_the_op_and_it_completes_with_the_last() {
        let p = match crate::limit_tests::resolve("d = 'hdd-c2-sas'")
            .unwrap()
            .kind
        {
            ResolvedKind::Disk(p) => p,
            k => panic!("{k:?}"),
        };
        let mut a = QueuedArray::new(p, 3, 65536);
        let pieces = a.pieces(100_000, 300_000);
        assert_eq!(pieces.iter().map(|x| x.2).sum::<u64>(), 300_000);
        assert!(pieces.iter().all(|x| x.2 <= 65536 && x.0 < 3));
        let mut done = Vec::new();
        a.submit(0, IoKind::Read, 100_000, 300_000, 7, &mut done);
        while done.is_empty() {
            let w = a.wake_request().expect("pieces in flight");
            a.wake(w, &mut done);
        }
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].0, 7);
        let last = a.members().iter().map(|m| m.reads).sum::<u64>();
        assert_eq!(last, pieces.len() as u64, "one media read per piece");
        // A flush goes to every member.
        done.clear();
        let t = a
            .members()
            .iter()
            .map(|m| m.params().flush_ns)
            .max()
            .unwrap();
        a.submit(t, IoKind::Flush, 0, 0, 8, &mut done);
        while done.is_empty() {
            let w = a.wake_request().expect("flushes in flight");
            a.wake(w, &mut done);
        }
        assert_eq!(done[0].0, 8);
    }

    /// Queueing members: RAID-0 only, and no link in front, each refused naming the field.
    #[test]
    fn queued_arrays_are_checked() {
        let e = |s: &str| crate::limit_tests::resolve(s).unwrap_err().to_string();
        assert!(
            e("d = { raid = 'raid5', members = 4, member = 'hdd-c2-sas' }").starts_with("d.member")
        );
        assert!(
            e("d = { raid = 'raid0', members = 2, member = 'hdd-c2-sas', link = 'net-10g' }")
                .starts_with("d.link")
        );
        assert!(crate::limit_tests::resolve(
            "d = { raid = 'raid0', members = 2, member = { preset = 'hdd-c2-sas', write_cache = 0 } }"
        )
        .is_ok());
    }
}
