//! The device model executors use: ops submitted with their cause, completion times, and
//! counters for load and wear.

use crate::*;

/// Counters of one device, cumulative since the start of the run; the difference of two
/// snapshots describes a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeviceCounters {
    /// Time of the snapshot.
    pub at: Nanos,
    /// ∫ ops in flight dt, op·ns.
    pub depth_area: u128,
    /// Capacity consumed, ps (largest over link and storage; arrays: mean over members).
    pub cost_ps: u128,
    /// Ops completed.
    pub ops: u64,
    /// Bytes read by completed ops.
    pub bytes_read: u64,
    /// Bytes written by completed ops.
    pub bytes_written: u64,
    /// Sum of op latencies (submission to completion), ns.
    pub latency_ns: u128,
    /// Completed ops by cause (indexed by [`cause_index`]).
    pub by_cause: [u64; 10],
    /// Bytes written by completed ops, by cause.
    pub written_by_cause: [u64; 10],
}

/// Index of a cause in [`DeviceCounters::by_cause`].
pub fn cause_index(c: OpCause) -> usize {
    match c {
        OpCause::ReadHit => 0,
        OpCause::ReadMiss => 1,
        OpCause::Write => 2,
        OpCause::Promotion => 3,
        OpCause::Fill => 4,
        OpCause::Clean => 5,
        OpCause::EvictFlush => 6,
        OpCause::Trim => 7,
        OpCause::Flush => 8,
        OpCause::Demote => 9,
    }
}

/// Every cause in [`cause_index`] order.
pub const CAUSES: [OpCause; 10] = [
    OpCause::ReadHit,
    OpCause::ReadMiss,
    OpCause::Write,
    OpCause::Promotion,
    OpCause::Fill,
    OpCause::Clean,
    OpCause::EvictFlush,
    OpCause::Trim,
    OpCause::Flush,
    OpCause::Demote,
];

/// Cause names in [`cause_index`] order, as reported.
pub const CAUSE_NAMES: [&str; 10] = [
    "read-hit",
    "read-miss",
    "write",
    "promotion",
    "fill",
    "clean",
    "evict-flush",
    "trim",
    "flush",
    "demote",
];

/// A device as the executor sees it: storage, optional link, and load accounting.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    pub(crate) name: String,
    pub(crate) store: Store,
    pub(crate) link: Option<Link>,
    pub(crate) inflight: u32,
    pub(crate) inflight_by_cause: [u32; 10],
    /// The same ops by origin (R, W, P, E), kept beside so executors polling the load per
    /// request read it without summing causes; the fifth slot counts the ops without origin
    /// (trims, flushes), so an op's origin is counted without a branch ([`ORIGIN_SLOT`]).
    inflight_by_origin: [u32; 5],
    pub(crate) max_inflight: u32,
    pub(crate) last_change: Nanos,
    /// Sum of the start times of the ops in flight, ns: with the completed ops' latencies
    /// (`c.latency_ns`) it gives ∫ ops in flight dt without a step at every change
    /// ([`DeviceModel::counters`]).
    inflight_start_sum: u128,
    pub(crate) c: DeviceCounters,
    /// Moving average of device time per completed op, ns (see [`DeviceModel::service_ns`]).
    service_ns: Nanos,
    /// Moving average of op latency (submission to completion), ns (see
    /// [`DeviceModel::latency_ns`]).
    latency_ns: Nanos,
    /// Device time consumed when the service estimate last took a sample, ps.
    cost_at_last_finish: u128,
    /// Ops whose device time was booked when the estimate last took a sample
    /// ([`DeviceModel::booked_ops`]).
    booked_at_last_finish: u64,
    /// Ops that entered the device ([`DeviceModel::op_started`]).
    started_ops: u64,
    /// Phases of every op when they do not depend on the op (every store but an array), so
    /// the executor's two questions per op are a field read: [`VARIES`] for arrays.
    fixed_phases: u8,
}

