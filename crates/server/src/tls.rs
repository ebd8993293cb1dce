//! `[serve.tls]`: NBD over TLS for the served cache (docs/nbd-tls.md), and the rule that a
//! TCP listener beyond loopback needs it.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tiercache_nbd::tls::PskKeys;
use tiercache_nbd::{ClientRule, ServerTls, ServerTlsFiles, TlsMode};

/// The `[serve.tls]` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeTlsConfig {
    /// `"off"`, `"on"` (TLS at the client's choice) or `"require"` (nothing but
    /// `NBD_OPT_STARTTLS` answered in the clear), as nbdkit's `--tls` spells them.
    pub mode: TlsMode,
    /// A directory laid out as nbdkit's and qemu's `tls-certificates`: `server-cert.pem`,
    /// `server-key.pem`, and `ca-cert.pem` (client certificates are verified against it when
    /// present). The files below override it one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<PathBuf>,
    /// The server's certificate chain (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<PathBuf>,
    /// Its private key (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// CAs client certificates are verified against (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// Refuse clients without a certificate the CA signed (nbdkit's `--tls-verify-peer`); a
    /// client with a pre-shared key is authenticated by it.
    pub verify_peer: bool,
    /// Pre-shared keys (nbdkit's `--tls-psk`): a file of `identity:hexkey` lines, as GnuTLS's
    /// `psktool` writes it. Alone, or beside a certificate for clients without a key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psk: Option<PathBuf>,
    /// Who may use which export (`[[serve.tls.clients]]`: `identity`, the PSK identity or the
    /// certificate subject or its common name, and `exports`, names or `"*"`); none: every
    /// client may use every export. Needs `psk` or `verify_peer`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientRule>,
}

impl ServeTlsConfig {
    /// Makes relative paths relative to `base` (the config file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for p in [
            &mut self.certificates,
            &mut self.certificate,
            &mut self.key,
            &mut self.ca,
            &mut self.psk,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }

    /// The certificate files, if any: none with a PSK file and no certificate named.
    fn certificate_files(&self) -> Result<Option<ServerTlsFiles>> {
        if self.psk.is_some()
            && self.certificates.is_none()
            && self.certificate.is_none()
            && self.key.is_none()
        {
            if self.ca.is_some() || self.verify_peer {
                bail!("serve.tls: ca and verify_peer check client certificates; with psk alone there are none (add a certificate and key, or drop them)");
            }
            return Ok(None);
        }
        self.files().map(Some)
    }

    /// The credential files, from the directory and the single files.
    fn files(&self) -> Result<ServerTlsFiles> {
        let from_dir = |name: &str| self.certificates.as_ref().map(|d| d.join(name));
        let certificate = self
            .certificate
            .clone()
            .or_else(|| from_dir("server-cert.pem"))
            .context("serve.tls: a certificate is needed (serve.tls.certificate, or serve.tls.certificates = DIR with server-cert.pem)")?;
        let key = self
            .key
            .clone()
            .or_else(|| from_dir("server-key.pem"))
            .context("serve.tls: a key is needed (serve.tls.key, or serve.tls.certificates = DIR with server-key.pem)")?;
        let ca = self
            .ca
            .clone()
            .or_else(|| from_dir("ca-cert.pem").filter(|p| p.exists()));
        Ok(ServerTlsFiles {
            certificate,
            key,
            ca,
            verify_peer: self.verify_peer,
        })
    }

    /// Checks the section against the served exports' names (`exports`).
    pub fn validate(&self, exports: &[&str]) -> Result<()> {
        if self.mode == TlsMode::Off {
            if !self.clients.is_empty() {
                bail!("serve.tls.clients: client identities come with TLS; set serve.tls.mode = \"require\" (or \"on\")");
            }
            return Ok(());
        }
        self.certificate_files()?;
        if let Some(psk) = &self.psk {
            PskKeys::load(psk).context("serve.tls.psk")?;
        }
        if !self.clients.is_empty() && !self.verify_peer && self.psk.is_none() {
            bail!("serve.tls.clients: identities are PSK identities or certificate subjects; set serve.tls.psk, or serve.tls.verify_peer = true (and serve.tls.ca)");
        }
        for (i, rule) in self.clients.iter().enumerate() {
            if rule.identity.is_empty() {
                bail!("serve.tls.clients[{i}]: an empty identity");
            }
            for e in &rule.exports {
                if e != "*" && !exports.contains(&e.as_str()) {
                    bail!(
                        "serve.tls.clients[{i}] ({}): no export named {e:?} (exports: {:?})",
                        rule.identity,
                        exports
                    );
                }
            }
        }
        Ok(())
    }

    /// The NBD server's TLS (credentials loaded), or `None` when off.
    pub fn server_tls(&self) -> Result<Option<Arc<ServerTls>>> {
        if self.mode == TlsMode::Off {
            return Ok(None);
        }
        let rules = (!self.clients.is_empty()).then(|| self.clients.clone());
        let tls = match &self.psk {
            Some(psk) => {
                let keys = PskKeys::load(psk).context("serve.tls.psk")?;
                ServerTls::with_psk(self.mode, keys, self.certificate_files()?.as_ref(), rules)
                    .context("serve.tls")?
            }
            None => ServerTls::from_files(self.mode, &self.files()?, rules).context("serve.tls")?,
        };
        Ok(Some(Arc::new(tls)))
    }
}

