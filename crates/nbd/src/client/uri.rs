//! NBD URIs (`nbd://`, `nbd+unix://`, `nbds://`, `nbds+unix://`, as libnbd spells them): the
//! target a client connects to, the export and the TLS settings it asks for.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Default NBD TCP port.
pub const DEFAULT_PORT: u16 = 10809;

/// Where an NBD server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `host:port` over TCP.
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// A Unix socket.
    Unix(PathBuf),
}

/// An NBD URI (the subset of the NBD URI spec a backend needs): `nbd://host[:port]/[export]`
/// or `nbd+unix:///[export]?socket=PATH`, and their TLS forms `nbds://` and `nbds+unix://`
/// with `tls-certificates=DIR` (libnbd's parameter: `ca-cert.pem`, and `client-cert.pem`
/// with `client-key.pem` for a client certificate) and optionally `tls-hostname=NAME`, or
/// with a pre-shared key: `tls-psk-file=FILE` and the identity as the URI's user
/// (`nbds://alice@host/export`) or `tls-username=NAME`, as libnbd and qemu spell them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    /// Server address.
    pub target: Target,
    /// Export name (empty: the server's default export).
    pub export: String,
    /// TLS, required (`nbds`): no data goes to a server that does not take STARTTLS.
    pub tls: Option<UriTls>,
}

/// The TLS settings of an `nbds://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTls {
    /// Certificates or a pre-shared key.
    pub credentials: UriCredentials,
    /// The name the server's certificate must carry (default: the URI's host; `localhost`
    /// over a Unix socket).
    pub hostname: Option<String>,
}

/// How an `nbds://` client proves who it is and checks the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriCredentials {
    /// Directory of PEM files, laid out as libnbd's and qemu's (`ca-cert.pem`,
    /// `client-cert.pem`, `client-key.pem`): `tls-certificates=DIR`.
    Certificates(PathBuf),
    /// A pre-shared key: `tls-psk-file=FILE` (`identity:hexkey` lines, as psktool writes),
    /// the key of `username` (the URI's user or `tls-username=`).
    Psk {
        /// The PSK file.
        file: PathBuf,
        /// The identity presented.
        username: String,
    },
}

impl NbdUri {
    /// The client TLS credentials this URI asks for, loaded (`None`: plain `nbd://`).
    pub fn client_tls(&self) -> Result<Option<crate::tls::ClientTls>, crate::tls::TlsError> {
        let Some(t) = &self.tls else {
            return Ok(None);
        };
        let name = match (&t.hostname, &self.target) {
            (Some(h), _) => h.as_str(),
            (None, Target::Tcp { host, .. }) => host.as_str(),
            (None, Target::Unix(_)) => "localhost",
        };
        match &t.credentials {
            UriCredentials::Certificates(dir) => {
                crate::tls::ClientTls::from_dir(dir, name).map(Some)
            }
            UriCredentials::Psk { file, username } => {
                crate::tls::ClientTls::with_psk_file(file, username).map(Some)
            }
        }
    }
}

/// Why a string is not an NBD URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NBD URI `{uri}`: {reason}")]
pub struct UriError {
    /// The string given.
    pub uri: String,
    /// What is wrong with it.
    pub reason: String,
}

