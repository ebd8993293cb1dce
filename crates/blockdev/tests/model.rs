//! `MemDevice` and every flavour of `FileDevice` (buffered, io_uring, O_DIRECT, mapped reads)
//! behave as a plain `Vec<u8>` under random sequences of writes, reads, batched and started
//! reads, trims, zeroings and flushes, including requests past the end (refused, changing
//! nothing).

use proptest::prelude::*;
use std::io;
use tiercache_blockdev::{BlockDevice, FileDevice, MemDevice, ReapWait};

const SIZE: usize = 64 << 10;

#[derive(Debug, Clone)]
enum Op {
    Write {
        off: u64,
        len: usize,
        seed: u8,
        fua: bool,
    },
    Read {
        off: u64,
        len: usize,
    },
    ReadMany(Vec<(u64, usize)>),
    StartReads(Vec<(u64, usize)>),
    Trim {
        off: u64,
        len: u64,
    },
    Zeroes {
        off: u64,
        len: u64,
        fua: bool,
    },
    Flush,
}

/// Offsets and lengths that are often 4 KiB-aligned (the O_DIRECT path), sometimes not, and
/// sometimes run past the end.
fn range() -> impl Strategy<Value = (u64, usize)> {
    prop_oneof![
        (0..16u64, 1..4usize).prop_map(|(b, n)| (b * 4096, n * 4096)),
        (0..SIZE as u64, 1..9000usize),
        (SIZE as u64 - 100..SIZE as u64 + 100, 1..300usize),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (range(), any::<u8>(), any::<bool>())
            .prop_map(|((off, len), seed, fua)| Op::Write { off, len, seed, fua: fua && seed % 8 == 0 }),
        3 => range().prop_map(|(off, len)| Op::Read { off, len }),
        1 => prop::collection::vec(range(), 1..6).prop_map(Op::ReadMany),
        1 => prop::collection::vec(range(), 1..6).prop_map(Op::StartReads),
        1 => range().prop_map(|(off, len)| Op::Trim { off, len: len as u64 }),
        1 => (range(), any::<bool>())
            .prop_map(|((off, len), fua)| Op::Zeroes { off, len: len as u64, fua }),
        1 => Just(Op::Flush),
    ]
}

/// The reference: a vector of bytes.
struct Model {
    bytes: Vec<u8>,
    /// Whether a trim zeroes (else it keeps the data: a file system without hole punching).
    trim_zeroes: bool,
}

impl Model {
    fn fits(&self, off: u64, len: u64) -> bool {
        off.checked_add(len)
            .is_some_and(|e| e <= self.bytes.len() as u64)
    }
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Out-of-range requests are refused as invalid input; in-range ones succeed.
fn expect(res: io::Result<()>, fits: bool, what: &str) {
    if fits {
        res.unwrap_or_else(|e| panic!("{what}: {e}"));
    } else {
        let e = res.expect_err(what);
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{what}: {e}");
    }
}

fn run(dev: &dyn BlockDevice, model: &mut Model, op: &Op, name: &str) {
    let what = format!("{name} {op:?}");
    match op {
        Op::Write {
            off,
            len,
            seed,
            fua,
        } => {
            let d = data(*len, *seed);
            let fits = model.fits(*off, *len as u64);
            expect(dev.write_at(&d, *off, *fua), fits, &what);
            if fits {
                model.bytes[*off as usize..*off as usize + len].copy_from_slice(&d);
            }
        }
        Op::Read { off, len } => {
            let mut b = vec![0xEEu8; *len];
            let fits = model.fits(*off, *len as u64);
            expect(dev.read_at(&mut b, *off), fits, &what);
            if fits {
                assert!(
                    b == model.bytes[*off as usize..*off as usize + len],
                    "{what}: bytes differ"
                );
            }
        }
        Op::ReadMany(ranges) => {
            let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0xEE; r.1]).collect();
            let mut reads: Vec<(u64, &mut [u8])> = ranges
                .iter()
                .zip(bufs.iter_mut())
                .map(|(r, b)| (r.0, &mut b[..]))
                .collect();
            let rs = dev.read_many(&mut reads);
            assert_eq!(rs.len(), ranges.len(), "{what}: one result per read");
            for ((r, res), b) in ranges.iter().zip(rs).zip(&bufs) {
                let fits = model.fits(r.0, r.1 as u64);
                expect(res, fits, &what);
                if fits {
                    assert!(
                        b[..] == model.bytes[r.0 as usize..r.0 as usize + r.1],
                        "{what}: read {r:?} differs"
                    );
                }
            }
        }
        Op::StartReads(ranges) => {
            let reads: Vec<(u64, u64, u32)> = ranges
                .iter()
                .enumerate()
                .map(|(tag, r)| (tag as u64, r.0, r.1 as u32))
                .collect();
            let started = dev.start_reads(&reads);
            assert_eq!(started.len(), reads.len(), "{what}: one answer per read");
            let mut got: Vec<Option<Vec<u8>>> = vec![None; reads.len()];
            let mut pending = 0;
            for (i, st) in started.into_iter().enumerate() {
                let (_, off, len) = reads[i];
                let fits = model.fits(off, len as u64);
                match st {
                    None => {
                        // Not started: read it as usual.
                        let mut b = vec![0u8; len as usize];
                        expect(dev.read_at(&mut b, off), fits, &what);
                        got[i] = fits.then_some(b);
                    }
                    Some(Ok(())) => {
                        assert!(fits, "{what}: started a read past the end");
                        pending += 1;
                    }
                    Some(Err(e)) => {
                        assert!(!fits, "{what}: {e}");
                        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{what}: {e}");
                    }
                }
            }
            while pending > 0 {
                let n = dev.reap_started(ReapWait::Completion, &mut |tag, res| {
                    let b = res.unwrap_or_else(|e| panic!("{what}: started read {tag}: {e}"));
                    assert!(got[tag as usize].is_none(), "{what}: tag {tag} twice");
                    got[tag as usize] = Some(b.to_vec());
                });
                assert!(n > 0, "{what}: reads in flight, none reaped");
                pending -= n;
            }
            for (i, &(_, off, len)) in reads.iter().enumerate() {
                if model.fits(off, len as u64) {
                    let b = got[i].as_ref().expect("every read answered");
                    assert!(
                        b[..] == model.bytes[off as usize..off as usize + len as usize],
                        "{what}: started read {i} differs"
                    );
                }
            }
        }
        Op::Trim { off, len } => {
            let fits = model.fits(*off, *len);
            expect(dev.trim(*off, *len), fits, &what);
            if fits && model.trim_zeroes {
                model.bytes[*off as usize..(off + len) as usize].fill(0);
            }
        }
        Op::Zeroes { off, len, fua } => {
            let fits = model.fits(*off, *len);
            expect(dev.write_zeroes(*off, *len, *fua), fits, &what);
            if fits {
                model.bytes[*off as usize..(off + len) as usize].fill(0);
            }
        }
        Op::Flush => dev.flush().unwrap_or_else(|e| panic!("{what}: {e}")),
    }
}

