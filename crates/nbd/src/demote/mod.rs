//! tiercache's DEMOTE extension to NBD (documented in `docs/nbd-demote.md`): an upper cache
//! hands a clean line it evicts to the cache serving the export, which may keep it (exclusive
//! caching, docs/design.md §4.7).
//!
//! Negotiation: the client sends option [`OPT_TIERCACHE_DEMOTE`] (payload: an 8-byte session
//! id) before `NBD_OPT_GO`; a tiercache server whose device takes demotes acknowledges it,
//! any other server refuses it as an unknown option (`NBD_REP_ERR_UNSUP`) and the client
//! simply never demotes there. Transmission: command [`CMD_TIERCACHE_DEMOTE`] carries the data
//! as a WRITE does; the reply's error field says what happened ([`DemoteReply`]).
//!
//! Race safety: a demote must never install data older than the latest write of its blocks.
//! The server keeps, for the whole export, a fixed-size hashed table of per-block write words
//! (a write sequence in the high bits, writes in flight in the low ones: [`DemoteTracker`]),
//! and per session a bounded ledger of the word each block had when the session last read it
//! whole, or wrote it whole, with no other write in flight ([`Ledger`]). A demote is accepted
//! only for whole blocks the ledger holds whose word has not changed since, checked under the
//! lower cache's decision lock (see [`BlockDevice::demote_at`]): any write decided before the
//! demote has bumped the word by then, so the demote is refused; any decided after it lands
//! over it. Hash collisions and forgotten ledger entries only cause refusals, which are
//! always safe. Memory is fixed by [`DemoteConfig`], never by the traffic.

use std::any::Any;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use tiercache_blockdev::{BlockDevice, DemoteReply, ReapWait, RemoteStats};

/// The option a client sends to ask for demotes (payload: 8-byte big-endian session id).
/// Far above the numbers the NBD protocol has assigned (1–11 at the time of writing).
pub const OPT_TIERCACHE_DEMOTE: u32 = 0x7443_0001;
/// The DEMOTE command type: offset, length and a payload of `length` bytes, as a WRITE.
/// Far above the command types the NBD protocol has assigned (0–9).
pub const CMD_TIERCACHE_DEMOTE: u16 = 0x7443;
/// Reply error of a demote the server already held (no data was written).
pub const DEMOTE_ERR_ALREADY_HELD: u32 = 17;
/// Reply error of a refused demote (stale, unknown to the session's ledger, or no room).
pub const DEMOTE_ERR_REJECTED: u32 = 11;

/// The NBD error field of a demote's reply ([`CMD_TIERCACHE_DEMOTE`]) saying what the server
/// did with it.
pub fn reply_errno(reply: DemoteReply) -> u32 {
    match reply {
        DemoteReply::Accepted => 0,
        DemoteReply::AlreadyHeld => DEMOTE_ERR_ALREADY_HELD,
        DemoteReply::Rejected => DEMOTE_ERR_REJECTED,
    }
}

/// The outcome a demote reply's error field stands for (`None`: a real error).
pub fn reply_of_errno(errno: u32) -> Option<DemoteReply> {
    match errno {
        0 => Some(DemoteReply::Accepted),
        DEMOTE_ERR_ALREADY_HELD => Some(DemoteReply::AlreadyHeld),
        DEMOTE_ERR_REJECTED => Some(DemoteReply::Rejected),
        _ => None,
    }
}

/// Bounds of the server's race-safety state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoteConfig {
    /// Granularity of the write table and the ledgers (a power of two, 512 B–1 MiB): demotes
    /// must cover whole blocks.
    pub block_size: u64,
    /// Write-table words (rounded up to a power of two), 8 bytes each.
    pub table_entries: usize,
    /// Ledger entries per session (rounded up to a power of two), 24 bytes each: how many
    /// blocks a session's demotes can be checked for.
    pub ledger_entries: usize,
    /// Sessions with a ledger at once; a session past it gets its option refused.
    pub max_sessions: usize,
}