/// [`DeviceModel::fixed_phases`] of a device whose ops' phases vary (an array).
const VARIES: u8 = u8::MAX;

/// The slot of `DeviceModel::inflight_by_origin` counting an op of each cause (in
/// [`cause_index`] order): its origin's index ([`OpCause::origin`]), or 4 for a cause without
/// origin. A table rather than `origin`'s match, so counting an op takes no branch (the
/// `origin_slots_follow_origin` test keeps it in step).
const ORIGIN_SLOT: [usize; 10] = [0, 0, 1, 2, 1, 3, 3, 4, 4, 3];

impl DeviceModel {
    /// Builds the model of a configuration (validating it).
    pub fn new(name: &str, cfg: &DeviceConfig) -> Result<Self, DeviceError> {
        Ok(Self::from_resolved(name, &cfg.resolve(name)?))
    }

    /// Builds the model of resolved parameters, as [`DeviceConfig::resolve`] gives them (it
    /// bounds what the model relies on, e.g. an array's members × stripe unit).
    pub fn from_resolved(name: &str, r: &ResolvedDevice) -> Self {
        let store = match &r.kind {
            ResolvedKind::None => Store::None,
            ResolvedKind::Disk(p) if p.geometry.is_some() => {
                Store::Queued(Box::new(QueuedDisk::new(*p)))
            }
            ResolvedKind::Disk(p) => Store::Disk(Disk::new(*p)),
            ResolvedKind::Array {
                members,
                member,
                stripe_unit,
                ..
            } if member.geometry.is_some() => {
                Store::QueuedArray(Box::new(QueuedArray::new(*member, *members, *stripe_unit)))
            }
            ResolvedKind::Constant { latency_ns } => Store::Constant(*latency_ns),
            ResolvedKind::Array {
                level,
                members,
                member,
                stripe_unit,
            } => Store::Array(Array {
                level: *level,
                members: (0..*members).map(|_| Disk::new(*member)).collect(),
                unit: *stripe_unit,
            }),
        };
        let link = r.link.map(Link::new);
        let fixed_phases = match &store {
            Store::Array(_) => VARIES,
            Store::None => link.is_some() as u8,
            Store::Disk(_) | Store::Constant(_) | Store::Queued(_) | Store::QueuedArray(_) => {
                1 + link.is_some() as u8
            }
        };
        Self {
            name: name.to_string(),
            store,
            link,
            fixed_phases,
            inflight: 0,
            inflight_by_cause: [0; 10],
            inflight_by_origin: [0; 5],
            max_inflight: 0,
            last_change: 0,
            inflight_start_sum: 0,
            c: DeviceCounters::default(),
            service_ns: 0,
            latency_ns: 0,
            cost_at_last_finish: 0,
            booked_at_last_finish: 0,
            started_ops: 0,
        }
    }

    /// Name used in reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ops queued or in service.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Most ops in flight at once so far.
    pub fn max_inflight(&self) -> u32 {
        self.max_inflight
    }

    /// Member ops submitted so far (reads, writes) over every member (or the device itself).
    pub fn member_ops(&self) -> (u64, u64) {
        match &self.store {
            Store::None | Store::Constant(_) => (0, 0),
            Store::Disk(d) => (d.reads, d.writes),
            Store::Queued(q) => (q.reads, q.writes),
            Store::QueuedArray(a) => a.member_ops(),
            Store::Array(a) => a
                .members
                .iter()
                .fold((0, 0), |(r, w), m| (r + m.reads, w + m.writes)),
        }
    }

    /// Phases a logical op goes through (link crossings and array read/write phases).
    #[inline]
    pub fn phases(&self, kind: IoKind, offset: u64, len: u64) -> u8 {
        if self.fixed_phases != VARIES {
            return self.fixed_phases;
        }
        let store = match &self.store {
            Store::Array(a) => a.phases(kind, offset, len),
            Store::None => 0,
            Store::Disk(_) | Store::Constant(_) | Store::Queued(_) | Store::QueuedArray(_) => 1,
        };
        store + self.link.is_some() as u8
    }

