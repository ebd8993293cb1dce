//! A file or block device through pread/pwrite, buffered or O_DIRECT.

use crate::extent::{HOLE, ZERO};
use crate::{check_range, uring, BlockDevice, Extent, Extents, ReapWait};
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

/// Alignment O_DIRECT transfers keep here (offset, length, memory): the largest logical block
/// size in common use, so it suits every device.
pub const DIRECT_ALIGN: usize = 4096;

/// A regular file or block device. Buffered by default (`flush` and FUA are fdatasync); with
/// [`open_direct`](Self::open_direct), transfers aligned to [`DIRECT_ALIGN`] bypass the page
/// cache (O_DIRECT, through an aligned bounce buffer), and the rest (metadata records,
/// sub-block pieces) use a buffered descriptor of the same file, which Linux keeps coherent
/// with direct I/O by writing back and invalidating cached pages around each direct transfer.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    direct: Option<File>,
    /// Identities of `file` and `direct` for the io_uring rings' registered-file tables.
    file_id: u64,
    direct_id: u64,
    /// Transfer through io_uring (per-thread rings), falling back to pread/pwrite where the
    /// kernel has none.
    uring: bool,
    /// Reads copy from a shared mapping of the file instead of calling pread.
    map: Option<memmap2::MmapRaw>,
    direct_ops: AtomicU64,
    len: u64,
    /// How [`BlockDevice::write_zeroes`] zeroes: [`ZEROES_PUNCH`], [`ZEROES_RANGE`] or
    /// [`ZEROES_WRITE`] (learned: a file system that refuses an fallocate mode once refuses
    /// it always).
    zeroes: AtomicU8,
}

/// Zeroes by punching a hole (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`): the range reads
/// as zeroes, its blocks are freed, and [`BlockDevice::allocation`] reports it a hole.
const ZEROES_PUNCH: u8 = 0;
/// Zeroes with `FALLOC_FL_ZERO_RANGE`: blocks stay allocated, marked as reading zero.
const ZEROES_RANGE: u8 = 1;
/// Zeroes by writing them (a block device, or a file system with neither fallocate mode).
const ZEROES_WRITE: u8 = 2;

/// `fallocate(fd, mode, offset, len)`: the OS error, if any.
fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {offset}+{len} beyond what fallocate takes"),
        ));
    };
    // SAFETY: fallocate only reads its integer arguments; the fd is owned by `file`, which
    // the borrow keeps open for the duration of the call.
    if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether `e` says the file system lacks the fallocate mode asked for.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
    )
}

thread_local! {
    /// Bounce buffer for O_DIRECT transfers (grown as needed, aligned by offsetting into it).
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on an aligned scratch slice of `len` bytes.
fn with_aligned<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    BOUNCE.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < len + DIRECT_ALIGN {
            b.resize(len + DIRECT_ALIGN, 0);
        }
        let at = b.as_ptr().align_offset(DIRECT_ALIGN);
        f(&mut b[at..at + len])
    })
}

impl FileDevice {
    /// Opens `path` read-write. A regular file is created when missing and extended (sparse)
    /// to `min_len` bytes when shorter; a block device keeps its size.
    pub fn open(path: &Path, min_len: u64) -> io::Result<Self> {
        let file = open_rw(path)?;
        let meta = file.metadata()?;
        let mut len = if meta.file_type().is_file() {
            meta.len()
        } else {
            // Block devices report 0 as their metadata length: ask for the end.
            use std::io::Seek;
            (&file).seek(io::SeekFrom::End(0))?
        };
        if len < min_len && meta.file_type().is_file() {
            file.set_len(min_len)?;
            len = min_len;
        }
        // Whether zeroing is fast here: a hole punched past the end of a regular file (which
        // changes nothing there: no data, the size kept) tells whether the file system
        // punches at all. Block devices write their zeroes.
        let zeroes = if meta.file_type().is_file()
            && fallocate(
                &file,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                len,
                DIRECT_ALIGN as u64,
            )
            .is_ok()
        {
            ZEROES_PUNCH
        } else {
            ZEROES_WRITE
        };
        Ok(Self {
            file,
            direct: None,
            file_id: uring::FileRef::new_id(),
            direct_id: uring::FileRef::new_id(),
            uring: false,
            map: None,
            direct_ops: AtomicU64::new(0),
            len,
            zeroes: AtomicU8::new(zeroes),
        })
    }

