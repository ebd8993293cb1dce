//! The serve lifecycle of tiercache as a library, beside the engine and the NBD server it
//! puts together: the `[serve]` config ([`config`]), a [`Server`] builder whose
//! [`ServerHandle`] stops cleanly ([`server`]), several exports ([`exports`]), the stats file,
//! the Prometheus metrics listener ([`metrics`]), the operator's control socket
//! ([`control`]), NBD over TLS ([`tls`]), socket activation ([`activation`]) and detaching a
//! stopped cache ([`flush`]).
//! The `tiercache serve` and `flush` commands are argument parsing around these.
//!
//! A crate of its own rather than a module of the engine: the metrics listener brings an HTTP
//! server, and the config brings the config language, neither of which the engine needs.

#![warn(missing_docs)]

pub mod activation;
pub mod config;
pub mod control;
mod early;
pub mod exports;
pub mod flush;
pub mod metrics;
pub mod server;
mod stats;
pub mod tls;

pub use config::{ServeConfig, ServeSetup};
pub use server::{ServeReport, Server, ServerBuilder, ServerHandle};
