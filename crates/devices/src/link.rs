//! A network link: a FIFO serialiser at its bandwidth plus a fixed propagation latency.

use crate::*;

/// Runtime state of a network link.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) p: LinkParams,
    pub(crate) ps_per_byte: u128,
    pub(crate) free_ps: u128,
    pub(crate) cost_ps: u128,
}

impl Link {
    pub(crate) fn new(p: LinkParams) -> Self {
        Self {
            ps_per_byte: bw_ps(p.bandwidth),
            p,
            free_ps: 0,
            cost_ps: 0,
        }
    }

    /// Sends `len` bytes at `now`; returns when they arrive, saturating at [`Nanos::MAX`].
    pub(crate) fn submit(&mut self, now: Nanos, len: u64) -> Nanos {
        let start = (now as u128 * PS_PER_NS).max(self.free_ps);
        let xfer = (len as u128).saturating_mul(self.ps_per_byte);
        self.free_ps = start.saturating_add(xfer);
        self.cost_ps = self.cost_ps.saturating_add(xfer);
        ps_to_ns_ceil(self.free_ps).saturating_add(self.p.latency_ns)
    }
}