    /// As [`open`](Self::open), with aligned transfers through O_DIRECT. File systems without
    /// O_DIRECT (tmpfs, /dev/shm) are an error naming the cause: use the buffered device there.
    pub fn open_direct(path: &Path, min_len: u64) -> io::Result<Self> {
        let mut d = Self::open(path, min_len)?;
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("O_DIRECT not available here ({e}); use buffered I/O for this file"),
                )
            })?;
        d.direct = Some(direct);
        Ok(d)
    }

    /// Moves data through io_uring where this kernel has it (pread/pwrite elsewhere).
    pub fn with_io_uring(mut self, on: bool) -> Self {
        self.uring = on;
        self
    }

    /// Serves reads from a shared memory mapping of the file (one copy, no system call: for a
    /// cache file in RAM such as /dev/shm). Writes still use pwrite; the page cache keeps the
    /// mapping coherent with them. The file must not shrink while open (a mapping past its end
    /// faults).
    pub fn with_mapped_reads(mut self) -> io::Result<Self> {
        if self.len > 0 {
            self.map = Some(
                memmap2::MmapOptions::new()
                    .len(self.len as usize)
                    .map_raw(&self.file)?,
            );
        }
        Ok(self)
    }

    /// Transfers done with O_DIRECT so far.
    pub fn direct_ops(&self) -> u64 {
        self.direct_ops.load(Relaxed)
    }

    fn file_ref(&self, f: &File) -> uring::FileRef {
        use std::os::fd::AsRawFd;
        let direct = self.direct.as_ref().is_some_and(|d| std::ptr::eq(d, f));
        uring::FileRef {
            fd: f.as_raw_fd(),
            id: if direct { self.direct_id } else { self.file_id },
        }
    }

    fn read_fd(&self, f: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.uring {
            if let Some(r) = uring::read_exact_at(self.file_ref(f), buf, offset) {
                return r;
            }
        }
        f.read_exact_at(buf, offset)
    }

    fn write_fd(&self, f: &File, data: &[u8], offset: u64) -> io::Result<()> {
        if self.uring {
            if let Some(r) = uring::write_all_at(self.file_ref(f), data, offset) {
                return r;
            }
        }
        f.write_all_at(data, offset)
    }

    /// Whether transfers go through this thread's io_uring (which stages them in aligned
    /// memory of its own, so O_DIRECT needs no bounce buffer here).
    fn ring(&self) -> bool {
        self.uring && uring::available()
    }

    /// Writes `data` at `offset` (through O_DIRECT where aligned), without FUA.
    fn write_data(&self, data: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, data.len() as u64, self.len)?;
        match self.direct_for(offset, data.len()) {
            Some(f) if self.ring() => {
                self.direct_ops.fetch_add(1, Relaxed);
                self.write_fd(f, data, offset)
            }
            Some(f) => {
                self.direct_ops.fetch_add(1, Relaxed);
                with_aligned(data.len(), |b| {
                    b.copy_from_slice(data);
                    self.write_fd(f, b, offset)
                })
            }
            None => self.write_fd(&self.file, data, offset),
        }
    }

    /// The O_DIRECT descriptor, if this transfer can use it.
    fn direct_for(&self, offset: u64, len: usize) -> Option<&File> {
        let aligned = offset.is_multiple_of(DIRECT_ALIGN as u64)
            && len.is_multiple_of(DIRECT_ALIGN)
            && len > 0;
        self.direct.as_ref().filter(|_| aligned)
    }
}

