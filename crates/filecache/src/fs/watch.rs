//! The store's watcher thread (docs/design.md §14 "Changes to the store"): it waits for the
//! watch's events, applies each batch to the state under the mount's lock
//! ([`State::store_events`]), marks the images of changed files, and then, with the lock let
//! go, tells the kernel what to forget. The kernel's invalidations wait for its own locks
//! (a directory's, a page's) that a request in flight may hold while it waits for the
//! mount's lock: sent under that lock they could deadlock, sent after it they cannot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fuser::{INodeNo, Notifier};

use super::Inner;
use crate::inotify::Inotify;
use crate::state::{Invalidation, State};

/// How often an idle watcher looks whether the mount is gone.
const POLL: Duration = Duration::from_millis(200);

/// The store's watcher, ready to start once the session's [`Notifier`] exists
/// ([`super::CacheFs::watcher`]).
pub struct Watcher {
    inner: Weak<Inner>,
    inotify: Arc<Inotify>,
    stop: Arc<AtomicBool>,
}

impl Watcher {
    pub(super) fn new(inner: &Arc<Inner>) -> Option<Watcher> {
        Some(Watcher {
            inotify: inner.watch.clone()?,
            inner: Arc::downgrade(inner),
            stop: inner.watch_stop.clone(),
        })
    }

    /// Starts the thread; it ends at unmount. If it cannot start, the mount says so and goes
    /// on unwatched.
    pub fn start(self, notifier: Notifier) {
        let spawned = std::thread::Builder::new()
            .name("tiercache-watch".into())
            .spawn(move || self.run(&notifier));
        if let Err(e) = spawned {
            eprintln!("tiercache mount: the store's watcher did not start ({e})");
        }
    }

    fn run(self, notifier: &Notifier) {
        let mut refused = false;
        while !self.stop.load(Ordering::Relaxed) {
            match self.inotify.wait(POLL) {
                Ok(true) => {}
                Ok(false) => {
                    let Some(inner) = self.inner.upgrade() else {
                        return;
                    };
                    let mut st = inner.lock();
                    if !st.store_checks_deferred() {
                        continue;
                    }
                    st.store_events(&[]);
                    let invalidations = changes(&inner, &mut st);
                    drop(st);
                    drop(inner);
                    self.send(notifier, invalidations, &mut refused);
                    continue;
                }
                Err(e) => {
                    eprintln!("tiercache mount: the store's watch failed ({e}); stopped");
                    return;
                }
            }
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(e) => {
                    eprintln!("tiercache mount: reading the store's watch failed ({e}); stopped");
                    return;
                }
            };
            let Some(inner) = self.inner.upgrade() else {
                return;
            };
            let invalidations = {
                let mut st = inner.lock();
                st.store_events(&events);
                changes(&inner, &mut st)
            };
            drop(inner);
            self.send(notifier, invalidations, &mut refused);
        }
    }

    /// Tells the kernel to forget what `invalidations` name; a refusal is said once.
    fn send(&self, notifier: &Notifier, invalidations: Vec<Invalidation>, refused: &mut bool) {
        for inv in invalidations {
            let sent = match &inv {
                Invalidation::Entry { parent, name } => {
                    notifier.inval_entry(INodeNo(*parent), name)
                }
                Invalidation::Inode(id) => notifier.inval_inode(INodeNo(*id), 0, 0),
                Invalidation::Attributes(id) => notifier.inval_inode(INodeNo(*id), -1, 0),
            };
            if let Err(e) = sent {
                if !*refused {
                    eprintln!(
                        "tiercache mount: the kernel refused an invalidation ({inv:?}: {e}); it \
                         may serve what it cached until its timeout"
                    );
                }
                *refused = true;
            }
        }
    }
}

/// The state's pending changes: open images of changed files are marked stale (a written one
/// is a conflict, its writes win at its release), idle ones dropped; returns what the kernel
/// must forget.
fn changes(inner: &Inner, st: &mut State) -> Vec<Invalidation> {
    let (invalidations, changed) = st.take_store_changes();
    for id in changed {
        if inner.images.store_changed(id) {
            st.store_conflict(id);
        }
    }
    invalidations
}
