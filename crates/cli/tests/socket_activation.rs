//! Socket activation: `tiercache serve` accepting on the listening socket a service manager
//! passes (descriptor 3, `LISTEN_FDS=1`, `LISTEN_PID` = the server's pid, as systemd does),
//! with an NBD client (qemu-io) writing and reading through it; a socket that does not match
//! the config refused by name; the example units verified by `systemd-analyze`.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tiercache")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn config(dir: &Path, serve: &str) -> PathBuf {
    let p = dir.join("serve.toml");
    std::fs::write(
        &p,
        format!(
            r#"
[cache]
capacity = "8MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "cache.img"
backend_path = "backend.img"
backend_size = "16MiB"
[serve]
{serve}
"#
        ),
    )
    .unwrap();
    p
}

/// A server process, killed if a test fails before it stops.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tiercache serve CFG` started as a service manager starts an activated service: `fd` open
/// as descriptor 3, `LISTEN_FDS=1` and `LISTEN_PID` naming the server's own pid (the shell
/// sets it to its pid, `$$`, then `exec`s the server, which keeps that pid).
fn activated(dir: &Path, cfg: &Path, fd: RawFd) -> Command {
    let mut c = Command::new("sh");
    c.args([
        "-c",
        r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve "$1""#,
        bin(),
    ])
    .arg(cfg)
    .current_dir(dir)
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.join("serve.log")).unwrap());
    // SAFETY: the closure runs in the forked child before exec and calls only `dup2` and
    // `fcntl`, which are async-signal-safe; `fd` is open in the parent (the caller keeps its
    // listener alive until `spawn` returns) and so in the child. dup2 onto 3 clears
    // close-on-exec on the copy; when `fd` already is 3, dup2 does nothing and the flag is
    // cleared by hand, so the server inherits it as descriptor 3 either way.
    unsafe {
        c.pre_exec(move || {
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

fn wait_for(server: &mut Server, path: &Path, log: &Path) {
    let t = Instant::now();
    while !path.exists() {
        assert!(
            server.0.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30),
            "serve did not start: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn qemu_io(uri: &str, cmd: &str) {
    let o = Command::new("qemu-io")
        .args(["-f", "raw", "-c", cmd, uri])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !out.contains("Pattern verification failed"),
        "qemu-io {cmd}: {out}"
    );
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn serve_accepts_on_a_unix_socket_the_service_manager_passes() {
    if !tiercache_testsupport::tool("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), r#"socket = "nbd.sock""#);
    let sock = dir.path().join("nbd.sock");
    // The service manager's socket: bound and listening before the server exists.
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let mut server = Server(
        activated(dir.path(), &cfg, listener.as_raw_fd())
            .spawn()
            .unwrap(),
    );
    let log = dir.path().join("serve.log");
    wait_for(&mut server, &dir.path().join("nbd.sock.ctl"), &log);
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    qemu_io(&uri, "write -P 0x5a 0 1M");
    qemu_io(&uri, "read -P 0x5a 0 1M");
    qemu_io(&uri, "read -P 0 1M 64k");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("listening on the socket the service manager passed (LISTEN_FDS)"),
        "{text}"
    );
    // The operator's commands find it from the config, as for a server that bound its socket.
    let o = Command::new(bin())
        .args(["detach", "--quiet"])
        .arg(&cfg)
        .output()
        .unwrap();
    ok(&o, "detach");
    assert!(server.0.wait().unwrap().success());
    // The socket file is the service manager's: the server leaves it, and it still listens
    // (systemd would start the service again on the next connection).
    assert!(sock.exists(), "the server removed the passed socket");
    let _client = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    // What was written is on the backend: the detach left nothing dirty.
    let backend = std::fs::read(dir.path().join("backend.img")).unwrap();
    assert!(backend[..1 << 20].iter().all(|&b| b == 0x5a));
}

#[test]
fn serve_accepts_on_a_tcp_socket_the_service_manager_passes() {
    if !tiercache_testsupport::tool("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = config(dir.path(), &format!(r#"listen = "{addr}""#));
    let mut server = Server(
        activated(dir.path(), &cfg, listener.as_raw_fd())
            .spawn()
            .unwrap(),
    );
    let log = dir.path().join("serve.log");
    let ctl = Command::new(bin())
        .args(["status", "--json"])
        .arg(&cfg)
        .output()
        .unwrap();
    let t = Instant::now();
    let mut ctl = ctl;
    while !ctl.status.success() {
        assert!(
            server.0.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30),
            "serve did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
        ctl = Command::new(bin())
            .args(["status", "--json"])
            .arg(&cfg)
            .output()
            .unwrap();
    }
    let uri = format!("nbd://{addr}");
    qemu_io(&uri, "write -P 0x3c 4096 256k");
    qemu_io(&uri, "read -P 0x3c 4096 256k");
    let status: serde_json::Value = serde_json::from_slice(&ctl.stdout).unwrap();
    assert_eq!(status["address"], format!("nbd://{addr}"), "{status}");
    ok(
        &Command::new(bin())
            .args(["detach", "--quiet"])
            .arg(&cfg)
            .output()
            .unwrap(),
        "detach",
    );
    assert!(server.0.wait().unwrap().success());
}

#[test]
fn a_passed_socket_that_is_not_the_configs_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), r#"socket = "nbd.sock""#);
    let other = dir.path().join("other.sock");
    let listener = std::os::unix::net::UnixListener::bind(&other).unwrap();
    let o = activated(dir.path(), &cfg, listener.as_raw_fd())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(
        log.contains("other.sock") && log.contains("serve.socket") && log.contains("ListenStream="),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    // A TCP socket for a config serving on a Unix socket: refused, naming serve.listen.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let o = activated(dir.path(), &cfg, tcp.as_raw_fd())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("set serve.listen"), "{log}");
}

#[test]
fn the_socket_activated_units_verify() {
    if !tiercache_testsupport::tool("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (src, installed) in [
        ("tiercache-nbd@.socket", "tiercache-nbd@vm1.socket"),
        ("tiercache-nbd@.service", "tiercache-nbd@vm1.service"),
    ] {
        let unit = std::fs::read_to_string(repo().join("examples/systemd").join(src)).unwrap();
        let path = dir.path().join(installed);
        // The unit as installed, with this build's binary where `cargo install` puts it.
        std::fs::write(&path, unit.replace("/usr/local/bin/tiercache", bin())).unwrap();
        paths.push(path);
    }
    let socket = std::fs::read_to_string(&paths[0]).unwrap();
    assert!(socket.contains("ListenStream=/run/tiercache-nbd/%i.sock"));
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .unwrap();
    ok(&o, "systemd-analyze verify");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
