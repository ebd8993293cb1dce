//! `tiercache serve` answers NBD reads before the cache's scan ends (docs/design.md §13,
//! "Serving before the scan ends", the server's part): a server over a write-back cache
//! whose one shard's slot records are held at a gate on the cache device listens at once,
//! a client reads dirty lines of the other shards (bytes only the cache holds) while that
//! scan is held, and its write completes only after the gate opens. Configurations that need
//! the engine first keep opening it first, and say so. Nothing here asserts a time: the tests
//! wait for states (a read held at the gate, a line in the log).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::MemDevice;
use tiercache_core::VolumeId;
use tiercache_engine::slot_table::Layout;
use tiercache_engine::testing::{wait_until, ScanGate};
use tiercache_engine::Engine;
use tiercache_nbd::client::{Command, Connection};
use tiercache_nbd::NbdUri;
use tiercache_policy::ShardLayout;
use tiercache_server::{ServeSetup, Server};

const LINE: u64 = 4096;
/// Lines of the volume.
const LINES: u64 = 128;
/// Lines written before the restart (fewer than the cache's 64, so none is evicted).
const WRITTEN: u64 = 24;

fn setup(dir: &std::path::Path, extra: &str) -> ServeSetup {
    let text = format!(
        r#"
[cache]
capacity = "256KiB"
line_size = "4KiB"
write_policy = "write-back"
shards = 4
cleaning = {{ policy = "lazy", idle_ns = "600s", batch = 64 }}
[engine]
cache_path = "{d}/cache.img"
backend_path = "{d}/backend.img"
backend_size = "512KiB"
[serve]
socket = "{d}/nbd.sock"
{extra}
"#,
        d = dir.display()
    );
    let mut all = tiercache_server::config::load_text(&text).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

/// Each line's bytes as a client last wrote them (the reference model), and the devices'
/// bytes after a write-back engine wrote lines `0..WRITTEN` and shut down (all still dirty).
struct Written {
    model: Vec<u8>,
    cache: Vec<u8>,
    backend: Vec<u8>,
}

fn written(s: &ServeSetup) -> Written {
    let shards = ShardLayout::new(&s.cache).unwrap();
    let layout = Layout::new(shards.total_lines(), LINE);
    let mut model: Vec<u8> = (0..LINES * LINE).map(|i| (i / 509 % 251) as u8).collect();
    let cache = Arc::new(MemDevice::new(layout.device_len() as usize));
    let backend = Arc::new(MemDevice::from_bytes(model.clone()));
    let engine = Engine::with_devices(&s.cache, &s.engine, cache.clone(), backend.clone()).unwrap();
    for line in 0..WRITTEN {
        let at = (line * LINE) as usize;
        for (j, b) in model[at..at + LINE as usize].iter_mut().enumerate() {
            *b = (line as u8).wrapping_mul(37).wrapping_add(j as u8) | 1;
        }
        engine
            .write(&model[at..at + LINE as usize], line * LINE, false)
            .unwrap();
    }
    assert_eq!(engine.stats().dirty_lines, WRITTEN, "every line dirty");
    engine.shutdown().unwrap();
    drop(engine);
    Written {
        model,
        cache: cache.snapshot(),
        backend: backend.snapshot(),
    }
}

fn line_of(bytes: &[u8], line: u64) -> Vec<u8> {
    bytes[(line * LINE) as usize..((line + 1) * LINE) as usize].to_vec()
}

#[test]
fn a_client_reads_ready_shards_during_the_scan_and_its_write_waits_for_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "");
    let w = written(&s);
    let shards = ShardLayout::new(&s.cache).unwrap();
    let shard_of = |l: u64| shards.shard_of(VolumeId(0), l);
    let held = shard_of(0);
    let gate = ScanGate::new(w.cache.clone(), &shards, LINE, &[held]);
    let _release = gate.release_on_drop();
    let backend = Arc::new(MemDevice::from_bytes(w.backend.clone()));
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let said_has = |p: &str| said.lock().unwrap().iter().any(|m| m.starts_with(p));
    let server = Server::builder(s)
        .devices(gate.clone(), backend)
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    assert!(said_has("serving before the scan ends"), "{said:?}");
    let uri: NbdUri = server.addr().parse().unwrap();
    let t = Duration::from_secs(120);
    let conn = Connection::open(&uri, t).unwrap();
    // Every dirty line outside the held shard: its bytes are on the cache device only.
    let ready: Vec<u64> = (0..WRITTEN).filter(|&l| shard_of(l) != held).collect();
    assert!(!ready.is_empty());
    for &line in &ready {
        assert_ne!(line_of(&w.model, line), line_of(&w.backend, line));
        let got = conn
            .call(Command::Read, false, line * LINE, LINE as u32, &[], t)
            .unwrap();
        assert_eq!(got, line_of(&w.model, line), "line {line}");
    }
    assert!(gate.waiting() >= 1, "shard {held}'s scan still held");
    assert!(!said_has("the open ended"), "{said:?}");
    assert!(
        !said_has("control on"),
        "the control socket starts at the open's end"
    );
    // A write waits for the whole open: it completes only after the gate opened.
    let released = Arc::new(AtomicBool::new(false));
    let data = vec![0x5au8; LINE as usize];
    let writer = {
        let (uri, data, released) = (uri.clone(), data.clone(), released.clone());
        std::thread::spawn(move || {
            let c = Connection::open(&uri, t).unwrap();
            c.call(Command::Write, false, 3 * LINE, LINE as u32, &data, t)
                .unwrap();
            released.load(SeqCst)
        })
    };
    // Time for the write to reach the server (not asserted: the order below is).
    std::thread::sleep(Duration::from_millis(200));
    assert!(!writer.is_finished(), "a write completed during the scan");
    released.store(true, SeqCst);
    gate.open_all();
    assert!(
        writer.join().unwrap(),
        "the write completed before the open"
    );
    wait_until("the control socket up", || said_has("control on"));
    assert!(said_has("the open ended"), "{said:?}");
    // The held shard's dirty line, and the line just written.
    assert_eq!(
        conn.call(Command::Read, false, 0, LINE as u32, &[], t)
            .unwrap(),
        line_of(&w.model, 0)
    );
    assert_eq!(
        conn.call(Command::Read, false, 3 * LINE, LINE as u32, &[], t)
            .unwrap(),
        data
    );
    drop(conn);
    let report = server.stop().unwrap();
    // The reads before the open were the opening engine's; the two after it, the engine's.
    assert_eq!((report.engine.reads, report.engine.writes), (2, 1));
}