impl Default for DemoteConfig {
    fn default() -> Self {
        Self {
            block_size: 4096,
            table_entries: 1 << 20,
            ledger_entries: 1 << 18,
            max_sessions: 64,
        }
    }
}

/// Low bits of a write word: writes in flight on the block(s) hashed to it.
const IN_FLIGHT_BITS: u32 = 20;
const IN_FLIGHT_MASK: u64 = (1 << IN_FLIGHT_BITS) - 1;
/// One write started: the sequence advances and one more is in flight.
const WRITE_START: u64 = (1 << IN_FLIGHT_BITS) + 1;
/// Most blocks one piece of a trim or zeroing spans (see `Tracked::in_pieces`): 1 MiB of words.
const PIECE_BLOCKS: u64 = 1 << 16;

/// Counters of the demotes a server received.
#[derive(Debug, Default, serde::Serialize)]
pub struct DemoteServerStats {
    /// Demote commands received.
    pub received: AtomicU64,
    /// Kept by the cache.
    pub accepted: AtomicU64,
    /// The cache already held them.
    pub already_held: AtomicU64,
    /// Refused: a write to a block came since the session read it (or was in flight).
    pub rejected_stale: AtomicU64,
    /// Refused: the session's ledger does not hold every block (never read whole, forgotten).
    pub rejected_unknown: AtomicU64,
    /// Refused by the cache (no free slot or clean victim), or failed.
    pub rejected_by_cache: AtomicU64,
    /// Refused: not block-aligned, or sent without the option.
    pub rejected_invalid: AtomicU64,
    /// Sessions that negotiated the option.
    pub sessions: AtomicU64,
    /// Sessions refused (more than `max_sessions` at once).
    pub sessions_refused: AtomicU64,
}

/// The export-wide race-safety state: the write table, the sessions' ledgers and counters.
#[derive(Debug)]
pub struct DemoteTracker {
    cfg: DemoteConfig,
    shift: u32,
    table: Box<[AtomicU64]>,
    sessions: Mutex<HashMap<u64, Weak<Ledger>>>,
    /// Counters.
    pub stats: DemoteServerStats,
}

/// Why a [`DemoteConfig`] is unusable.
#[derive(Debug, thiserror::Error)]
#[error("demote.{field}: {reason}")]
pub struct DemoteConfigError {
    /// The setting.
    pub field: &'static str,
    /// Why.
    pub reason: String,
}

impl DemoteTracker {
    /// A tracker with the given bounds.
    pub fn new(cfg: DemoteConfig) -> Result<Self, DemoteConfigError> {
        let bad = |field, reason: &str| DemoteConfigError {
            field,
            reason: reason.to_string(),
        };
        if !cfg.block_size.is_power_of_two() || !(512..=1 << 20).contains(&cfg.block_size) {
            return Err(bad("block_size", "a power of two from 512 B to 1 MiB"));
        }
        if !(1..=1 << 28).contains(&cfg.table_entries) {
            return Err(bad("table_entries", "1 to 2^28"));
        }
        if !(1..=1 << 26).contains(&cfg.ledger_entries) {
            return Err(bad("ledger_entries", "1 to 2^26"));
        }
        if !(1..=4096).contains(&cfg.max_sessions) {
            return Err(bad("max_sessions", "1 to 4096"));
        }
        let n = cfg.table_entries.next_power_of_two();
        Ok(Self {
            shift: 64 - n.trailing_zeros(),
            table: (0..n).map(|_| AtomicU64::new(0)).collect(),
            sessions: Mutex::new(HashMap::new()),
            stats: DemoteServerStats::default(),
            cfg,
        })
    }

    /// The bounds it runs with.
    pub fn config(&self) -> &DemoteConfig {
        &self.cfg
    }

