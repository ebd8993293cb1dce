//! Write-back to a remote NBD export: how fast a full flush (`flush_all`) writes dirty lines
//! back, with flush jobs' writes pipelined over the connection pool (`pipeline` 64) against one
//! request per round trip (`pipeline` 1, the former behaviour), side by side in one run. The
//! dirty lines are every other line of the volume, so no two merge into one request.
//!
//! The remote: nbdkit's memory plugin behind its delay filter (`wdelay`, a network round trip
//! plus a remote device's write latency), over a Unix socket, 4 connections (multi-conn).
//!
//! `cargo run --profile test -p tiercache-engine --example remote_flush -- [LINES] [WDELAY_MS] [ROUNDS]`
//!
//! Prints one JSON line per run and the median ratio pipelined / one-at-a-time. Needs nbdkit.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_blockdev::MemDevice;
use tiercache_engine::device::NbdBackend;
use tiercache_engine::slot_table::Layout;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_nbd::{Remote, RemoteConfig};
use tiercache_policy::{CacheConfig, CleaningConfig, PromotionConfig, WritePolicy};

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: u64 = args
        .next()
        .map_or(2048, |a| a.parse().expect("LINES: a number"));
    let wdelay_ms: u64 = args
        .next()
        .map_or(1, |a| a.parse().expect("WDELAY_MS: a number"));
    let rounds: usize = args
        .next()
        .map_or(3, |a| a.parse().expect("ROUNDS: a number"));
    let dir = tempfile::tempdir().expect("temporary directory");
    let sock = dir.path().join("remote.sock");
    let volume = (lines * 8192).max(16 << 20);
    let mut server = Command::new("nbdkit")
        .args(["-f", "--exit-with-parent", "-U"])
        .arg(&sock)
        .args(["--filter=delay", "memory", &format!("size={volume}")])
        .arg(format!("wdelay={wdelay_ms}ms"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("remote_flush: nbdkit: {e}");
            std::process::exit(1)
        });
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "nbdkit did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let cfg = CacheConfig {
        capacity: lines * 4096,
        line_size: 4096,
        write_policy: WritePolicy::WriteBack,
        promotion: PromotionConfig::Always,
        cleaning: CleaningConfig::None,
        shards: 16,
        ..CacheConfig::default()
    };
    let layout = Layout::new(lines as u32, 4096);
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let mut rate = [0.0f64; 2];
        for (k, pipeline) in [1usize, 64].into_iter().enumerate() {
            let remote = Remote::connect(
                uri.parse().expect("URI"),
                RemoteConfig {
                    pipeline,
                    ..RemoteConfig::default()
                },
            )
            .expect("connect");
            let cache = Arc::new(MemDevice::new(layout.device_len() as usize));
            let engine = Engine::with_devices(
                &cfg,
                &EngineConfig::default(),
                cache,
                Arc::new(NbdBackend(remote)),
            )
            .expect("engine");
            let data = vec![round as u8; 4096];
            // Every other line: no two dirty lines adjacent, so no write-back merges lines
            // into one request (each line is a request, as random writes leave them).
            for i in 0..lines {
                engine.write(&data, i * 8192, false).expect("write");
            }
            let t = Instant::now();
            engine.flush_all().expect("flush_all");
            let secs = t.elapsed().as_secs_f64();
            let s = engine.stats();
            assert_eq!(s.dirty_lines, 0);
            rate[k] = s.flushed_lines as f64 / secs;
            println!(
                "{{\"round\": {round}, \"pipeline\": {pipeline}, \"lines\": {}, \"seconds\": {secs:.3}, \"lines_per_s\": {:.0}}}",
                s.flushed_lines, rate[k]
            );
            engine.shutdown().expect("shutdown");
        }
        ratios.push(rate[1] / rate[0]);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{{\"wdelay_ms\": {wdelay_ms}, \"median_ratio_pipelined_over_one_at_a_time\": {:.2}}}",
        ratios[ratios.len() / 2]
    );
    let _ = server.kill();
    let _ = server.wait();
}
