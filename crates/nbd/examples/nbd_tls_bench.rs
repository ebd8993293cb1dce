//! The NBD server over TCP on a RAM device, with or without TLS, for bench/nbd_tls.sh and
//! bench/nbd_tls_psk.sh (what TLS costs on the hit path, against plaintext and nbdkit with
//! TLS).
//!
//! ```text
//! nbd_tls_bench certs DIR          # CA, server and client credentials (qemu/nbdkit layout)
//! nbd_tls_bench serve PORT SIZE_MIB [DIR]   # serves until killed; TLS required with DIR
//! nbd_tls_bench serve-psk PORT SIZE_MIB FILE   # TLS required, pre-shared keys of FILE
//! ```

use std::path::Path;
use std::sync::Arc;
use tiercache_blockdev::MemDevice;
use tiercache_nbd::tls::PskKeys;
use tiercache_nbd::{
    serve_tcp, ServerConfig, ServerStats, ServerTls, ServerTlsFiles, Shutdown, TlsMode,
};

fn certs(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    std::fs::create_dir_all(dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "bench CA");
    let ca = p.self_signed(&ca_key).unwrap();
    let leaf = |sans: Vec<String>, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        (
            p.signed_by(&key, &ca, &ca_key).unwrap().pem(),
            key.serialize_pem(),
        )
    };
    let (sc, sk) = leaf(vec!["localhost".into(), "127.0.0.1".into()], "localhost");
    let (cc, ck) = leaf(Vec::new(), "bench");
    for (name, pem) in [
        ("ca-cert.pem", ca.pem()),
        ("server-cert.pem", sc),
        ("server-key.pem", sk),
        ("client-cert.pem", cc),
        ("client-key.pem", ck),
    ] {
        std::fs::write(dir.join(name), pem).unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("certs") => certs(Path::new(&args[2])),
        Some(mode @ ("serve" | "serve-psk")) => {
            let port: u16 = args[2].parse().expect("PORT");
            let mib: usize = args[3].parse().expect("SIZE_MIB");
            let psk = (mode == "serve-psk").then(|| {
                let keys = PskKeys::load(Path::new(args.get(4).expect("FILE"))).expect("PSK file");
                Arc::new(ServerTls::with_psk(TlsMode::Require, keys, None, None).expect("PSK"))
            });
            let tls = psk.or_else(|| {
                args.get(4).map(|d| {
                    let d = Path::new(d);
                    Arc::new(
                        ServerTls::from_files(
                            TlsMode::Require,
                            &ServerTlsFiles {
                                certificate: d.join("server-cert.pem"),
                                key: d.join("server-key.pem"),
                                ca: None,
                                verify_peer: false,
                            },
                            None,
                        )
                        .expect("TLS credentials"),
                    )
                })
            });
            let l = std::net::TcpListener::bind(("127.0.0.1", port)).expect("listen");
            let cfg = ServerConfig {
                tls,
                ..ServerConfig::default()
            };
            serve_tcp(
                l,
                Arc::new(MemDevice::new(mib << 20)),
                cfg,
                Arc::new(ServerStats::default()),
                Shutdown::new(),
            )
            .expect("serving");
        }
        _ => {
            eprintln!("usage: nbd_tls_bench certs DIR | serve PORT SIZE_MIB [DIR] | serve-psk PORT SIZE_MIB FILE");
            std::process::exit(2);
        }
    }
}
