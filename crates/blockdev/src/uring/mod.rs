//! Transfers through io_uring, one ring per thread, with pread/pwrite as the portable fallback
//! where the kernel has no io_uring (or a sandbox forbids it).
//!
//! A call hands the kernel a whole batch of transfers in one submission and reaps their
//! completions in batches ([`transfer_batch`]): a connection's concurrent cache hits cost one
//! system call, not one each. Files are registered with the ring (fixed files: no descriptor
//! lookup per op) and transfers use buffers registered with it (fixed buffers: no page pinning
//! per op), aligned for O_DIRECT.
//!
//! Soundness: the kernel only ever reads or writes memory the ring itself owns (its registered
//! pool, or aligned scratch it keeps until the completion is reaped); callers' slices are
//! copied into or out of it. A call returns only once every op it submitted has completed; if
//! the ring breaks with ops in flight, the ring and everything the kernel may still touch are
//! leaked, never freed, and the thread falls back to pread/pwrite.

use crate::ReapWait;
use io_uring::{opcode, squeue, types, IoUring};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Submission queue entries per ring: the most ops one submission carries.
const RING_ENTRIES: u32 = 64;
/// Registered buffers per ring, and the size of each.
const POOL_BUFFERS: usize = 64;
const POOL_BUFFER_SIZE: usize = 64 << 10;
/// Files registered per ring at once (least recently registered replaced first).
const FIXED_FILES: u32 = 32;
/// Alignment of every buffer the kernel sees (O_DIRECT's strictest common need).
const ALIGN: usize = 4096;
/// Longest single op: longer transfers are cut into ops of this size.
pub const MAX_OP: usize = 16 << 20;

/// A file as the rings know it: its descriptor and a process-unique identity, so that a
/// descriptor number reused by another file is never taken for the registered one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRef {
    /// The open descriptor (owned by the caller, open for the duration of each call).
    pub fd: RawFd,
    /// From [`FileRef::new_id`].
    pub id: u64,
}

impl FileRef {
    /// A fresh identity for a newly opened file.
    pub fn new_id() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Relaxed)
    }
}

/// One transfer of a batch.
pub enum Transfer<'a> {
    /// Fill the slice from the file.
    Read(&'a mut [u8]),
    /// Write the slice to the file.
    Write(&'a [u8]),
}

impl Transfer<'_> {
    fn len(&self) -> usize {
        match self {
            Transfer::Read(b) => b.len(),
            Transfer::Write(b) => b.len(),
        }
    }
}

/// Aligned memory owned by a ring.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len.max(ALIGN), ALIGN).expect("buffer layout");
        // SAFETY: the layout has a non-zero size (at least ALIGN bytes).
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Aligned { ptr, len }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len.max(ALIGN), ALIGN).expect("buffer layout");
        // SAFETY: `ptr` came from `alloc_zeroed` with this same layout and is freed once.
        unsafe { dealloc(self.ptr, layout) }
    }
}

/// A thread's ring and what it registered. Field order matters: the ring is dropped (closed,
/// which ends the registrations) before the pool it registered is freed.
struct RingState {
    ring: IoUring,
    /// Completions are posted only when this thread enters the kernel (deferred task work;
    /// read by the tests that depend on it).
    #[cfg_attr(not(test), allow(dead_code))]
    defers_task_work: bool,
    /// The registered pool: `POOL_BUFFERS` buffers of `POOL_BUFFER_SIZE` bytes, contiguous.
    pool: Aligned,
    /// Whether the pool is registered (fixed buffers) or used as plain aligned memory.
    pool_registered: bool,
    /// Which file each fixed-file slot holds (`None`: no fixed files on this kernel).
    fixed: Option<Vec<Option<u64>>>,
    next_fixed: usize,
    /// Pool buffers not in use.
    free_pool: Vec<usize>,
    /// Started reads ([`start_reads`]) not reaped yet, by user data (bit 63 set).
    started: std::collections::HashMap<u64, StartedRead>,
    next_started: u64,
    /// Completions of started reads reaped while a batch waited for its own.
    started_done: Vec<(u64, i32)>,
    /// An eventfd the kernel signals as completions arrive (with deferred task work: as they
    /// wait to be posted), so a reap can wait for a completion and a socket in one poll
    /// ([`ReapWait::CompletionOrReadable`]); `None` where it could not be registered.
    eventfd: Option<OwnedFd>,
}