    /// Submits phase `phase` of an op at `now`; returns when the phase completes. Calls must come
    /// in non-decreasing `now` (the executor's event order). Times saturate: a completion at or
    /// beyond the end of time is [`Nanos::MAX`] (never a wrapped, earlier time), which the
    /// executor reports as an error of the device's settings.
    #[inline]
    pub fn submit_phase(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        phase: u8,
    ) -> Nanos {
        if let Some(d) = self.lone_disk() {
            return d.submit(now, kind, offset, len);
        }
        let store_phase = match &self.link {
            None => phase,
            Some(_) => {
                // Data crosses the link before a write and after a read.
                let link_phase = if kind == IoKind::Read {
                    self.phases(kind, offset, len) - 1
                } else {
                    0
                };
                if phase == link_phase {
                    let l = self.link.as_mut().expect("checked");
                    let bytes = if matches!(kind, IoKind::Read | IoKind::Write) {
                        len
                    } else {
                        0
                    };
                    return l.submit(now, bytes);
                }
                if kind == IoKind::Read {
                    phase
                } else {
                    phase - 1
                }
            }
        };
        match &mut self.store {
            Store::None => now,
            Store::Constant(ns) => now.saturating_add(*ns),
            Store::Disk(d) => d.submit(now, kind, offset, len),
            Store::Queued(q) => q.run_one(now, kind, offset, len),
            Store::QueuedArray(a) => a.run_one(now, kind, offset, len),
            Store::Array(a) => a.submit_phase(now, kind, offset, len, store_phase),
        }
    }

    /// The disk of a device that is one disk without a link: the commonest device, whose ops
    /// have one phase and go straight to its queue.
    #[inline(always)]
    fn lone_disk(&mut self) -> Option<&mut Disk> {
        match (&self.link, &mut self.store) {
            (None, Store::Disk(d)) => Some(d),
            _ => None,
        }
    }

    /// An op enters the device at `now` and its first phase is submitted: what
    /// [`DeviceModel::op_started`] then, for an op with phases, [`DeviceModel::submit_phase`]
    /// of phase 0 do, in one call (for an op without phases, `now`). The commonest device, a
    /// lone disk, goes straight to its queue.
    #[inline]
    pub fn start_op(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        cause: OpCause,
    ) -> Nanos {
        self.op_started(now, cause);
        if let Some(d) = self.lone_disk() {
            return d.submit(now, kind, offset, len);
        }
        if self.phases(kind, offset, len) == 0 {
            return now;
        }
        self.submit_phase(now, kind, offset, len, 0)
    }

    /// Whether the device is a positional disk that reorders its queue
    /// ([`QueuedDisk`]): an executor submits to it with [`DeviceModel::start_queued`] and
    /// wakes it when it asks ([`DeviceModel::wake_request`]), as an op's completion is only
    /// known when the op starts service.
    #[inline(always)]
    pub fn is_queued(&self) -> bool {
        matches!(self.store, Store::Queued(_) | Store::QueuedArray(_))
    }

    /// An op enters a queueing device at `now` ([`DeviceModel::is_queued`]); `tag` names it in
    /// `done`, where every op whose completion became known is pushed as `(tag, completion)`
    /// (this op's if it was acknowledged from the drive's cache or started at once).
    #[allow(clippy::too_many_arguments)]
    pub fn start_queued(
        &mut self,
        now: Nanos,
        kind: IoKind,
        offset: u64,
        len: u64,
        cause: OpCause,
        tag: u64,
        done: &mut Vec<(u64, Nanos)>,
    ) {
        self.op_started(now, cause);
        match &mut self.store {
            Store::Queued(q) => q.submit(now, kind, offset, len, tag, done),
            Store::QueuedArray(a) => a.submit(now, kind, offset, len, tag, done),
            _ => {
                let end = self.submit_phase(now, kind, offset, len, 0);
                done.push((tag, end));
            }
        }
    }

