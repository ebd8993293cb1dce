//! Test certificates made at test time (rcgen): a CA, server and client certificates
//! written in the directory layout qemu (`tls-creds-x509 dir=`), nbdkit
//! (`--tls-certificates`) and libnbd (`tls-certificates=`) read.

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use tiercache_nbd::{ClientRule, ServerTls, ServerTlsFiles, TlsMode};

/// A certificate authority and the directories of credentials it signed.
pub struct Pki {
    pub dir: tempfile::TempDir,
    ca: Certificate,
    ca_key: KeyPair,
}

fn write(dir: &Path, name: &str, pem: &str) {
    std::fs::write(dir.join(name), pem).unwrap();
}

impl Pki {
    /// A new CA (its own name, so two `Pki`s do not trust each other).
    pub fn new(name: &str) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = p.self_signed(&ca_key).unwrap();
        Self {
            dir: tempfile::tempdir().unwrap(),
            ca,
            ca_key,
        }
    }

    fn leaf(&self, sans: Vec<String>, cn: &str, server: bool, expired: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(DnType::OrganizationName, "tiercache tests");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        if expired {
            p.not_before = rcgen::date_time_ymd(2001, 1, 1);
            p.not_after = rcgen::date_time_ymd(2002, 1, 1);
        }
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A directory with `ca-cert.pem`, `server-cert.pem` and `server-key.pem` for
    /// `localhost` and 127.0.0.1.
    pub fn server_dir(&self, name: &str, expired: bool) -> PathBuf {
        let d = self.dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let (cert, key) = self.leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            "localhost",
            true,
            expired,
        );
        write(&d, "ca-cert.pem", &self.ca.pem());
        write(&d, "server-cert.pem", &cert);
        write(&d, "server-key.pem", &key);
        d
    }

    /// A directory with `ca-cert.pem` and, given a common name, `client-cert.pem` and
    /// `client-key.pem` (subject `CN=<cn>,O=tiercache tests`).
    pub fn client_dir(&self, name: &str, cn: Option<&str>) -> PathBuf {
        let d = self.dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        write(&d, "ca-cert.pem", &self.ca.pem());
        if let Some(cn) = cn {
            let (cert, key) = self.leaf(Vec::new(), cn, false, false);
            write(&d, "client-cert.pem", &cert);
            write(&d, "client-key.pem", &key);
        }
        d
    }

    /// A server TLS from `server_dir`'s files, verifying client certificates against this CA
    /// when `verify_peer`.
    pub fn server_tls(
        &self,
        dir: &Path,
        mode: TlsMode,
        verify_peer: bool,
        rules: Option<Vec<ClientRule>>,
    ) -> ServerTls {
        ServerTls::from_files(
            mode,
            &ServerTlsFiles {
                certificate: dir.join("server-cert.pem"),
                key: dir.join("server-key.pem"),
                ca: Some(dir.join("ca-cert.pem")),
                verify_peer,
            },
            rules,
        )
        .unwrap()
    }
}