/// A read started and not yet reaped: its tag and where its bytes land.
struct StartedRead {
    tag: u64,
    len: usize,
    staging: Staging,
}

/// User data of started reads carry this bit (a batch's own ops never do).
const STARTED_BIT: u64 = 1 << 63;
/// User data of a sync's completion: no started read's (no [`STARTED_BIT`]), and beyond any
/// batch op's index.
const SYNC_KEY: u64 = STARTED_BIT - 1;

/// Whether a failed `io_uring_enter` is worth retrying as it was (interrupted, or the kernel
/// short of resources for a moment).
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}

/// `io_uring_enter`: submits what is queued and waits for `want` completions (0: none).
/// (Tests make it fail on cue: `tests::enter_fails`.)
fn enter(state: &mut RingState, want: usize) -> io::Result<usize> {
    #[cfg(test)]
    if tests::enter_fails() {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    #[cfg(test)]
    if tests::enter_busy() {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    state.ring.submit_and_wait(want)
}

/// Queues `entry`, first handing the queue to the kernel if it is full (entries left queued by
/// a transient failure). `Ok(false)`: still full; `Err`: the ring cannot be entered.
///
/// # Safety
/// As [`io_uring::SubmissionQueue::push`]: what `entry` names stays valid until its
/// completion is reaped.
unsafe fn push(state: &mut RingState, entry: &squeue::Entry) -> io::Result<bool> {
    if state.ring.submission().is_full() {
        match enter(state, 0) {
            Err(e) if !transient(&e) => return Err(e),
            _ => {}
        }
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { state.ring.submission().push(entry) }.is_ok())
}

/// A completion's result: bytes transferred, or the error its negative value names.
fn cqe_result(res: i32) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as usize)
    }
}

/// Waits for at least one completion and hands each completed op of the caller's own (user
/// data without [`STARTED_BIT`]) to `own`; started reads' completions are kept for their
/// reaper ([`reap_started`]), so a batch or a sync never takes, and loses, one of them.
fn wait_own(state: &mut RingState, mut own: impl FnMut(u64, i32)) -> io::Result<()> {
    match enter(state, 1) {
        Err(e) if !transient(&e) => return Err(e),
        _ => {}
    }
    for cqe in state.ring.completion() {
        if cqe.user_data() & STARTED_BIT != 0 {
            state.started_done.push((cqe.user_data(), cqe.result()));
        } else {
            own(cqe.user_data(), cqe.result());
        }
    }
    Ok(())
}

impl RingState {
    fn new() -> io::Result<RingState> {
        // A ring only ever serves the thread that made it (it is thread-local), so it can be
        // single-issuer with deferred task work: completions are posted when this thread
        // enters the kernel to reap them, instead of interrupting it wherever it is (in a
        // socket read, say) to run their task work. Kernels before 6.1 lack these flags:
        // a plain ring then.
        let (ring, defers_task_work) = match IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(RING_ENTRIES)
        {
            Ok(ring) => (ring, true),
            Err(_) => (IoUring::new(RING_ENTRIES)?, false),
        };
        let pool = Aligned::new(POOL_BUFFERS * POOL_BUFFER_SIZE);
        let iovecs: Vec<libc::iovec> = (0..POOL_BUFFERS)
            .map(|i| libc::iovec {
                // SAFETY: `i * POOL_BUFFER_SIZE` is inside the pool's allocation.
                iov_base: unsafe { pool.ptr.add(i * POOL_BUFFER_SIZE) }.cast(),
                iov_len: POOL_BUFFER_SIZE,
            })
            .collect();
        // SAFETY: the iovecs name the pool, which lives in this struct as long as the ring
        // (and longer: the ring field is dropped first), so the registration never outlives
        // the memory.
        let pool_registered = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        let fixed = ring
            .submitter()
            .register_files_sparse(FIXED_FILES)
            .is_ok()
            .then(|| vec![None; FIXED_FILES as usize]);
        // SAFETY: plain system call with no pointers.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let eventfd = (efd >= 0)
            // SAFETY: `efd` is a descriptor just opened here and owned by nothing else.
            .then(|| unsafe { OwnedFd::from_raw_fd(efd) })
            .filter(|e| ring.submitter().register_eventfd(e.as_raw_fd()).is_ok());
        Ok(RingState {
            ring,
            defers_task_work,
            pool,
            pool_registered,
            fixed,
            next_fixed: 0,
            free_pool: (0..POOL_BUFFERS).rev().collect(),
            started: std::collections::HashMap::new(),
            next_started: 0,
            started_done: Vec::new(),
            eventfd,
        })
    }

