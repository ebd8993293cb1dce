//! Real clients: qemu-io patterns, fio verify, nbdcopy of a whole volume.
mod common;

use common::{have, serve};
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tiercache_blockdev::{BlockDevice, MemDevice};
use tiercache_nbd::*;

fn qemu_io(uri: &str, cmd: &str) {
    let o = Command::new("qemu-io")
        .args(["-f", "raw", "-c", cmd, uri])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success()
            && !out.contains("Pattern verification failed")
            && !out.contains("failed"),
        "{cmd}: {out}"
    );
}

#[test]
fn qemu_io_write_then_verify_read() {
    if !have("qemu-io") {
        return;
    }
    let (sock, stats, stop, _d) = serve(Arc::new(MemDevice::new(8 << 20)), ServerConfig::default());
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    qemu_io(&uri, "write -P 0xab 4096 65536");
    qemu_io(&uri, "read -P 0xab 4096 65536");
    qemu_io(&uri, "read -P 0 0 4096");
    qemu_io(&uri, "write -z 8192 4096");
    qemu_io(&uri, "read -P 0 8192 4096");
    qemu_io(&uri, "flush");
    assert!(stats.bytes_written.load(Relaxed) >= 65536);
    stop.trigger();
}

#[test]
fn qemu_io_over_tcp() {
    if !have("qemu-io") {
        return;
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stop = Shutdown::new();
    let sd = stop.clone();
    std::thread::spawn(move || {
        serve_tcp(
            l,
            Arc::new(MemDevice::new(4 << 20)),
            ServerConfig::default(),
            Arc::new(ServerStats::default()),
            sd,
        )
    });
    let uri = format!("nbd://127.0.0.1:{port}");
    qemu_io(&uri, "write -P 0x5a 0 1M");
    qemu_io(&uri, "read -P 0x5a 0 1M");
    stop.trigger();
}

#[test]
fn fio_verify_random_and_sequential_two_connections() {
    if !have("fio") {
        return;
    }
    let (sock, stats, stop, dir) =
        serve(Arc::new(MemDevice::new(64 << 20)), ServerConfig::default());
    for rw in ["randwrite", "write"] {
        let out = dir.path().join(format!("{rw}.json"));
        let o = Command::new("fio")
            .args([
                "--name=verify",
                "--ioengine=nbd",
                &format!("--uri=nbd+unix:///?socket={}", sock.display()),
                &format!("--rw={rw}"),
                "--bs=4k",
                "--iodepth=16",
                "--size=16m",
                "--numjobs=2",
                "--offset_increment=24m",
                "--verify=crc32c",
                "--verify_state_save=0",
                "--do_verify=1",
                "--output-format=json",
                &format!("--output={}", out.display()),
            ])
            .output()
            .unwrap();
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(
            o.status.success(),
            "fio {rw}: {}{}",
            String::from_utf8_lossy(&o.stderr),
            text
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for job in v["jobs"].as_array().unwrap() {
            assert_eq!(job["error"], 0, "{rw}: {job}");
            assert!(
                job["read"]["io_bytes"].as_u64().unwrap() >= 16 << 20,
                "{rw}: verify read everything back"
            );
        }
    }
    assert!(stats.sessions.load(Relaxed) >= 4);
    assert_eq!(stats.eio.load(Relaxed) + stats.einval.load(Relaxed), 0);
    stop.trigger();
}

#[test]
fn nbdcopy_whole_volume_round_trip() {
    if !have("nbdcopy") {
        return;
    }
    let data: Vec<u8> = (0..(8u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let dev = Arc::new(MemDevice::new(8 << 20));
    let (sock, _stats, stop, dir) = serve(dev.clone(), ServerConfig::default());
    let src = dir.path().join("src.img");
    let back = dir.path().join("back.img");
    std::fs::write(&src, &data).unwrap();
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let run = |a: &str, b: &str| {
        let o = Command::new("nbdcopy").args([a, b]).output().unwrap();
        assert!(
            o.status.success(),
            "nbdcopy {a} {b}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(src.to_str().unwrap(), &uri);
    run(&uri, back.to_str().unwrap());
    assert!(
        std::fs::read(&back).unwrap() == data,
        "the copy back differs"
    );
    let mut check = vec![0u8; 4096];
    dev.read_at(&mut check, 4 << 20).unwrap();
    assert_eq!(&check[..], &data[4 << 20..(4 << 20) + 4096]);
    stop.trigger();
}
