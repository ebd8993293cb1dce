//! Block-path requests the reading thread serves itself (docs/design.md §14 "Served
//! inline"): a read whose blocks are all cached, and a write-back write over blocks all
//! cached, complete on the fast device alone; handing them to a request thread would add
//! the hand-off's latency and buy nothing (the data path is under the mount's lock). The
//! lock is only tried: a reading thread never waits for it, and a request it cannot serve
//! at once goes to the pool as before, and so does one larger than [`INLINE_MAX_BYTES`].

use std::sync::{MutexGuard, TryLockError};

use fuser::{INodeNo, ReplyData, ReplyWrite};

use super::attr::errno;
use super::Inner;
use crate::state::{HitPlan, State};

/// The largest read or write served inline: a larger one's copy and reply would hold up the
/// reading of the next requests, which request threads could serve meanwhile (§14: served
/// inline without a limit, 1 MiB reads with 8 jobs lost about a third; 4 KiB random reads of
/// one job gained severalfold).
pub(super) const INLINE_MAX_BYTES: usize = 64 << 10;

impl Inner {
    /// The mount's lock if it is free now (a poisoned lock is used, as [`Inner::lock`] does).
    fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Serves a read on the calling thread if the lock is free and its blocks are all
    /// cached; otherwise gives `reply` back, to be handed off.
    pub(super) fn read_inline(
        &self,
        ino: INodeNo,
        offset: u64,
        size: u32,
        reply: ReplyData,
    ) -> Option<ReplyData> {
        if size as usize > INLINE_MAX_BYTES {
            return Some(reply);
        }
        let Some(mut st) = self.try_lock() else {
            return Some(reply);
        };
        if !st.read_is_cached(ino.0, offset, size) {
            return Some(reply);
        }
        st.note_inline();
        // The cache device's reads too run without the lock, its slots pinned (§14, "The
        // data path off the lock"), so request threads take the lock meanwhile.
        let planned = st.read_hits(ino.0, offset, size);
        let result = match planned {
            None => st.read(ino.0, offset, size),
            Some(HitPlan::Done(result)) => result,
            Some(HitPlan::Io(hits)) => {
                drop(st);
                return {
                    match hits.run() {
                        Ok(data) => reply.data(&data),
                        // A cache-device error: read again under the lock (it counts the
                        // error and serves past the cache, §11) — on a request thread.
                        Err(_) => return Some(reply),
                    }
                    None
                };
            }
        };
        drop(st); // the reply is sent without the lock
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(&e)),
        }
        None
    }

    /// Serves a write on the calling thread if the lock is free and the write needs no
    /// store I/O ([`State::write_is_cached`]); otherwise gives `reply` back.
    pub(super) fn write_inline(
        &self,
        ino: INodeNo,
        offset: u64,
        data: &[u8],
        reply: ReplyWrite,
    ) -> Option<ReplyWrite> {
        if data.len() > INLINE_MAX_BYTES {
            return Some(reply);
        }
        let Some(mut st) = self.try_lock() else {
            return Some(reply);
        };
        if !st.write_is_cached(ino.0, offset, data.len()) {
            return Some(reply);
        }
        st.note_inline();
        let result = st.write(ino.0, offset, data);
        drop(st);
        match result {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(&e)),
        }
        None
    }
}
