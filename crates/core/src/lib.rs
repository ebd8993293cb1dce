//! Shared vocabulary of tiercache (docs/design.md §2–§3).
//!
//! Every other crate speaks in these types: a [`Request`] arrives from a workload, a trace or an
//! NBD client; the policy core turns it into a [`Plan`] of [`DevOp`]s; an executor (simulator or
//! engine) runs the plan. Units are explicit: byte quantities are `u64` bytes, times are
//! [`Nanos`].

pub mod geometry;
pub mod hint;
pub mod lookup;
pub mod plan;
pub mod request;
pub mod source;
pub mod splitmix;
pub mod units;

pub use geometry::{GeometryError, LineGeometry, LineKey, MAX_VOLUMES};
pub use lookup::Lookup;
pub use plan::{service_ewma, DevOp, Device, IoKind, OpCause, Origin, Plan, Stage};
pub use request::{Nanos, Op, Request, VolumeId};
pub use source::{Arrival, RequestSource, SourceError};