    /// The fixed-file slot of `f`, registering it (replacing the oldest) if needed.
    fn fixed_slot(&mut self, f: FileRef) -> Option<u32> {
        let table = self.fixed.as_mut()?;
        if let Some(i) = table.iter().position(|s| *s == Some(f.id)) {
            return Some(i as u32);
        }
        let i = self.next_fixed;
        self.next_fixed = (i + 1) % table.len();
        match self
            .ring
            .submitter()
            .register_files_update(i as u32, &[f.fd])
        {
            Ok(_) => {
                table[i] = Some(f.id);
                Some(i as u32)
            }
            Err(_) => {
                table[i] = None;
                None
            }
        }
    }

    /// Memory for an op of `len` bytes: a free pool buffer, else aligned scratch. Returns it,
    /// its address and, for a pool buffer, its index.
    fn stage(&mut self, len: usize) -> (Staging, *mut u8, Option<usize>) {
        let pooled = if len <= POOL_BUFFER_SIZE {
            self.free_pool.pop()
        } else {
            None
        };
        match pooled {
            Some(b) => (Staging::Pool(b), self.pool_buffer(b), Some(b)),
            None => {
                let a = Aligned::new(len);
                let p = a.ptr;
                (Staging::Scratch(a), p, None)
            }
        }
    }

    /// Gives a staged op's pool buffer back (its op completed); scratch is freed.
    fn unstage(&mut self, staging: Staging) {
        if let Staging::Pool(b) = staging {
            self.free_pool.push(b);
        }
    }

    fn pool_buffer(&self, i: usize) -> *mut u8 {
        // SAFETY: callers pass `i < POOL_BUFFERS`: the offset is inside the pool.
        unsafe { self.pool.ptr.add(i * POOL_BUFFER_SIZE) }
    }
}

/// What a thread's ring is: not tried yet, working, or unavailable here.
enum Ring {
    Untried,
    Ready(Box<RingState>),
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
    /// Tags of this thread's started reads that were in flight when its ring broke: they
    /// never complete, so the next [`reap_started`] hands them back as errors.
    static LOST: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Gives up a broken ring: ops may still be in flight, so the ring and everything it owns
/// are leaked; its started reads' tags go to [`LOST`] for the next reap.
fn abandon(r: &mut Ring) {
    if let Ring::Ready(s) = std::mem::replace(r, Ring::Unavailable) {
        LOST.with(|l| l.borrow_mut().extend(s.started.values().map(|st| st.tag)));
        std::mem::forget(s);
    }
}

fn init(r: &mut Ring) {
    if let Ring::Untried = *r {
        *r = match RingState::new() {
            Ok(s) => Ring::Ready(Box::new(s)),
            Err(_) => Ring::Unavailable,
        };
    }
}

/// Whether this thread can use io_uring (sets up its ring on first use).
pub fn available() -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        matches!(*r, Ring::Ready(_))
    })
}

/// Whether this thread's ring posts completions only when the thread enters the kernel
/// (deferred task work, kernels from 6.1); false without a ring.
#[cfg(test)]
fn defers_task_work() -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        matches!(&*r, Ring::Ready(s) if s.defers_task_work)
    })
}

/// Where one op's bytes live while the kernel works on them.
enum Staging {
    Pool(usize),
    Scratch(Aligned),
}