    /// Delivers a wake a queueing device asked for ([`DeviceModel::wake_request`]) at `now`;
    /// completions go to `done` as in [`DeviceModel::start_queued`].
    pub fn wake(&mut self, now: Nanos, done: &mut Vec<(u64, Nanos)>) {
        match &mut self.store {
            Store::Queued(q) => q.wake(now, done),
            Store::QueuedArray(a) => a.wake(now, done),
            _ => {}
        }
    }

    /// When a queueing device wants to be woken ([`DeviceModel::wake`]), if it has not asked
    /// already; `None` for every other device.
    pub fn wake_request(&mut self) -> Option<Nanos> {
        match &mut self.store {
            Store::Queued(q) => q.wake_request(),
            Store::QueuedArray(a) => a.wake_request(),
            _ => None,
        }
    }

    /// The power fails at `at`: a queueing disk loses what its volatile write cache held
    /// ([`QueuedDisk::power_cut`]); `None` for every other device (it acknowledges a write
    /// once the write is durable, so it loses nothing a host was told is written).
    pub fn power_cut(&mut self, at: Nanos) -> Option<PowerCutLoss> {
        match &mut self.store {
            Store::Queued(q) => Some(q.power_cut(at)),
            _ => None,
        }
    }

    /// Whether the device acknowledges writes before they are durable (a queueing disk with
    /// a write cache): the one kind to which a FLUSH means anything (the Linux block layer
    /// completes a FLUSH at once on a device that reports no volatile cache).
    pub fn has_volatile_cache(&self) -> bool {
        matches!(&self.store, Store::Queued(q) if q.params().write_cache > 0)
    }

    /// The queueing disk of the device, if it is one.
    pub fn queued_disk(&self) -> Option<&QueuedDisk> {
        match &self.store {
            Store::Queued(q) => Some(q),
            _ => None,
        }
    }

    /// Runs every phase of an op back to back, each starting when the previous one completes,
    /// and returns the completion time; no load accounting. Meant for wrapping a real file with
    /// a model (the engine's emulated slow backend): exact for single-phase devices (a device
    /// without link or RAID-5 read phase); for multi-phase ops later phases are booked ahead,
    /// which is a close approximation under FIFO. Calls should come in non-decreasing `now`.
    pub fn run_op(&mut self, now: Nanos, kind: IoKind, offset: u64, len: u64) -> Nanos {
        let mut t = now;
        for phase in 0..self.phases(kind, offset, len) {
            t = self.submit_phase(t, kind, offset, len, phase);
        }
        t
    }