#[test]
fn a_configuration_that_needs_the_engine_first_opens_it_first_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "metrics_listen = \"127.0.0.1:0\"");
    let w = written(&s);
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let server = Server::builder(s)
        .devices(
            Arc::new(MemDevice::from_bytes(w.cache)),
            Arc::new(MemDevice::from_bytes(w.backend)),
        )
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    {
        let said = said.lock().unwrap();
        let first = said
            .iter()
            .position(|m| m.starts_with("opening the whole cache before serving"))
            .unwrap_or_else(|| panic!("{said:?}"));
        let listening = said
            .iter()
            .position(|m| m.starts_with("listening on "))
            .unwrap();
        assert!(first < listening, "{said:?}");
        assert!(!said.iter().any(|m| m.starts_with("serving before")));
        assert!(said.iter().any(|m| m.starts_with("control on")));
    }
    let uri: NbdUri = server.addr().parse().unwrap();
    let t = Duration::from_secs(30);
    let conn = Connection::open(&uri, t).unwrap();
    assert_eq!(
        conn.call(Command::Read, false, 5 * LINE, LINE as u32, &[], t)
            .unwrap(),
        line_of(&w.model, 5)
    );
    drop(conn);
    server.stop().unwrap();
}

#[test]
fn a_recovery_error_after_listening_stops_the_server_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "");
    let w = written(&s);
    let shards = ShardLayout::new(&s.cache).unwrap();
    // Every shard's scan held, so the server is surely listening before the open fails.
    let gate = ScanGate::new(w.cache.clone(), &shards, LINE, &[0, 1, 2, 3]);
    let _release = gate.release_on_drop();
    // A backend shorter than the dirty lines 16..WRITTEN: their records are refused.
    let short = w.backend[..(16 * LINE) as usize].to_vec();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = said.clone();
    let server = Server::builder(s)
        .devices(gate.clone(), Arc::new(MemDevice::from_bytes(short)))
        .log(move |m| log.lock().unwrap().push(m.to_string()))
        .start()
        .unwrap();
    assert!(
        said.lock()
            .unwrap()
            .iter()
            .any(|m| m.starts_with("serving before the scan ends")),
        "{said:?}"
    );
    gate.open_all();
    let err = format!("{:#}", server.wait().expect_err("the open fails"));
    assert!(err.contains("its open failed"), "{err}");
    let said = said.lock().unwrap();
    assert!(
        said.iter()
            .any(|m| m.starts_with("the open failed after serving began")),
        "{said:?}"
    );
    assert!(
        !said.iter().any(|m| m.starts_with("control on")),
        "{said:?}"
    );
}
