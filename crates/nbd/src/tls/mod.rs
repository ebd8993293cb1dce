//! NBD over TLS (the protocol's `NBD_OPT_STARTTLS`, docs/nbd-tls.md): the server's
//! credentials and mode ([`ServerTls`], [`TlsMode`] as nbdkit's `--tls` spells it), the
//! client's ([`ClientTls`], from an `nbds://` URI), the per-export authorisation of client
//! identities ([`ClientRule`]) and the stream that carries a connection once the upgrade is
//! made ([`TlsStream`]).
//!
//! Credentials are X.509 certificates (PEM files, the layout qemu, nbdkit and libnbd read from
//! a `tls-certificates` directory: `ca-cert.pem`, `server-cert.pem`, `server-key.pem`,
//! `client-cert.pem`, `client-key.pem`), run on rustls, or pre-shared keys (GnuTLS's
//! `psktool` files, [`PskKeys`]), run on OpenSSL because rustls implements no external PSKs
//! (rustls/rustls#174).

mod psk;
mod session;
mod stream;

pub use psk::{PskKeys, MAX_IDENTITY_BYTES, MAX_KEY_BYTES};
pub(crate) use session::Session;
pub use stream::TlsStream;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether the server offers TLS, and whether it insists on it (nbdkit's `--tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is refused with `NBD_REP_ERR_POLICY` (the protocol's NOTLS).
    #[default]
    Off,
    /// TLS at the client's choice: `NBD_OPT_STARTTLS` is taken, plaintext clients are served
    /// too (the protocol's SELECTIVETLS with no TLS-only export).
    On,
    /// TLS or nothing: before the upgrade every option but `NBD_OPT_STARTTLS` and
    /// `NBD_OPT_ABORT` is refused with `NBD_REP_ERR_TLS_REQD` and `NBD_OPT_EXPORT_NAME` closes
    /// the connection (the protocol's FORCEDTLS: no option is answered in the clear, so a
    /// man in the middle cannot downgrade the session).
    Require,
}

/// Why TLS credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{what} {}: {reason}", path.display())]
    File {
        /// What the file is for (`certificate`, `key`, `CA bundle`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the credentials (a key that does not match its certificate, a
    /// malformed CA).
    #[error("TLS credentials: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built from the CA bundle.
    #[error("TLS client verification: {0}")]
    Verifier(String),
    /// The name the server's certificate is checked against is not a DNS name or address.
    #[error("TLS server name {0:?} is neither a DNS name nor an IP address")]
    ServerName(String),
    /// A line of a PSK file is not `identity:hexkey`.
    #[error("PSK file {} line {line}: {reason}", path.display())]
    PskFile {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A client's identity has no key in its PSK file.
    #[error("PSK file {} has no key for identity {identity:?}", path.display())]
    PskIdentity {
        /// The file.
        path: PathBuf,
        /// The identity asked for.
        identity: String,
    },
    /// A TLS session could not be started.
    #[error("TLS session: {0}")]
    Session(String),
    /// OpenSSL (pre-shared keys) refused the settings.
    #[error("TLS (OpenSSL): {0}")]
    OpenSsl(#[from] openssl::error::ErrorStack),
}

/// rustls on ring: it builds with a C compiler alone (aws-lc-rs, rustls's default, needs a
/// much larger native build); what ring lacks is the post-quantum key exchange.
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(what: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        what,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Every certificate of a PEM file (at least one).
pub fn load_certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no PEM certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error("key", path, e))
}

fn root_store(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certificates("CA bundle", path)? {
        roots.add(c).map_err(|e| file_error("CA bundle", path, e))?;
    }
    Ok(roots)
}

/// An export list one client identity may use (`"*"`: every export).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRule {
    /// The client's PSK identity (`alice`), or its certificate subject, as its full
    /// distinguished name in RFC 4514 order (`CN=alice,O=Example`, as GnuTLS and qemu's
    /// `tls-authz` print it) or as the common name alone (`alice`).
    pub identity: String,
    /// Exports it may use, by name.
    pub exports: Vec<String>,
}

impl ClientRule {
    fn matches(&self, id: &PeerIdentity) -> bool {
        self.identity == id.subject || id.common_name.as_deref() == Some(self.identity.as_str())
    }
    fn allows(&self, export: &str) -> bool {
        self.exports.iter().any(|e| e == "*" || e == export)
    }
}

/// Who is on the other end of a TLS session: its certificate's subject, or its PSK identity
/// (as `subject`, without a common name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerIdentity {
    /// The subject's distinguished name in RFC 4514 order (`CN=alice,O=Example`).
    pub subject: String,
    /// The subject's common name, if it has one.
    pub common_name: Option<String>,
}

