//! The control socket of a served cache: an operator's actions on the running server, as
//! Open CAS's `casadm` offers them (`tiercache status`, `stats`, `set`, `flush --live`,
//! `detach`), over a Unix socket only its owner can open (`serve.control_socket`; by default
//! the NBD socket's path with `.ctl` appended, or for a TCP listener `tiercache-ADDR.ctl` in
//! the temporary directory; docs/design.md §10).
//!
//! The protocol is JSON lines: the client sends one [`Request`] line; the server answers with
//! zero or more [`Reply::Progress`] lines (a flush or a detach draining dirty lines) and one
//! final [`Reply::Ok`] (the answer) or [`Reply::Error`] (why not), then closes. One request
//! per connection.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use tiercache_server::control::{Client, Request};
//! let status = Client::new("/tmp/tiercache.sock.ctl").call(&Request::Status, |_| {})?;
//! println!("{status}");
//! # Ok(())
//! # }
//! ```

mod listener;
mod settings;
mod status;

pub use listener::{ControlServer, ControlSource, ExportInfo, Lifecycle};
pub use status::{config_name, CacheStatus, ExportStatus, PolicyStatus, Status};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// One operator action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// What the server serves and how: a [`Status`].
    Status,
    /// Every counter: the engine's, per export, and the partitions.
    Stats,
    /// Changes policies live, each setting `KEY=VALUE` as `--set` spells it: `cache.*` keys
    /// of the live-settable policies (`write_policy`, `cleaning`, `promotion`, `balancing`),
    /// `exports.NAME.write_policy`, `exports.NAME.partition`, and `degraded=on|off` (take the
    /// cache device out of service, or return it). All or nothing per key kind:
    /// an invalid setting is refused, naming it, before any cache-wide policy changes.
    Set {
        /// The settings.
        settings: Vec<String>,
    },
    /// Writes every dirty line back while serving, reporting progress; with `write_through`
    /// the cache first turns write-through, so no new line becomes dirty.
    Flush {
        /// Turn write-through first.
        #[serde(default)]
        write_through: bool,
    },
    /// Detaches the cache: turns write-through, writes every dirty line back while serving,
    /// then stops the server cleanly with nothing dirty (the backends alone are complete).
    /// The final reply comes once the server has stopped.
    Detach,
}

/// One line of the server's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    /// A drain in progress.
    Progress(Progress),
    /// The request's answer (its shape depends on the request).
    Ok(serde_json::Value),
    /// Why the request was refused or failed.
    Error(String),
}

/// How far a drain of dirty lines is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Dirty lines left.
    pub dirty_lines: u64,
    /// Lines written back since the drain started.
    pub flushed_lines: u64,
}

/// The control socket path of a server whose NBD socket is `socket`, unless configured.
pub fn default_path(socket: &Path) -> PathBuf {
    let mut s = socket.as_os_str().to_owned();
    s.push(".ctl");
    PathBuf::from(s)
}

/// The control socket path of a server listening on TCP at `addr` (`127.0.0.1:10809`), unless
/// configured: in the temporary directory, named after the address, so that servers on
/// different ports have different sockets.
pub fn default_tcp_path(addr: &str) -> PathBuf {
    let name: String = addr
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    std::env::temp_dir().join(format!("tiercache-{name}.ctl"))
}

/// A client of one server's control socket.
pub struct Client {
    path: PathBuf,
}

impl Client {
    /// A client of the control socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The socket it talks to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends `req`; calls `progress` on each progress line; returns the final answer or the
    /// server's refusal as an error.
    pub fn call(
        &self,
        req: &Request,
        mut progress: impl FnMut(Progress),
    ) -> Result<serde_json::Value> {
        let mut stream = match UnixStream::connect(&self.path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                use std::os::unix::fs::MetadataExt;
                let owner = std::fs::metadata(&self.path)
                    .map(|m| format!("uid {}", m.uid()))
                    .unwrap_or_else(|_| "its owner".into());
                bail!(
                    "control socket {}: permission denied: only the server's user ({owner}) or root \
                     may control it; run the command as that user",
                    self.path.display()
                );
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "control socket {}: no server answers there (is `tiercache serve` running with this config? \
                         `--control PATH` names another socket)",
                        self.path.display()
                    )
                })
            }
        };
        let mut line = serde_json::to_string(req)?;
        line.push('\n');
        // A server refusing this peer answers before reading and closes: the write may then
        // fail, but its refusal is still there to read, and says more than a broken pipe.
        let written = stream.write_all(line.as_bytes());
        let mut reader = BufReader::new(stream);
        let mut text = String::new();
        loop {
            text.clear();
            let n = match reader.read_line(&mut text) {
                Ok(n) => n,
                Err(e) => return Err(written.err().unwrap_or(e).into()),
            };
            if n == 0 {
                written?;
                bail!(
                    "control socket {}: the server closed the connection without an answer",
                    self.path.display()
                );
            }
            let reply: Reply = serde_json::from_str(text.trim_end()).with_context(|| {
                format!(
                    "control socket {}: an answer that is not the protocol's: {text:?}",
                    self.path.display()
                )
            })?;
            match reply {
                Reply::Progress(p) => progress(p),
                Reply::Ok(v) => return Ok(v),
                Reply::Error(e) => bail!("{e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_are_one_json_line_each_in_kebab_case() {
        let r = Request::Flush {
            write_through: true,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"op":"flush","write_through":true}"#);
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op":"flush"}"#).unwrap(),
            Request::Flush {
                write_through: false
            }
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"format"}"#).is_err());
        let p = Reply::Progress(Progress {
            dirty_lines: 3,
            flushed_lines: 1,
        });
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"progress":{"dirty_lines":3,"flushed_lines":1}}"#
        );
        assert_eq!(
            default_path(Path::new("/tmp/a.sock")),
            PathBuf::from("/tmp/a.sock.ctl")
        );
        // TCP servers on different ports (and addresses) get different sockets, named so a
        // person can tell which is which.
        let a = default_tcp_path("127.0.0.1:10809");
        assert_eq!(
            a,
            std::env::temp_dir().join("tiercache-127.0.0.1-10809.ctl")
        );
        assert_ne!(a, default_tcp_path("127.0.0.1:10810"));
        assert_ne!(
            default_tcp_path("[::1]:10809"),
            default_tcp_path("127.0.0.1:10809")
        );
    }
}
