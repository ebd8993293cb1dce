//! TLS with pre-shared keys (docs/nbd-tls.md, "Pre-shared keys"): the key files GnuTLS's
//! `psktool` writes and nbdkit (`--tls-psk`), qemu (`tls-creds-psk`) and libnbd
//! (`tls-psk-file=`) read, and the OpenSSL contexts that use them. rustls implements no
//! external PSKs (rustls/rustls#174), so a PSK session runs on OpenSSL (TLS 1.3 with an
//! external PSK, which GnuTLS clients and servers offer first, or a TLS 1.2 PSK
//! ciphersuite); X.509-only sessions stay on rustls.

use super::{ServerTlsFiles, TlsError};
use openssl::ssl::{
    Ssl, SslContext, SslContextBuilder, SslFiletype, SslMethod, SslOptions, SslRef, SslVerifyMode,
    SslVersion,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The longest key OpenSSL takes (`PSK_MAX_PSK_LEN`); psktool makes 32 bytes by default.
pub const MAX_KEY_BYTES: usize = 512;
/// The longest identity accepted: OpenSSL's `PSK_MAX_IDENTITY_LEN` (256) less its
/// terminating NUL.
pub const MAX_IDENTITY_BYTES: usize = 255;
/// The largest PSK file read: a key file holds a line per client, far below this.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// TLS 1.2 PSK ciphersuites offered (TLS 1.3 takes its own suites, all of them): AEAD or
/// SHA-2 ones, the ECDHE ones (forward secrecy) first. GnuTLS offers these under its
/// `+ECDHE-PSK:+PSK` priorities, as qemu, nbdkit and libnbd set them.
const PSK_CIPHERS: &str = "ECDHE-PSK-CHACHA20-POLY1305:ECDHE-PSK-AES256-CBC-SHA384:\
ECDHE-PSK-AES128-CBC-SHA256:PSK-AES256-GCM-SHA384:PSK-CHACHA20-POLY1305:PSK-AES128-GCM-SHA256";
/// TLS 1.3 suites, SHA-256 ones first (the hash of an external PSK).
const TLS13_SUITES: &str =
    "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";
/// TLS 1.2 certificate ciphersuites a server with both a PSK file and a certificate adds.
const CERT_CIPHERS: &str = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:\
ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256:\
ECDHE-RSA-AES128-GCM-SHA256";

/// The keys of a PSK file: lines `identity:hexkey`, as `psktool -u NAME -p FILE` writes them.
#[derive(Clone)]
pub struct PskKeys {
    path: PathBuf,
    keys: HashMap<String, Vec<u8>>,
}

impl std::fmt::Debug for PskKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are secrets: their identities only.
        let mut ids: Vec<_> = self.keys.keys().collect();
        ids.sort();
        f.debug_struct("PskKeys")
            .field("path", &self.path)
            .field("identities", &ids)
            .finish()
    }
}

fn line_error(path: &Path, line: usize, reason: impl ToString) -> TlsError {
    TlsError::PskFile {
        path: path.to_path_buf(),
        line,
        reason: reason.to_string(),
    }
}

