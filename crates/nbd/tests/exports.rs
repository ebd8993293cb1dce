//! Several named exports behind one server: each name reaches its own device, an unknown
//! name is refused, and listing shows every name.

mod common;

use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::client::Command;
use tiercache_nbd::*;

fn uri(sock: &std::path::Path, export: &str) -> NbdUri {
    format!("nbd+unix:///{export}?socket={}", sock.display())
        .parse()
        .unwrap()
}

#[test]
fn each_export_name_reaches_its_own_device() {
    let (a, b) = (
        Arc::new(MemDevice::new(1 << 20)),
        Arc::new(MemDevice::new(2 << 20)),
    );
    let exports = Exports::named(vec![
        Export {
            name: "vm1".into(),
            device: a.clone(),
        },
        Export {
            name: "vm2".into(),
            device: b.clone(),
        },
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stop = Shutdown::new();
    let stats = Arc::new(ServerStats::default());
    let (st, sd) = (stats.clone(), stop.clone());
    let server = std::thread::spawn(move || {
        serve_unix_exports(l, Arc::new(exports), ServerConfig::default(), st, sd)
    });
    let t = Duration::from_secs(10);
    let c1 = Connection::open(&uri(&sock, "vm1"), t).unwrap();
    let c2 = Connection::open(&uri(&sock, "vm2"), t).unwrap();
    assert_eq!((c1.info().size, c2.info().size), (1 << 20, 2 << 20));
    c1.call(Command::Write, false, 4096, 4, b"vm1!", t).unwrap();
    c2.call(Command::Write, false, 4096, 4, b"vm2?", t).unwrap();
    assert_eq!(
        c1.call(Command::Read, false, 4096, 4, &[], t).unwrap(),
        b"vm1!"
    );
    assert_eq!(
        c2.call(Command::Read, false, 4096, 4, &[], t).unwrap(),
        b"vm2?"
    );
    let mut got = [0u8; 4];
    a.read_at(&mut got, 4096).unwrap();
    assert_eq!(&got, b"vm1!");
    b.read_at(&mut got, 4096).unwrap();
    assert_eq!(&got, b"vm2?");
    // An unknown name (and the default one, which several exports do not have) is refused.
    for bad in ["vm3", ""] {
        assert!(
            Connection::open(&uri(&sock, bad), t).is_err(),
            "export {bad:?} was accepted"
        );
    }
    if common::have("nbdinfo") {
        let out = std::process::Command::new("nbdinfo")
            .args(["--list", "--json"])
            .arg(format!("nbd+unix:///?socket={}", sock.display()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("\"vm1\"") && text.contains("\"vm2\""),
            "nbdinfo --list: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop((c1, c2));
    stop.trigger();
    server.join().unwrap().unwrap();
}

#[test]
fn bad_export_sets_are_refused_by_field() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(4096));
    let e = |name: &str| Export {
        name: name.into(),
        device: dev.clone(),
    };
    assert_eq!(Exports::named(vec![]).err(), Some(ExportsError::Empty));
    assert_eq!(
        Exports::named(vec![e("a"), e("")]).err(),
        Some(ExportsError::EmptyName { index: 1 })
    );
    assert_eq!(
        Exports::named(vec![e("a"), e("b"), e("a")]).err(),
        Some(ExportsError::Duplicate {
            index: 2,
            name: "a".into()
        })
    );
    // A single export answers any name, as a one-export server always has.
    let one = Exports::single("x", dev.clone());
    assert!(one.find(b"anything").is_some());
    let two = Exports::named(vec![e("a"), e("b")]).unwrap();
    assert_eq!(two.find(b"b").map(|x| x.name.as_str()), Some("b"));
    assert!(two.find(b"c").is_none());
}
