//! A hard disk that queues like one (docs/design.md §5.1): a positional model (seek by distance,
//! rotational position by time), up to `queue_depth` commands queued in the drive and served
//! shortest positioning time first, contiguous commands served in one pass, and an optional
//! volatile write cache (writes acknowledged once cached, destaged in the background, emptied by
//! a flush), lost on a power cut ([`QueuedDisk::power_cut`]) unless flushed or written with
//! FUA ([`QueuedDisk::submit_fua`]).
//!
//! Unlike [`crate::Disk`], an op's completion is not known when it is submitted: a command
//! submitted later may be served first. The device hands back each op's completion time when
//! the op starts service (with its `tag`), and asks its executor to be woken when its head
//! frees ([`QueuedDisk::wake_request`]), where it picks the next command.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::*;

/// Longest a command may wait in the drive's queue before it is served ahead of shorter
/// positioning times (firmware ages commands so none starves under SPTF).
pub const AGE_LIMIT_NS: Nanos = 500_000_000;

/// Dirty runs of the write cache considered at each pick, on each side of the head: the
/// nearest by address hold the shortest seeks, and a bounded look keeps a pick cheap however
/// full the cache is.
const DESTAGE_LOOK: usize = 16;

/// Most bytes one destage writes: contiguous dirty runs merge into one media write up to this.
const DESTAGE_MERGE_MAX: u64 = 1 << 20;

/// The mechanical figures of a disk (from its datasheet; see the presets).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Geometry {
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Bytes on one track (one revolution's transfer).
    pub track_bytes: u64,
    /// Addressable bytes (the seek distance is a fraction of it).
    pub capacity: u64,
    /// Read seek time over a fraction `x` of the stroke: `a + b·√x + c·x` ns (`x > 0`), fitted
    /// to the datasheet's single-track, average and full-stroke figures.
    pub read_seek: [f64; 3],
    /// Write seek time, as `read_seek` (writes settle longer).
    pub write_seek: [f64; 3],
    /// Controller overhead per command that is not a continuation of the previous one, ns.
    pub overhead_ns: Nanos,
}

impl Geometry {
    /// One revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        60e9 / self.rpm
    }

    /// Media transfer time per byte, ns (a track per revolution).
    pub fn ns_per_byte(&self) -> f64 {
        self.revolution_ns() / self.track_bytes as f64
    }

    /// Seek time from byte `from` to byte `to` for `kind`, ns: none on the same track.
    pub fn seek_ns(&self, kind: IoKind, from: u64, to: u64) -> f64 {
        if from / self.track_bytes == to / self.track_bytes {
            return 0.0;
        }
        let x = (from.abs_diff(to) as f64 / self.capacity as f64).min(1.0);
        let [a, b, c] = match kind {
            IoKind::Write => self.write_seek,
            _ => self.read_seek,
        };
        a + b * x.sqrt() + c * x
    }

    /// The mean seek of `kind` over uniformly random pairs of positions, ns: `a + b·8/15 +
    /// c/3` (E√|X−Y| = 8/15 and E|X−Y| = 1/3 for X, Y uniform on 0..1).
    pub fn mean_seek_ns(&self, kind: IoKind) -> f64 {
        let [a, b, c] = match kind {
            IoKind::Write => self.write_seek,
            _ => self.read_seek,
        };
        a + b * 8.0 / 15.0 + c / 3.0
    }

    /// Fits `a + b·√x + c·x` to a single-track, an average and a full-stroke seek time (ns).
    pub fn fit_seek(single: f64, average: f64, full: f64) -> [f64; 3] {
        // a = single; b + c = full − a; b·8/15 + c/3 = average − a.
        let a = single;
        let span = full - a;
        let b = (average - a - span / 3.0) / (8.0 / 15.0 - 1.0 / 3.0);
        [a, b, span - b]
    }
}

/// What a power cut took from a drive's volatile write cache ([`QueuedDisk::power_cut`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerCutLoss {
    /// Tags of the writes the drive had acknowledged from its write cache whose data was not
    /// on the media yet (still cached, or in a destage not finished at the cut), ascending.
    pub acknowledged_writes: Vec<u64>,
    /// The byte ranges whose cached data was lost, `(offset, len)` by offset (runs may
    /// overlap: a rewrite starting inside a cached run is a run of its own).
    pub ranges: Vec<(u64, u64)>,
}

