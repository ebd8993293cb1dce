//! The engine in front of a remote NBD export served by a real nbdkit: data round trips, the
//! backend killed mid write-back burst and restarted, a stalled backend, and injected errors.
//! Every check compares against a shadow of what clients were told was written.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tiercache_engine::config::RemoteBackendConfig;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};
use tiercache_testsupport::ServerProcess;

const VOLUME: u64 = 8 << 20;
const LINE: u64 = 4096;

/// Whether nbdkit runs; on CI a missing nbdkit fails the test instead of skipping it.
fn have_nbdkit() -> bool {
    tiercache_testsupport::tool("nbdkit")
}

/// An nbdkit serving `file` on `sock` (with `filters`: `--filter=...` options and their
/// parameters), killed when dropped.
fn nbdkit(sock: &Path, file: &Path, filters: &[&str]) -> ServerProcess {
    let _ = std::fs::remove_file(sock);
    let mut cmd = Command::new("nbdkit");
    cmd.args(["-f", "--exit-with-parent", "-U"]).arg(sock);
    for f in filters.iter().filter(|a| a.starts_with("--filter")) {
        cmd.arg(f);
    }
    cmd.arg("file").arg(format!("file={}", file.display()));
    cmd.args(filters.iter().filter(|a| !a.starts_with("--filter")));
    ServerProcess::start(&mut cmd, sock)
}

struct Setup {
    dir: tempfile::TempDir,
    sock: PathBuf,
    backend: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("backend.sock");
    let backend = dir.path().join("backend.img");
    std::fs::File::create(&backend)
        .unwrap()
        .set_len(VOLUME)
        .unwrap();
    Setup { dir, sock, backend }
}

fn engine_config(s: &Setup, timeout_ms: u64, retries: u32) -> EngineConfig {
    EngineConfig {
        cache_path: s.dir.path().join("cache.img"),
        backend_path: format!("nbd+unix:///?socket={}", s.sock.display()).into(),
        remote: RemoteBackendConfig {
            connections: 4,
            timeout_ns: timeout_ms * 1_000_000,
            retries,
            backoff_ns: 10_000_000,
            connect_timeout_ns: 1_000_000_000,
        },
        flusher_poll_ns: 2_000_000,
        ..EngineConfig::default()
    }
}

fn cache_config(policy: WritePolicy, capacity: u64) -> CacheConfig {
    CacheConfig {
        capacity,
        line_size: LINE,
        write_policy: policy,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::Lazy {
            idle_ns: 1_000_000,
            batch: 16,
        },
        shards: 16,
        ..CacheConfig::default()
    }
}

/// What clients were told: `Some(byte)` where a write (or the initial zeroes) was
/// acknowledged, `None` where a failed write left the range unspecified.
type Shadow = Vec<Option<u8>>;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(0x9E37_79B9) >> 7) as u8 ^ (i as u8).wrapping_mul(7))
        .collect()
}

fn check_bytes(what: &str, got: &[u8], want: &[Option<u8>], at: u64) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if let Some(w) = w {
            assert_eq!(g, w, "{what}: byte at {}", at + i as u64);
        }
    }
}

/// The backend file alone (after a detach) holds every acknowledged byte.
fn check_backend_file(path: &Path, shadow: &Shadow) {
    let f = std::fs::File::open(path).unwrap();
    let mut data = vec![0u8; VOLUME as usize];
    f.read_exact_at(&mut data, 0).unwrap();
    check_bytes("backend after detach", &data, shadow, 0);
}

/// Runs `ops` random line-aligned reads and writes from one thread over `region`; failures
/// are allowed only when `may_fail`, and leave the written range unspecified.
fn random_io(
    engine: &Engine,
    shadow: &mut Shadow,
    region: std::ops::Range<u64>,
    seed: u64,
    ops: u32,
    may_fail: bool,
) -> (u32, u32) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let lines = (region.end - region.start) / LINE;
    let (mut ok, mut failed) = (0, 0);
    for n in 0..ops {
        let count = rng.gen_range(1..=4u64).min(lines);
        let off = region.start + rng.gen_range(0..=lines - count) * LINE;
        let len = (count * LINE) as usize;
        let range = off as usize..off as usize + len;
        if rng.gen_bool(0.5) {
            let data = pattern(seed * 1_000_000 + n as u64, len);
            match engine.write(&data, off, false) {
                Ok(()) => {
                    ok += 1;
                    for (s, b) in shadow[range].iter_mut().zip(&data) {
                        *s = Some(*b);
                    }
                }
                Err(e) => {
                    assert!(may_fail, "write {n} at {off}: {e}");
                    failed += 1;
                    shadow[range].fill(None);
                }
            }
        } else {
            let mut buf = vec![0u8; len];
            match engine.read(&mut buf, off) {
                Ok(()) => {
                    ok += 1;
                    check_bytes(&format!("read {n}"), &buf, &shadow[range], off);
                }
                Err(e) => {
                    assert!(may_fail, "read {n} at {off}: {e}");
                    failed += 1;
                }
            }
        }
    }
    (ok, failed)
}

