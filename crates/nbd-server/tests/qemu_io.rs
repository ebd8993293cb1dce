//! qemu-io round trip over a Unix socket.
use std::process::Command;
use std::sync::Arc;
use tiercache_nbd_server::*;

#[test]
fn qemu_io_write_then_verify_read() {
    if Command::new("qemu-io").arg("--version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "qemu-io missing");
        eprintln!("skipping: qemu-io not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("nbdsrv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let stats = Arc::new(ServerStats::default());
    let st = stats.clone();
    std::thread::spawn(move || {
        serve_unix(
            l,
            Arc::new(MemDevice::new(8 << 20)),
            ServerConfig::default(),
            st,
        )
    });
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let run = |cmd: &str| {
        let o = Command::new("qemu-io")
            .args(["-f", "raw", "-c", cmd, &uri])
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && !out.contains("Pattern verification failed"),
            "{cmd}: {out}"
        );
    };
    run("write -P 0xab 4096 65536");
    run("read -P 0xab 4096 65536");
    run("read -P 0 0 4096");
    assert!(
        stats
            .bytes_written
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 65536
    );
}
