//! Pipelined writes to a remote NBD export (nbdkit's memory plugin): `Remote::write_many`
//! lands every write, also when the server fails some of them (retried one by one), and a
//! write-back engine's flush jobs, which send their lines through it, leave the remote
//! holding exactly what was written.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tiercache_blockdev::MemDevice;
use tiercache_engine::device::NbdBackend;
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_nbd::{NbdUri, Remote, RemoteConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};
use tiercache_testsupport::ServerProcess;

const VOLUME: usize = 8 << 20;

/// nbdkit's memory plugin (with `extra` filters and parameters) on `sock`, killed on drop;
/// `None` when nbdkit is missing here (on CI that fails the test instead).
fn nbdkit(sock: &Path, extra: &[&str]) -> Option<ServerProcess> {
    if !tiercache_testsupport::tool("nbdkit") {
        return None;
    }
    let mut cmd = Command::new("nbdkit");
    cmd.args(["-f", "--exit-with-parent", "-U"]).arg(sock);
    cmd.args(extra.iter().filter(|a| a.starts_with("--filter")));
    cmd.args(["memory", &format!("size={VOLUME}")]);
    cmd.args(extra.iter().filter(|a| !a.starts_with("--filter")));
    Some(ServerProcess::start(&mut cmd, sock))
}

fn connect(sock: &Path, pipeline: usize) -> Remote {
    let uri: NbdUri = format!("nbd+unix:///?socket={}", sock.display())
        .parse()
        .unwrap();
    Remote::connect(
        uri,
        RemoteConfig {
            connections: 4,
            retries: 20,
            backoff: Duration::from_millis(1),
            max_request: 64 << 10,
            pipeline,
            ..RemoteConfig::default()
        },
    )
    .unwrap()
}

/// Distinct random ranges (some past `max_request`, so split) with random bytes, written in
/// one `write_many`, read back one by one.
fn writes_land(remote: &Remote, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut ranges: Vec<(u64, Vec<u8>)> = Vec::new();
    // One range per 128 KiB region: they never overlap.
    for region in 0..(VOLUME / (128 << 10)) as u64 {
        if rng.gen_bool(0.3) {
            continue;
        }
        let len = [4096, 512, 100_000, 65536 + 4096][rng.gen_range(0..4)];
        let at = region * (128 << 10) + rng.gen_range(0..(128 << 10) - len as u64);
        ranges.push((at, (0..len).map(|_| rng.gen()).collect()));
    }
    let batch: Vec<(u64, &[u8])> = ranges.iter().map(|(o, d)| (*o, &d[..])).collect();
    remote.write_many(&batch).unwrap();
    for (o, d) in &ranges {
        let mut b = vec![0u8; d.len()];
        remote.read(&mut b, *o).unwrap();
        assert!(b == *d, "write at {o} landed");
    }
}

#[test]
fn write_many_lands_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("m.sock");
    let Some(_server) = nbdkit(&sock, &[]) else {
        return;
    };
    let remote = connect(&sock, 16);
    assert_eq!(remote.stats().connections, 4, "multi-conn pool");
    writes_land(&remote, 1);
    let s = remote.stats();
    assert_eq!((s.retries, s.failed_requests), (0, 0), "{s:?}");
    // One request per round trip gives the same bytes.
    writes_land(&connect(&sock, 1), 2);
}

#[test]
fn write_many_retries_failed_writes_until_they_land() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("e.sock");
    let Some(_server) = nbdkit(
        &sock,
        &["--filter=error", "error=EIO", "error-pwrite-rate=20%"],
    ) else {
        return;
    };
    let remote = connect(&sock, 64);
    writes_land(&remote, 3);
    let s = remote.stats();
    assert!(
        s.error_replies > 0 && s.retries > 0,
        "errors injected: {s:?}"
    );
    assert_eq!(s.failed_requests, 0, "{s:?}");
}

/// Dirty lines written back by flush jobs (their writes pipelined) all reach the remote.
#[test]
fn flush_jobs_write_every_dirty_line_back() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("f.sock");
    let Some(_server) = nbdkit(&sock, &[]) else {
        return;
    };
    let cfg = CacheConfig {
        capacity: 4 << 20,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 4,
        ..CacheConfig::default()
    };
    let layout = Layout::new((cfg.capacity / 4096) as u32, 4096);
    let cache = Arc::new(MemDevice::new(layout.device_len() as usize));
    let backend = Arc::new(NbdBackend(connect(&sock, 64)));
    let engine =
        Engine::with_devices(&cfg, &EngineConfig::default(), cache, backend.clone()).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut model = vec![0u8; VOLUME];
    for _ in 0..600 {
        let len = [4096, 512, 8192][rng.gen_range(0..3)];
        let at = rng.gen_range(0..(VOLUME - len) as u64);
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        engine.write(&data, at, false).unwrap();
        model[at as usize..at as usize + len].copy_from_slice(&data);
    }
    engine.flush_all().unwrap();
    let s = engine.stats();
    assert!(s.flush_jobs > 0 && s.flushed_lines > 100, "{s:?}");
    assert_eq!(s.dirty_lines, 0);
    let mut remote_bytes = vec![0u8; VOLUME];
    backend.0.read(&mut remote_bytes, 0).unwrap();
    assert!(remote_bytes == model, "the remote alone holds the volume");
}
