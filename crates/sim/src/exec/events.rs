//! Events of the simulation and the tasks (requests, flush jobs) they move along.

use super::*;

/// What an event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum What {
    /// A fetched request reaches the cache.
    Arrive(u32),
    /// Submission CPU done: issue the first stage.
    Issue(u32),
    /// Phase `phase` of op `op` of a task completed.
    Phase { task: u32, op: u32, phase: u8 },
    /// Op `op` of a task, sent to the level below, is done there and back across the link;
    /// `served` is the level (or [`BACKEND`]) its data came from.
    Below { task: u32, op: u32, served: u16 },
    /// Completion CPU done: acknowledge.
    Ack(u32),
    /// The cleaner of a level asked to be polled.
    Poll(u16),
    /// A load-balancing interval of a level ended.
    Balance(u16),
    /// A tenancy interval of a level ended (partitions may be resized).
    Repartition(u16),
    /// A queueing disk (device `dev` of level `level`) asked to be woken: its head is free.
    Wake { level: u16, dev: u16 },
}

/// Where a request's data came from when it was the backend (a level's index otherwise).
pub(super) const BACKEND: u16 = u16::MAX;
/// A demote's answer: it serves no data.
pub(super) const NOT_SERVED: u16 = u16::MAX - 1;
/// No parent task.
pub(super) const NO_TASK: u32 = u32::MAX;

/// An event as the queue returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) time: Nanos,
    pub(super) seq: u64,
    pub(super) what: What,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskKind {
    /// A client's request, at its top level.
    Request,
    /// A backend op of the level above (its `parent`), a request at this level.
    Sub,
    /// A demote of the level above, offered to this level.
    Demote,
    /// A flush job of this level.
    Flush,
}

impl TaskKind {
    /// A request (a client's or the level above's): acknowledged, its cache ops foreground.
    #[inline(always)]
    pub(super) fn is_request(self) -> bool {
        matches!(self, TaskKind::Request | TaskKind::Sub)
    }
}

/// A request or flush job in flight. Slots are reused with their plan buffers.
#[derive(Debug)]
pub(super) struct Task {
    pub(super) kind: TaskKind,
    pub(super) plan: Plan,
    pub(super) req: Request,
    pub(super) job: u32,
    pub(super) arrival: Nanos,
    pub(super) stage_start: Nanos,
    pub(super) next_op: u32,
    pub(super) stage_pending: u32,
    pub(super) crit_left: u32,
    pub(super) ops_left: u32,
    pub(super) measured: bool,
    pub(super) ack_started: bool,
    pub(super) acked: bool,
    pub(super) flush: Option<FlushJob>,
    /// Allocated (guards against releasing a slot twice).
    pub(super) live: bool,
    /// The level it runs at.
    pub(super) level: u16,
    /// The client whose request it is (requests only).
    pub(super) client: u16,
    /// Where its data came from: the deepest level (or [`BACKEND`]) a critical op reached.
    pub(super) served: u16,
    /// A request that crossed its client's link down already.
    pub(super) crossed: bool,
    /// The task and op at the level above this sub-request or demote answers.
    pub(super) parent: u32,
    pub(super) parent_op: u32,
    /// FLUSH ops a flush job appended to its plan (`run.write_back_barrier`).
    pub(super) barrier_ops: u32,
}

impl Task {
    pub(super) fn empty() -> Self {
        Task {
            kind: TaskKind::Request,
            plan: Plan::new(),
            req: Request::read(0, 0),
            job: 0,
            arrival: 0,
            stage_start: 0,
            next_op: 0,
            stage_pending: 0,
            crit_left: 0,
            ops_left: 0,
            measured: false,
            ack_started: false,
            acked: false,
            flush: None,
            live: false,
            level: 0,
            client: 0,
            served: 0,
            crossed: false,
            parent: NO_TASK,
            parent_op: 0,
            barrier_ops: 0,
        }
    }
}

/// The tag of op `op` of task `task` at a queueing disk.
#[inline]
pub(super) fn task_op_tag(task: u32, op: u32) -> u64 {
    (u64::from(task) << 32) | u64::from(op)
}

/// Schedules what a queueing disk (device `dev` of level `level`) handed back: the
/// completions in `done` (emptied) as the ops' phase events, and the wake it asked for.
/// Returns whether a time reached the end of time.
pub(super) fn deliver(
    events: &mut EventQueue,
    done: &mut Vec<(u64, Nanos)>,
    wake: Option<Nanos>,
    level: u16,
    dev: usize,
) -> bool {
    let mut overflow = false;
    for (tag, end) in done.drain(..) {
        if end == Nanos::MAX {
            overflow = true;
            continue;
        }
        let what = What::Phase {
            task: (tag >> 32) as u32,
            op: tag as u32,
            phase: 0,
        };
        events.push(end, what);
    }
    if let Some(at) = wake {
        if at == Nanos::MAX {
            return true;
        }
        let what = What::Wake {
            level,
            dev: dev as u16,
        };
        events.push(at, what);
    }
    overflow
}

impl<const MULTI: bool> Sim<'_, MULTI> {
    /// A queueing disk's wake: its head is free and takes the next command or destage.
    #[inline(never)]
    pub(super) fn wake_device(&mut self, level: u16, dev: u16) {
        let now = self.now;
        let d = &mut self.levels[level as usize].devs[dev as usize];
        d.wake(now, &mut self.device_done);
        let wake = d.wake_request();
        if deliver(
            &mut self.events,
            &mut self.device_done,
            wake,
            level,
            dev as usize,
        ) {
            self.time_overflow();
        }
    }
}