    fn word(&self, block: u64) -> &AtomicU64 {
        // Fibonacci hashing: neighbouring blocks land far apart.
        let i = if self.shift >= 64 {
            0
        } else {
            (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
        };
        &self.table[i]
    }

    /// The ledger of session `id`, made on first use; `None` past `max_sessions`.
    fn session(&self, id: u64) -> Option<Arc<Ledger>> {
        let mut s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = s.get(&id).and_then(Weak::upgrade) {
            return Some(l);
        }
        s.retain(|_, w| w.strong_count() > 0);
        if s.len() >= self.cfg.max_sessions {
            self.stats.sessions_refused.fetch_add(1, SeqCst);
            return None;
        }
        let l = Arc::new(Ledger::new(self.cfg.ledger_entries));
        s.insert(id, Arc::downgrade(&l));
        self.stats.sessions.fetch_add(1, SeqCst);
        Some(l)
    }

    /// Blocks `[off, off+len)` overlaps, and those it covers whole.
    fn blocks(&self, off: u64, len: u64) -> (std::ops::Range<u64>, std::ops::Range<u64>) {
        let b = self.cfg.block_size;
        if len == 0 {
            return (0..0, 0..0);
        }
        let touched = off / b..(off + len - 1) / b + 1;
        let whole = off.div_ceil(b)..(off + len) / b;
        (touched, whole)
    }
}

/// One session's memory of what it read or wrote whole: block → write word then, in a
/// direct-mapped array (a newer block replaces an older one at the same index).
#[derive(Debug)]
pub struct Ledger {
    mask: usize,
    entries: Box<[Mutex<(u64, u64)>]>,
}

impl Ledger {
    fn new(n: usize) -> Self {
        let n = n.next_power_of_two();
        Self {
            mask: n - 1,
            entries: (0..n).map(|_| Mutex::new((u64::MAX, 0))).collect(),
        }
    }

    fn slot(&self, block: u64) -> &Mutex<(u64, u64)> {
        &self.entries[(block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17) as usize & self.mask]
    }

    fn record(&self, block: u64, word: u64) {
        *self.slot(block).lock().unwrap_or_else(|e| e.into_inner()) = (block, word);
    }

    fn forget(&self, block: u64) {
        let mut e = self.slot(block).lock().unwrap_or_else(|e| e.into_inner());
        if e.0 == block {
            *e = (u64::MAX, 0);
        }
    }

    fn get(&self, block: u64) -> Option<u64> {
        let e = *self.slot(block).lock().unwrap_or_else(|e| e.into_inner());
        (e.0 == block).then_some(e.1)
    }
}

/// The demote tracker `dev` is served with, if demotes are offered into it.
pub(crate) fn tracker_of(dev: &dyn BlockDevice) -> Option<Arc<DemoteTracker>> {
    dev.demote_tracker()?.downcast().ok()
}

/// Answers the option: the session's ledger, or the reply type refusing it.
pub(crate) fn negotiate(dev: &dyn BlockDevice, data: &[u8]) -> Result<Arc<Ledger>, u32> {
    use crate::proto::{REP_ERR_INVALID, REP_ERR_UNSUP};
    let tracker = tracker_of(dev).ok_or(REP_ERR_UNSUP)?;
    let id: [u8; 8] = data.try_into().map_err(|_| REP_ERR_INVALID)?;
    // Too many sessions: refused like an unknown option (the client just does not demote).
    tracker.session(u64::from_be_bytes(id)).ok_or(REP_ERR_UNSUP)
}

/// The device a connection runs on: `dev` itself, or, when it takes demotes, `dev` with this
/// connection's tracking (every connection's writes advance the write table).
pub(crate) fn for_connection(
    dev: Arc<dyn BlockDevice>,
    session: Option<Arc<Ledger>>,
) -> Arc<dyn BlockDevice> {
    match tracker_of(&*dev) {
        Some(tracker) => Arc::new(Tracked {
            inner: dev,
            tracker,
            session,
            started: Mutex::new(HashMap::new()),
        }),
        None => dev,
    }
}

/// Runs a DEMOTE command; the reply's error field.
pub(crate) fn run(dev: &dyn BlockDevice, data: &[u8], off: u64) -> u32 {
    match dev.demote_at(data, off, &|| true) {
        Ok(r) => reply_errno(r),
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => crate::proto::EINVAL,
        Err(_) => DEMOTE_ERR_REJECTED,
    }
}

/// A connection's view of a device that takes demotes.
struct Tracked {
    inner: Arc<dyn BlockDevice>,
    tracker: Arc<DemoteTracker>,
    session: Option<Arc<Ledger>>,
    /// Words of the reads started on the device and not reaped yet, by tag (as many as the
    /// server keeps in flight on this connection).
    started: Mutex<HashMap<u64, Vec<(u64, u64)>>>,
}

impl Tracked {
    /// Before a read: the words of the blocks it covers whole, if no write is in flight on
    /// them (a read overlapping a write may return either's data).
    fn before_read(&self, off: u64, len: u64) -> Option<Vec<(u64, u64)>> {
        self.session.as_ref()?;
        let (_, whole) = self.tracker.blocks(off, len);
        let words: Vec<(u64, u64)> = whole
            .map(|b| (b, self.tracker.word(b).load(SeqCst)))
            .filter(|(_, w)| w & IN_FLIGHT_MASK == 0)
            .collect();
        (!words.is_empty()).then_some(words)
    }