impl PskKeys {
    /// Reads a PSK file. Blank lines are skipped; any other line must be `identity:hexkey`
    /// with a non-empty identity (no `:` in it, at most [`MAX_IDENTITY_BYTES`]) and a key of
    /// 1 to [`MAX_KEY_BYTES`] bytes in hexadecimal. Errors name the file and the line.
    pub fn load(path: &Path) -> Result<Self, TlsError> {
        let file_err = |reason: String| TlsError::File {
            what: "PSK file",
            path: path.to_path_buf(),
            reason,
        };
        let len = std::fs::metadata(path)
            .map_err(|e| file_err(e.to_string()))?
            .len();
        if len > MAX_FILE_BYTES {
            return Err(file_err(format!(
                "{len} bytes, more than a key file holds ({MAX_FILE_BYTES} at most)"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| file_err(e.to_string()))?;
        Self::parse(path, &bytes)
    }

    /// Parses the contents of the PSK file `path` (named in errors).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, TlsError> {
        let mut keys = HashMap::new();
        let mut first_line: HashMap<String, usize> = HashMap::new();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let text = std::str::from_utf8(raw).map_err(|_| line_error(path, n, "not UTF-8"))?;
            if text.trim().is_empty() {
                continue;
            }
            let (identity, hex) = text.split_once(':').ok_or_else(|| {
                line_error(path, n, "expected identity:hexkey (no ':' in the line)")
            })?;
            if identity.is_empty() {
                return Err(line_error(path, n, "an empty identity"));
            }
            if identity.contains('\0') {
                // Identities travel as C strings.
                return Err(line_error(path, n, "a NUL byte in the identity"));
            }
            if identity.len() > MAX_IDENTITY_BYTES {
                return Err(line_error(
                    path,
                    n,
                    format!(
                        "identity of {} bytes, more than {MAX_IDENTITY_BYTES}",
                        identity.len()
                    ),
                ));
            }
            let key = decode_hex(hex.trim_end()).map_err(|why| {
                line_error(path, n, format!("key of identity {identity:?}: {why}"))
            })?;
            if let Some(first) = first_line.insert(identity.to_string(), n) {
                return Err(line_error(
                    path,
                    n,
                    format!("identity {identity:?} again (first on line {first})"),
                ));
            }
            keys.insert(identity.to_string(), key);
        }
        if keys.is_empty() {
            return Err(TlsError::File {
                what: "PSK file",
                path: path.to_path_buf(),
                reason: "no keys in it (lines identity:hexkey, as psktool writes them)".into(),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            keys,
        })
    }

    /// The file the keys came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many identities the file holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the file holds no identity (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether the file holds a key for `identity`.
    pub fn contains(&self, identity: &str) -> bool {
        self.keys.contains_key(identity)
    }

    fn key(&self, identity: &str) -> Option<&[u8]> {
        self.keys.get(identity).map(Vec::as_slice)
    }
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    if hex.is_empty() {
        return Err("empty".into());
    }
    if !hex.len().is_multiple_of(2) {
        return Err(format!("{} hex digits, an odd number", hex.len()));
    }
    if hex.len() / 2 > MAX_KEY_BYTES {
        return Err(format!(
            "{} bytes, more than {MAX_KEY_BYTES}",
            hex.len() / 2
        ));
    }
    let digit = |c: u8| -> Result<u8, String> {
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| format!("{:?} is not a hex digit", c as char))
    };
    hex.as_bytes()
        .chunks(2)
        .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Where a server's PSK callback leaves the identity it accepted, for the session's
/// [`PeerIdentity`](super::PeerIdentity) (OpenSSL records none for a TLS 1.3 external PSK).
pub(super) fn identity_index() -> Result<openssl::ex_data::Index<Ssl, String>, TlsError> {
    static INDEX: OnceLock<openssl::ex_data::Index<Ssl, String>> = OnceLock::new();
    if let Some(i) = INDEX.get() {
        return Ok(*i);
    }
    let i = Ssl::new_ex_index::<String>()?;
    Ok(*INDEX.get_or_init(|| i))
}

/// Settings both ends share: TLS 1.2 at least, no renegotiation (a TLS 1.2 peer cannot start
/// a handshake in the middle of the data), no session tickets (nothing resumes: a PSK
/// handshake is as short).
fn common(builder: &mut SslContextBuilder) -> Result<(), TlsError> {
    builder.set_min_proto_version(Some(SslVersion::TLS1_2))?;
    builder.set_options(SslOptions::NO_RENEGOTIATION | SslOptions::NO_TICKET);
    Ok(())
}

/// A server context taking the keys of `keys` (an unknown identity or a wrong key fails the
/// handshake), and with `certificates` also an X.509 certificate for clients that offer no
/// PSK (client certificates verified as `certificates` says).
pub(super) fn server_context(
    keys: PskKeys,
    certificates: Option<&ServerTlsFiles>,
) -> Result<SslContext, TlsError> {
    let index = identity_index()?;
    let mut b = SslContextBuilder::new(SslMethod::tls_server())?;
    common(&mut b)?;
    b.set_num_tickets(0)?;
    // A TLS 1.3 external PSK is tied to SHA-256 (OpenSSL's, GnuTLS's default): the server
    // picks a SHA-256 suite, or a client's key would be passed over for the certificate.
    b.set_ciphersuites(TLS13_SUITES)?;
    b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE);
    // OpenSSL takes an external PSK as a resumed session, and refuses to resume one where
    // peers are verified unless sessions carry a context (an internal_error alert).
    b.set_session_id_context(b"tiercache-nbd")?;
    match certificates {
        None => b.set_cipher_list(PSK_CIPHERS)?,
        Some(files) => {
            b.set_cipher_list(&format!("{PSK_CIPHERS}:{CERT_CIPHERS}"))?;
            let file_err = |what, path: &Path, e: openssl::error::ErrorStack| TlsError::File {
                what,
                path: path.to_path_buf(),
                reason: e.to_string(),
            };
            b.set_certificate_chain_file(&files.certificate)
                .map_err(|e| file_err("certificate", &files.certificate, e))?;
            b.set_private_key_file(&files.key, SslFiletype::PEM)
                .map_err(|e| file_err("key", &files.key, e))?;
            b.check_private_key()
                .map_err(|e| file_err("key", &files.key, e))?;
            match &files.ca {
                Some(ca) => {
                    b.set_ca_file(ca)
                        .map_err(|e| file_err("CA bundle", ca, e))?;
                    // The CA's names tell a client which certificate to present.
                    let names =
                        openssl::x509::X509::stack_from_pem(&std::fs::read(ca).map_err(|e| {
                            TlsError::File {
                                what: "CA bundle",
                                path: ca.clone(),
                                reason: e.to_string(),
                            }
                        })?)
                        .map_err(|e| file_err("CA bundle", ca, e))?;
                    let mut list = openssl::stack::Stack::new()?;
                    for c in names {
                        list.push(c.subject_name().to_owned()?)?;
                    }
                    b.set_client_ca_list(list);
                    b.set_verify(if files.verify_peer {
                        SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT
                    } else {
                        SslVerifyMode::PEER
                    });
                }
                None if files.verify_peer => {
                    return Err(TlsError::Verifier(
                        "verify_peer needs a CA bundle to verify client certificates against"
                            .into(),
                    ))
                }
                None => {}
            }
        }
    }
    b.set_psk_server_callback(move |ssl: &mut SslRef, identity, psk_out: &mut [u8]| {
        // An identity the file lacks (or not UTF-8): no key, the handshake fails (or, with a
        // certificate, goes on without a PSK).
        let Some(id) = identity.and_then(|i| std::str::from_utf8(i).ok()) else {
            return Ok(0);
        };
        let Some(key) = keys.key(id) else {
            return Ok(0);
        };
        if key.len() > psk_out.len() {
            return Ok(0);
        }
        psk_out[..key.len()].copy_from_slice(key);
        ssl.set_ex_data(index, id.to_string());
        Ok(key.len())
    });
    Ok(b.build())
}

/// A client context presenting `identity` with its key from `keys`. The server must prove
/// it holds the same key: one that answers with a certificate instead fails the handshake
/// (no CA is trusted), so a man in the middle cannot take the session with any certificate.
pub(super) fn client_context(keys: &PskKeys, identity: &str) -> Result<SslContext, TlsError> {
    let key = keys
        .key(identity)
        .ok_or_else(|| TlsError::PskIdentity {
            path: keys.path.clone(),
            identity: identity.to_string(),
        })?
        .to_vec();
    let id = identity.as_bytes().to_vec();
    let mut b = SslContextBuilder::new(SslMethod::tls_client())?;
    common(&mut b)?;
    b.set_cipher_list(PSK_CIPHERS)?;
    b.set_verify(SslVerifyMode::PEER);
    b.set_psk_client_callback(move |_, _hint, id_out: &mut [u8], psk_out: &mut [u8]| {
        // The identity is written as a C string.
        if id.len() >= id_out.len() || key.len() > psk_out.len() {
            return Ok(0);
        }
        id_out[..id.len()].copy_from_slice(&id);
        id_out[id.len()] = 0;
        psk_out[..key.len()].copy_from_slice(&key);
        Ok(key.len())
    });
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PskKeys, String> {
        PskKeys::parse(Path::new("keys.psk"), text.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn psktool_lines_parse() {
        let k = parse("alice:00ff10\r\n\nbob:DEADbeef\n").unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k.key("alice"), Some(&[0x00, 0xff, 0x10][..]));
        assert_eq!(k.key("bob"), Some(&[0xde, 0xad, 0xbe, 0xef][..]));
        assert!(k.contains("alice") && !k.contains("carol"));
        // The key stays out of debug output.
        assert!(!format!("{k:?}").contains("deadbeef"));
    }

    #[test]
    fn malformed_lines_are_named() {
        for (text, line, why) in [
            ("alice:00\nbob\n", 2, "no ':'"),
            (":00\n", 1, "empty identity"),
            ("alice:\n", 1, "empty"),
            ("alice:0\n", 1, "odd number"),
            ("alice:zz\n", 1, "not a hex digit"),
            ("alice:00\n\nalice:11\n", 3, "again (first on line 1)"),
            ("a\u{0}b:00\n", 1, "NUL byte"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                e.contains(&format!("keys.psk line {line}:")) && e.contains(why),
                "{text:?}: {e}"
            );
        }
        let long = format!("alice:{}\n", "00".repeat(MAX_KEY_BYTES + 1));
        assert!(parse(&long).unwrap_err().contains("more than 512"));
        let long_id = format!("{}:00\n", "a".repeat(MAX_IDENTITY_BYTES + 1));
        assert!(parse(&long_id)
            .unwrap_err()
            .contains("identity of 256 bytes"));
        assert!(parse("\n\n").unwrap_err().contains("no keys"));
        let bad = PskKeys::parse(Path::new("k"), b"al\xffce:00\n").unwrap_err();
        assert!(bad.to_string().contains("line 1: not UTF-8"), "{bad}");
    }

    #[test]
    fn a_client_needs_its_identity_in_the_file() {
        let k = parse("alice:00ff\n").unwrap();
        let e = client_context(&k, "bob").unwrap_err().to_string();
        assert!(e.contains("keys.psk") && e.contains("\"bob\""), "{e}");
        client_context(&k, "alice").unwrap();
    }
}
