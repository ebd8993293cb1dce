//! Failure and fail-stop: the halt that ends service when the core's state or an evicted
//! dirty line's only copy can no longer be trusted.

use super::*;

impl Inner {
    /// An error if the engine has halted.
    /// A shard's policy core. A thread that panicked holding it may have left it half updated
    /// (a line in the index but not the lists, a dirty bit without its record …): serving from
    /// it could return wrong data, so the engine halts (fail-stop) as it does when a dirty
    /// line's write-back fails, and every request from now on gets EIO. A restart recovers
    /// from the cache device's durable records, which the core never wrote half.
    pub(super) fn core<'a>(&self, shard: &'a Shard) -> MutexGuard<'a, Core> {
        shard.core.lock().unwrap_or_else(|poisoned| {
            let _ = self.halted.set(
                "a thread panicked while holding a policy core's lock, whose state may be \
                 broken; restart to recover from the cache device's records"
                    .into(),
            );
            poisoned.into_inner()
        })
    }

    pub(super) fn check_halted(&self) -> io::Result<()> {
        match self.halted.get() {
            Some(why) => Err(io::Error::other(format!("cache engine halted: {why}"))),
            None => Ok(()),
        }
    }

    /// Halts the engine if the failed `plan` evicted a dirty line: the core has forgotten the
    /// line, whose data may not have reached the backend (see [`Inner::halted`]).
    pub(super) fn halt_if_evicting(&self, plan: &Plan, e: &io::Error) {
        if plan.ops.iter().any(|o| o.cause == OpCause::EvictFlush) {
            let why = format!(
                "writing back an evicted dirty line failed ({e}); its data is kept on the \
                 cache device and a restart recovers it"
            );
            if self.halted.set(why).is_ok() {
                self.kick();
            }
        }
    }
}
