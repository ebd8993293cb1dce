//! A minimal Linux inotify instance (docs/design.md §14 "Changes to the store"): one watch
//! per store directory, its events read in batches. Written on `libc` directly (four calls)
//! rather than a crate: the mount needs directory watches and nothing else.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// What a directory watch reports: names created, removed, moved in or out, and files
/// written or whose attributes changed. Reads (`IN_ACCESS`, opens, closes without write) are
/// not asked for: the mount's own store reads would wake the watcher for nothing.
const DIR_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK;

/// The fixed part of a `struct inotify_event`: wd, mask, cookie, len (4 bytes each).
const HEADER: usize = 16;

/// One event: the watch it came from, what happened, the rename cookie, and the name in the
/// watched directory (empty for an event on the directory itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The watch descriptor ([`Inotify::watch_dir`]'s result).
    pub wd: i32,
    /// `IN_*` bits.
    pub mask: u32,
    /// Pairs an `IN_MOVED_FROM` with its `IN_MOVED_TO`.
    pub cookie: u32,
    /// The name in the watched directory.
    pub name: OsString,
}

impl Event {
    /// Whether the kernel's event queue overflowed: events were lost.
    pub fn overflowed(&self) -> bool {
        self.mask & libc::IN_Q_OVERFLOW != 0
    }

    /// Whether the watch is gone (its directory removed, or the watch taken off).
    pub fn ignored(&self) -> bool {
        self.mask & libc::IN_IGNORED != 0
    }
}

/// An inotify instance, non-blocking.
#[derive(Debug)]
pub struct Inotify {
    file: File,
}

impl Inotify {
    /// A new instance.
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by inotify_init1, is open, and nothing else owns
        // it: the `File` becomes its only owner and closes it once.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Inotify { file })
    }

    /// Watches directory `path` (not following a symlink); returns the watch descriptor (the
    /// same one again for a directory already watched). The per-user watch limit gives ENOSPC.
    pub fn watch_dir(&self, path: &Path) -> io::Result<i32> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the descriptor is open (owned by `self.file`) and `c_path` is a
        // NUL-terminated string alive for the call; the kernel keeps no pointer to it.
        let wd =
            unsafe { libc::inotify_add_watch(self.file.as_raw_fd(), c_path.as_ptr(), DIR_EVENTS) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Waits up to `timeout` for events; whether some are ready.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `pfd` is one valid pollfd alive for the call, and we pass a count of 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        match rc {
            n if n > 0 => Ok(true),
            0 => Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Every event ready now (none if nothing is queued).
    pub fn read_events(&self) -> io::Result<Vec<Event>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match (&self.file).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => parse(&buf[..n], &mut out)?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// Parses the events of one read: each is the 16-byte header and `len` bytes of name,
/// NUL-padded. A short record (the kernel never writes one) is an error naming its offset.
fn parse(bytes: &[u8], out: &mut Vec<Event>) -> io::Result<()> {
    let mut at = 0;
    while at < bytes.len() {
        let field = |i: usize| -> Option<u32> {
            let b = bytes.get(at + 4 * i..at + 4 * i + 4)?;
            Some(u32::from_ne_bytes(b.try_into().ok()?))
        };
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("inotify event at byte {at} of {} is cut short", bytes.len()),
            )
        };
        let (wd, mask, cookie, len) = match (field(0), field(1), field(2), field(3)) {
            (Some(wd), Some(mask), Some(cookie), Some(len)) => (wd as i32, mask, cookie, len),
            _ => return Err(bad()),
        };
        let name = bytes
            .get(at + HEADER..at + HEADER + len as usize)
            .ok_or_else(bad)?;
        let name = match name.iter().position(|&b| b == 0) {
            Some(end) => &name[..end],
            None => name,
        };
        out.push(Event {
            wd,
            mask,
            cookie,
            name: OsStr::from_bytes(name).to_os_string(),
        });
        at += HEADER + len as usize;
    }
    Ok(())
}

/// A name as bytes owned (for events built in tests).
#[cfg(test)]
fn record(wd: i32, mask: u32, cookie: u32, name: &str, pad: usize) -> Vec<u8> {
    let mut name = name.as_bytes().to_vec();
    name.resize(name.len() + pad, 0);
    let mut out = Vec::new();
    for v in [wd as u32, mask, cookie, name.len() as u32] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    out.extend_from_slice(&name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_a_cut_one_is_refused_with_its_offset() {
        let mut bytes = record(3, libc::IN_CREATE, 0, "a", 3);
        bytes.extend(record(4, libc::IN_MOVED_TO, 9, "", 0));
        let mut out = Vec::new();
        parse(&bytes, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].wd, out[0].name.as_os_str()), (3, OsStr::new("a")));
        assert_eq!((out[1].cookie, out[1].name.len()), (9, 0));
        for cut in 1..bytes.len() {
            if cut == 20 {
                continue; // the first record's end: a whole record
            }
            let e = parse(&bytes[..cut], &mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains("at byte"), "{e}");
        }
    }

    #[test]
    fn a_watched_directory_reports_a_created_file_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let ino = Inotify::new().unwrap();
        let wd = ino.watch_dir(dir.path()).unwrap();
        assert_eq!(
            ino.watch_dir(dir.path()).unwrap(),
            wd,
            "one watch per directory"
        );
        assert!(ino.read_events().unwrap().is_empty());
        std::fs::write(dir.path().join("new"), b"x").unwrap();
        assert!(ino.wait(Duration::from_secs(5)).unwrap());
        let events = ino.read_events().unwrap();
        assert!(events
            .iter()
            .any(|e| e.wd == wd && e.mask & libc::IN_CREATE != 0 && e.name == "new"));
        // A file is no directory: refused (IN_ONLYDIR).
        assert!(ino.watch_dir(&dir.path().join("new")).is_err());
    }
}