/// Runs `ops` on `file` through this thread's ring: one submission per up to
/// `RING_ENTRIES` (64) ops, completions reaped in batches. Each op's result is in the returned
/// vector, in order (a short transfer is finished by further ops). `None`: io_uring is
/// unavailable here; use the portable path. Ops longer than [`MAX_OP`] are an error.
pub fn transfer_batch(
    file: FileRef,
    ops: &mut [(u64, Transfer<'_>)],
) -> Option<Vec<io::Result<()>>> {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        let Ring::Ready(state) = &mut *r else {
            return None;
        };
        let mut results: Vec<io::Result<()>> = Vec::with_capacity(ops.len());
        for chunk in ops.chunks_mut(RING_ENTRIES as usize) {
            match run_chunk(state, file, chunk) {
                Ok(rs) => results.extend(rs),
                Err(broken) => {
                    abandon(&mut r);
                    results.extend(
                        (results.len()..ops.len())
                            .map(|_| Err(io::Error::new(broken.kind(), broken.to_string()))),
                    );
                    return Some(results);
                }
            }
        }
        Some(results)
    })
}

/// Submits and completes one chunk (at most the ring's size). `Err`: the ring broke with ops
/// possibly in flight (the caller must leak it).
fn run_chunk(
    state: &mut RingState,
    file: FileRef,
    ops: &mut [(u64, Transfer<'_>)],
) -> io::Result<Vec<io::Result<()>>> {
    let fixed = state.fixed_slot(file);
    let mut staging: Vec<Staging> = Vec::with_capacity(ops.len());
    let mut results: Vec<Option<io::Result<usize>>> = (0..ops.len()).map(|_| None).collect();
    let mut pushed = 0;
    for (i, (offset, t)) in ops.iter().enumerate() {
        let len = t.len();
        if len > MAX_OP {
            results[i] = Some(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("io_uring op of {len} bytes exceeds {MAX_OP}"),
            )));
            staging.push(Staging::Scratch(Aligned::new(0)));
            continue;
        }
        let (st, ptr, buf_index) = state.stage(len);
        staging.push(st);
        if let Transfer::Write(data) = t {
            // SAFETY: `ptr` names at least `len` bytes of ring-owned memory no op in flight
            // uses (each op of this chunk has its own buffer; earlier chunks completed), and
            // `data` is a distinct allocation of `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, len) };
        }
        let entry = build_entry(
            t,
            ptr,
            len as u32,
            *offset,
            file.fd,
            fixed,
            buf_index.filter(|_| state.pool_registered),
        );
        // SAFETY: the entry names ring-owned memory (`ptr`, kept in `staging` or the pool
        // until this chunk's completions are reaped, or leaked with the ring) and a file the
        // caller keeps open for the call.
        if !unsafe { push(state, &entry.user_data(i as u64)) }? {
            // The queue stayed full (entries of a transient failure): the op fails, reported,
            // never left unrun silently.
            results[i] = Some(Err(io::Error::other("io_uring submission queue full")));
            continue;
        }
        pushed += 1;
    }
    let mut outstanding = pushed;
    while outstanding > 0 {
        wait_own(state, |i, res| {
            results[i as usize] = Some(cqe_result(res));
            outstanding -= 1;
        })?;
    }
    // Every op completed: copy reads out, finish short transfers.
    let mut out = Vec::with_capacity(ops.len());
    for (i, (offset, t)) in ops.iter_mut().enumerate() {
        let ptr = match &staging[i] {
            Staging::Pool(b) => state.pool_buffer(*b),
            Staging::Scratch(a) => a.ptr,
        };
        let r = match results[i].take().expect("every op has a result") {
            Err(e) => Err(e),
            Ok(n) => {
                let n = n.min(t.len());
                if let Transfer::Read(buf) = t {
                    // SAFETY: the op completed, so the kernel no longer writes `ptr`; it holds
                    // `n <= buf.len()` bytes read, and `buf` is a distinct allocation.
                    unsafe { std::ptr::copy_nonoverlapping(ptr, buf.as_mut_ptr(), n) };
                }
                finish_short(state, file, *offset, t, n)
            }
        };
        out.push(r);
    }
    for st in staging {
        state.unstage(st);
    }
    Ok(out)
}

