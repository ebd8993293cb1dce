//! NBD, both sides: a server (fixed newstyle handshake, STARTTLS, structured replies to READs when asked for) over any
//! [`BlockDevice`], and a client ([`Connection`], pooled with retries and reconnection as
//! [`Remote`]) so a remote export can be a cache's backend.
//!
//! Each connection has a reader (this crate parses and validates every request), a pool of
//! workers that run requests concurrently, and one writer: replies go out as requests
//! complete, in any order, as the protocol allows. Durability follows the protocol: a FLUSH
//! is answered after `BlockDevice::flush`, which makes every completed write durable; a FUA
//! write is durable before its reply. Malformed traffic is answered with an error or ends only
//! its own connection, counted in [`ServerStats`].
#![warn(missing_docs)]

#[cfg(doc)]
use tiercache_blockdev::BlockDevice;

pub mod client;
pub mod demote;
mod exports;
pub mod fuzzing;
mod proto;
mod remote;
mod server;
pub mod tls;

pub use client::{ClientError, Connection, ExportInfo, NbdUri, Sent, Target};
pub use demote::{DemoteConfig, DemoteExport, DemoteTracker};
pub use exports::{serve_tcp_exports, serve_unix_exports, Export, Exports, ExportsError};
pub use remote::{Remote, RemoteConfig};
pub use server::{
    serve_connection, serve_connection_to, serve_tcp, serve_unix, ServerConfig, ServerStats,
    Shutdown, Stream, MAX_BUSY_POLL,
};
pub use tls::{ClientRule, ClientTls, ServerTls, ServerTlsFiles, TlsError, TlsMode};