impl NbdUri {
    /// Whether `s` looks like an NBD URI (as opposed to a file path).
    pub fn is_uri(s: &str) -> bool {
        s.starts_with("nbd://") || s.starts_with("nbd+unix://") || s.starts_with("nbds")
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl FromStr for NbdUri {
    type Err = UriError;
    fn from_str(s: &str) -> Result<Self, UriError> {
        let err = |reason: &str| UriError {
            uri: s.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            err("expected nbd://host[:port]/export or nbd+unix:///export?socket=PATH")
        })?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let export =
            percent_decode(path).ok_or_else(|| err("bad percent-encoding in the export name"))?;
        // The user part names the PSK identity (libnbd's `nbds://alice@host/`).
        let (user, authority) = match authority.rsplit_once('@') {
            Some((u, a)) => (
                Some(percent_decode(u).ok_or_else(|| err("bad percent-encoding in the user"))?),
                a,
            ),
            None => (None, authority),
        };
        let mut socket = None;
        let (mut certificates, mut hostname) = (None, None);
        let (mut psk_file, mut username) = (None, None);
        for kv in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|kv| !kv.is_empty())
        {
            match kv.split_once('=') {
                Some(("socket", v)) => {
                    socket = Some(
                        percent_decode(v).ok_or_else(|| err("bad percent-encoding in socket="))?,
                    )
                }
                Some(("tls-certificates", v)) => {
                    certificates = Some(PathBuf::from(
                        percent_decode(v)
                            .ok_or_else(|| err("bad percent-encoding in tls-certificates="))?,
                    ))
                }
                Some(("tls-hostname", v)) => {
                    hostname = Some(
                        percent_decode(v).ok_or_else(|| err("bad percent-encoding in tls-hostname="))?,
                    )
                }
                Some(("tls-psk-file", v)) => {
                    psk_file = Some(PathBuf::from(
                        percent_decode(v)
                            .ok_or_else(|| err("bad percent-encoding in tls-psk-file="))?,
                    ))
                }
                Some(("tls-username", v)) => {
                    username = Some(
                        percent_decode(v).ok_or_else(|| err("bad percent-encoding in tls-username="))?,
                    )
                }
                Some((k, _)) if k.starts_with("tls") => {
                    return Err(err(&format!(
                        "unsupported TLS parameter `{k}` (tiercache takes tls-certificates=, tls-hostname=, tls-psk-file= and tls-username=)"
                    )))
                }
                _ => return Err(err(&format!("unknown query parameter `{kv}`"))),
            }
        }
        let secure = matches!(scheme, "nbds" | "nbds+unix");
        if !secure
            && (certificates.is_some()
                || hostname.is_some()
                || psk_file.is_some()
                || username.is_some())
        {
            return Err(err("tls-* parameters belong to nbds:// and nbds+unix://"));
        }
        if user.is_some() && username.is_some() {
            return Err(err(
                "the PSK identity is given twice (the URI's user and tls-username=): give one",
            ));
        }
        if !secure && user.is_some() {
            return Err(err(
                "a user name (PSK identity) belongs to nbds:// and nbds+unix://",
            ));
        }
        let username = username.or(user);
        let credentials = match (certificates, psk_file) {
            _ if !secure => None,
            (Some(_), Some(_)) => {
                return Err(err(
                    "tls-certificates= and tls-psk-file= are two ways to authenticate: give one",
                ))
            }
            (Some(dir), None) => {
                if username.is_some() {
                    return Err(err(
                        "a user name (PSK identity) needs tls-psk-file=FILE, not tls-certificates=",
                    ));
                }
                Some(UriCredentials::Certificates(dir))
            }
            (None, Some(file)) => {
                if hostname.is_some() {
                    return Err(err(
                        "tls-hostname= names the server's certificate; with tls-psk-file= the key authenticates the server",
                    ));
                }
                let username = username.ok_or_else(|| {
                    err("tls-psk-file= needs the identity whose key to use: nbds://NAME@host/export or tls-username=NAME")
                })?;
                Some(UriCredentials::Psk { file, username })
            }
            (None, None) => {
                return Err(err(
                    "nbds:// needs tls-certificates=DIR (a directory holding ca-cert.pem, and client-cert.pem with client-key.pem for a client certificate) or tls-psk-file=FILE with a user name (nbds://NAME@host/export)",
                ))
            }
        };
        let tls = credentials.map(|credentials| UriTls {
            credentials,
            hostname,
        });
        let target = match scheme {
            "nbd" | "nbds" => {
                if socket.is_some() {
                    return Err(err("socket= belongs to nbd+unix://"));
                }
                let (host, port) = match authority.rsplit_once(':') {
                    Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
                        h,
                        p.parse::<u16>()
                            .map_err(|_| err(&format!("bad port `{p}`")))?,
                    ),
                    _ => (authority, DEFAULT_PORT),
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                if host.is_empty() {
                    return Err(err("missing host"));
                }
                Target::Tcp {
                    host: host.to_string(),
                    port,
                }
            }
            "nbd+unix" | "nbds+unix" => {
                if !authority.is_empty() {
                    return Err(err(
                        "nbd+unix:// takes no host (write nbd+unix:///export?socket=PATH)",
                    ));
                }
                Target::Unix(PathBuf::from(
                    socket.ok_or_else(|| err("nbd+unix:// needs ?socket=PATH"))?,
                ))
            }
            other => return Err(err(&format!("unknown scheme `{other}`"))),
        };
        Ok(NbdUri {
            target,
            export,
            tls,
        })
    }
}

impl fmt::Display for NbdUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.tls.is_some() { "s" } else { "" };
        match &self.target {
            Target::Tcp { host, port } if host.contains(':') => {
                write!(f, "nbd{s}://[{host}]:{port}/{}", self.export)?
            }
            Target::Tcp { host, port } => write!(f, "nbd{s}://{host}:{port}/{}", self.export)?,
            Target::Unix(p) => write!(f, "nbd{s}+unix:///{}?socket={}", self.export, p.display())?,
        }
        if let Some(t) = &self.tls {
            let sep = if matches!(self.target, Target::Unix(_)) {
                '&'
            } else {
                '?'
            };
            match &t.credentials {
                UriCredentials::Certificates(dir) => {
                    write!(f, "{sep}tls-certificates={}", dir.display())?
                }
                UriCredentials::Psk { file, username } => write!(
                    f,
                    "{sep}tls-psk-file={}&tls-username={username}",
                    file.display()
                )?,
            }
            if let Some(h) = &t.hostname {
                write!(f, "&tls-hostname={h}")?;
            }
        }
        Ok(())
    }
}