    /// After a read: blocks no write touched meanwhile were read as of their word.
    fn after_read(&self, words: Vec<(u64, u64)>) {
        if let Some(ledger) = &self.session {
            for (b, w) in words {
                if self.tracker.word(b).load(SeqCst) == w {
                    ledger.record(b, w);
                }
            }
        }
    }

    /// [`before_read`](Self::before_read) of each of a batch of reads.
    fn before_reads(&self, reads: &[(u64, &mut [u8])]) -> Vec<Option<Vec<(u64, u64)>>> {
        reads
            .iter()
            .map(|(off, buf)| self.before_read(*off, buf.len() as u64))
            .collect()
    }

    /// [`after_read`](Self::after_read) of each read of a batch that succeeded.
    fn after_reads(&self, words: Vec<Option<Vec<(u64, u64)>>>, ok: impl Iterator<Item = bool>) {
        for (w, ok) in words.into_iter().zip(ok) {
            if let (Some(w), true) = (w, ok) {
                self.after_read(w);
            }
        }
    }

    /// Runs `op` over `off..off + len` in pieces of at most [`PIECE_BLOCKS`] blocks, each
    /// starting on a multiple of that span (so every block lies in one piece, and a block the
    /// request covers whole is covered whole by its piece), stopping at the first error. A
    /// piece holds a word per block until it completes: a trim or zeroing, whose length a
    /// client sets with no payload behind it, holds memory by the piece, not by its length.
    fn in_pieces(
        &self,
        off: u64,
        len: u64,
        mut op: impl FnMut(u64, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let span = PIECE_BLOCKS * self.tracker.cfg.block_size;
        let end = off.saturating_add(len);
        let mut at = off;
        loop {
            let next = (at / span).saturating_add(1).saturating_mul(span).min(end);
            op(at, next - at)?;
            if next >= end {
                return Ok(());
            }
            at = next;
        }
    }

    /// Before a write (or trim, or zeroing): every block it touches advances; the words after.
    fn begin_write(&self, off: u64, len: u64) -> Vec<(u64, u64)> {
        let (touched, _) = self.tracker.blocks(off, len);
        touched
            .map(|b| {
                let w = self.tracker.word(b).fetch_add(WRITE_START, SeqCst) + WRITE_START;
                if let Some(l) = &self.session {
                    // Until it completes, the session's copy of the block is not proven.
                    l.forget(b);
                }
                (b, w)
            })
            .collect()
    }

    /// After a write: its blocks are no longer in flight; with `record` (the session now
    /// holds exactly what it wrote), blocks it covered whole and that no other write touched
    /// since before it began are recorded in the session's ledger.
    fn end_write(&self, off: u64, len: u64, words: Vec<(u64, u64)>, record: bool) {
        let (_, whole) = self.tracker.blocks(off, len);
        for (b, w) in words {
            let before = self.tracker.word(b).fetch_sub(1, SeqCst);
            let alone = before == w && w & IN_FLIGHT_MASK == 1;
            if let (true, true, Some(l)) = (record && alone, whole.contains(&b), &self.session) {
                l.record(b, w - 1);
            }
        }
    }
}

impl BlockDevice for Tracked {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let words = self.before_read(off, buf.len() as u64);
        self.inner.read_at(buf, off)?;
        if let Some(w) = words {
            self.after_read(w);
        }
        Ok(())
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        let words = self.begin_write(off, data.len() as u64);
        let out = self.inner.write_at(data, off, fua);
        self.end_write(off, data.len() as u64, words, out.is_ok());
        out
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.in_pieces(off, len, |off, len| {
            let words = self.begin_write(off, len);
            let out = self.inner.trim(off, len);
            // After a trim the contents are unspecified: nothing is recorded.
            self.end_write(off, len, words, false);
            out
        })
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.in_pieces(off, len, |off, len| {
            let words = self.begin_write(off, len);
            let out = self.inner.write_zeroes(off, len, fua);
            self.end_write(off, len, words, out.is_ok());
            out
        })
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        let words = self.before_read(off, buf.len() as u64);
        let out = self.inner.read_fast(buf, off)?;
        if let (Ok(()), Some(w)) = (&out, words) {
            self.after_read(w);
        }
        Some(out)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        let words = self.begin_write(off, data.len() as u64);
        let out = self.inner.write_fast(data, off);
        // Not claimed: the sequence still advanced, which only makes demotes refused.
        let ok = matches!(out, Some(Ok(())));
        self.end_write(off, data.len() as u64, words, ok);
        out
    }
    // The batched and started paths are forwarded with the same tracking as the single ones:
    // without them a server offering demotes would serve an O_DIRECT engine's hits one
    // thread hand-off at a time. A connection without a demote session records no read (see
    // `before_read`): its reads go straight through, with no allocation or lock per batch.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        if self.session.is_none() {
            return self.inner.read_many(reads);
        }
        let words = self.before_reads(reads);
        let out = self.inner.read_many(reads);
        self.after_reads(words, out.iter().map(|r| r.is_ok()));
        out
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        let words: Vec<_> = writes
            .iter()
            .map(|(off, data)| self.begin_write(*off, data.len() as u64))
            .collect();
        let out = self.inner.write_many(writes);
        for ((off, data), w) in writes.iter().zip(words) {
            self.end_write(*off, data.len() as u64, w, out.is_ok());
        }
        out
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        if self.session.is_none() {
            return self.inner.read_fast_many(reads);
        }
        let words = self.before_reads(reads);
        let out = self.inner.read_fast_many(reads);
        self.after_reads(words, out.iter().map(|r| matches!(r, Some(Ok(())))));
        out
    }
    fn hits_wait_for_device(&self) -> bool {
        self.inner.hits_wait_for_device()
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        if self.session.is_none() {
            return self.inner.start_reads(reads);
        }
        let words: Vec<_> = reads
            .iter()
            .map(|&(_, off, len)| self.before_read(off, len as u64))
            .collect();
        let out = self.inner.start_reads(reads);
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        for ((&(tag, _, _), w), r) in reads.iter().zip(words).zip(&out) {
            if let (Some(w), Some(Ok(()))) = (w, r) {
                started.insert(tag, w);
            }
        }
        out
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        if self.session.is_none() {
            return self.inner.reap_started(wait, f);
        }
        self.inner.reap_started(wait, &mut |tag, res| {
            let w = self
                .started
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&tag);
            if let (Some(w), Ok(_)) = (w, &res) {
                self.after_read(w);
            }
            f(tag, res)
        })
    }
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.inner.flush_since(epoch)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.inner.link_stats()
    }
    fn multi_conn(&self) -> bool {
        self.inner.multi_conn()
    }
    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        _still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        let st = &self.tracker.stats;
        st.received.fetch_add(1, SeqCst);
        let b = self.tracker.cfg.block_size;
        let len = data.len() as u64;
        let Some(ledger) = self.session.as_ref().filter(|_| {
            len > 0
                && off.is_multiple_of(b)
                && len.is_multiple_of(b)
                && off.checked_add(len).is_some_and(|e| e <= self.size())
        }) else {
            st.rejected_invalid.fetch_add(1, SeqCst);
            return Ok(DemoteReply::Rejected);
        };
        let mut expected = Vec::with_capacity((len / b) as usize);
        for blk in off / b..(off + len) / b {
            match ledger.get(blk) {
                Some(w) => expected.push((blk, w)),
                None => {
                    st.rejected_unknown.fetch_add(1, SeqCst);
                    return Ok(DemoteReply::Rejected);
                }
            }
        }
        let current = || {
            expected
                .iter()
                .all(|&(blk, w)| self.tracker.word(blk).load(SeqCst) == w)
        };
        if !current() {
            st.rejected_stale.fetch_add(1, SeqCst);
            return Ok(DemoteReply::Rejected);
        }
        let out = self.inner.demote_at(data, off, &current);
        let counter = match &out {
            Ok(DemoteReply::Accepted) => &st.accepted,
            Ok(DemoteReply::AlreadyHeld) => &st.already_held,
            // Re-checked under the cache's lock: a write slipped in, or there was no room.
            Ok(DemoteReply::Rejected) if !current() => &st.rejected_stale,
            _ => &st.rejected_by_cache,
        };
        counter.fetch_add(1, SeqCst);
        out
    }
    fn demote_tracker(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(self.tracker.clone())
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.inner.allocation(off, len)
    }
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        self.inner.cache_state(off, len)
    }
    fn fast_zeroes(&self) -> bool {
        self.inner.fast_zeroes()
    }
}

