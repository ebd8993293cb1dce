//! Tests of the demote export: batched, fast and started paths tracked as the single ones,
//! and long trims and zeroings run in bounded pieces.

use super::*;
use std::sync::atomic::AtomicUsize;
use tiercache_blockdev::MemDevice;

/// A cache-like device with every batched path of its own: reads it claims fast, reads
/// it starts and hands back on reap, demotes it installs while `still_valid()`.
#[derive(Default)]
struct Batched {
    mem: Option<MemDevice>,
    fast_many_calls: AtomicUsize,
    many_calls: AtomicUsize,
    start_calls: AtomicUsize,
    pending: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl Batched {
    fn mem(&self) -> &MemDevice {
        self.mem.as_ref().unwrap()
    }
}

impl BlockDevice for Batched {
    fn size(&self) -> u64 {
        self.mem().size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.mem().read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.mem().write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<io::Result<()>> {
        self.many_calls.fetch_add(1, SeqCst);
        reads
            .iter_mut()
            .map(|(off, buf)| self.mem().read_at(buf, *off))
            .collect()
    }
    fn write_many(&self, writes: &[(u64, &[u8])]) -> io::Result<()> {
        self.many_calls.fetch_add(1, SeqCst);
        for (off, data) in writes {
            self.mem().write_at(data, *off, false)?;
        }
        Ok(())
    }
    fn read_fast_many(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<Option<io::Result<()>>> {
        self.fast_many_calls.fetch_add(1, SeqCst);
        reads
            .iter_mut()
            .map(|(off, buf)| Some(self.mem().read_at(buf, *off)))
            .collect()
    }
    fn hits_wait_for_device(&self) -> bool {
        true
    }
    fn start_reads(&self, reads: &[(u64, u64, u32)]) -> Vec<Option<io::Result<()>>> {
        self.start_calls.fetch_add(1, SeqCst);
        reads
            .iter()
            .map(|&(tag, off, len)| {
                let mut buf = vec![0; len as usize];
                let r = self.mem().read_at(&mut buf, off);
                if r.is_ok() {
                    self.pending.lock().unwrap().push((tag, buf));
                }
                Some(r)
            })
            .collect()
    }
    fn reap_started(&self, _wait: ReapWait, f: &mut dyn FnMut(u64, io::Result<&[u8]>)) -> usize {
        let done = std::mem::take(&mut *self.pending.lock().unwrap());
        for (tag, buf) in &done {
            f(*tag, Ok(buf));
        }
        done.len()
    }
    fn takes_demotes(&self) -> bool {
        true
    }
    fn demote_at(
        &self,
        data: &[u8],
        off: u64,
        still_valid: &dyn Fn() -> bool,
    ) -> io::Result<DemoteReply> {
        if !still_valid() {
            return Ok(DemoteReply::Rejected);
        }
        self.mem().write_at(data, off, false)?;
        Ok(DemoteReply::Accepted)
    }
}

const B: u64 = 4096;

#[test]
fn batched_and_started_reads_reach_the_device_and_prove_blocks_for_demotes() {
    let dev = Arc::new(Batched {
        mem: Some(MemDevice::new(16 * B as usize)),
        ..Default::default()
    });
    let export: Arc<dyn BlockDevice> =
        Arc::new(DemoteExport::new(dev.clone(), DemoteConfig::default()).unwrap());
    let ledger = negotiate(&*export, &7u64.to_be_bytes()).unwrap();
    let conn = for_connection(export.clone(), Some(ledger));
    let other = for_connection(export.clone(), None);
    assert!(
        conn.hits_wait_for_device(),
        "the device's started reads are offered"
    );
    let block = |c: u8| vec![c; B as usize];
    let demote = |data: &[u8], off: u64| conn.demote_at(data, off, &|| true).unwrap();

    // Batched fast reads reach the device in one call and prove their blocks.
    let (mut a, mut b) = (vec![0; B as usize], vec![0; B as usize]);
    let out = conn.read_fast_many(&mut [(0, &mut a[..]), (B, &mut b[..])]);
    assert!(out.iter().all(|r| matches!(r, Some(Ok(())))));
    assert_eq!(dev.fast_many_calls.load(SeqCst), 1);
    assert_eq!(demote(&a, 0), DemoteReply::Accepted);

    // Started reads: one block written by another client between start and reap is not
    // proven (its demote would carry the older bytes); the other one is.
    let started = conn.start_reads(&[(70, 2 * B, B as u32), (71, 3 * B, B as u32)]);
    assert!(started.iter().all(|r| matches!(r, Some(Ok(())))));
    assert_eq!(dev.start_calls.load(SeqCst), 1);
    other.write_at(&block(9), 3 * B, false).unwrap();
    let mut reaped = Vec::new();
    assert_eq!(
        conn.reap_started(ReapWait::Completion, &mut |tag, r| reaped
            .push((tag, r.unwrap().to_vec()))),
        2
    );
    reaped.sort();
    assert_eq!(reaped, vec![(70, block(0)), (71, block(0))]);
    assert_eq!(demote(&block(0), 2 * B), DemoteReply::Accepted);
    assert_eq!(demote(&block(0), 3 * B), DemoteReply::Rejected);
    assert_eq!(
        dev.mem().snapshot()[3 * B as usize],
        9,
        "the later write survives"
    );

    // Batched writes prove what they wrote; a block never read is refused. Both reach the
    // device as batches (the trait's defaults would split them into single calls).
    conn.write_many(&[(5 * B, &block(5)), (6 * B, &block(6))])
        .unwrap();
    assert_eq!(demote(&block(6), 6 * B), DemoteReply::Accepted);
    assert_eq!(demote(&block(8), 8 * B), DemoteReply::Rejected);
    let mut c = vec![0; B as usize];
    let out = conn.read_many(&mut [(8 * B, &mut c[..])]);
    assert!(out[0].is_ok());
    assert_eq!(demote(&c, 8 * B), DemoteReply::Accepted);
    assert_eq!(dev.many_calls.load(SeqCst), 2);

    // A connection without a session forwards the batched, fast and started reads to the
    // device as batches too.
    let mut d = vec![0; B as usize];
    assert!(other.read_many(&mut [(9 * B, &mut d[..])])[0].is_ok());
    assert!(matches!(
        other.read_fast_many(&mut [(9 * B, &mut d[..])])[0],
        Some(Ok(()))
    ));
    assert!(matches!(
        other.start_reads(&[(80, 4 * B, B as u32)])[0],
        Some(Ok(()))
    ));
    let mut tags = Vec::new();
    assert_eq!(
        other.reap_started(ReapWait::Completion, &mut |tag, r| tags
            .push((tag, r.is_ok()))),
        1
    );
    assert_eq!(tags, vec![(80, true)]);
    assert_eq!(
        (
            dev.many_calls.load(SeqCst),
            dev.fast_many_calls.load(SeqCst),
            dev.start_calls.load(SeqCst)
        ),
        (3, 2, 2)
    );
}

/// A 4 GiB device that only records the trims and zeroings it is given.
#[derive(Default)]
struct Ranges {
    calls: Mutex<Vec<(&'static str, u64, u64)>>,
}

impl BlockDevice for Ranges {
    fn size(&self) -> u64 {
        4 << 30
    }
    fn read_at(&self, buf: &mut [u8], _: u64) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn write_at(&self, _: &[u8], _: u64, _: bool) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.calls.lock().unwrap().push(("trim", off, len));
        Ok(())
    }
    fn write_zeroes(&self, off: u64, len: u64, _: bool) -> io::Result<()> {
        self.calls.lock().unwrap().push(("zero", off, len));
        Ok(())
    }
}

/// A trim or zeroing longer than a piece reaches the device as consecutive pieces that tile
/// it exactly, each within one aligned span of `PIECE_BLOCKS` blocks (its words, held until
/// it completes, are bounded by the piece: a 4 GiB trim held a word per block of it); a
/// short or empty one as itself.
#[test]
fn long_trims_and_zeroings_run_in_bounded_pieces() {
    let dev = Arc::new(Ranges::default());
    let export: Arc<dyn BlockDevice> =
        Arc::new(DemoteExport::new(dev.clone(), DemoteConfig::default()).unwrap());
    let ledger = negotiate(&*export, &7u64.to_be_bytes()).unwrap();
    let conn = for_connection(export.clone(), Some(ledger));
    let span = PIECE_BLOCKS * DemoteConfig::default().block_size;
    let (off, len) = (3 * B + 100, 3 * span + 5000);
    conn.trim(off, len).unwrap();
    conn.write_zeroes(off, len, false).unwrap();
    conn.trim(5 * B, B).unwrap();
    conn.trim(7 * B, 0).unwrap();
    let calls = dev.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 10, "{calls:?}");
    for (kind, pieces) in [("trim", &calls[..4]), ("zero", &calls[4..8])] {
        let mut at = off;
        for &(k, o, l) in pieces {
            assert_eq!(k, kind);
            assert_eq!(o, at, "{kind}: the pieces are consecutive");
            assert!(
                l > 0 && o / span == (o + l - 1) / span,
                "{kind}: {o}+{l} in one span"
            );
            at = o + l;
        }
        assert_eq!(
            at,
            off + len,
            "{kind}: the pieces end where the request does"
        );
    }
    assert_eq!(calls[8..], [("trim", 5 * B, B), ("trim", 7 * B, 0)]);
}
