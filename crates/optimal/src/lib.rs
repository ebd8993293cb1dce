//! How far from optimal a cache is (docs/design.md §12).
//!
//! - [`FutureIndex`]: a trace's line accesses with, for each, the position of the next access
//!   to the same line (and of the next write to it). The accesses are numbered by one forward
//!   pass and spilled to an anonymous temporary file; a backward pass over that file computes
//!   the next uses into a second one. Memory is bounded by the footprint (one `u64` per distinct
//!   line and fixed-size buffers), never by the trace's length.
//! - [`Belady`]: MIN at one cache size (evict the line used furthest in the future), an
//!   indexed heap over the resident lines: exact miss counts.
//! - [`opt_curve`]: OPT is a stack algorithm, so one pass of Mattson's priority stack gives
//!   the OPT stack distance of every access and with it the miss count at every size. Its cost
//!   depends on the trace (see its module); [`opt_misses_at`] gives the counts at chosen sizes
//!   in one pass at a bounded O(log c) per access and size.
//! - [`writeback`]: the cost of a write-back cache (a miss costs a backend read, evicting dirty
//!   data a write-back): the exact optimum by exhaustive search on small traces, and lower
//!   bounds that any policy's cost is at least: the sum of two separate minima and joint ones
//!   (a min-cost flow within limits, a time-aggregated relaxation at scale).
//!
//! Requests are split into lines as the simulator splits them ([`line_accesses`]): a read or
//! write covers lines ⌊off/L⌋ ..= ⌊(off+len−1)/L⌋, each one access; trims, flushes and empty
//! requests reference no line.

#![warn(missing_docs)]

mod belady;
mod future;
mod stack;
pub mod writeback;

pub use belady::{opt_misses_at, Belady};
pub use future::{Future, FutureIndex, FutureIndexBuilder, FutureReader};
pub use stack::{opt_curve, OptCurve};

use tiercache_core::{GeometryError, LineGeometry, LineKey, Op, Request};

/// "Never again": the next use of a line not accessed later.
pub const NEVER: u64 = u64::MAX;

/// One access to one line: which line, and whether it writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineAccess {
    /// The line.
    pub key: LineKey,
    /// A write (else a read).
    pub write: bool,
}

/// Why an optimum could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum OptimalError {
    /// The spill files could not be written or read back.
    #[error("spill file: {0}")]
    Io(#[from] std::io::Error),
    /// A request cannot be addressed at the line size.
    #[error("request {index}: {source}")]
    Geometry {
        /// Index of the request in input order.
        index: u64,
        /// What is wrong with it.
        source: GeometryError,
    },
    /// More distinct lines than the index numbers (2^31).
    #[error("more than {0} distinct lines")]
    Footprint(u64),
    /// An exact method (the exhaustive search, the flow bound) was asked for a problem too
    /// large for it.
    #[error("limited to {limit} {what}, got {got}")]
    TooLarge {
        /// What is limited (accesses, distinct lines, gaps, work).
        what: &'static str,
        /// The limit.
        limit: usize,
        /// What was asked.
        got: usize,
    },
}

/// The line accesses of `req` at geometry `geo`, as the simulator splits it, appended to `out`;
/// `index` names the request in the error when it cannot be addressed.
pub fn line_accesses(
    req: &Request,
    geo: &LineGeometry,
    index: u64,
    out: &mut Vec<LineAccess>,
) -> Result<(), OptimalError> {
    geo.check_request(req.volume, req.offset, req.len)
        .map_err(|source| OptimalError::Geometry { index, source })?;
    let write = match req.op {
        Op::Read => false,
        Op::Write => true,
        _ => return Ok(()),
    };
    if req.len == 0 {
        return Ok(());
    }
    let first = geo.line_of(req.offset);
    let last = geo.line_of(req.offset + req.len - 1);
    out.extend((first..=last).map(|i| LineAccess {
        key: LineKey::new(req.volume, i),
        write,
    }));
    Ok(())
}