/// A device that takes demotes, exported with race-safety tracking: serve this instead of
/// the device itself to offer [`OPT_TIERCACHE_DEMOTE`].
pub struct DemoteExport {
    inner: Arc<dyn BlockDevice>,
    tracker: Arc<DemoteTracker>,
}

impl DemoteExport {
    /// Offers demotes into `inner` (whose [`BlockDevice::demote_at`] must take them).
    pub fn new(inner: Arc<dyn BlockDevice>, cfg: DemoteConfig) -> Result<Self, DemoteConfigError> {
        Ok(Self {
            inner,
            tracker: Arc::new(DemoteTracker::new(cfg)?),
        })
    }

    /// The tracker (its counters).
    pub fn tracker(&self) -> &Arc<DemoteTracker> {
        &self.tracker
    }
}

impl BlockDevice for DemoteExport {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.inner.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.inner.trim(off, len)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> io::Result<()> {
        self.inner.write_zeroes(off, len, fua)
    }
    fn read_fast(&self, buf: &mut [u8], off: u64) -> Option<io::Result<()>> {
        self.inner.read_fast(buf, off)
    }
    fn write_fast(&self, data: &[u8], off: u64) -> Option<io::Result<()>> {
        self.inner.write_fast(data, off)
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        self.inner.read_many(reads)
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        self.inner.write_many(writes)
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        self.inner.read_fast_many(reads)
    }
    fn hits_wait_for_device(&self) -> bool {
        self.inner.hits_wait_for_device()
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        self.inner.start_reads(reads)
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        self.inner.reap_started(wait, f)
    }
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn flush_since(&self, epoch: u64) -> io::Result<()> {
        self.inner.flush_since(epoch)
    }
    fn link_stats(&self) -> Option<RemoteStats> {
        self.inner.link_stats()
    }
    fn multi_conn(&self) -> bool {
        self.inner.multi_conn()
    }
    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        self.inner.demote_at(data, off, still_valid)
    }
    fn demote_tracker(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(self.tracker.clone())
    }
    fn allocation(&self, off: u64, len: u64) -> io::Result<Vec<tiercache_blockdev::Extent>> {
        self.inner.allocation(off, len)
    }
    fn cache_state(
        &self,
        off: u64,
        len: u64,
    ) -> Option<io::Result<Vec<tiercache_blockdev::Extent>>> {
        self.inner.cache_state(off, len)
    }
    fn fast_zeroes(&self) -> bool {
        self.inner.fast_zeroes()
    }
}

#[cfg(test)]
mod tests;