/// A destage in service: its end, its bytes, and the acknowledged writes it carries
/// (tag, acknowledgement time).
#[derive(Debug, Clone)]
struct Destage {
    end: Nanos,
    offset: u64,
    len: u64,
    writes: Vec<(u64, Nanos)>,
}

/// A command in the drive.
#[derive(Debug, Clone, Copy)]
struct Cmd {
    kind: IoKind,
    offset: u64,
    len: u64,
    tag: u64,
    arrived: Nanos,
    /// A flush: the cache's runs older than this (by [`QueuedDisk::next_seq`]) must be on
    /// the media before it completes; later writes need not be (a drive flushes what it held
    /// when the FLUSH came).
    epoch: u64,
}

/// What the head does next.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// Command `i` of the queue.
    Cmd(usize),
    /// The dirty run at this offset (destage).
    Destage(u64),
}

/// Runtime state of a queueing disk.
#[derive(Debug, Clone)]
pub struct QueuedDisk {
    p: DiskParams,
    g: Geometry,
    /// Commands in the drive (at most `queue_depth`), in arrival order.
    queue: Vec<Cmd>,
    /// Commands the host holds until the drive has room, in arrival order.
    host: VecDeque<Cmd>,
    /// The write cache's dirty runs, offset → length.
    dirty: BTreeMap<u64, u64>,
    dirty_bytes: u64,
    /// The writes acknowledged from the cache and not on the media yet, by the offset of the
    /// dirty run holding them: (tag, acknowledgement time).
    volatile: BTreeMap<u64, Vec<(u64, Nanos)>>,
    /// The last destage the head started (lost at a cut before its end).
    destaging: Option<Destage>,
    /// Sequence number of the next new cached run.
    next_seq: u64,
    /// Each cached run's sequence number, by offset, and the runs by it (oldest first).
    run_seq: BTreeMap<u64, u64>,
    by_seq: BTreeSet<(u64, u64)>,
    /// When the head is free.
    busy_until: Nanos,
    /// The byte after the last one the head transferred.
    head: u64,
    /// A wake is pending with the executor (asked for and not yet delivered).
    wake_armed: bool,
    /// Device time consumed, ps.
    pub(crate) cost_ps: u128,
    /// Pieces of work the head started (commands and destages): the ops its device time
    /// was booked for.
    pub dispatched: u64,
    /// Media reads served.
    pub reads: u64,
    /// Media writes served (destages included).
    pub writes: u64,
    /// Writes acknowledged from the write cache.
    pub cached_writes: u64,
    /// Reads served from the write cache.
    pub cache_read_hits: u64,
}

impl QueuedDisk {
    /// A drive at rest, its head at byte 0. `p.geometry` must be set.
    pub fn new(p: DiskParams) -> Self {
        let g = p
            .geometry
            .expect("a queueing disk is built from parameters with a geometry");
        Self {
            p,
            g,
            queue: Vec::with_capacity(p.queue_depth as usize),
            host: VecDeque::new(),
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            volatile: BTreeMap::new(),
            destaging: None,
            next_seq: 0,
            run_seq: BTreeMap::new(),
            by_seq: BTreeSet::new(),
            busy_until: 0,
            head: 0,
            wake_armed: false,
            cost_ps: 0,
            dispatched: 0,
            reads: 0,
            writes: 0,
            cached_writes: 0,
            cache_read_hits: 0,
        }
    }

    /// Parameters.
    pub fn params(&self) -> &DiskParams {
        &self.p
    }

    /// Bytes in the write cache not yet on the media.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    /// Commands queued in the drive or held by the host, not yet in service.
    pub fn queued(&self) -> usize {
        self.queue.len() + self.host.len()
    }

