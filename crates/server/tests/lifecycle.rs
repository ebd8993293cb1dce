//! The serve lifecycle as a library: a server built from a config, talked to over NBD,
//! stopped through its handle (no signals, no process), with its counters in the report and
//! the stats file, its data durable on the backend after a flush on exit.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_nbd::client::{Command, Connection};
use tiercache_nbd::NbdUri;
use tiercache_server::Server;

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"
[cache]
capacity = "4MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "{d}/cache.img"
backend_path = "{d}/backend.img"
backend_size = "16MiB"
[serve]
socket = "{d}/nbd.sock"
stats_file = "{d}/stats.json"
flush_on_exit = true
"#,
        d = dir.display()
    )
}

#[test]
fn a_built_server_serves_stops_on_request_and_leaves_the_backend_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config(dir.path())).unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let server = Server::builder(setup)
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    assert!(server.addr().starts_with("nbd+unix:///?socket="));
    let uri: NbdUri = server.addr().parse().unwrap();
    let t = Duration::from_secs(10);
    let conn = Connection::open(&uri, t).unwrap();
    let data = vec![0xa5u8; 8192];
    conn.call(Command::Write, false, 65536, 8192, &data, t)
        .unwrap();
    assert_eq!(
        conn.call(Command::Read, false, 65536, 8192, &[], t)
            .unwrap(),
        data
    );
    drop(conn);
    assert!(!server.is_finished(), "nothing asked it to stop");
    let report = server.stop().unwrap();
    assert_eq!((report.engine.reads, report.engine.writes), (1, 1));
    assert_eq!(report.engine.dirty_lines, 0, "flushed on exit");
    let said = said.lock().unwrap();
    assert!(
        said.iter().any(|m| m.starts_with("listening on ")),
        "{said:?}"
    );
    assert!(said.iter().any(|m| m.starts_with("stopped: ")), "{said:?}");
    // The final counters, and the data on the backend alone.
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["engine"]["writes"], 1);
    let backend = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert_eq!(&backend[65536..65536 + 8192], &data[..]);
    assert!(!dir.path().join("nbd.sock").exists(), "socket removed");
}

#[test]
fn a_server_with_a_duration_stops_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config(dir.path())).unwrap();
    let setup =
        tiercache_server::config::load(Some(&path), &["serve.duration_ns=\"200ms\"".into()])
            .unwrap();
    let server = Server::builder(setup).log(|_| {}).start().unwrap();
    let report = server.wait().unwrap();
    assert_eq!(report.engine.reads, 0);
}