    /// Notes a change of the ops in flight at `now` (calls come in non-decreasing `now`).
    #[inline]
    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.last_change);
        self.last_change = now;
    }

    /// Estimated device time per op, ns: a moving average (1/16 per op) of the device time
    /// consumed between op completions; 0 before any op completed.
    pub fn service_ns(&self) -> Nanos {
        self.service_ns
    }

    /// Estimated latency of one op, ns: a moving average (1/16 per op) of completion − start
    /// over completed ops, queueing inside the device included; 0 before any op completed.
    /// For a device that serves many ops at once it is far above [`DeviceModel::service_ns`].
    pub fn latency_ns(&self) -> Nanos {
        self.latency_ns
    }

    /// Ops queued or in service by origin (R, W, P, E, indexed by [`tiercache_core::Origin::index`]).
    #[inline]
    pub fn inflight_by_origin(&self) -> [u32; 4] {
        let [r, w, p, e, _] = self.inflight_by_origin;
        [r, w, p, e]
    }

    /// Ops queued or in service by cause (indexed by [`cause_index`]).
    pub fn inflight_by_cause(&self) -> &[u32; 10] {
        &self.inflight_by_cause
    }

    /// An op entered the device (before its first phase).
    #[inline]
    pub fn op_started(&mut self, now: Nanos, cause: OpCause) {
        self.advance(now);
        self.inflight_start_sum += u128::from(now);
        self.inflight += 1;
        self.started_ops += 1;
        let ci = cause_index(cause);
        self.inflight_by_cause[ci] += 1;
        self.inflight_by_origin[ORIGIN_SLOT[ci]] += 1;
        self.max_inflight = self.max_inflight.max(self.inflight);
    }

    /// An op left the device (after its last phase); `started` is when it entered (the `now`
    /// of its [`DeviceModel::op_started`]: the device's mean depth is reckoned from it).
    #[inline]
    pub fn op_finished(
        &mut self,
        now: Nanos,
        started: Nanos,
        kind: IoKind,
        len: u64,
        cause: OpCause,
    ) {
        self.advance(now);
        self.inflight_start_sum -= u128::from(started);
        self.inflight -= 1;
        let ci = cause_index(cause);
        self.inflight_by_cause[ci] -= 1;
        self.inflight_by_origin[ORIGIN_SLOT[ci]] -= 1;
        self.c.ops += 1;
        self.c.latency_ns += (now - started) as u128;
        self.latency_ns = service_ewma(self.latency_ns, now - started);
        // One sample per completion: the device time booked since the last sample, per op it
        // was booked for. A FIFO disk books an op's time when the op is submitted, a
        // queueing disk when it starts one: a completion after a batch of submissions sees
        // the batch's time, and those after it, with nothing booked, keep the estimate (as
        // the time between completions, the estimate fell to nothing while a long queue
        // drained, and a disk thousands of ops deep looked idle to the balancers).
        let booked = self.booked_ops();
        let ops = booked - self.booked_at_last_finish;
        if ops > 0 {
            let (cost, spent) = self.cost_since_last_finish();
            let per_batch = crate::disk::div_u128(spent, 1000);
            // One op booked is the common case: no division (a 128-bit one is a library call).
            let sample = if ops == 1 {
                per_batch
            } else {
                crate::disk::div_u128(per_batch, ops)
            };
            self.cost_at_last_finish = cost;
            self.booked_at_last_finish = booked;
            self.service_ns = service_ewma(self.service_ns, sample.min(u64::MAX as u128) as u64);
        }
        self.c.by_cause[ci] += 1;
        match kind {
            IoKind::Read => self.c.bytes_read += len,
            IoKind::Write => {
                self.c.bytes_written += len;
                self.c.written_by_cause[ci] += len;
            }
            _ => {}
        }
    }

    /// Ops whose device time has been booked so far: the ops a queueing disk started (its
    /// destages too), the ops that entered any other device.
    #[inline]
    fn booked_ops(&self) -> u64 {
        match &self.store {
            Store::Queued(q) => q.dispatched,
            Store::QueuedArray(a) => a.dispatched(),
            _ => self.started_ops,
        }
    }

    /// Snapshot of the counters at `now` (not before the last change).
    pub fn counters(&self, now: Nanos) -> DeviceCounters {
        let mut c = self.c;
        let now = now.max(self.last_change);
        c.at = now;
        // ∫ ops in flight dt up to `now` is each op's time in the device up to then: the
        // completed ops' latencies, and `now` less its start for each op in flight.
        c.depth_area = c.latency_ns + self.inflight as u128 * now as u128 - self.inflight_start_sum;
        c.cost_ps = self.store_cost_ps();
        c
    }

    /// Device time consumed so far, ps ([`DeviceModel::store_cost_ps`]), and since the last op
    /// completed (0 if it went down).
    #[inline]
    fn cost_since_last_finish(&self) -> (u128, u128) {
        if let (None, Store::Disk(d)) = (&self.link, &self.store) {
            // A lone disk's cost only grows (a saturating sum): the difference cannot wrap.
            return (d.cost_ps, d.cost_ps - self.cost_at_last_finish);
        }
        // An array's cost is a mean of its members' sums, which can wrap in absurd settings:
        // kept saturating, as before.
        let cost = self.store_cost_ps();
        (cost, cost.saturating_sub(self.cost_at_last_finish))
    }

    /// Device time consumed so far, ps: the busiest of the store (members averaged) and link.
    #[inline]
    fn store_cost_ps(&self) -> u128 {
        if let (None, Store::Disk(d)) = (&self.link, &self.store) {
            return d.cost_ps;
        }
        let store_cost = match &self.store {
            // No capacity limit: a constant device is never busy.
            Store::None | Store::Constant(_) => 0,
            Store::Disk(d) => d.cost_ps,
            Store::Queued(q) => q.cost_ps,
            Store::QueuedArray(a) => a.cost_ps(),
            Store::Array(a) => crate::disk::div_u128(
                a.members.iter().map(|m| m.cost_ps).sum::<u128>(),
                a.members.len() as u64,
            ),
        };
        store_cost.max(self.link.as_ref().map_or(0, |l| l.cost_ps))
    }
}

