//! Block requests: what a workload, a trace reader or an NBD client hands the cache.

use serde::{Deserialize, Serialize};

/// Nanoseconds, the one time unit inside tiercache (virtual in the simulator, real in the engine).
pub type Nanos = u64;

/// Dense volume identifier (a LUN, a VM disk, a trace's host+disk). Trace readers map the
/// original volume key to these ids and keep the name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct VolumeId(pub u32);

/// Operation of a block request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// Discard `len` bytes at `offset`: the data is no longer needed.
    Trim,
    /// Make every acknowledged write durable (offset and length are ignored).
    Flush,
}

impl Op {
    /// Lower-case name, as used in configs, traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "flush",
        }
    }
}

/// One block request: (time, volume, op, byte offset, byte length) as in docs/design.md §2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    /// Arrival time in ns since the start of the workload or trace.
    pub time_ns: Nanos,
    /// Volume addressed.
    pub volume: VolumeId,
    /// Operation.
    pub op: Op,
    /// Byte offset within the volume.
    pub offset: u64,
    /// Length in bytes (0 for flush).
    pub len: u64,
}

impl Request {
    /// Convenience constructor for a read at time 0 on volume 0.
    pub fn read(offset: u64, len: u64) -> Self {
        Self {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Read,
            offset,
            len,
        }
    }

    /// Convenience constructor for a write at time 0 on volume 0.
    pub fn write(offset: u64, len: u64) -> Self {
        Self {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Write,
            offset,
            len,
        }
    }

    /// Convenience constructor for a trim at time 0 on volume 0.
    pub fn trim(offset: u64, len: u64) -> Self {
        Self {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Trim,
            offset,
            len,
        }
    }

    /// Same request on another volume.
    pub fn on_volume(mut self, volume: VolumeId) -> Self {
        self.volume = volume;
        self
    }

    /// Same request at another time.
    pub fn at(mut self, time_ns: Nanos) -> Self {
        self.time_ns = time_ns;
        self
    }

    /// One past the last byte addressed.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}