/// Completes a transfer the kernel did only `done` bytes of, one op at a time.
fn finish_short(
    state: &mut RingState,
    file: FileRef,
    offset: u64,
    t: &mut Transfer<'_>,
    done: usize,
) -> io::Result<()> {
    if done == t.len() {
        return Ok(());
    }
    if done == 0 {
        return Err(match t {
            Transfer::Read(_) => io::ErrorKind::UnexpectedEof.into(),
            Transfer::Write(_) => io::ErrorKind::WriteZero.into(),
        });
    }
    let mut rest = [(
        offset + done as u64,
        match t {
            Transfer::Read(b) => Transfer::Read(&mut b[done..]),
            Transfer::Write(b) => Transfer::Write(&b[done..]),
        },
    )];
    match run_chunk(state, file, &mut rest) {
        Ok(mut r) => r.pop().expect("one result"),
        Err(e) => Err(e),
    }
}

fn build_entry(
    t: &Transfer<'_>,
    ptr: *mut u8,
    len: u32,
    offset: u64,
    fd: RawFd,
    fixed: Option<u32>,
    buf_index: Option<usize>,
) -> squeue::Entry {
    macro_rules! with_fd {
        ($make:expr) => {
            match fixed {
                Some(slot) => $make(types::Fixed(slot)),
                None => $make(types::Fd(fd)),
            }
        };
    }
    match (t, buf_index) {
        (Transfer::Read(_), Some(b)) => with_fd!(|f| opcode::ReadFixed::new(f, ptr, len, b as u16)
            .offset(offset)
            .build()),
        (Transfer::Write(_), Some(b)) => {
            with_fd!(|f| opcode::WriteFixed::new(f, ptr, len, b as u16)
                .offset(offset)
                .build())
        }
        (Transfer::Read(_), None) => {
            with_fd!(|f| opcode::Read::new(f, ptr, len).offset(offset).build())
        }
        (Transfer::Write(_), None) => {
            with_fd!(|f| opcode::Write::new(f, ptr, len).offset(offset).build())
        }
    }
}

/// Fills `buf` from `offset` of `file`; `None` when io_uring is unavailable.
pub fn read_exact_at(file: FileRef, buf: &mut [u8], offset: u64) -> Option<io::Result<()>> {
    let mut ops: Vec<(u64, Transfer<'_>)> = buf
        .chunks_mut(MAX_OP)
        .enumerate()
        .map(|(i, c)| (offset + (i * MAX_OP) as u64, Transfer::Read(c)))
        .collect();
    let rs = transfer_batch(file, &mut ops)?;
    Some(rs.into_iter().collect())
}

/// Writes all of `data` at `offset` of `file`; `None` when io_uring is unavailable.
pub fn write_all_at(file: FileRef, data: &[u8], offset: u64) -> Option<io::Result<()>> {
    let mut ops: Vec<(u64, Transfer<'_>)> = data
        .chunks(MAX_OP)
        .enumerate()
        .map(|(i, c)| (offset + (i * MAX_OP) as u64, Transfer::Write(c)))
        .collect();
    let rs = transfer_batch(file, &mut ops)?;
    Some(rs.into_iter().collect())
}

/// fdatasync through the ring; `None` when io_uring is unavailable.
pub fn data_sync(fd: RawFd) -> Option<io::Result<()>> {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        let Ring::Ready(state) = &mut *r else {
            return None;
        };
        let entry = opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(SYNC_KEY);
        // SAFETY: the entry names no memory, only a descriptor the caller keeps open.
        match unsafe { push(state, &entry) } {
            Ok(true) => {}
            Ok(false) => return Some(Err(io::Error::other("io_uring submission queue full"))),
            Err(e) => return Some(Err(e)),
        }
        // Started reads of this thread may complete first: `wait_own` keeps them for their
        // reaper (taking one for the sync's would lose the read and end the sync early).
        let mut synced = None;
        while synced.is_none() {
            if let Err(e) = wait_own(state, |key, res| {
                debug_assert_eq!(key, SYNC_KEY, "the sync is the caller's only op");
                synced = Some(res);
            }) {
                return Some(Err(e));
            }
        }
        Some(synced.map_or(Ok(()), |res| cqe_result(res).map(|_| ())))
    })
}

mod started;
pub use started::{reap_started, start_reads, started_in_flight};

#[cfg(test)]
mod tests;