/// Trimmed ranges become holes (read as zeroes) where the file system can punch them, and
/// keep their data elsewhere (trim is a hint). Started reads ([`BlockDevice::start_reads`])
/// go through the calling thread's io_uring ring, which every file device on that thread
/// shares: [`BlockDevice::reap_started`] hands back any of them, so tags must be unique per
/// thread, not only per device.
impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.len
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        if let Some(map) = &self.map {
            // SAFETY: `check_range` keeps `offset..offset + buf.len()` inside the mapping,
            // which spans the file's `len` bytes and lives as long as `self`; `buf` is a
            // distinct, writable allocation of exactly `buf.len()` bytes. Callers order writes
            // against reads of the same bytes (the trait leaves overlapping concurrent requests
            // unspecified; the engine's ordering table orders them), so the copy sees no
            // concurrent modification from this process; a raw copy (no reference into the mapping) is
            // used because other processes could still change the file.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    map.as_ptr().add(offset as usize),
                    buf.as_mut_ptr(),
                    buf.len(),
                );
            }
            return Ok(());
        }
        match self.direct_for(offset, buf.len()) {
            Some(f) if self.ring() => {
                self.direct_ops.fetch_add(1, Relaxed);
                self.read_fd(f, buf, offset)
            }
            Some(f) => {
                self.direct_ops.fetch_add(1, Relaxed);
                with_aligned(buf.len(), |b| {
                    self.read_fd(f, b, offset)?;
                    buf.copy_from_slice(b);
                    Ok(())
                })
            }
            None => self.read_fd(&self.file, buf, offset),
        }
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.write_data(data, offset)?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        if self.map.is_some() || reads.len() < 2 || !self.ring() {
            return reads
                .iter_mut()
                .map(|(offset, buf)| self.read_at(buf, *offset))
                .collect();
        }
        // One submission per descriptor: O_DIRECT-aligned reads on the direct one, the rest
        // through the page cache.
        let mut results: Vec<Option<io::Result<()>>> = (0..reads.len()).map(|_| None).collect();
        let mut direct: Vec<(usize, (u64, uring::Transfer<'_>))> = Vec::new();
        let mut buffered: Vec<(usize, (u64, uring::Transfer<'_>))> = Vec::new();
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            if let Err(e) = check_range(*offset, buf.len() as u64, self.len) {
                results[i] = Some(Err(e));
                continue;
            }
            let to = if self.direct_for(*offset, buf.len()).is_some() {
                &mut direct
            } else {
                &mut buffered
            };
            to.push((i, (*offset, uring::Transfer::Read(&mut buf[..]))));
        }
        self.direct_ops.fetch_add(direct.len() as u64, Relaxed);
        let d = self.direct.as_ref();
        for (group, f) in [(direct, d), (buffered, Some(&self.file))] {
            let (Some(f), false) = (f, group.is_empty()) else {
                continue;
            };
            let (idx, mut ops): (Vec<usize>, Vec<_>) = group.into_iter().unzip();
            let file = self.file_ref(f);
            let rs = uring::transfer_batch(file, &mut ops).unwrap_or_else(|| {
                ops.iter()
                    .map(|_| Err(io::Error::other("io_uring vanished")))
                    .collect()
            });
            for (i, r) in idx.into_iter().zip(rs) {
                results[i] = Some(r);
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every read has a result"))
            .collect()
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        if self.map.is_some() || !self.ring() {
            return reads.iter().map(|_| None).collect();
        }
        // Reads past the end fail alone; the rest go to the ring, each as it is queued.
        let mut out: Vec<Option<io::Result<()>>> = Vec::with_capacity(reads.len());
        let mut ring_reads: Vec<(u64, usize, u64)> = Vec::with_capacity(reads.len());
        for &(tag, offset, len) in reads {
            match check_range(offset, len as u64, self.len) {
                Ok(()) => {
                    out.push(None);
                    ring_reads.push((offset, len as usize, tag));
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        if ring_reads.is_empty() {
            return out;
        }
        // Through O_DIRECT when every read is aligned (cache hits are whole lines).
        let direct = ring_reads
            .iter()
            .all(|&(offset, len, _)| self.direct_for(offset, len).is_some());
        let f = match (&self.direct, direct) {
            (Some(d), true) => {
                self.direct_ops.fetch_add(ring_reads.len() as u64, Relaxed);
                d
            }
            _ => &self.file,
        };
        let Some(results) = uring::start_reads(self.file_ref(f), &ring_reads) else {
            // No ring after all: nothing started, the in-range reads stay `None`.
            return out;
        };
        let mut results = results.into_iter();
        for slot in out.iter_mut().filter(|o| o.is_none()) {
            *slot = match results.next().expect("one result per started read") {
                // No room in the ring: not started, and nothing wrong with the read (the
                // caller runs it with `read_at`, as for a device that starts none).
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                r => Some(r),
            };
        }
        out
    }
    fn reap_started(&self, wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        uring::reap_started(wait, f)
    }
    fn flush(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.uring {
            if let Some(r) = uring::data_sync(self.file.as_raw_fd()) {
                return r;
            }
        }
        self.file.sync_data()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        if len == 0 {
            return Ok(());
        }
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        match fallocate(&self.file, punch, offset, len) {
            // Punching holes is an optimisation: file systems without it keep the data.
            Err(e) if !unsupported(&e) => Err(e),
            _ => Ok(()),
        }
    }
    /// Zeroes without writing them where the file system can: a punched hole, else
    /// `FALLOC_FL_ZERO_RANGE`, else zeroes written (see [`fast_zeroes`](Self::fast_zeroes)).
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        if len == 0 {
            return Ok(());
        }
        let modes = [
            (
                ZEROES_PUNCH,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            ),
            (
                ZEROES_RANGE,
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            ),
        ];
        let mut zeroed = false;
        for (way, mode) in modes {
            if self.zeroes.load(Relaxed) > way {
                continue;
            }
            match fallocate(&self.file, mode, offset, len) {
                Ok(()) => {
                    zeroed = true;
                    break;
                }
                Err(e) if unsupported(&e) => {
                    self.zeroes.fetch_max(way + 1, Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        if !zeroed {
            const CHUNK: u64 = 1 << 20;
            let zeros = vec![0u8; CHUNK.min(len) as usize];
            let mut at = 0;
            while at < len {
                let n = CHUNK.min(len - at);
                self.write_data(&zeros[..n as usize], offset + at)?;
                at += n;
            }
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }
    /// A regular file on a file system that punches holes or zeroes ranges (ext4, XFS,
    /// btrfs, tmpfs): fallocate, no data written. Block devices write their zeroes.
    fn fast_zeroes(&self) -> bool {
        self.zeroes.load(Relaxed) < ZEROES_WRITE
    }
    /// The file's holes, found with `SEEK_DATA` / `SEEK_HOLE`; where the file system (or a
    /// block device) has no holes to tell, all data.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        use std::os::fd::AsRawFd;
        check_range(offset, len, self.len)?;
        let fd = self.file.as_raw_fd();
        // SAFETY: lseek only reads its integer arguments; the fd is owned by `self.file` and
        // open for the call. The file position it moves is used by nothing (transfers are
        // positioned: pread/pwrite, io_uring, the mapping), and each call's answer is its
        // return value, so concurrent calls do not disturb each other.
        let seek = |at: u64, whence| unsafe { libc::lseek(fd, at as libc::off_t, whence) };
        let end = offset + len;
        let mut x = Extents::new();
        let mut at = offset;
        while at < end && !x.full() {
            let data = seek(at, libc::SEEK_DATA);
            if data < 0 {
                // ENXIO: no data from `at` to the end of the file. Anything else (EINVAL: the
                // file system cannot tell): data, which is always a correct answer.
                let hole = io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
                x.push(end - at, if hole { HOLE | ZERO } else { 0 });
                break;
            }
            let data = (data as u64).clamp(at, end);
            x.push(data - at, HOLE | ZERO);
            if data == end {
                break;
            }
            let hole = seek(data, libc::SEEK_HOLE);
            let hole = if hole < 0 {
                end
            } else {
                (hole as u64).clamp(data + 1, end)
            };
            x.push(hole - data, 0);
            at = hole;
        }
        Ok(x.into_vec())
    }
}

/// Opens `path` read-write, creating it empty when missing (never truncating).
pub fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sparse file's holes are reported as holes that read as zeroes, its data as data,
    /// a query cut to its range; where the file system keeps no holes (all data) the data
    /// is still reported where it was written.
    #[test]
    fn holes_of_a_sparse_file_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev");
        let d = FileDevice::open(&p, 4 << 20).unwrap();
        d.write_at(&[7u8; 65536], 1 << 20, false).unwrap();
        let x = d.allocation(0, 4 << 20).unwrap();
        assert_eq!(x.iter().map(|e| e.len).sum::<u64>(), 4 << 20, "{x:?}");
        let at = |off: u64| {
            let mut pos = 0;
            x.iter()
                .find(|e| {
                    pos += e.len;
                    off < pos
                })
                .unwrap()
                .flags
        };
        assert_eq!(at((1 << 20) + 100), 0, "{x:?}");
        if x.len() > 1 {
            // The file system keeps holes: the start and the end are ones.
            assert_eq!(at(0), HOLE | ZERO, "{x:?}");
            assert_eq!(at((4 << 20) - 1), HOLE | ZERO, "{x:?}");
        }
        let part = d.allocation((1 << 20) + 4096, 4096).unwrap();
        assert_eq!(
            part,
            vec![Extent {
                len: 4096,
                flags: 0
            }]
        );
        d.allocation(4 << 20, 1).unwrap_err();
    }

    #[test]
    fn creates_extends_and_punches_holes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev");
        let d = FileDevice::open(&p, 1 << 20).unwrap();
        assert_eq!(d.size(), 1 << 20);
        d.write_at(&[7u8; 8192], 4096, false).unwrap();
        d.trim(4096, 4096).unwrap();
        let mut b = [1u8; 4096];
        d.read_at(&mut b, 4096).unwrap();
        assert_eq!(b, [0u8; 4096], "a punched hole reads as zeroes");
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(b, [7u8; 4096]);
        assert!(d.read_at(&mut b, (1 << 20) - 100).is_err());
        // Reopening keeps size and data.
        let d2 = FileDevice::open(&p, 4096).unwrap();
        assert_eq!(d2.size(), 1 << 20);
    }

    /// Zeroes read as zeroes, the bytes beside them kept and the size unchanged, whichever
    /// way the file zeroes (a punched hole, a zeroed range, or zeroes written, each forced
    /// here), with and without FUA; a punched range is a hole. The file system of the test
    /// directory punches holes (ext4, XFS, tmpfs all do): zeroing is fast there.
    #[test]
    fn zeroes_without_writing_them() {
        let dir = tempfile::tempdir().unwrap();
        for (i, way) in [ZEROES_PUNCH, ZEROES_RANGE, ZEROES_WRITE]
            .into_iter()
            .enumerate()
        {
            let p = dir.path().join(format!("dev{i}"));
            let d = FileDevice::open(&p, 1 << 20).unwrap();
            assert!(d.fast_zeroes(), "a regular file here punches holes");
            d.zeroes.store(way, Relaxed);
            assert_eq!(d.fast_zeroes(), way != ZEROES_WRITE);
            let pattern: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251 + 1) as u8).collect();
            d.write_at(&pattern, 0, false).unwrap();
            let (at, len) = (100_000u64, 300_001u64);
            d.write_zeroes(at, len, i == 1).unwrap();
            let mut want = pattern.clone();
            want[at as usize..(at + len) as usize].fill(0);
            let mut back = vec![1u8; 1 << 20];
            d.read_at(&mut back, 0).unwrap();
            assert!(back == want, "way {way}: zeroed inside, kept outside");
            assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20);
            // Way learned or kept: never a faster one than was set.
            assert!(d.zeroes.load(Relaxed) >= way);
            if way == ZEROES_PUNCH {
                let x = d.allocation(131_072, 262_144).unwrap();
                assert!(x.iter().all(|e| e.flags & HOLE != 0), "{x:?}");
            }
            d.write_zeroes(0, 0, false).unwrap();
            d.write_zeroes(1 << 20, 1, false).unwrap_err();
            d.write_zeroes(u64::MAX, 2, false).unwrap_err();
        }
    }

    /// Mapped reads see pwrite's data at once, and the reverse, at any offset and length.
    #[test]
    fn mapped_reads_see_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev");
        let d = FileDevice::open(&p, 1 << 20)
            .unwrap()
            .with_mapped_reads()
            .unwrap();
        let pattern: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 253) as u8).collect();
        d.write_at(&pattern, 12_345, false).unwrap();
        let mut b = vec![0u8; pattern.len()];
        d.read_at(&mut b, 12_345).unwrap();
        assert!(b == pattern);
        let other = FileDevice::open(&p, 0).unwrap();
        other.write_at(&[0xEE; 3], (1 << 20) - 3, false).unwrap();
        let mut tail = [0u8; 3];
        d.read_at(&mut tail, (1 << 20) - 3).unwrap();
        assert_eq!(
            tail, [0xEE; 3],
            "another descriptor's write, read through the mapping"
        );
        assert!(
            d.read_at(&mut tail, (1 << 20) - 2).is_err(),
            "no read past the end"
        );
    }

    /// Aligned transfers go through O_DIRECT, unaligned ones through the page cache, and both
    /// see each other's data (where the file system supports O_DIRECT at all).
    #[test]
    fn io_uring_transfers_match_pread_and_pwrite() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev");
        let d = FileDevice::open(&p, 1 << 20).unwrap().with_io_uring(true);
        if !uring::available() {
            eprintln!("skipping: no io_uring here (the fallback is the plain path)");
        }
        let pattern: Vec<u8> = (0..100_000u32).map(|i| (i * 13 % 251) as u8).collect();
        d.write_at(&pattern, 777, false).unwrap();
        d.flush().unwrap();
        let plain = FileDevice::open(&p, 0).unwrap();
        let mut b = vec![0u8; pattern.len()];
        plain.read_at(&mut b, 777).unwrap();
        assert!(b == pattern, "written through the ring, read with pread");
        plain.write_at(&[9u8; 5000], 50_000, false).unwrap();
        let mut c = vec![0u8; 5000];
        d.read_at(&mut c, 50_000).unwrap();
        assert_eq!(
            c,
            vec![9u8; 5000],
            "written with pwrite, read through the ring"
        );
        assert!(
            d.read_at(&mut c, (1 << 20) - 10).is_err(),
            "range checked first"
        );
        // A short file: the ring's read hits end of file and says so.
        let short = dir.path().join("short");
        std::fs::write(&short, [1u8; 100]).unwrap();
        let f = File::open(&short).unwrap();
        use std::os::fd::AsRawFd;
        let fref = uring::FileRef {
            fd: f.as_raw_fd(),
            id: uring::FileRef::new_id(),
        };
        if let Some(r) = uring::read_exact_at(fref, &mut [0u8; 200], 0) {
            assert_eq!(r.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    #[test]
    fn direct_and_buffered_transfers_agree() {
        let dir =
            tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/var/tmp".into())).unwrap();
        let p = dir.path().join("dev");
        let d = match FileDevice::open_direct(&p, 1 << 20) {
            Ok(d) => d,
            Err(e) => {
                assert!(e.to_string().contains("O_DIRECT not available"), "{e}");
                eprintln!("skipping: {e}");
                return;
            }
        };
        let pattern: Vec<u8> = (0..16384u32).map(|i| (i * 7 % 251) as u8).collect();
        d.write_at(&pattern, 8192, false).unwrap();
        assert_eq!(d.direct_ops(), 1);
        // A buffered (unaligned) write inside the directly written range, then direct reads.
        d.write_at(&[0xAB; 100], 8192 + 4096 + 10, false).unwrap();
        let mut b = vec![0u8; 16384];
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(d.direct_ops(), 2);
        let mut want = pattern.clone();
        want[4096 + 10..4096 + 110].fill(0xAB);
        assert!(b == want, "direct read sees the buffered write");
        // A buffered (unaligned) read sees direct writes.
        d.write_at(&[0x5A; 4096], 0, false).unwrap();
        let mut small = [0u8; 10];
        d.read_at(&mut small, 3).unwrap();
        assert_eq!(small, [0x5A; 10]);
        assert_eq!(d.direct_ops(), 3);
        d.flush().unwrap();
        // Another thread uses its own bounce buffer.
        let d = std::sync::Arc::new(d);
        let d2 = d.clone();
        std::thread::spawn(move || d2.write_at(&[3u8; 4096], 65536, false).unwrap())
            .join()
            .unwrap();
        d.read_at(&mut b[..4096], 65536).unwrap();
        assert_eq!(&b[..4096], &[3u8; 4096][..]);
    }
}
