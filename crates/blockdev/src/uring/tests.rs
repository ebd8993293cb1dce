//! Tests of the rings: batches against plain transfers, started reads across batches and
//! syncs, reaps that never wait, and a broken ring.

use super::*;
use std::os::fd::AsRawFd;

/// A batch mixing sizes (pool buffers, scratch past the pool's buffer size, more ops than
/// the pool holds and than the ring takes at once) matches pread/pwrite byte for byte.
#[test]
fn batches_match_plain_transfers() {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    let (_dir, f) = file_of(8 << 20);
    let file = file_ref(&f);
    let sizes = [512usize, 4096, 70_000, 100, 4096 * 3];
    let datas: Vec<Vec<u8>> = (0..150)
        .map(|i| {
            let n = sizes[i % sizes.len()];
            (0..n).map(|j| ((i * 7 + j * 13) % 251) as u8).collect()
        })
        .collect();
    let offsets: Vec<u64> = (0..150u64).map(|i| i * 80_000 + (i % 3) * 17).collect();
    let mut ops: Vec<(u64, Transfer<'_>)> = datas
        .iter()
        .zip(&offsets)
        .map(|(d, &o)| (o, Transfer::Write(d)))
        .collect();
    for r in transfer_batch(file, &mut ops).unwrap() {
        r.unwrap();
    }
    use std::os::unix::fs::FileExt;
    for (d, &o) in datas.iter().zip(&offsets) {
        let mut b = vec![0u8; d.len()];
        f.read_exact_at(&mut b, o).unwrap();
        assert!(&b == d, "written at {o} through the ring, read with pread");
    }
    let mut bufs: Vec<Vec<u8>> = datas.iter().map(|d| vec![0u8; d.len()]).collect();
    let mut ops: Vec<(u64, Transfer<'_>)> = bufs
        .iter_mut()
        .zip(&offsets)
        .map(|(b, &o)| (o, Transfer::Read(b)))
        .collect();
    for r in transfer_batch(file, &mut ops).unwrap() {
        r.unwrap();
    }
    assert!(bufs == datas, "read back through the ring");
    // Past the end: that op fails alone, its neighbours succeed.
    let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
    let end = f.metadata().unwrap().len();
    let mut ops = vec![
        (0, Transfer::Read(&mut a[..])),
        (end - 100, Transfer::Read(&mut b[..])),
    ];
    let rs = transfer_batch(file, &mut ops).unwrap();
    assert!(rs[0].is_ok());
    assert!(
        b[..100] == datas[149][datas[149].len() - 100..],
        "the short part was read"
    );
    assert_eq!(
        rs[1].as_ref().unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
    // A reused descriptor number names a new file: its identity, not the number, counts.
    drop(f);
    let (_gdir, g) = file_of(4096);
    let gref = file_ref(&g);
    write_all_at(gref, &[5u8; 4096], 0).unwrap().unwrap();
    let mut back = [0u8; 4096];
    g.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, [5u8; 4096]);
}

/// Started reads come back with their tags and bytes, also when a batch runs on the same
/// ring while they are in flight (its waits reap their completions and keep them).
#[test]
fn started_reads_come_back_tagged_across_a_batch() {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    use std::os::unix::fs::FileExt;
    let (_dir, f) = file_of(1 << 20);
    let bytes: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 241) as u8).collect();
    f.write_all_at(&bytes, 0).unwrap();
    let file = file_ref(&f);
    // More than the pool holds (scratch for the rest), two sizes.
    let reads: Vec<(u64, usize, u64)> = (0..80u64)
        .map(|i| (i * 9000, if i % 3 == 0 { 70_000 } else { 4096 }, 1000 + i))
        .collect();
    for r in start_reads(file, &reads).unwrap() {
        r.unwrap();
    }
    assert_eq!(started_in_flight(), 80);
    // A sync and a batch meanwhile: both wait on the ring the reads complete on.
    data_sync(f.as_raw_fd()).unwrap().unwrap();
    let mut b = vec![0u8; 4096];
    read_exact_at(file, &mut b, 5000).unwrap().unwrap();
    assert!(b[..] == bytes[5000..9096]);
    let mut seen = std::collections::HashMap::new();
    // Without waiting, so a completion taken by someone else fails here, not hangs.
    let t0 = std::time::Instant::now();
    while started_in_flight() > 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "{} started reads never came back",
            started_in_flight()
        );
        reap_started(ReapWait::No, &mut |tag, res| {
            seen.insert(tag, res.unwrap().to_vec());
        });
    }
    assert_eq!(seen.len(), 80);
    for (off, len, tag) in reads {
        assert!(
            seen[&tag] == bytes[off as usize..off as usize + len],
            "tag {tag}"
        );
    }
    // Past the end: an error, tagged.
    start_reads(file, &[((1 << 20) - 10, 4096, 7)]).unwrap()[0]
        .as_ref()
        .unwrap();
    let mut got = None;
    reap_started(ReapWait::Completion, &mut |tag, res| {
        got = Some((tag, res.is_err()))
    });
    assert_eq!(got, Some((7, true)));
    assert_eq!(
        reap_started(ReapWait::Completion, &mut |_, _| {}),
        0,
        "nothing in flight: no wait"
    );
}