/// Whether this file system punches holes (reads of a trimmed range return zeroes).
fn punches_holes(dev: &FileDevice) -> bool {
    dev.write_at(&[1u8; 4096], 0, false).unwrap();
    dev.trim(0, 4096).unwrap();
    let mut b = [9u8; 4096];
    dev.read_at(&mut b, 0).unwrap();
    dev.write_zeroes(0, 4096, false).unwrap();
    b == [0u8; 4096]
}

/// A directory on a file system that takes O_DIRECT if there is one at hand (tmpfs does not).
fn direct_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/var/tmp".into()))
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_device_behaves_as_a_vector_of_bytes(ops in prop::collection::vec(op(), 1..40)) {
        let dir = direct_dir();
        let path = |n: &str| dir.path().join(n);
        let mut devices: Vec<(String, Box<dyn BlockDevice>)> = vec![
            ("mem".into(), Box::new(MemDevice::new(SIZE))),
            ("file".into(), Box::new(FileDevice::open(&path("f"), SIZE as u64).unwrap())),
            (
                "file+io_uring".into(),
                Box::new(FileDevice::open(&path("u"), SIZE as u64).unwrap().with_io_uring(true)),
            ),
            (
                "file+mapped".into(),
                Box::new(FileDevice::open(&path("m"), SIZE as u64).unwrap().with_mapped_reads().unwrap()),
            ),
        ];
        for (name, uring) in [("file+direct", false), ("file+direct+io_uring", true)] {
            // Where O_DIRECT is unavailable the buffered flavours above cover the device.
            if let Ok(d) = FileDevice::open_direct(&path(name), SIZE as u64) {
                devices.push((name.into(), Box::new(d.with_io_uring(uring))));
            }
        }
        let holes = punches_holes(&FileDevice::open(&path("probe"), 4096).unwrap());
        for (name, dev) in &devices {
            prop_assert_eq!(dev.size(), SIZE as u64, "{}", name);
            let mut model = Model { bytes: vec![0; SIZE], trim_zeroes: name == "mem" || holes };
            for op in &ops {
                run(&**dev, &mut model, op, name);
            }
            let mut all = vec![0u8; SIZE];
            dev.read_at(&mut all, 0).unwrap();
            prop_assert!(all == model.bytes, "{}: final contents differ", name);
        }
    }
}

/// Data written through one `FileDevice` is in the file: another device over it reads it
/// back after a flush, and sizes come from the file.
#[test]
fn a_file_device_reopened_reads_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev");
    let d = FileDevice::open(&p, 10_000).unwrap();
    d.write_at(b"tiercache", 9_000, true).unwrap();
    d.flush().unwrap();
    drop(d);
    let again = FileDevice::open(&p, 0).unwrap();
    assert_eq!(again.size(), 10_000);
    let mut b = [0u8; 9];
    again.read_at(&mut b, 9_000).unwrap();
    assert_eq!(&b, b"tiercache");
}

/// A device whose every method records its name: what reaches it through a wrapper.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<&'static str>>);

