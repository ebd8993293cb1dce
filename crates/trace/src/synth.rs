//! Synthetic trace files for benchmarks and tests (deterministic, no randomness crate needed).

use crate::error::TraceError;
use crate::native::NativeWriter;
use crate::volume::VolumeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use tiercache_core::{Op, Request, VolumeId};

/// Deterministic request `i` of a synthetic 4-volume trace (xorshift-mixed offsets, 1 µs apart).
pub fn synthetic_request(i: u64) -> Request {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let op = if x & 3 == 0 { Op::Write } else { Op::Read };
    Request {
        time_ns: i * 1000,
        volume: VolumeId((x >> 8) as u32 & 3),
        op,
        offset: ((x >> 16) & 0xF_FFFF) * 4096,
        len: 512 << ((x >> 4) & 7),
    }
}

/// Writes `n` synthetic requests as an MSR Cambridge CSV (hosts `h0`..`h3`, disk 0).
pub fn write_synthetic_msr(path: &str, n: u64) -> Result<(), TraceError> {
    let io = |e| TraceError::io(path, e);
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    const BASE: u64 = 128_166_385_295_514_663;
    for i in 0..n {
        let r = synthetic_request(i);
        let ty = if r.op == Op::Write { "Write" } else { "Read" };
        writeln!(
            w,
            "{},h{},0,{ty},{},{},2833",
            BASE + r.time_ns / 100,
            r.volume.0,
            r.offset,
            r.len
        )
        .map_err(io)?;
    }
    w.flush().map_err(io)
}

/// Writes `n` synthetic requests as a native trace.
pub fn write_synthetic_native(path: &str, n: u64) -> Result<(), TraceError> {
    let mut w = NativeWriter::create(path)?;
    for i in 0..n {
        w.write(&synthetic_request(i))?;
    }
    let mut vols = VolumeMap::new();
    for v in 0..4 {
        vols.intern(format!("h{v}_0").as_bytes());
    }
    w.finish(&vols, None)?;
    Ok(())
}
