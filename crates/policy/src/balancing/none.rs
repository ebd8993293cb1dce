//! No balancing: the configured write policy whatever the load.

use super::{BalanceDecision, Balancer};
use crate::config::WritePolicy;
use crate::executor::ExecutorState;
use tiercache_core::Nanos;

/// Never polled; never changes anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBalancing;

impl Balancer for NoBalancing {
    fn name(&self) -> &'static str {
        "none"
    }

    fn interval_ns(&self) -> Option<Nanos> {
        None
    }

    fn poll(&mut self, _state: &ExecutorState, _configured: WritePolicy) -> BalanceDecision {
        BalanceDecision::KEEP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_never_polled_and_keeps_the_configured_policy() {
        let mut b = NoBalancing;
        assert_eq!(b.interval_ns(), None);
        assert_eq!(
            b.poll(&ExecutorState::default(), WritePolicy::WriteBack),
            BalanceDecision::KEEP
        );
    }
}