impl PeerIdentity {
    /// The identity a DER certificate names; `None` if it cannot be parsed (rustls verified
    /// it, so only a certificate without a verifier could get here unparsed).
    pub fn of_certificate(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let registry = x509_parser::objects::oid_registry();
        let mut parts = Vec::new();
        // RFC 4514 writes the last RDN first.
        for rdn in cert.subject().iter().collect::<Vec<_>>().into_iter().rev() {
            let attrs: Vec<String> = rdn
                .iter()
                .map(|a| {
                    let oid = a.attr_type();
                    let key = x509_parser::objects::oid2abbrev(oid, registry)
                        .map(str::to_string)
                        .unwrap_or_else(|_| oid.to_id_string());
                    let value = a.as_str().map(str::to_string).unwrap_or_else(|_| {
                        let hex: String = a.as_slice().iter().map(|b| format!("{b:02x}")).collect();
                        format!("#{hex}")
                    });
                    format!("{key}={}", escape_rfc4514(&value))
                })
                .collect();
            parts.push(attrs.join("+"));
        }
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string);
        Some(Self {
            subject: parts.join(","),
            common_name,
        })
    }
}

/// Escapes an attribute value as RFC 4514 asks (`,+"\<>;` and leading `#`/space, trailing
/// space).
fn escape_rfc4514(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge = (i == 0 && (c == '#' || c == ' ')) || (i + 1 == v.chars().count() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Where the server's credentials are (PEM files).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerTlsFiles {
    /// The server's certificate chain.
    pub certificate: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// CAs client certificates are verified against; none: clients are not asked for one.
    pub ca: Option<PathBuf>,
    /// Refuse the TLS handshake of a client without a certificate the CA signed (nbdkit's
    /// `--tls-verify-peer`); needs `ca`.
    pub verify_peer: bool,
}

/// A server's TLS: its mode, its credentials and who may use which export.
#[derive(Clone)]
pub struct ServerTls {
    /// Offered, required (or off).
    pub mode: TlsMode,
    config: ServerBackend,
    /// Who may use which export; `None`: every client may use every export.
    rules: Option<Vec<ClientRule>>,
}

/// Which library runs a server's sessions.
#[derive(Clone)]
enum ServerBackend {
    /// X.509 alone.
    Rustls(Arc<rustls::ServerConfig>),
    /// Pre-shared keys (and maybe a certificate too).
    OpenSsl(openssl::ssl::SslContext),
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Loads the credentials in `files`; `rules` (if any) authorise client identities per
    /// export, and need verified client certificates (`files.verify_peer`).
    pub fn from_files(
        mode: TlsMode,
        files: &ServerTlsFiles,
        rules: Option<Vec<ClientRule>>,
    ) -> Result<Self, TlsError> {
        let certs = load_certificates("certificate", &files.certificate)?;
        let key = load_key(&files.key)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let builder = match &files.ca {
            Some(ca) => {
                let roots = Arc::new(root_store(ca)?);
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if files.verify_peer {
                    verifier
                } else {
                    verifier.allow_unauthenticated()
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| TlsError::Verifier(e.to_string()))?,
                )
            }
            None if files.verify_peer => {
                return Err(TlsError::Verifier(
                    "verify_peer needs a CA bundle to verify client certificates against".into(),
                ))
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(certs, key)?;
        Ok(Self::with_config(mode, Arc::new(config), rules))
    }

    /// A server TLS over a rustls config made elsewhere.
    pub fn with_config(
        mode: TlsMode,
        config: Arc<rustls::ServerConfig>,
        rules: Option<Vec<ClientRule>>,
    ) -> Self {
        Self {
            mode,
            config: ServerBackend::Rustls(config),
            rules,
        }
    }

    /// A server taking the pre-shared keys of `keys` (a client's PSK identity is its
    /// identity for `rules`), and with `certificates` an X.509 certificate too, for clients
    /// that offer no key (their certificate subject their identity, as with
    /// [`from_files`](Self::from_files)). Sessions run on OpenSSL.
    pub fn with_psk(
        mode: TlsMode,
        keys: PskKeys,
        certificates: Option<&ServerTlsFiles>,
        rules: Option<Vec<ClientRule>>,
    ) -> Result<Self, TlsError> {
        Ok(Self {
            mode,
            config: ServerBackend::OpenSsl(psk::server_context(keys, certificates)?),
            rules,
        })
    }

    pub(crate) fn session(&self) -> Result<Session, TlsError> {
        match &self.config {
            ServerBackend::Rustls(c) => Ok(Session::Rustls(
                rustls::ServerConnection::new(c.clone())?.into(),
            )),
            ServerBackend::OpenSsl(ctx) => {
                let ssl = openssl::ssl::Ssl::new(ctx)?;
                session::OpenSslSession::new(ssl, true)
                    .map(|s| Session::OpenSsl(Box::new(s)))
                    .map_err(TlsError::Session)
            }
        }
    }

    /// Whether a client (its identity, `None` without TLS or without a certificate) may use
    /// `export`.
    pub fn allows(&self, identity: Option<&PeerIdentity>, export: &str) -> bool {
        match (&self.rules, identity) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(rules), Some(id)) => rules.iter().any(|r| r.matches(id) && r.allows(export)),
        }
    }
}

