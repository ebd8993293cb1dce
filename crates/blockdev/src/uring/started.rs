//! Reads started without waiting and reaped later on the same thread: a connection's cache hits
//! go to the kernel as they are parsed and are answered as they complete, while the thread also
//! watches its socket for the next requests.

use super::*;

/// Starts reads of `file` on this thread's ring without waiting: `(offset, len, tag)` each,
/// each handed to the kernel as it is queued. Their bytes come back, with their tags, from
/// [`reap_started`] on this same thread. One result per read (an error: not started; a read
/// started is answered exactly once, by a reap). An error of kind `WouldBlock` means only that
/// the ring had no room for the read (its queue full of entries the kernel was too busy to
/// take): the read is fine, to be run another way. `None`: io_uring is unavailable.
pub fn start_reads(file: FileRef, reads: &[(u64, usize, u64)]) -> Option<Vec<io::Result<()>>> {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        let Ring::Ready(state) = &mut *r else {
            return None;
        };
        let fixed = state.fixed_slot(file);
        let mut out = Vec::with_capacity(reads.len());
        let mut broken = None;
        for &(offset, len, tag) in reads {
            if len > MAX_OP || len == 0 {
                out.push(Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("started read of {len} bytes (1 to {MAX_OP})"),
                )));
                continue;
            }
            let (staging, ptr, buf_index) = state.stage(len);
            let key = STARTED_BIT | state.next_started;
            state.next_started = (state.next_started + 1) & !STARTED_BIT;
            let entry = build_entry(
                &Transfer::Read(&mut []),
                ptr,
                len as u32,
                offset,
                file.fd,
                fixed,
                buf_index.filter(|_| state.pool_registered),
            );
            // SAFETY: the entry names ring-owned memory (`ptr`, recorded in `started` until
            // its completion is reaped, or leaked with the ring) and a file the caller keeps
            // open until then.
            match unsafe { push(state, &entry.user_data(key)) } {
                Ok(true) => {}
                Ok(false) => {
                    state.unstage(staging);
                    out.push(Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "io_uring submission queue full",
                    )));
                    continue;
                }
                Err(e) => {
                    // The buffer is leaked with the ring.
                    std::mem::forget(staging);
                    broken = Some(e);
                    break;
                }
            }
            state.started.insert(key, StartedRead { tag, len, staging });
            out.push(Ok(()));
            // Each read goes to the kernel on its own, as fio submits by default (one
            // doorbell per read): on the O_DIRECT QD 16 benchmark (bench/odirect_vs_fio.sh)
            // that was 5-16% ahead of one submission per batch in-process and about 15% over
            // NBD, for about 40% more CPU; a submission every 4 reads fell between the two.
            match enter(state, 0) {
                // A transient failure leaves the entry queued: the next enter sends it.
                Err(e) if !transient(&e) => {
                    broken = Some(e);
                    break;
                }
                _ => {}
            }
        }
        if let Some(e) = broken {
            // The ring cannot be entered: the reads it holds (this call's included, answered
            // as started) come back as errors from the next reap; the rest were not started.
            out.extend(
                (out.len()..reads.len()).map(|_| Err(io::Error::new(e.kind(), e.to_string()))),
            );
            abandon(&mut r);
        }
        Some(out)
    })
}

/// Started reads of this thread not reaped yet.
pub fn started_in_flight() -> usize {
    let lost = LOST.with(|l| l.borrow().len());
    lost + RING.with(|r| match &*r.borrow() {
        Ring::Ready(s) => s.started.len(),
        _ => 0,
    })
}

/// What one poll of a socket and a ring's eventfd saw.
enum Woken {
    /// The socket has bytes (or an error or hang-up) to read.
    Readable,
    /// The ring may have completions (or the poll was interrupted): look again.
    Ring,
    /// The poll failed: wait on the ring alone.
    Failed,
}

/// Longest sleep of one poll for a completion or a readable descriptor: the caller looks at
/// the ring after it even without a signal (a safety net should a kernel not signal the
/// eventfd for completions still waiting as deferred task work).
const POLL_TIMEOUT_MS: i32 = 10;