/// Load of a device over the window between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowLoad {
    /// Capacity share used, clamped to 0..=1.
    pub utilisation: f64,
    /// Time-weighted mean ops in flight.
    pub mean_queue_depth: f64,
}

impl DeviceCounters {
    /// Load between `earlier` and `self`.
    pub fn load_since(&self, earlier: &DeviceCounters) -> WindowLoad {
        let dt = self.at.saturating_sub(earlier.at);
        if dt == 0 {
            return WindowLoad::default();
        }
        let util = (self.cost_ps - earlier.cost_ps.min(self.cost_ps)) as f64 / (dt as f64 * 1000.0);
        WindowLoad {
            utilisation: util.clamp(0.0, 1.0),
            mean_queue_depth: (self.depth_area - earlier.depth_area) as f64 / dt as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cost_now(d: &DeviceModel, now: Nanos) -> u128 {
        d.counters(now).cost_ps
    }

    /// A disk given a batch of ops at once keeps its service time while the batch drains
    /// (it fell to nothing before: the completions after the first saw no time booked), so
    /// a queue thousands of ops deep does not look idle.
    #[test]
    fn a_drained_batch_keeps_the_service_time() {
        for preset in ["hdd-7200-sas", "hdd-c2-sas"] {
            let mut d = DeviceModel::new("d", &DeviceConfig::preset(preset)).unwrap();
            let mut ends = Vec::new();
            let mut done = Vec::new();
            for i in 0..200u64 {
                let offset = (i * 7_919) % 1000 * (1 << 30);
                if d.is_queued() {
                    d.start_queued(
                        0,
                        IoKind::Read,
                        offset,
                        4096,
                        OpCause::ReadMiss,
                        i,
                        &mut done,
                    );
                } else {
                    ends.push(d.start_op(0, IoKind::Read, offset, 4096, OpCause::ReadMiss));
                }
            }
            while let Some(w) = d.wake_request() {
                d.wake(w, &mut done);
            }
            ends.extend(done.iter().map(|x| x.1));
            ends.sort_unstable();
            for &e in &ends {
                d.op_finished(e, 0, IoKind::Read, 4096, OpCause::ReadMiss);
            }
            let svc = d.service_ns();
            let mean = ends.last().unwrap() / 200;
            assert!(
                svc as f64 > 0.5 * mean as f64 && (svc as f64) < 2.0 * mean as f64,
                "{preset}: service {svc} ns, mean op {mean} ns"
            );
        }
    }

    proptest! {
        /// The service-time average follows the device time booked between completions per
        /// op booked, as the counters report it (saturating), on a lone disk and on an array,
        /// at the end of time too (a per-byte time that saturates the cost).
        #[test]
        fn service_average_follows_the_device_time_between_completions(
            preset in prop_oneof![Just("nvme-ssd"), Just("sata-ssd-5100")],
            array in any::<bool>(),
            absurd in any::<bool>(),
            steps in proptest::collection::vec((0u64..50_000, any::<bool>(), any::<prop::sample::Index>(), 1u64..65_536), 1..200),
        ) {
            let text = if array {
                format!("d = {{ raid = 'raid0', members = 2, member = '{preset}' }}")
            } else {
                format!("d = '{preset}'")
            };
            let mut r = crate::limit_tests::resolve(&text).unwrap();
            // Beyond what a configuration allows: every read saturates the device time (on a
            // lone disk: an array's members' saturated times overflow their sum).
            if absurd && !array {
                match &mut r.kind {
                    ResolvedKind::Disk(p) | ResolvedKind::Array { member: p, .. } => {
                        p.read_ns_per_byte = 1e300
                    }
                    _ => unreachable!(),
                }
            }
            let mut d = DeviceModel::from_resolved("d", &r);
            let (mut now, mut before, mut avg, mut booked) = (0u64, 0u128, 0u64, 0u128);
            let mut started: Vec<Nanos> = Vec::new();
            for (dt, start, pick, len) in steps {
                now = now.saturating_add(dt);
                if start || started.is_empty() {
                    booked += 1;
                    d.op_started(now, OpCause::ReadMiss);
                    let mut t = now;
                    for phase in 0..d.phases(IoKind::Read, len * 512, len) {
                        t = d.submit_phase(t, IoKind::Read, len * 512, len, phase);
                    }
                    started.push(now);
                } else {
                    let s = started.swap_remove(pick.index(started.len()));
                    d.op_finished(now, s, IoKind::Read, len, OpCause::ReadMiss);
                    // Per op booked since the last sample; none booked, no sample.
                    if let Some(per_op) = (cost_now(&d, now).saturating_sub(before) / 1000).checked_div(booked) {
                        avg = service_ewma(avg, per_op.min(u128::from(u64::MAX)) as u64);
                        before = cost_now(&d, now);
                        booked = 0;
                    }
                    prop_assert_eq!(d.service_ns(), avg);
                }
            }
        }

        /// The depth area reckoned from start times and latencies is the step integral of the
        /// ops in flight over time, op changes and snapshots at any instants.
        #[test]
        fn depth_area_is_the_integral_of_ops_in_flight(
            steps in proptest::collection::vec((0u64..5_000, any::<bool>(), any::<prop::sample::Index>()), 1..300),
        ) {
            let mut d = DeviceModel::new("d", &DeviceConfig::preset("nvme-ssd")).unwrap();
            let (mut now, mut last, mut area, mut inflight) = (0u64, 0u64, 0u128, 0u128);
            let mut started: Vec<Nanos> = Vec::new();
            for (dt, start, pick) in steps {
                now += dt;
                prop_assert_eq!(
                    d.counters(now).depth_area,
                    area + inflight * u128::from(now - last)
                );
                area += inflight * u128::from(now - last);
                last = now;
                if start || started.is_empty() {
                    d.op_started(now, OpCause::ReadHit);
                    started.push(now);
                    inflight += 1;
                } else {
                    let s = started.swap_remove(pick.index(started.len()));
                    d.op_finished(now, s, IoKind::Read, 4096, OpCause::ReadHit);
                    inflight -= 1;
                }
                prop_assert_eq!(d.counters(now).depth_area, area);
            }
        }
    }

    #[test]
    fn origin_slots_follow_origin() {
        for c in CAUSES {
            let slot = c.origin().map_or(4, |o| o.index());
            assert_eq!(ORIGIN_SLOT[cause_index(c)], slot, "{c:?}");
        }
    }
}
