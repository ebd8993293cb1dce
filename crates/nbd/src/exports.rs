//! Several named exports behind one server: a client picks one by name in the handshake
//! (`NBD_OPT_GO`, `NBD_OPT_INFO`, `NBD_OPT_EXPORT_NAME`) and `NBD_OPT_LIST` lists them.

use crate::server::{accept_loop, ServerConfig, ServerStats, Shutdown};
use std::io;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use tiercache_blockdev::BlockDevice;

/// One named export.
#[derive(Clone)]
pub struct Export {
    /// The name clients ask for.
    pub name: String,
    /// What it serves.
    pub device: Arc<dyn BlockDevice>,
}

/// Why a set of exports is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExportsError {
    /// No export at all.
    #[error("no exports: at least one is needed")]
    Empty,
    /// An export without a name (clients asking for the default export get the only one of
    /// a single-export server; several need names).
    #[error("export {index}: an empty name (several exports are told apart by name)")]
    EmptyName {
        /// Position in the list.
        index: usize,
    },
    /// Two exports with one name.
    #[error("export {index}: name {name:?} is used twice")]
    Duplicate {
        /// Position of the second one.
        index: usize,
        /// The name.
        name: String,
    },
    /// A name longer than the protocol's 4096-byte limit.
    #[error("export {index}: name is {len} bytes, at most 4096")]
    TooLong {
        /// Position in the list.
        index: usize,
        /// Its length.
        len: usize,
    },
}

/// The exports of one server.
#[derive(Clone)]
pub struct Exports {
    list: Vec<Export>,
    /// A single-export server answers any name with its export (how `serve_tcp` and
    /// `serve_unix` have always behaved).
    any_name: bool,
}

impl Exports {
    /// One export answering every name (listed as `name`).
    pub fn single(name: impl Into<String>, device: Arc<dyn BlockDevice>) -> Self {
        Self {
            list: vec![Export {
                name: name.into(),
                device,
            }],
            any_name: true,
        }
    }

    /// Several exports, each reached by its own name only: names must be non-empty, unique
    /// and at most 4096 bytes.
    pub fn named(list: Vec<Export>) -> Result<Self, ExportsError> {
        if list.is_empty() {
            return Err(ExportsError::Empty);
        }
        for (index, e) in list.iter().enumerate() {
            if e.name.is_empty() {
                return Err(ExportsError::EmptyName { index });
            }
            if e.name.len() > 4096 {
                return Err(ExportsError::TooLong {
                    index,
                    len: e.name.len(),
                });
            }
            if list[..index].iter().any(|o| o.name == e.name) {
                return Err(ExportsError::Duplicate {
                    index,
                    name: e.name.clone(),
                });
            }
        }
        Ok(Self {
            list,
            any_name: false,
        })
    }

    /// The export a client asking for `name` gets, if any.
    pub fn find(&self, name: &[u8]) -> Option<&Export> {
        if self.any_name {
            return self.list.first();
        }
        self.list.iter().find(|e| e.name.as_bytes() == name)
    }

    /// The exports, in the order given.
    pub fn list(&self) -> &[Export] {
        &self.list
    }
}

/// As [`crate::serve_unix`], serving several exports.
pub fn serve_unix_exports(
    listener: UnixListener,
    exports: Arc<Exports>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let accept = |l: &UnixListener| {
        let (c, _) = l.accept()?;
        c.set_nonblocking(false)?;
        Ok(c)
    };
    accept_loop(accept, &listener, exports, cfg, stats, shutdown)
}

/// As [`crate::serve_tcp`], serving several exports.
pub fn serve_tcp_exports(
    listener: TcpListener,
    exports: Arc<Exports>,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    shutdown: Shutdown,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let accept = |l: &TcpListener| {
        let (c, _) = l.accept()?;
        c.set_nonblocking(false)?;
        c.set_nodelay(true)?;
        Ok(c)
    };
    accept_loop(accept, &listener, exports, cfg, stats, shutdown)
}