/// Refuses a TCP listen address beyond loopback served without TLS required, unless the
/// operator said so (`allow_plaintext`): anyone who reaches the port would read and write
/// every export.
pub fn check_listen(addr: &str, tls: TlsMode, allow_plaintext: bool) -> Result<()> {
    if tls == TlsMode::Require || allow_plaintext {
        return Ok(());
    }
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .with_context(|| format!("serve.listen {addr}"))?
        .collect();
    if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        bail!(
            "serve.listen {addr}: {} is not a loopback address, and without TLS anyone who reaches it reads and writes every export; set serve.tls.mode = \"require\" with a certificate or a PSK file (docs/nbd-tls.md), listen on 127.0.0.1, or set serve.allow_plaintext = true to serve in the clear anyway{}",
            open.ip(),
            if tls == TlsMode::On {
                " (serve.tls.mode = \"on\" still serves plaintext clients)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_beyond_loopback_is_refused_unless_allowed() {
        check_listen("127.0.0.1:10809", TlsMode::Off, false).unwrap();
        check_listen("[::1]:10809", TlsMode::Off, false).unwrap();
        let e = check_listen("0.0.0.0:10809", TlsMode::Off, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("0.0.0.0 is not a loopback address") && e.contains("allow_plaintext"),
            "{e}"
        );
        let e = check_listen("0.0.0.0:10809", TlsMode::On, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("still serves plaintext"), "{e}");
        check_listen("0.0.0.0:10809", TlsMode::Require, false).unwrap();
        check_listen("0.0.0.0:10809", TlsMode::Off, true).unwrap();
    }

    #[test]
    fn a_tls_section_is_checked_before_serving() {
        let on = |f: &dyn Fn(&mut ServeTlsConfig)| {
            let mut c = ServeTlsConfig {
                mode: TlsMode::Require,
                certificate: Some("c.pem".into()),
                key: Some("k.pem".into()),
                ..ServeTlsConfig::default()
            };
            f(&mut c);
            c.validate(&["a", "b"]).map_err(|e| e.to_string())
        };
        assert!(on(&|_| {}).is_ok());
        assert!(on(&|c| c.key = None)
            .unwrap_err()
            .contains("a key is needed"));
        let rule = |e: &str| ClientRule {
            identity: "alice".into(),
            exports: vec![e.into()],
        };
        assert!(on(&|c| c.clients = vec![rule("a")])
            .unwrap_err()
            .contains("verify_peer"));
        assert!(on(&|c| {
            c.verify_peer = true;
            c.clients = vec![rule("zz")]
        })
        .unwrap_err()
        .contains("no export named \"zz\""));
        assert!(on(&|c| {
            c.verify_peer = true;
            c.clients = vec![rule("*")]
        })
        .is_ok());
        let off = ServeTlsConfig {
            clients: vec![rule("a")],
            ..ServeTlsConfig::default()
        };
        assert!(off.validate(&["a"]).is_err());
    }

    #[test]
    fn a_psk_file_stands_alone_or_beside_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("keys.psk");
        std::fs::write(&good, format!("alice:{}\n", "ab".repeat(32))).unwrap();
        let psk_only = |f: &dyn Fn(&mut ServeTlsConfig)| {
            let mut c = ServeTlsConfig {
                mode: TlsMode::Require,
                psk: Some(good.clone()),
                ..ServeTlsConfig::default()
            };
            f(&mut c);
            c.validate(&["a", "b"]).map_err(|e| format!("{e:#}"))
        };
        assert!(psk_only(&|_| {}).is_ok());
        // PSK identities may be authorised without verify_peer.
        let rule = ClientRule {
            identity: "alice".into(),
            exports: vec!["a".into()],
        };
        assert!(psk_only(&|c| c.clients = vec![rule.clone()]).is_ok());
        // Client-certificate settings without a certificate of the server's own.
        assert!(psk_only(&|c| c.verify_peer = true)
            .unwrap_err()
            .contains("with psk alone"));
        // Beside a certificate: the certificate's files are needed whole.
        assert!(psk_only(&|c| c.certificate = Some("c.pem".into()))
            .unwrap_err()
            .contains("a key is needed"));
        // A malformed file: named, with its line, when the config is checked.
        let bad = dir.path().join("bad.psk");
        std::fs::write(&bad, "alice:00\nbob:0x\n").unwrap();
        let e = psk_only(&|c| c.psk = Some(bad.clone())).unwrap_err();
        assert!(
            e.contains("serve.tls.psk") && e.contains("bad.psk line 2"),
            "{e}"
        );
        let e = psk_only(&|c| c.psk = Some(dir.path().join("none.psk"))).unwrap_err();
        assert!(e.contains("none.psk"), "{e}");
        // Relative to the config file's directory.
        let mut c = ServeTlsConfig {
            psk: Some("keys.psk".into()),
            ..ServeTlsConfig::default()
        };
        c.resolve_paths(dir.path());
        assert_eq!(c.psk.as_deref(), Some(good.as_path()));
        // Loaded for serving: a server TLS, authorisation included.
        let c = ServeTlsConfig {
            mode: TlsMode::Require,
            psk: Some(good.clone()),
            clients: vec![rule],
            ..ServeTlsConfig::default()
        };
        assert!(c.server_tls().unwrap().is_some());
    }
}