/// O_DIRECT reads complete asynchronously, so on a ring with deferred task work their
/// completions are posted only when the thread enters the kernel for them: reaping without
/// waiting must still hand every one over (it enters when the kernel flags pending work),
/// with nothing else touching the ring meanwhile.
#[test]
fn started_direct_reads_come_back_to_reaps_that_never_wait() {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    let bytes: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let Some((_dir, f)) = direct_file(&bytes) else {
        return;
    };
    let file = file_ref(&f);
    let reads: Vec<(u64, usize, u64)> = (0..32u64).map(|i| (i * 32768, 4096, 500 + i)).collect();
    for r in start_reads(file, &reads).unwrap() {
        r.unwrap();
    }
    let mut seen = std::collections::HashMap::new();
    let t0 = std::time::Instant::now();
    while started_in_flight() > 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "{} started reads never came back to reaps that do not wait",
            started_in_flight()
        );
        reap_started(ReapWait::No, &mut |tag, res| {
            seen.insert(tag, res.unwrap().to_vec());
        });
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(seen.len(), 32);
    for (off, len, tag) in reads {
        assert!(seen[&tag][..] == bytes[off as usize..off as usize + len]);
    }
}

/// Reads in flight when the ring breaks never complete: the next reap hands each back
/// as an error, once, and the thread then runs without io_uring.
#[test]
fn started_reads_of_a_broken_ring_come_back_as_errors() {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    let (_dir, f) = file_of(1 << 20);
    let file = file_ref(&f);
    for r in start_reads(file, &[(0, 4096, 11), (8192, 4096, 12)]).unwrap() {
        r.unwrap();
    }
    RING.with(|r| abandon(&mut r.borrow_mut()));
    assert_eq!(started_in_flight(), 2);
    let mut got = Vec::new();
    assert_eq!(
        reap_started(ReapWait::Completion, &mut |tag, res| got
            .push((tag, res.is_err()))),
        2
    );
    got.sort();
    assert_eq!(got, vec![(11, true), (12, true)]);
    assert_eq!(started_in_flight(), 0);
    assert_eq!(reap_started(ReapWait::Completion, &mut |_, _| {}), 0);
    assert!(!available(), "the thread runs without io_uring now");
}

thread_local! {
    /// Enters of the started-read paths still allowed on this thread before each fails
    /// (`None`: no failure injected).
    static ENTERS_LEFT: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

thread_local! {
    /// While set, every enter fails with EBUSY, a transient error: entries stay queued.
    static ENTERS_BUSY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the next enter finds the kernel busy (fault injection for the tests below).
pub(super) fn enter_busy() -> bool {
    ENTERS_BUSY.with(|c| c.get())
}

/// A ring whose queue fills (the kernel busy, entries left queued) answers the reads it has no
/// room for as `WouldBlock`, not started and not failed: the file device hands them back as
/// not started (`None`), so a caller runs them another way instead of answering EIO. The
/// queued ones are sent and answered once the kernel takes entries again.
#[test]
fn reads_a_full_ring_has_no_room_for_are_not_started_not_failed() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev");
    std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
    let dev = crate::file::FileDevice::open(&path, 1 << 20)
        .unwrap()
        .with_io_uring(true);
    let dev: &dyn crate::BlockDevice = &dev;
    let n = RING_ENTRIES as u64 + 6;
    let reads: Vec<(u64, u64, u32)> = (0..n).map(|i| (100 + i, i * 4096, 4096)).collect();
    ENTERS_BUSY.with(|c| c.set(true));
    let out = dev.start_reads(&reads);
    ENTERS_BUSY.with(|c| c.set(false));
    let started = out.iter().filter(|o| matches!(o, Some(Ok(())))).count();
    assert_eq!(started, RING_ENTRIES as usize, "{out:?}");
    assert!(
        out[RING_ENTRIES as usize..].iter().all(|o| o.is_none()),
        "no room: not started, not failed: {out:?}"
    );
    let mut got = Vec::new();
    while got.len() < started {
        dev.reap_started(ReapWait::Completion, &mut |tag, res| {
            got.push((tag, res.unwrap().to_vec()))
        });
    }
    got.sort();
    assert_eq!(got.len(), started);
    for (i, (tag, bytes)) in got.into_iter().enumerate() {
        assert_eq!(tag, 100 + i as u64);
        assert_eq!(bytes, vec![7u8; 4096]);
    }
    assert_eq!(started_in_flight(), 0);
}

/// Whether the next enter fails (fault injection for the tests below).
pub(super) fn enter_fails() -> bool {
    ENTERS_LEFT.with(|c| match c.get() {
        None => false,
        Some(0) => true,
        Some(n) => {
            c.set(Some(n - 1));
            false
        }
    })
}

/// A readable file of `len` zero bytes (reads of it succeed, so a read answered with an error
/// was failed by the ring, not by the file).
fn file_of(len: u64) -> (tempfile::TempDir, std::fs::File) {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("f"))
        .unwrap();
    f.set_len(len).unwrap();
    (dir, f)
}