/// Detaches, retrying while the remote reports errors (bounded).
fn detach(engine: &Engine) {
    let mut last = None;
    for _ in 0..200 {
        match engine.flush_all() {
            Ok(()) => return,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("detach kept failing: {last:?}");
}

/// Four threads of write-back traffic through a remote backend, then a detach: reads match
/// and the backend file alone holds the volume.
#[test]
fn write_back_over_nbdkit_reads_back_and_detaches() {
    if !have_nbdkit() {
        return;
    }
    let s = setup();
    let _server = nbdkit(&s.sock, &s.backend, &[]);
    let engine = Engine::open(
        &cache_config(WritePolicy::WriteBack, 1 << 20),
        &engine_config(&s, 5000, 3),
    )
    .unwrap();
    assert_eq!(engine.size(), VOLUME);
    assert!(engine
        .notes()
        .iter()
        .any(|n| n.contains("dirty_full = bypass")));
    let quarter = VOLUME / 4;
    let shadows: Vec<Shadow> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let engine = &engine;
                sc.spawn(move || {
                    let mut shadow = vec![Some(0u8); VOLUME as usize];
                    random_io(
                        engine,
                        &mut shadow,
                        t * quarter..(t + 1) * quarter,
                        t + 1,
                        600,
                        false,
                    );
                    shadow
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut shadow = vec![Some(0u8); VOLUME as usize];
    for (t, sh) in shadows.iter().enumerate() {
        let r = t * quarter as usize..(t + 1) * quarter as usize;
        shadow[r.clone()].copy_from_slice(&sh[r]);
    }
    engine.flush().unwrap();
    detach(&engine);
    let st = engine.stats();
    assert_eq!(st.dirty_lines, 0);
    assert!(
        st.flushed_lines > 0,
        "the flusher wrote lines back over NBD"
    );
    let link = st.backend_link.expect("remote counters");
    assert!(link.connections >= 1 && link.flushes > 0, "{link:?}");
    assert_eq!(
        (link.connection_losses, link.failed_requests),
        (0, 0),
        "{link:?}"
    );
    check_backend_file(&s.backend, &shadow);
}

/// kill -9 of the backend server during a write-back burst, then a restart: the engine
/// reconnects, drains its dirty lines, and no acknowledged write is lost.
#[test]
fn backend_killed_mid_burst_reconnects_and_loses_no_acknowledged_write() {
    if !have_nbdkit() {
        return;
    }
    let s = setup();
    let server = nbdkit(&s.sock, &s.backend, &[]);
    // A cache of half the volume: the flusher is busy writing back during the burst.
    let engine = Engine::open(
        &cache_config(WritePolicy::WriteBack, VOLUME / 2),
        &engine_config(&s, 500, 1),
    )
    .unwrap();
    let mut shadow = vec![Some(0u8); VOLUME as usize];
    let (ok1, _) = random_io(&engine, &mut shadow, 0..VOLUME, 7, 1500, false);
    assert!(engine.stats().flush_jobs > 0 || engine.stats().dirty_lines > 0);
    server.kill9();
    // The burst goes on with the backend gone: hits and cache-absorbed writes succeed; what
    // needs the backend fails (EIO) and leaves its range unspecified.
    let (ok2, failed2) = random_io(&engine, &mut shadow, 0..VOLUME, 8, 400, true);
    let dirty_while_down = engine.stats().dirty_lines;
    assert!(
        dirty_while_down > 0,
        "dirty data is kept while the backend is down"
    );
    assert!(
        ok2 > 0,
        "the cache kept serving with the backend down ({failed2} failed)"
    );
    let _server = nbdkit(&s.sock, &s.backend, &[]);
    let (ok3, _) = random_io(&engine, &mut shadow, 0..VOLUME, 9, 300, false);
    detach(&engine);
    let st = engine.stats();
    let link = st.backend_link.clone().unwrap();
    assert!(
        link.connection_losses >= 1 && link.reconnects >= 1,
        "{link:?}"
    );
    assert_eq!(st.dirty_lines, 0);
    check_backend_file(&s.backend, &shadow);
    // And through the engine, after the detach (the cache still holds clean copies).
    let mut all = vec![0u8; VOLUME as usize];
    engine.read(&mut all, 0).unwrap();
    check_bytes("engine after detach", &all, &shadow, 0);
    eprintln!("ok {ok1}/{ok2}/{ok3}, failed while down {failed2}, dirty while down {dirty_while_down}, link {link:?}");
}

/// A backend that stops answering: misses get an error after the configured timeout and
/// retries, hits keep being served, and the engine works again once the backend resumes.
#[test]
fn stalled_backend_fails_misses_in_bounded_time_and_keeps_serving_hits() {
    if !have_nbdkit() {
        return;
    }
    let s = setup();
    let server = nbdkit(&s.sock, &s.backend, &[]);
    let engine = Engine::open(
        &cache_config(WritePolicy::WriteBack, 1 << 20),
        &engine_config(&s, 300, 1),
    )
    .unwrap();
    let hot = pattern(1, 64 << 10);
    engine.write(&hot, 0, false).unwrap();
    engine.flush().unwrap();
    server.signal("-STOP");
    let mut b = vec![0u8; 64 << 10];
    engine.read(&mut b, 0).unwrap();
    assert!(b == hot, "a hit is served with the backend stalled");
    let t = Instant::now();
    let (e, depth) = std::thread::scope(|sc| {
        let miss = sc.spawn(|| engine.read(&mut [0u8; 4096], 4 << 20).unwrap_err());
        // The stalled miss shows as the backend's queue depth while it waits.
        let mut depth = 0;
        while !miss.is_finished() && depth == 0 {
            depth = engine.stats().backend_in_flight;
            std::thread::sleep(Duration::from_millis(5));
        }
        (miss.join().unwrap(), depth)
    });
    assert_eq!(depth, 1, "one backend read outstanding");
    assert_eq!(engine.stats().backend_in_flight, 0);
    let waited = t.elapsed();
    // Two attempts of 300 ms and a 10 ms backoff; the bound only rules out a hang.
    assert!(waited < Duration::from_secs(20), "{waited:?}: {e}");
    let link = engine.stats().backend_link.unwrap();
    assert!(link.timeouts >= 2 && link.failed_requests >= 1, "{link:?}");
    engine.read(&mut b, 0).unwrap();
    assert!(b == hot, "still serving hits after the error");
    server.signal("-CONT");
    engine.read(&mut [0u8; 4096], 4 << 20).unwrap();
    engine.write(&[5u8; 4096], 6 << 20, true).unwrap();
    detach(&engine);
    assert!(engine.stats().backend_link.unwrap().reconnects >= 1);
    let mut tail = [0u8; 4096];
    std::fs::File::open(&s.backend)
        .unwrap()
        .read_exact_at(&mut tail, 6 << 20)
        .unwrap();
    assert_eq!(tail, [5u8; 4096]);
}

/// nbdkit's error filter fails a fifth of the backend's requests: the engine retries, counts
/// them, returns errors only when retries run out, and corrupts nothing.
#[test]
fn injected_backend_errors_are_counted_and_corrupt_nothing() {
    if !have_nbdkit() {
        return;
    }
    let s = setup();
    let _server = nbdkit(
        &s.sock,
        &s.backend,
        &["--filter=error", "error=EIO", "error-rate=20%"],
    );
    for policy in [WritePolicy::WriteThrough, WritePolicy::WriteBack] {
        let engine = Engine::open(
            &cache_config(policy, 1 << 20),
            &EngineConfig {
                format: true,
                ..engine_config(&s, 5000, 1)
            },
        )
        .unwrap();
        let mut shadow = vec![None; VOLUME as usize];
        let mut cur = vec![0u8; VOLUME as usize];
        std::fs::File::open(&s.backend)
            .unwrap()
            .read_exact_at(&mut cur, 0)
            .unwrap();
        for (s, b) in shadow.iter_mut().zip(&cur) {
            *s = Some(*b);
        }
        let (ok, failed) = random_io(&engine, &mut shadow, 0..VOLUME, 11, 1200, true);
        let _ = engine.flush();
        detach(&engine);
        let link = engine.stats().backend_link.unwrap();
        assert!(
            link.error_replies > 0 && link.retries > 0,
            "{policy:?}: {link:?}"
        );
        assert_eq!(
            link.connection_losses, 0,
            "error replies keep connections up"
        );
        assert!(ok > 0, "{policy:?}: {ok} ok, {failed} failed");
        check_backend_file(&s.backend, &shadow);
        eprintln!("{policy:?}: {ok} ok, {failed} failed, {link:?}");
    }
}
