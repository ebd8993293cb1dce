//! Structured replies through a served cache on an O_DIRECT cache device, where cache hits
//! are answered as the device completes them (the started-reads path): qemu-io, which asks
//! for structured replies, writes patterns and reads them back verified, hits and misses.

use std::process::Command;
use tiercache_server::Server;

#[test]
fn qemu_io_reads_back_through_a_direct_cache_in_structured_replies() {
    if !tiercache_testsupport::tool("qemu-io") {
        return;
    }
    // O_DIRECT needs a real file system (not tmpfs).
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(
        &path,
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
cache_direct = true
[serve]
socket = "{d}/nbd.sock"
"#,
            d = dir.path().display()
        ),
    )
    .unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    let server = match Server::builder(setup).log(|_| {}).start() {
        Ok(s) => s,
        Err(e) if format!("{e:#}").contains("O_DIRECT") => {
            eprintln!("skipped: no O_DIRECT here: {e:#}");
            return;
        }
        Err(e) => panic!("{e:#}"),
    };
    let uri = server.addr().to_string();
    let io = |cmd: &str| {
        let o = Command::new("qemu-io")
            .args(["-f", "raw", "-c", cmd, &uri])
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && !out.contains("failed") && !out.contains("error"),
            "{cmd}: {out}"
        );
    };
    io("write -P 0x61 0 1M");
    io("write -P 0x62 8M 64k");
    for _ in 0..2 {
        // Hits (the lines just written), a miss, and reads spanning both.
        io("aio_read -P 0x61 0 64k");
        io("read -P 0x61 4096 512k");
        io("read -P 0x62 8M 64k");
        io("read -P 0 12M 64k");
    }
    server.stop().unwrap();
}