impl Recording {
    fn hit(&self, name: &'static str) {
        self.0.lock().unwrap().push(name);
    }
}

impl BlockDevice for Recording {
    fn size(&self) -> u64 {
        self.hit("size");
        0
    }
    fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
        self.hit("read_at");
        Ok(())
    }
    fn write_at(&self, _: &[u8], _: u64, _: bool) -> io::Result<()> {
        self.hit("write_at");
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.hit("flush");
        Ok(())
    }
    fn trim(&self, _: u64, _: u64) -> io::Result<()> {
        self.hit("trim");
        Ok(())
    }
    fn write_zeroes(&self, _: u64, _: u64, _: bool) -> io::Result<()> {
        self.hit("write_zeroes");
        Ok(())
    }
    fn read_many(&self, _: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        self.hit("read_many");
        Vec::new()
    }
    fn write_many(&self, _: &[(u64, &[u8])]) -> io::Result<()> {
        self.hit("write_many");
        Ok(())
    }
    fn read_fast(&self, _: &mut [u8], _: u64) -> Option<io::Result<()>> {
        self.hit("read_fast");
        None
    }
    fn read_fast_many(&self, _: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        self.hit("read_fast_many");
        Vec::new()
    }
    fn write_fast(&self, _: &[u8], _: u64) -> Option<io::Result<()>> {
        self.hit("write_fast");
        None
    }
    fn hits_wait_for_device(&self) -> bool {
        self.hit("hits_wait_for_device");
        false
    }
    fn start_reads(&self, _: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        self.hit("start_reads");
        Vec::new()
    }
    fn reap_started(&self, _: ReapWait, _: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        self.hit("reap_started");
        0
    }
    fn epoch(&self) -> u64 {
        self.hit("epoch");
        0
    }
    fn flush_since(&self, _: u64) -> io::Result<()> {
        self.hit("flush_since");
        Ok(())
    }
    fn link_stats(&self) -> Option<tiercache_blockdev::RemoteStats> {
        self.hit("link_stats");
        None
    }
    fn multi_conn(&self) -> bool {
        self.hit("multi_conn");
        false
    }
    fn takes_demotes(&self) -> bool {
        self.hit("takes_demotes");
        false
    }
    fn demote_at(
        &self,
        _: &[u8],
        _: u64,
        _: &dyn Fn() -> bool,
    ) -> io::Result<tiercache_blockdev::DemoteReply> {
        self.hit("demote_at");
        Ok(tiercache_blockdev::DemoteReply::Rejected)
    }
    fn demote_tracker(&self) -> Option<std::sync::Arc<dyn std::any::Any + Send + Sync>> {
        self.hit("demote_tracker");
        None
    }
}

/// Calls every method of `d` once (through `D`'s own implementation).
fn call_every_method<D: BlockDevice>(d: &D) {
    let mut b = [0u8; 1];
    d.size();
    let _ = d.read_at(&mut b, 0);
    let _ = d.write_at(&b, 0, false);
    let _ = d.flush();
    let _ = d.trim(0, 1);
    let _ = d.write_zeroes(0, 1, false);
    let _ = d.read_many(&mut [(0, &mut b[..])]);
    let _ = d.write_many(&[(0, &[0u8][..])]);
    let _ = d.read_fast(&mut b, 0);
    let _ = d.read_fast_many(&mut [(0, &mut b[..])]);
    let _ = d.write_fast(&b, 0);
    d.hits_wait_for_device();
    let _ = d.start_reads(&[(1, 0, 1)]);
    d.reap_started(ReapWait::No, &mut |_, _| {});
    d.epoch();
    let _ = d.flush_since(0);
    let _ = d.link_stats();
    d.multi_conn();
    d.takes_demotes();
    let _ = d.demote_at(&b, 0, &|| true);
    let _ = d.demote_tracker();
}

/// The `Arc` blanket implementation forwards every method to the device's own, none to the
/// trait's default (which would silently drop, say, a device's batched reads or demotes).
#[test]
fn an_arc_forwards_every_override() {
    let direct = Recording::default();
    call_every_method(&direct);
    let want = direct.0.lock().unwrap().clone();
    assert_eq!(want.len(), 21, "every method of the trait: {want:?}");
    let inner = std::sync::Arc::new(Recording::default());
    call_every_method(&inner.clone());
    assert_eq!(*inner.0.lock().unwrap(), want);
    // And MemDevice's own overrides, through Arc<dyn BlockDevice>.
    let d = std::sync::Arc::new(MemDevice::new(100));
    let dyn_dev: std::sync::Arc<dyn BlockDevice> = d.clone();
    dyn_dev.write_at(&[5; 10], 10, false).unwrap();
    // MemDevice's trim zeroes (the default would keep the bytes).
    call_trim(&dyn_dev);
    assert_eq!(&d.snapshot()[10..20], &[0, 0, 0, 0, 0, 5, 5, 5, 5, 5]);
}

fn call_trim<D: BlockDevice>(d: &D) {
    d.trim(10, 5).unwrap();
}
