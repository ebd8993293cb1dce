//! Power loss at every point, with zeroes: the write-back scenario of `crash.rs` with
//! WRITE_ZEROES of whole lines mixed in, on a backend that zeroes fast (so each goes through
//! the engine's zeroing plan: cached copies, dirty ones included, dropped and the backend
//! zeroed, the records dropping dirty data written only once the backend's zeroes are
//! durable). For every write the cache device received, both devices are rebuilt as a crash
//! just before it (unsynced writes kept, and lost), the engine recovers, and every sector must
//! read back a value it may legally hold: as of the last completed FLUSH, a FUA write or zero
//! completed since, or any write or zero issued after that (a zero is "write 0").

mod common;

use common::{Scenario, LINE, SECTOR};
use rand::Rng;
use std::io;
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;
use tiercache_engine::device::CrashDevice;

/// A crash-logging device that says it zeroes fast (its zeroes are logged writes).
struct FastZeroes(CrashDevice);

impl BlockDevice for FastZeroes {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_at(buf, off)
    }
    fn write_at(&self, data: &[u8], off: u64, fua: bool) -> io::Result<()> {
        self.0.write_at(data, off, fua)
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
    fn fast_zeroes(&self) -> bool {
        true
    }
}

#[test]
fn every_crash_point_recovers_durable_data_with_zeroes() {
    let mut run = Scenario::new(|backend| Arc::new(FastZeroes(backend)));
    assert!(run.engine.fast_zeroes());
    for id in 1..=120u32 {
        if id % 9 == 0 {
            run.flush();
        }
        let line = run.pick_line();
        let first = line * (LINE as usize / SECTOR) + run.rng.gen_range(0..6);
        let fua = run.rng.gen_bool(0.1);
        if id % 3 == 0 {
            // Zeroes over one to three whole lines, mostly hot ones (dirty in the cache,
            // their data durable there after a FLUSH: dropping it must wait for the zeroes).
            let lines = run.rng.gen_range(1..=3);
            let line = if run.rng.gen_bool(0.8) {
                line % 6
            } else {
                line
            };
            run.zero(line, lines, fua);
            continue;
        }
        let sectors = run.rng.gen_range(1..=3);
        run.write(id, first, sectors, fua);
    }
    assert!(run.check() > 300);
}
