//! The NBD server with TLS required: nothing but STARTTLS answered in the clear, then a TLS
//! handshake over whatever the client sends.
#![no_main]
use std::sync::{Arc, OnceLock};
use tiercache_nbd::{ServerTls, TlsMode};

fn tls() -> Arc<ServerTls> {
    static TLS: OnceLock<Arc<ServerTls>> = OnceLock::new();
    TLS.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
            )
            .unwrap();
        Arc::new(ServerTls::with_config(TlsMode::Require, Arc::new(config), None))
    })
    .clone()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiercache_nbd::fuzzing::serve_input(data, Some(tls()), false);
});
