//! Block I/O trace readers, tiercache's native trace format, converters and statistics.
//!
//! One reader abstraction ([`TraceReader`], opened with [`open`]) covers MSR Cambridge,
//! CloudPhysics vSCSI v1/v2, SPC, FIU, Tencent CBS, Alibaba, SYSTOR'17, blkparse text, fio
//! iolog v2/v3, libCacheSim oracleGeneral, the native format and generic CSV ([`CsvSpec`]).
//! Compression (gzip, bzip2, xz, zstd) is found by magic bytes; the format by name and content.
//! Readers convert units at the source: offsets and lengths in bytes, times in ns since the first
//! record, volume keys mapped to dense ids ([`VolumeMap`]) and kept by name.
//!
//! | format | volume key | offset, length | time |
//! | --- | --- | --- | --- |
//! | `msr` | `host_disk` | bytes | FILETIME (100 ns since 1601), absolute |
//! | `vscsi` v1/v2 | `0` | lbn × 512, bytes | µs |
//! | `spc` | ASU | LBA × 512, bytes | s from trace start |
//! | `fiu` | `major:minor` | sectors × 512 | ns |
//! | `tencent` | VolumeID | sectors × 512 | unix s |
//! | `alibaba` | device_id | bytes | unix µs |
//! | `systor` | LUN | bytes | unix s with fraction |
//! | `blkparse` | `major,minor` | sectors × 512 | s.ns; one action kept (Q by default) |
//! | `fio-iolog` | file name | bytes | v2: sum of `wait` µs; v3: µs |
//! | `oracle-general` | top 16 bits of obj_id | (obj_id & 2^48-1) × line size, obj_size | s |
//! | `native` | stored names | bytes | ns |
//! | `csv` | mapped columns | mapped units | mapped unit |
//!
//! Times become ns since the first record; records earlier than it are clamped to 0 and counted
//! ([`ReadCounters::clamped_times`]); the unix time of the first record is kept in
//! [`TraceMeta::epoch_unix_ns`] where the format carries it.
//!
//! Writers ([`writer`]) stream the native format, oracleGeneral (one record per line-sized block,
//! `next_access_vtime` computed) and fio iolog v3. [`stats()`] summarises a trace. The
//! `tiercache trace` subcommands are the `tiercache` binary's; [`InputOptions`] is how every
//! command describes the trace it reads.
#![warn(missing_docs)]

mod binary;
pub mod compress;
pub mod csv;
pub mod error;
mod footprint;
pub mod format;
pub mod fuzzing;
mod input;
mod lines;
pub mod native;
mod parse;
pub mod read_ahead;
pub mod reader;
pub mod replay;
pub mod stats;
pub mod synth;
mod text;
pub mod volume;
pub mod writer;

pub use compress::Compression;
pub use csv::{CsvSpec, OpNames, TimeUnit};
pub use error::TraceError;
pub use format::{detect, Format};
pub use input::InputOptions;
pub use native::{NativeReader, NativeTrace, NativeWriter};
pub use reader::{
    open, read_all, ReadCounters, ReadOptions, TraceMeta, TraceReader, MAX_DATA_REQUEST_LEN,
    MAX_REQUEST_LEN,
};
pub use replay::ReplaySource;
pub use stats::{stats, stats_of, CounterNotes, StatsOptions, TraceStats};
pub use text::BlkAction;
pub use volume::VolumeMap;
pub use writer::{convert, create_writer, ConvertSummary, OutputFormat, TraceWriter, WriteSummary};

use std::time::Instant;

/// Throughput of reading a trace to its end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadThroughput {
    /// Requests read.
    pub records: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// `records / seconds`.
    pub records_per_sec: f64,
}

/// Reads `path` through [`open`] to the end, in batches ([`TraceReader::next_batch`]), and
/// measures requests per second (benchmark helper;
/// the sum of offsets is kept so the work cannot be optimised away).
pub fn bench_read(path: &str, format: Option<Format>) -> Result<ReadThroughput, TraceError> {
    let start = Instant::now();
    let mut r = open(path, format, &ReadOptions::default())?;
    let mut records = 0u64;
    let mut sum = 0u64;
    // In batches, as the simulator, `analyze` and `trace stats` read.
    let mut batch = Vec::with_capacity(4096);
    loop {
        batch.clear();
        let n = r.next_batch(&mut batch, 4096)?;
        if n == 0 {
            break;
        }
        records += n as u64;
        for req in &batch {
            sum = sum.wrapping_add(req.offset ^ req.time_ns);
        }
    }
    std::hint::black_box(sum);
    let seconds = start.elapsed().as_secs_f64();
    Ok(ReadThroughput {
        records,
        seconds,
        records_per_sec: records as f64 / seconds.max(1e-9),
    })
}
