//! The background cleaner's pass over the mount's state (docs/design.md §4.9): the policy
//! core's cleaning decisions (§4.6) executed on the block file and the store, so dirty data
//! drains to the store without waiting for eviction, fsync or unmount.

use std::io;

use super::State;

impl State {
    pub(super) fn now_ns(&self) -> u64 {
        self.opened.elapsed().as_nanos() as u64
    }

    /// A request arrived (data, or one that reached the store's namespace): the mount is
    /// not idle.
    pub(super) fn note_request(&mut self) {
        self.last_request_ns = self.now_ns();
    }

    /// One pass of the background cleaner: the core's cleaning policy
    /// ([`MountConfig::cleaning`]) picks dirty blocks to write back given how long the mount
    /// has been idle, and they are written back now; when the last dirty block is gone, the
    /// store files written and the journal are synced, so the store alone is complete and
    /// durable. Returns the blocks written back and how long until the policy wants to be
    /// asked again (`None`: after the next request).
    pub fn clean_step(&mut self) -> io::Result<(u64, Option<std::time::Duration>)> {
        if self.health.degraded || !self.stranded.is_empty() {
            // Dirty blocks the cache could not read are tried again every second.
            let degraded = self.health.degraded;
            let (n, left) = self.drain_some(None, !degraded)?;
            self.stats.cleaned_blocks += n;
            let again = (left > 0).then_some(std::time::Duration::from_secs(1));
            if self.health.degraded || n + left > 0 {
                return Ok((n, again));
            }
        }
        let now = self.now_ns();
        let idle = now.saturating_sub(self.last_request_ns);
        let mut ops = Vec::new();
        let next = self.core.clean(now, idle, &mut ops);
        let n = ops.len() as u64;
        if n > 0 {
            let done = self.execute(&ops, 0, &mut [], None).and_then(|()| {
                if self.core.dirty_blocks() == 0 {
                    self.sync_journal_raw()?;
                }
                Ok(())
            });
            match done {
                Ok(()) => self.stats.cleaned_blocks += n,
                Err(e) if crate::faults::is_device_error(&e) => {
                    // The write-backs the core counted done that did not happen are done
                    // again or set aside (stranded) by the repair.
                    self.count_error(&e);
                    let failed_at = self.exec_failed_at;
                    self.repair(&ops, failed_at, &std::collections::HashMap::new(), None)?;
                    self.maybe_degrade();
                    return Ok((0, Some(std::time::Duration::from_millis(100))));
                }
                Err(e) => return Err(e),
            }
        }
        let wait = next.map(|t| std::time::Duration::from_nanos(t.saturating_sub(now)));
        Ok((n, wait))
    }

    /// A cleaning pass failed: counted (the error is the caller's to report).
    pub fn note_cleaner_error(&mut self) {
        self.stats.cleaner_errors += 1;
    }
}