/// Waits until `fd` is readable or the ring's eventfd `efd` is signalled, at most
/// [`POLL_TIMEOUT_MS`]; a signal is consumed (the caller then reaps). An interrupted or timed
/// out poll counts as a signal: the caller looks at the ring and waits again.
fn poll_readable_or_ring(fd: RawFd, efd: RawFd) -> Woken {
    let mut p = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: efd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: `p` is two valid pollfds, alive for the call.
    let r = unsafe { libc::poll(p.as_mut_ptr(), 2, POLL_TIMEOUT_MS) };
    if r > 0 && p[1].revents != 0 {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `count`; the eventfd is non-blocking, and a
        // failure (nothing to read) leaves nothing to undo.
        let _ = unsafe { libc::read(efd, count.as_mut_ptr().cast(), 8) };
        return Woken::Ring;
    }
    if r > 0 && p[0].revents != 0 {
        Woken::Readable
    } else if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
        Woken::Failed
    } else {
        Woken::Ring
    }
}

/// Hands each completed started read of this thread to `f` (its tag, and its bytes or its
/// error); first waits as `wait` says if none completed (and some are in flight). Returns how
/// many were handed over (0 when a wait ended on a readable descriptor).
pub fn reap_started(wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
    let lost = LOST.with(|l| std::mem::take(&mut *l.borrow_mut()));
    for &tag in &lost {
        f(
            tag,
            Err(io::Error::other(
                "the io_uring ring broke with the read in flight",
            )),
        );
    }
    if !lost.is_empty() {
        // Handed over: the caller need not wait for more now.
        return lost.len();
    }
    let reaped = RING.with(|r| {
        let mut r = r.borrow_mut();
        let Ring::Ready(state) = &mut *r else {
            return Some(0);
        };
        loop {
            if state.ring.submission().taskrun() || !state.ring.submission().is_empty() {
                // Completions wait as deferred task work (one enter posts them), or reads
                // left queued by a transient failure wait to be sent.
                match enter(state, 0) {
                    Err(e) if !transient(&e) => {
                        abandon(&mut r);
                        return None;
                    }
                    _ => {}
                }
            }
            for cqe in state.ring.completion() {
                state.started_done.push((cqe.user_data(), cqe.result()));
            }
            if !state.started_done.is_empty() || wait == ReapWait::No || state.started.is_empty() {
                break;
            }
            if let (ReapWait::CompletionOrReadable(fd), Some(efd)) = (wait, &state.eventfd) {
                // The eventfd is signalled as a completion arrives (before it is posted,
                // under deferred task work), so one that arrives after the look above wakes
                // the poll: none is missed. Stale signals only cost a look.
                match poll_readable_or_ring(fd, efd.as_raw_fd()) {
                    Woken::Readable => break,
                    Woken::Ring => continue,
                    Woken::Failed => {}
                }
            }
            match enter(state, 1) {
                Err(e) if !transient(&e) => {
                    // The ring cannot be entered: its reads would never come back (and a
                    // caller waiting for them would spin). Given up; they are answered as
                    // errors below.
                    abandon(&mut r);
                    return None;
                }
                _ => {}
            }
        }
        let done = std::mem::take(&mut state.started_done);
        let n = done.len();
        for (key, res) in done {
            let Some(st) = state.started.remove(&key) else {
                debug_assert!(false, "a completion of no started read ({key:#x})");
                continue;
            };
            let ptr = match &st.staging {
                Staging::Pool(b) => state.pool_buffer(*b),
                Staging::Scratch(a) => a.ptr,
            };
            let result = match cqe_result(res) {
                Err(e) => Err(e),
                Ok(n) if n < st.len => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("started read got {n} of {} bytes", st.len),
                )),
                Ok(_) => {
                    // SAFETY: the read completed, so the kernel no longer writes `ptr`, which
                    // holds `st.len` bytes it read, owned by this ring until unstaged below.
                    Ok(unsafe { std::slice::from_raw_parts(ptr, st.len) })
                }
            };
            f(st.tag, result);
            state.unstage(st.staging);
        }
        Some(n)
    });
    match reaped {
        Some(n) => n,
        // Abandoned: its reads are in `LOST`, handed over now.
        None => reap_started(ReapWait::No, f),
    }
}