/// A ring that cannot be entered while reads are being started (here the second read's
/// submission fails): the reads reported started are answered once each, as errors, by the
/// next reap; the read reported failed is never answered; the thread goes on without io_uring.
#[test]
fn reads_started_on_a_ring_that_cannot_be_entered_are_answered_once() {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    let (_dir, f) = file_of(1 << 20);
    let file = file_ref(&f);
    ENTERS_LEFT.with(|c| c.set(Some(1)));
    let out = start_reads(file, &[(0, 4096, 21), (8192, 4096, 22), (16384, 4096, 23)]).unwrap();
    ENTERS_LEFT.with(|c| c.set(None));
    assert!(out[0].is_ok() && out[1].is_ok(), "queued: started");
    assert!(out[2].is_err(), "never queued: not started");
    let mut got = Vec::new();
    let n = reap_started(ReapWait::Completion, &mut |tag, res| {
        got.push((tag, res.is_err()))
    });
    got.sort();
    assert_eq!((n, got), (2, vec![(21, true), (22, true)]));
    assert_eq!(started_in_flight(), 0);
    assert_eq!(
        reap_started(ReapWait::Completion, &mut |_, _| panic!("answered twice")),
        0
    );
    assert!(!available(), "the thread runs without io_uring now");
}

/// A ring that cannot be entered while a reap waits: the reap gives it up and answers its
/// reads, each once (it neither returns empty-handed, leaving its caller to spin, nor
/// hangs). The reads are O_DIRECT, so they complete on the device, not inline at submission,
/// and (with deferred task work) are posted only by an enter: the reap has to wait.
#[test]
fn a_reap_on_a_ring_that_cannot_be_entered_answers_each_read_once() {
    reap_on_a_ring_that_cannot_be_entered(ReapWait::Completion);
}

/// The same for reaps that never wait (a polling caller): once the kernel flags the reads'
/// completions, the reap's enter fails, and the reads come back as errors, each once.
#[test]
fn a_polling_reap_on_a_ring_that_cannot_be_entered_answers_each_read_once() {
    reap_on_a_ring_that_cannot_be_entered(ReapWait::No);
}

/// Runs [`reap_attempt`] on fresh threads (a ring given up stays given up for its thread)
/// until one takes the give-up path: the second read's submission is an enter, which posts
/// the first read's completion if the device was already done with it (a loaded machine
/// makes that likely), and a read posted before the ring broke is answered with its data.
fn reap_on_a_ring_that_cannot_be_entered(wait: ReapWait) {
    for _ in 0..8 {
        match std::thread::spawn(move || reap_attempt(wait))
            .join()
            .unwrap()
        {
            Some(true) | None => return,
            Some(false) => {}
        }
    }
    panic!("in 8 attempts every read was posted before the ring broke: the give-up path never ran");
}

