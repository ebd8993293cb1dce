//! An NBD server (fixed newstyle handshake, simple replies) over any [`BlockDevice`].
//!
//! Each connection has a reader (this crate parses and validates every request), a pool of
//! workers that run requests concurrently, and one writer: replies go out as requests
//! complete, in any order, as the protocol allows. Durability follows the protocol: a FLUSH
//! is answered after `BlockDevice::flush`, which makes every completed write durable; a FUA
//! write is durable before its reply. Malformed traffic is answered with an error or ends only
//! its own connection, counted in [`ServerStats`].
#![warn(missing_docs)]

mod device;
mod server;

pub use device::{BlockDevice, FileDevice, MemDevice};
pub use server::{serve_connection, serve_tcp, serve_unix, ServerConfig, ServerStats, Shutdown};