    /// Submits an op at `now` (calls in non-decreasing `now`); `tag` names it in `done`, where
    /// each op whose completion became known is pushed as `(tag, completion)`: this op's, if
    /// the write cache acknowledges it or the head starts it now.
    pub fn submit(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        tag: u64,
        done: &mut Vec<(u64, Nanos)>,
    ) {
        let ack = now.saturating_add(self.g.overhead_ns);
        match kind {
            IoKind::Write if self.p.write_cache > 0 && self.cache_write(offset, len) => {
                self.cached_writes += 1;
                self.volatile.entry(offset).or_default().push((tag, ack));
                done.push((tag, ack));
            }
            IoKind::Read if self.cached(offset, len) => {
                self.cache_read_hits += 1;
                done.push((tag, ack));
            }
            _ => self.enqueue(now, kind, offset, len, tag),
        }
        if self.busy_until <= now {
            self.dispatch(now, done);
        }
    }

    /// Queues a command at the drive (up to its queue depth) or, past it, at the host.
    fn enqueue(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64, tag: u64) {
        let cmd = Cmd {
            kind,
            offset,
            len,
            tag,
            arrived: now,
            epoch: self.next_seq,
        };
        if self.queue.len() < self.p.queue_depth as usize {
            self.queue.push(cmd);
        } else {
            self.host.push_back(cmd);
        }
    }

    /// Submits a write with FUA (force unit access) at `now`: it bypasses the write cache and
    /// completes once on the media, so it is durable at its completion (pushed to `done` as
    /// in [`QueuedDisk::submit`]). Cached runs it covers wholly are superseded by it (dropped
    /// from the cache: their data would be stale on the media).
    pub fn submit_fua(
        &mut self,
        now: Nanos,
        offset: u64,
        len: u64,
        tag: u64,
        done: &mut Vec<(u64, Nanos)>,
    ) {
        let end = offset.saturating_add(len);
        let covered: Vec<u64> = self
            .dirty
            .range(offset..end)
            .filter(|(&o, &l)| o.saturating_add(l) <= end)
            .map(|(&o, _)| o)
            .collect();
        for o in covered {
            self.dirty_bytes -= self.dirty.remove(&o).expect("listed above");
            self.volatile.remove(&o);
            self.forget_run(o);
        }
        self.enqueue(now, IoKind::Write, offset, len, tag);
        if self.busy_until <= now {
            self.dispatch(now, done);
        }
    }

    /// The power fails at `at` (after every call at or before `at`): what the volatile write
    /// cache held is lost, the cached runs and a destage the head had not finished by `at`;
    /// the acknowledged writes among them are reported (a write acknowledged after `at` was
    /// never acknowledged). Writes done on the media, by a destage that ended by `at`, a
    /// flush or FUA, survive. The commands queued or in service are dropped unfinished (the
    /// host sees them fail; none was acknowledged), and the drive comes back empty, its head
    /// free at `at`. Counters are kept.
    pub fn power_cut(&mut self, at: Nanos) -> PowerCutLoss {
        let mut acked: Vec<u64> = Vec::new();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        if let Some(d) = self.destaging.take().filter(|d| d.end > at) {
            acked.extend(d.writes.iter().filter(|w| w.1 <= at).map(|w| w.0));
            ranges.push((d.offset, d.len));
        }
        for writes in std::mem::take(&mut self.volatile).into_values() {
            acked.extend(writes.iter().filter(|w| w.1 <= at).map(|w| w.0));
        }
        ranges.extend(std::mem::take(&mut self.dirty));
        self.run_seq.clear();
        self.by_seq.clear();
        ranges.sort_unstable();
        acked.sort_unstable();
        self.dirty_bytes = 0;
        self.queue.clear();
        self.host.clear();
        self.busy_until = at;
        self.wake_armed = false;
        PowerCutLoss {
            acknowledged_writes: acked,
            ranges,
        }
    }

    /// The executor's wake at `now` (the time [`QueuedDisk::wake_request`] gave): the head is
    /// free, the next command or destage starts; completions go to `done` as in `submit`.
    pub fn wake(&mut self, now: Nanos, done: &mut Vec<(u64, Nanos)>) {
        self.wake_armed = false;
        if self.busy_until <= now {
            self.dispatch(now, done);
        }
    }

    /// When the executor should call [`QueuedDisk::wake`], if it has not been asked already:
    /// the head's free time while work waits. Asked once per busy period.
    pub fn wake_request(&mut self) -> Option<Nanos> {
        if self.wake_armed || (self.queue.is_empty() && self.dirty.is_empty()) {
            return None;
        }
        self.wake_armed = true;
        Some(self.busy_until)
    }