/// Starts two reads, breaks the ring and reaps until both are answered: each once, the ones
/// not posted before the break as errors, never an empty-handed waiting reap. `None`: skipped
/// (no io_uring or no deferred task work here); `Some(gave_up)`: whether any read came back as
/// an error (the ring was given up).
fn reap_attempt(wait: ReapWait) -> Option<bool> {
    if !available() {
        eprintln!("skipping: no io_uring here");
        return None;
    }
    let (_dir, f) = direct_file(&[7u8; 1 << 20])?;
    let file = file_ref(&f);
    if !defers_task_work() {
        eprintln!("skipping: completions are posted without an enter on this kernel");
        return None;
    }
    for r in start_reads(file, &[(0, 4096, 31), (65536, 4096, 32)]).unwrap() {
        r.unwrap();
    }
    ENTERS_LEFT.with(|c| c.set(Some(0)));
    let mut got = Vec::new();
    let t0 = std::time::Instant::now();
    while got.len() < 2 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "the reads never came back"
        );
        let n = reap_started(wait, &mut |tag, res| got.push((tag, res.is_err())));
        if wait != ReapWait::No {
            assert!(n > 0, "a waiting reap with reads in flight answers some");
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    ENTERS_LEFT.with(|c| c.set(None));
    got.sort();
    let tags: Vec<u64> = got.iter().map(|&(tag, _)| tag).collect();
    assert_eq!(tags, vec![31, 32], "answered once each");
    assert_eq!(started_in_flight(), 0);
    assert_eq!(
        reap_started(ReapWait::Completion, &mut |_, _| panic!("answered twice")),
        0
    );
    let gave_up = got.iter().any(|&(_, failed)| failed);
    if gave_up {
        assert!(!available(), "the thread runs without io_uring now");
    }
    Some(gave_up)
}

/// A file holding `bytes` on a real disk (`TMPDIR`, else /var/tmp), opened O_DIRECT and out of
/// the page cache, so reads go to the device; `None` (said on stderr) where O_DIRECT is refused.
fn direct_file(bytes: &[u8]) -> Option<(tempfile::TempDir, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/var/tmp".into())).unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, bytes).unwrap();
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    else {
        eprintln!("skipping: no O_DIRECT in {}", dir.path().display());
        return None;
    };
    let _ = f.sync_all();
    // SAFETY: advice only; the descriptor is open.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Some((dir, f))
}

/// A fresh ring identity for the open file `f`.
fn file_ref(f: &std::fs::File) -> FileRef {
    FileRef {
        fd: f.as_raw_fd(),
        id: FileRef::new_id(),
    }
}

/// A reap waiting for a completion or a readable descriptor wakes for whichever comes first.
/// The reads here are on socket pairs, in flight until bytes are written to the other end.
/// A descriptor that gets bytes ends the wait with the read still in flight (a wait for the
/// completion alone would sleep until the watchdog completes the read, 10 s on); a completion
/// ends it while the descriptor stays empty (the ring's eventfd woke the poll).
#[test]
fn a_reap_waiting_for_a_completion_or_a_descriptor_wakes_for_either() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};
    if !available() {
        eprintln!("skipping: no io_uring here");
        return;
    }
    let later = |to: &UnixStream, after: Duration, bytes: Vec<u8>| {
        let mut to = to.try_clone().unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let _ = to.write_all(&bytes);
        })
    };
    let in_flight = |read_end: &UnixStream, tag: u64| {
        let file = FileRef {
            fd: read_end.as_raw_fd(),
            id: FileRef::new_id(),
        };
        start_reads(file, &[(0, 8, tag)])
            .unwrap()
            .remove(0)
            .unwrap();
    };
    let (socket, client) = UnixStream::pair().unwrap();
    let waiting = ReapWait::CompletionOrReadable(socket.as_raw_fd());

    // 1. The descriptor first.
    let (read_end, write_end) = UnixStream::pair().unwrap();
    in_flight(&read_end, 71);
    later(&write_end, Duration::from_secs(10), vec![1; 8]);
    later(&client, Duration::from_millis(100), vec![9]);
    let t0 = Instant::now();
    let n = reap_started(waiting, &mut |tag, _| panic!("read {tag} reaped"));
    assert_eq!(n, 0, "woken by the descriptor, nothing reaped");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(started_in_flight(), 1, "the read is still in flight");
    let mut b = [0u8; 1];
    (&socket).read_exact(&mut b).unwrap();
    (&write_end).write_all(&[3; 8]).unwrap();
    let mut got = Vec::new();
    reap_started(ReapWait::Completion, &mut |tag, r| {
        got.push((tag, r.unwrap().to_vec()))
    });
    assert_eq!(got, vec![(71, vec![3u8; 8])]);

    // 2. The completion first, the descriptor empty (until a watchdog, 10 s on).
    let (read_end, write_end) = UnixStream::pair().unwrap();
    in_flight(&read_end, 72);
    later(&client, Duration::from_secs(10), vec![9]);
    later(&write_end, Duration::from_millis(100), vec![4; 8]);
    let t0 = Instant::now();
    let mut got = Vec::new();
    let n = reap_started(waiting, &mut |tag, r| got.push((tag, r.unwrap().to_vec())));
    assert_eq!(n, 1, "woken by the completion");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(got, vec![(72, vec![4u8; 8])]);
    assert_eq!(started_in_flight(), 0);
}