/// A client's TLS: the CAs the server's certificate is checked against, the name it must
/// carry, and the client's own certificate if it has one; or a pre-shared key.
#[derive(Clone)]
pub struct ClientTls {
    config: ClientBackend,
}

#[derive(Clone)]
enum ClientBackend {
    Rustls {
        config: Arc<rustls::ClientConfig>,
        server_name: ServerName<'static>,
    },
    Psk {
        context: openssl::ssl::SslContext,
        identity: String,
    },
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.config {
            ClientBackend::Rustls { server_name, .. } => f
                .debug_struct("ClientTls")
                .field("server_name", server_name)
                .finish_non_exhaustive(),
            ClientBackend::Psk { identity, .. } => f
                .debug_struct("ClientTls")
                .field("psk_identity", identity)
                .finish_non_exhaustive(),
        }
    }
}

impl ClientTls {
    /// Credentials from a directory laid out as libnbd's `tls-certificates` (and qemu's
    /// `tls-creds-x509 dir=`): `ca-cert.pem`, and `client-cert.pem` with `client-key.pem` if
    /// the client has a certificate. The server's certificate must name `server_name`.
    pub fn from_dir(dir: &Path, server_name: &str) -> Result<Self, TlsError> {
        let ca = dir.join("ca-cert.pem");
        let roots = root_store(&ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let (cert, key) = (dir.join("client-cert.pem"), dir.join("client-key.pem"));
        let config = if cert.exists() {
            builder
                .with_client_auth_cert(load_certificates("certificate", &cert)?, load_key(&key)?)?
        } else {
            builder.with_no_client_auth()
        };
        Self::with_config(Arc::new(config), server_name)
    }

    /// A client TLS over a rustls config made elsewhere.
    pub fn with_config(
        config: Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> Result<Self, TlsError> {
        let server_name = ServerName::try_from(server_name.to_string())
            .map_err(|_| TlsError::ServerName(server_name.to_string()))?;
        Ok(Self {
            config: ClientBackend::Rustls {
                config,
                server_name,
            },
        })
    }

    /// A client presenting `identity` with its key from the PSK file `path` (libnbd's
    /// `tls-psk-file` and `tls-username`, qemu's `tls-creds-psk`). The server must hold the
    /// same key: a server answering with a certificate instead is refused. Sessions run on
    /// OpenSSL.
    pub fn with_psk_file(path: &Path, identity: &str) -> Result<Self, TlsError> {
        let keys = PskKeys::load(path)?;
        Ok(Self {
            config: ClientBackend::Psk {
                context: psk::client_context(&keys, identity)?,
                identity: identity.to_string(),
            },
        })
    }

    pub(crate) fn session(&self) -> Result<Session, TlsError> {
        match &self.config {
            ClientBackend::Rustls {
                config,
                server_name,
            } => Ok(Session::Rustls(
                rustls::ClientConnection::new(config.clone(), server_name.clone())?.into(),
            )),
            ClientBackend::Psk { context, .. } => {
                let ssl = openssl::ssl::Ssl::new(context)?;
                session::OpenSslSession::new(ssl, false)
                    .map(|s| Session::OpenSsl(Box::new(s)))
                    .map_err(TlsError::Session)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4514_escapes_the_specials() {
        assert_eq!(escape_rfc4514("a,b"), "a\\,b");
        assert_eq!(escape_rfc4514(" x "), "\\ x\\ ");
        assert_eq!(escape_rfc4514("#1"), "\\#1");
        assert_eq!(escape_rfc4514("plain"), "plain");
    }

    #[test]
    fn a_certificate_subject_reads_in_rfc4514_order() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example, Inc");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let id = PeerIdentity::of_certificate(cert.der()).unwrap();
        assert_eq!(id.subject, "CN=alice,O=Example\\, Inc");
        assert_eq!(id.common_name.as_deref(), Some("alice"));
        let rule = ClientRule {
            identity: "alice".into(),
            exports: vec!["a".into()],
        };
        let by_dn = ClientRule {
            identity: "CN=alice,O=Example\\, Inc".into(),
            exports: vec!["*".into()],
        };
        let tls_rules = |rules| ServerTls {
            mode: TlsMode::Require,
            config: ServerBackend::Rustls(Arc::new(
                rustls::ServerConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(
                        vec![cert.der().clone()],
                        PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
                    )
                    .unwrap(),
            )),
            rules,
        };
        let t = tls_rules(Some(vec![rule]));
        assert!(t.allows(Some(&id), "a"));
        assert!(!t.allows(Some(&id), "b"));
        assert!(!t.allows(None, "a"));
        let t = tls_rules(Some(vec![by_dn]));
        assert!(t.allows(Some(&id), "b"));
        let t = tls_rules(None);
        assert!(t.allows(None, "b"));
    }
}
