//! The mount's background cleaner (docs/design.md §4.9): a thread that asks the policy core's
//! cleaning policy (§4.6: lazy on an idle mount, threshold on the share of dirty blocks,
//! aggressive on a period) for write-backs and runs them, so dirty data drains to the store
//! without waiting for eviction, fsync or unmount. It takes the mount's lock for one batch at
//! a time, so requests wait at most one batch.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::state::State;

/// How long the cleaner sleeps when its policy names no time (it asks again after requests,
/// which it cannot see: so it looks every so often).
const POLL: Duration = Duration::from_millis(100);

/// After a failed pass (the store refused a write-back), the next try waits this long.
const RETRY: Duration = Duration::from_secs(1);

/// A running cleaner; dropping it stops the thread and waits for it (so the state it cleans
/// is released with the mount).
pub struct Cleaner {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Cleaner {
    /// Starts cleaning `state` (nothing runs if its variant is not write-back or its policy is
    /// none: the thread finds nothing to do and sleeps).
    pub fn spawn(state: &Arc<Mutex<State>>) -> std::io::Result<Cleaner> {
        let weak: Weak<Mutex<State>> = Arc::downgrade(state);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("tiercache-cleaner".into())
            .spawn(move || {
                let mut failed_before = false;
                loop {
                    let Some(state) = weak.upgrade() else { return };
                    let wait = {
                        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                        match st.clean_step() {
                            // More may be due at once: the lock is let go in between.
                            Ok((n, _)) if n > 0 => Duration::ZERO,
                            Ok((_, next)) => {
                                next.map_or(POLL, |w| w.clamp(Duration::from_millis(1), POLL))
                            }
                            Err(e) => {
                                st.note_cleaner_error();
                                if !failed_before {
                                    eprintln!(
                                        "tiercache mount: background write-back failed ({e}); \
                                         the blocks stay dirty and are retried (reported once)"
                                    );
                                    failed_before = true;
                                }
                                RETRY
                            }
                        }
                    };
                    drop(state);
                    match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
            })?;
        Ok(Cleaner {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
