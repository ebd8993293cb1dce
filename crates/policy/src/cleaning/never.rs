//! No background cleaning: dirty data leaves only by eviction or a final flush.

use super::{CleaningPolicy, DirtyState};
use crate::cache::ExecutorState;
use tiercache_core::Nanos;

/// Never flushes in the background.
#[derive(Debug, Clone, Copy)]
pub struct Never;

impl CleaningPolicy for Never {
    fn poll(&mut self, _exec: &ExecutorState, _d: DirtyState) -> u32 {
        0
    }

    fn next_poll(&self, _exec: &ExecutorState, _d: DirtyState) -> Option<Nanos> {
        None
    }
}