    /// Runs one op to its completion as if the drive held nothing else the caller waits on
    /// (the emulated backend's sequential use, [`DeviceModel::run_op`]): submitted at `now`,
    /// the head woken each time it frees until this op is done.
    pub fn run_one(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        const MINE: u64 = u64::MAX;
        let mut done = Vec::new();
        self.submit(now, kind, offset, len, MINE, &mut done);
        loop {
            if let Some(&(_, end)) = done.iter().find(|d| d.0 == MINE) {
                return end;
            }
            self.wake(self.busy_until.max(now), &mut done);
        }
    }

    /// Caches a write if there is room; a rewrite of a cached run's start replaces it.
    fn cache_write(&mut self, offset: u64, len: u64) -> bool {
        let old = self.dirty.get(&offset).copied().unwrap_or(0);
        let grown = len.saturating_sub(old);
        if self.dirty_bytes + grown > self.p.write_cache {
            return false;
        }
        self.dirty.insert(offset, len.max(old));
        self.dirty_bytes += grown;
        if old == 0 {
            self.run_seq.insert(offset, self.next_seq);
            self.by_seq.insert((self.next_seq, offset));
            self.next_seq += 1;
        }
        true
    }

    /// Drops a run that left the cache from the sequence indexes.
    fn forget_run(&mut self, offset: u64) {
        if let Some(seq) = self.run_seq.remove(&offset) {
            self.by_seq.remove(&(seq, offset));
        }
    }

    /// Whether a flush of `epoch` may complete: no run older than it is cached.
    fn flush_ready(&self, epoch: u64) -> bool {
        self.by_seq.first().is_none_or(|&(seq, _)| seq >= epoch)
    }

    /// Whether one dirty run holds all of `offset..offset + len`.
    fn cached(&self, offset: u64, len: u64) -> bool {
        self.dirty
            .range(..=offset)
            .next_back()
            .is_some_and(|(&o, &l)| o + l >= offset.saturating_add(len))
    }

    /// Positioning time of an op starting at `offset` if the head starts toward it at `now`,
    /// ns: nothing for a continuation of the last transfer (the run is merged: no command
    /// overhead, no seek, no rotational wait), otherwise the command overhead, the seek and
    /// the wait for the sector to come round.
    fn positioning_ns(&self, now: Nanos, kind: IoKind, offset: u64) -> Nanos {
        if offset == self.head {
            return 0;
        }
        let rev = self.g.revolution_ns();
        let arrive =
            now as f64 + self.g.overhead_ns as f64 + self.g.seek_ns(kind, self.head, offset);
        let angle_now = (arrive / rev).fract();
        let target = (offset % self.g.track_bytes) as f64 / self.g.track_bytes as f64;
        let wait = (target - angle_now).rem_euclid(1.0) * rev;
        (arrive + wait - now as f64).ceil() as Nanos
    }

    /// Starts the next piece of work on the free head at `now`, if any.
    fn dispatch(&mut self, now: Nanos, done: &mut Vec<(u64, Nanos)>) {
        let Some(pick) = self.pick(now) else {
            return;
        };
        let (kind, offset, len) = match pick {
            Pick::Cmd(i) => {
                let c = self.queue[i];
                (c.kind, c.offset, c.len)
            }
            Pick::Destage(at) => {
                let (len, writes) = self.destage_run(at);
                self.destaging = Some(Destage {
                    end: 0,
                    offset: at,
                    len,
                    writes,
                });
                (IoKind::Write, at, len)
            }
        };
        let service = match kind {
            IoKind::Read | IoKind::Write => {
                let pos = self.positioning_ns(now, kind, offset);
                let xfer = (len as f64 * self.g.ns_per_byte()).ceil() as Nanos;
                self.head = offset.saturating_add(len);
                if kind == IoKind::Read {
                    self.reads += 1;
                } else {
                    self.writes += 1;
                }
                pos.saturating_add(xfer)
            }
            IoKind::Trim => self.p.trim_ns,
            IoKind::Flush => self.p.flush_ns,
        };
        let end = now.saturating_add(service);
        self.busy_until = end;
        match (&pick, &mut self.destaging) {
            (Pick::Destage(_), Some(d)) => d.end = end,
            // The head moved on: the last destage ended by `now`.
            _ => self.destaging = None,
        }
        self.dispatched += 1;
        self.cost_ps = self
            .cost_ps
            .saturating_add(u128::from(service) * crate::disk::PS_PER_NS);
        if let Pick::Cmd(i) = pick {
            let c = self.queue.remove(i);
            done.push((c.tag, end));
            if let Some(next) = self.host.pop_front() {
                self.queue.push(next);
            }
        }
    }

