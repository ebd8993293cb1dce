//! Synchronous transfers through io_uring, one ring per thread, with pread/pwrite as the
//! portable fallback where the kernel has no io_uring (or a sandbox forbids it).
//!
//! Each call submits one operation and waits for its completion before returning, so the
//! buffer it names is borrowed for exactly as long as the kernel uses it.

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

/// What a thread's ring is: not tried yet, working, or unavailable here.
enum Ring {
    Untried,
    Ready(Box<IoUring>),
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
}

/// One operation.
#[derive(Clone, Copy)]
enum Op {
    Read {
        buf: *mut u8,
        len: u32,
        offset: u64,
    },
    Write {
        buf: *const u8,
        len: u32,
        offset: u64,
    },
    DataSync,
}

fn init(r: &mut Ring) {
    if let Ring::Untried = *r {
        *r = match IoUring::new(8) {
            Ok(ring) => Ring::Ready(Box::new(ring)),
            Err(_) => Ring::Unavailable,
        };
    }
}

/// Runs `op` on `fd` through this thread's ring. `None`: io_uring is unavailable; use the
/// portable path.
fn run(fd: RawFd, op: Op) -> Option<io::Result<usize>> {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        let Ring::Ready(ring) = &mut *r else {
            return None;
        };
        let fd = types::Fd(fd);
        let entry = match op {
            Op::Read { buf, len, offset } => opcode::Read::new(fd, buf, len).offset(offset).build(),
            Op::Write { buf, len, offset } => {
                opcode::Write::new(fd, buf, len).offset(offset).build()
            }
            Op::DataSync => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        };
        // SAFETY: the entry names `fd` and the buffer of `op`, which the caller borrows for
        // the whole call; this function does not return until the operation's completion has
        // been reaped below (the ring is this thread's own and holds at most this one
        // operation, so the completion reaped is this one), so the kernel never touches the
        // buffer after the borrow ends.
        if unsafe { ring.submission().push(&entry.user_data(1)) }.is_err() {
            return Some(Err(io::Error::other("io_uring submission queue full")));
        }
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    // The operation may still be in flight: its buffer must not be released
                    // while the kernel can write it. Give up on the ring for this thread
                    // only after the completion arrives.
                    while ring.completion().next().is_none() {
                        if let Err(e2) = ring.submit_and_wait(1) {
                            if e2.raw_os_error() != Some(libc::EINTR) {
                                break;
                            }
                        }
                    }
                    return Some(Err(e));
                }
            }
            if let Some(cqe) = ring.completion().next() {
                let res = cqe.result();
                return Some(if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res as usize)
                });
            }
        }
    })
}

/// Whether this thread can use io_uring (sets up its ring on first use).
pub fn available() -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        init(&mut r);
        matches!(*r, Ring::Ready(_))
    })
}

/// Fills `buf` from `offset` of `fd`; `None` when io_uring is unavailable.
pub fn read_exact_at(fd: RawFd, mut buf: &mut [u8], mut offset: u64) -> Option<io::Result<()>> {
    while !buf.is_empty() {
        let len = buf.len().min(1 << 30) as u32;
        match run(
            fd,
            Op::Read {
                buf: buf.as_mut_ptr(),
                len,
                offset,
            },
        )? {
            Ok(0) => return Some(Err(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(()))
}

/// Writes all of `data` at `offset` of `fd`; `None` when io_uring is unavailable.
pub fn write_all_at(fd: RawFd, mut data: &[u8], mut offset: u64) -> Option<io::Result<()>> {
    while !data.is_empty() {
        let len = data.len().min(1 << 30) as u32;
        match run(
            fd,
            Op::Write {
                buf: data.as_ptr(),
                len,
                offset,
            },
        )? {
            Ok(0) => return Some(Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                data = &data[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(()))
}

/// fdatasync through the ring; `None` when io_uring is unavailable.
pub fn data_sync(fd: RawFd) -> Option<io::Result<()>> {
    run(fd, Op::DataSync).map(|r| r.map(|_| ()))
}
