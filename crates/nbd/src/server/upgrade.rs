//! The stream a server connection runs over: the socket, until the client asks for TLS
//! (`NBD_OPT_STARTTLS`), then the TLS session over it.

use super::Stream;
use crate::tls::TlsStream;
use std::io::{self, Read, Write};
use std::os::fd::RawFd;

/// A connection's socket, in the clear or under TLS.
pub(super) enum Transport<S: Stream> {
    /// Before (or without) STARTTLS.
    Plain(S),
    /// After STARTTLS and a completed TLS handshake.
    Tls(TlsStream<S>),
}

impl<S: Stream> Read for Transport<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl<S: Stream> Write for Transport<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

impl<S: Stream> Stream for Transport<S> {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Plain(s) => Self::Plain(s.try_clone()?),
            Self::Tls(s) => Self::Tls(s.try_clone()?),
        })
    }
    fn shutdown(&self) {
        match self {
            Self::Plain(s) => s.shutdown(),
            Self::Tls(s) => s.shutdown(),
        }
    }
    fn shutdown_read(&self) {
        match self {
            Self::Plain(s) => s.shutdown_read(),
            Self::Tls(s) => s.shutdown_read(),
        }
    }
    fn raw_fd(&self) -> Option<RawFd> {
        match self {
            Self::Plain(s) => s.raw_fd(),
            Self::Tls(s) => s.raw_fd(),
        }
    }
    fn buffered(&self) -> bool {
        match self {
            Self::Plain(s) => s.buffered(),
            Self::Tls(s) => s.buffered(),
        }
    }
}