    /// Removes the dirty run at `at` and the runs contiguous after it (up to
    /// [`DESTAGE_MERGE_MAX`] bytes) from the cache; returns the bytes to write and the
    /// acknowledged writes they carry.
    fn destage_run(&mut self, at: u64) -> (u64, Vec<(u64, Nanos)>) {
        let mut len = self.dirty.remove(&at).expect("picked from the cache");
        let mut writes = self.volatile.remove(&at).unwrap_or_default();
        self.forget_run(at);
        while len < DESTAGE_MERGE_MAX {
            match self.dirty.get(&(at + len)).copied() {
                Some(l) => {
                    self.dirty.remove(&(at + len));
                    writes.extend(self.volatile.remove(&(at + len)).unwrap_or_default());
                    self.forget_run(at + len);
                    len += l;
                }
                None => break,
            }
        }
        self.dirty_bytes -= len;
        (len, writes)
    }

    /// Shortest positioning time first over the queued commands and the dirty runs nearest
    /// the head; a command past [`AGE_LIMIT_NS`] goes first, and a flush waits for the runs
    /// cached before it came to reach the media (the dirty runs go first: the nearest of
    /// those older than the flush, else the oldest, so it completes however many writes
    /// come after it).
    fn pick(&self, now: Nanos) -> Option<Pick> {
        if let Some(i) = self
            .queue
            .iter()
            .position(|c| now.saturating_sub(c.arrived) >= AGE_LIMIT_NS)
        {
            let c = &self.queue[i];
            if c.kind != IoKind::Flush || self.flush_ready(c.epoch) {
                return Some(Pick::Cmd(i));
            }
        }
        if let Some(i) = self
            .queue
            .iter()
            .position(|c| c.kind == IoKind::Flush && self.flush_ready(c.epoch))
        {
            // It costs no positioning, and the writes behind it wait for it.
            return Some(Pick::Cmd(i));
        }
        // The oldest flush waiting is served first.
        let waiting_epoch = self
            .queue
            .iter()
            .filter(|c| c.kind == IoKind::Flush)
            .map(|c| c.epoch)
            .min();
        if let Some(epoch) = waiting_epoch {
            let after = self.dirty.range(self.head..).take(DESTAGE_LOOK);
            let before = self.dirty.range(..self.head).rev().take(DESTAGE_LOOK);
            let nearest_old = after
                .chain(before)
                .filter(|(o, _)| self.run_seq.get(o).is_some_and(|&s| s < epoch))
                .map(|(&o, _)| (self.positioning_ns(now, IoKind::Write, o), o))
                .min();
            let oldest = self.by_seq.first().map(|&(_, o)| o);
            return nearest_old.map(|x| x.1).or(oldest).map(Pick::Destage);
        }
        let mut best: Option<(Nanos, Pick)> = None;
        let mut consider = |t: Nanos, p: Pick| {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, p));
            }
        };
        for (i, c) in self.queue.iter().enumerate() {
            let t = match c.kind {
                IoKind::Read | IoKind::Write => self.positioning_ns(now, c.kind, c.offset),
                IoKind::Trim | IoKind::Flush => 0,
            };
            consider(t, Pick::Cmd(i));
        }
        let after = self.dirty.range(self.head..).take(DESTAGE_LOOK);
        let before = self.dirty.range(..self.head).rev().take(DESTAGE_LOOK);
        for (&o, _) in after.chain(before) {
            consider(self.positioning_ns(now, IoKind::Write, o), Pick::Destage(o));
        }
        best.map(|(_, p)| p)
    }
}

#[cfg(test)]
#[path = "queued_tests.rs"]
mod tests;
