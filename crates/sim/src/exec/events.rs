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
    /// Completion CPU done: acknowledge.
    Ack(u32),
    /// The cleaner asked to be polled.
    Poll,
    /// A load-balancing interval ended.
    Balance,
    /// A tenancy interval ended (partitions may be resized).
    Repartition,
}

/// An event as the queue returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) time: Nanos,
    pub(super) seq: u64,
    pub(super) what: What,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskKind {
    Request,
    Flush,
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
        }
    }
}
