//! Reads served on the device's started reads: the READs waiting whole in the connection's
//! buffer are offered to the device together, and answered as they complete while the
//! connection keeps reading requests.

use super::*;
/// Most reads offered to the device at once.
pub(super) const READ_BATCH: usize = 32;

/// `first` (handle, offset, length) and the valid READ requests that follow it, whole, in the
/// reader's buffer (up to `max`), consumed from it.
pub(super) fn take_waiting_reads<S: Read>(
    reader: &mut BufReader<S>,
    dev: &dyn BlockDevice,
    cfg: &ServerConfig,
    stats: &ServerStats,
    first: ([u8; 8], u64, u32),
    max: usize,
    extended: bool,
) -> Vec<([u8; 8], u64, u32)> {
    let mut reads = vec![first];
    let size = header_size(extended);
    while reads.len() < max {
        let b = reader.buffer();
        let Some(h) = (b.len() >= size)
            .then(|| Header::parse(&b[..size]))
            .flatten()
        else {
            break;
        };
        if h.typ != CMD_READ || h.flags & CMD_FLAG_PAYLOAD_LEN != 0 {
            break;
        }
        let (handle, offset) = (h.handle, h.offset);
        let Ok(len) = u32::try_from(h.len) else {
            break;
        };
        let valid = len <= cfg.max_payload
            && offset
                .checked_add(len as u64)
                .is_some_and(|e| e <= dev.size());
        if !valid {
            // Answered on its own by the main loop (EINVAL).
            break;
        }
        io::BufRead::consume(reader, size);
        stats.requests.fetch_add(1, Relaxed);
        reads.push((handle, offset, len));
    }
    reads
}

/// Offers `reads` to the device together; replies to those it serves (in order), and hands
/// the rest to the workers. `more`: requests still wait in the reader's buffer.
pub(super) fn read_fast_batch<W: Write>(
    reads: Vec<([u8; 8], u64, u32)>,
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<Replies<W>>,
    tx: &mpsc::SyncSender<Job>,
    more: bool,
) -> io::Result<()> {
    let mut bufs: Vec<Vec<u8>> = reads.iter().map(|r| vec![0u8; r.2 as usize]).collect();
    let answers = {
        let mut ios: Vec<(u64, &mut [u8])> = reads
            .iter()
            .zip(bufs.iter_mut())
            .map(|(r, b)| (r.1, &mut b[..]))
            .collect();
        dev.read_fast_many(&mut ios)
    };
    let last = reads.len() - 1;
    for (i, ((r, buf), answer)) in reads.into_iter().zip(bufs).zip(answers).enumerate() {
        let (handle, offset, len) = r;
        match answer {
            Some(res) => {
                let err = errno_of(res, stats, &stats.bytes_read, len);
                reply(writer, &handle, err, &buf, more || i < last)?;
            }
            None => {
                let job = Job {
                    typ: CMD_READ,
                    flags: 0,
                    handle,
                    offset,
                    len: len.into(),
                    payload: buf,
                };
                if tx.send(job).is_err() {
                    return Ok(());
                }
            }
        }
    }
    // Replies held back for a later read a worker took: out now unless more are coming.
    if !more {
        writer.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    }
    Ok(())
}

/// Answers the started reads that finished; while some are in flight and no request waits
/// (in the reader's buffer or on the socket `fd`), polls for `busy_poll` without sleeping,
/// then sleeps until the next finishes or a request arrives, whichever comes first. Replies
/// go out at once: the client sends its next requests as it gets them, and those are started
/// as they arrive. (Sleeping on a completion alone held each arriving request until the
/// device's next completion.)
pub(super) fn answer_started<S: Stream, W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<Replies<W>>,
    reader: &BufReader<S>,
    fd: Option<RawFd>,
    busy_poll: Duration,
    in_flight: &mut usize,
) -> io::Result<()> {
    let mut wait = ReapWait::No;
    // Polling without sleeping ends here (restarted by every answer).
    let mut poll_until: Option<Instant> = None;
    loop {
        let n = reap_and_answer(dev, stats, writer, wait, in_flight)?;
        let Some(fd) = fd else {
            return Ok(());
        };
        if *in_flight == 0
            || !reader.buffer().is_empty()
            || reader.get_ref().buffered()
            || readable(fd)
        {
            return Ok(());
        }
        if wait != ReapWait::No && n == 0 {
            // A wait ended with nothing reaped and no request: the device has nothing in
            // flight after all (it says). Waiting again would spin.
            *in_flight = 0;
            return Ok(());
        }
        if !busy_poll.is_zero() {
            let now = Instant::now();
            if n > 0 {
                poll_until = None;
            }
            if now < *poll_until.get_or_insert(now + busy_poll) {
                std::hint::spin_loop();
                continue;
            }
        }
        wait = ReapWait::CompletionOrReadable(fd);
    }
}

/// Hands `job` to the workers; `false` when they are gone. While their queue is full and
/// reads started on the device are in flight, those are answered first: a started read holds
/// its lines' ordering ticket until it is reaped, here, so workers waiting on those lines
/// could otherwise wait for a reader blocked on their full queue.
pub(super) fn hand_over<W: Write>(
    tx: &mpsc::SyncSender<Job>,
    job: Job,
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<Replies<W>>,
    started: &mut usize,
) -> io::Result<bool> {
    let mut job = job;
    while *started > 0 {
        match tx.try_send(job) {
            Ok(()) => return Ok(true),
            Err(mpsc::TrySendError::Disconnected(_)) => return Ok(false),
            Err(mpsc::TrySendError::Full(j)) => {
                job = j;
                if reap_and_answer(dev, stats, writer, ReapWait::Completion, started)? == 0 {
                    // Nothing in flight after all (the device says): block below.
                    *started = 0;
                }
            }
        }
    }
    Ok(tx.send(job).is_ok())
}

/// Answers every started read still in flight, waiting for each (the connection is ending).
pub(super) fn answer_all_started<W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<Replies<W>>,
    in_flight: &mut usize,
) -> io::Result<()> {
    while *in_flight > 0 {
        if reap_and_answer(dev, stats, writer, ReapWait::Completion, in_flight)? == 0 {
            break;
        }
    }
    writer.lock().unwrap_or_else(|e| e.into_inner()).flush()
}

/// Hands each started read that finished (first waiting as `wait` says) its reply, its bytes
/// or EIO, and sends the replies; counts them off `in_flight` and returns how many.
fn reap_and_answer<W: Write>(
    dev: &dyn BlockDevice,
    stats: &ServerStats,
    writer: &Mutex<Replies<W>>,
    wait: ReapWait,
    in_flight: &mut usize,
) -> io::Result<usize> {
    let mut out = Ok(());
    let n = dev.reap_started(wait, &mut |tag, res| {
        if out.is_err() {
            // The connection broke: the rest are reaped, not answered.
            return;
        }
        let (err, data) = match res {
            Ok(d) => {
                stats.bytes_read.fetch_add(d.len() as u64, Relaxed);
                (0, d)
            }
            Err(_) => {
                stats.eio.fetch_add(1, Relaxed);
                (EIO, &[][..])
            }
        };
        out = reply(writer, &tag.to_be_bytes(), err, data, true);
    });
    *in_flight = in_flight.saturating_sub(n);
    out?;
    if n > 0 {
        writer.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    }
    Ok(n)
}

/// Whether `fd` has bytes to read now (or an error or hang-up to report).
pub(super) fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd, alive for the call; a zero timeout never blocks.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r != 0
}
