//! The protocol's modern features through a served cache, checked with the real tools:
//! `nbdinfo` against `tiercache serve` offers what nbdkit's file plugin offers on the same
//! backend file (and more), `nbdinfo --map` reports the sparse backend's holes exactly as
//! nbdkit does and `--map=tiercache:state` the cache's resident and dirty ranges; `nbdcopy`
//! skips the holes (the backend bytes the cache read, measured, are the data's, against the
//! whole volume with extents off); `qemu-img map` sees the same layout; fast zero is refused
//! at once and a plain zero done; `NBD_CMD_FLAG_REQ_ONE` is honoured; a cache whose backend
//! is a remote NBD export (nbdkit's file plugin) reports the remote's holes, and all data
//! when the remote offers no block status.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tiercache_nbd::client::{Command as Nbd, Connection};
use tiercache_server::{Server, ServerHandle};

const MIB: u64 = 1 << 20;
const VOLUME: u64 = 64 * MIB;
/// The backend's data: 1 MiB at each of these MiB offsets; the rest is holes.
const DATA_AT_MIB: [u64; 3] = [1, 10, 40];

/// A sparse backend file (data at [`DATA_AT_MIB`], each MiB a distinct pattern) and a
/// write-back cache of 64 KiB lines serving it over a Unix socket.
fn serve(dir: &Path) -> ServerHandle {
    let backend = dir.join("backend.img");
    let f = std::fs::File::create(&backend).unwrap();
    f.set_len(VOLUME).unwrap();
    for (i, m) in DATA_AT_MIB.iter().enumerate() {
        f.write_all_at(&vec![0x41 + i as u8; MIB as usize], m * MIB)
            .unwrap();
    }
    f.sync_all().unwrap();
    let path = dir.join("serve.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[cache]
capacity = "16MiB"
line_size = "64KiB"
write_policy = "write-back"
# Dirty lines stay dirty for the test's length (the cache-state map shows them).
cleaning = {{ policy = "lazy", idle_ns = "60s", batch = 64 }}
[engine]
cache_path = "{d}/cache.img"
backend_path = "{d}/backend.img"
backend_size = "64MiB"
[serve]
socket = "{d}/nbd.sock"
"#,
            d = dir.display()
        ),
    )
    .unwrap();
    let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
    Server::builder(setup).log(|_| {}).start().unwrap()
}

/// A directory on a file system that keeps holes (not tmpfs-limited /tmp on every machine:
/// /var/tmp, as the O_DIRECT tests use).
fn workdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{cmd:?}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `nbdinfo --map` lines as (offset, length, flags).
fn map(uri: &str, context: &str) -> Vec<(u64, u64, u32)> {
    let out = run(Command::new("nbdinfo")
        .arg(format!("--map={context}"))
        .arg(uri));
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// The flags `m` gives byte `at`.
fn flags_at(m: &[(u64, u64, u32)], at: u64) -> u32 {
    m.iter()
        .find(|&&(o, l, _)| o <= at && at < o + l)
        .unwrap_or_else(|| panic!("{at} not mapped: {m:?}"))
        .2
}

/// `nbdinfo`'s `can_*` and `is_*` lines, by name.
fn capabilities(out: &str) -> BTreeMap<String, bool> {
    out.lines()
        .filter_map(|l| l.trim().split_once(": "))
        .filter(|(k, _)| k.starts_with("can_"))
        .map(|(k, v)| (k.to_string(), v == "true"))
        .collect()
}

#[test]
fn nbdinfo_finds_what_nbdkits_file_plugin_offers_and_the_same_holes() {
    if !(tiercache_testsupport::tool("nbdinfo") && tiercache_testsupport::tool("nbdkit")) {
        return;
    }
    let dir = workdir();
    let server = serve(dir.path());
    let uri = server.addr().to_string();
    let ours = run(Command::new("nbdinfo").arg(&uri));
    assert!(ours.contains("using structured packets"), "{ours}");
    assert!(
        ours.contains("base:allocation") && ours.contains("tiercache:state"),
        "{ours}"
    );
    let backend = dir.path().join("backend.img");
    // nbdkit's file plugin on the same backend file, asked the same questions.
    let theirs = run(Command::new("nbdkit")
        .args(["-U", "-", "file"])
        .arg(&backend)
        .args([
            "--run",
            "nbdinfo \"$uri\" && echo MAP && nbdinfo --map \"$uri\"",
        ]));
    let (theirs_info, theirs_map) = theirs.split_once("MAP\n").unwrap();
    let (ours_caps, theirs_caps) = (capabilities(&ours), capabilities(theirs_info));
    assert!(theirs_caps.len() >= 8, "{theirs_info}");
    for (cap, &on) in &theirs_caps {
        assert!(
            !on || ours_caps.get(cap) == Some(&true),
            "nbdkit offers {cap}, tiercache does not:\n{ours}"
        );
    }
    assert_eq!(ours_caps.get("can_fast_zero"), Some(&true), "{ours}");
    // The holes, exactly as nbdkit reads them from the file.
    let ours_map = run(Command::new("nbdinfo").arg("--map").arg(&uri));
    assert_eq!(ours_map, theirs_map);
    let m = map(&uri, "base:allocation");
    for mib in DATA_AT_MIB {
        assert_eq!(flags_at(&m, mib * MIB), 0, "{m:?}");
        assert_eq!(flags_at(&m, (mib + 1) * MIB - 1), 0, "{m:?}");
        assert_eq!(flags_at(&m, (mib + 1) * MIB), 3, "{m:?}");
    }
    assert_eq!(flags_at(&m, 0), 3, "{m:?}");
    server.stop().unwrap();
}

/// Written ranges are resident and dirty; read ones resident; a write into one of the
/// backend's holes, still only in the cache, is data in `base:allocation` (the backend's
/// hole there is stale).
#[test]
fn the_cache_state_context_shows_resident_and_dirty_ranges() {
    if !tiercache_testsupport::tool("nbdinfo") {
        return;
    }
    let dir = workdir();
    let server = serve(dir.path());
    let uri = server.addr().to_string();
    let t = Duration::from_secs(10);
    let conn = Connection::open(&uri.parse().unwrap(), t).unwrap();
    // A hole of the backend written (20 MiB + 64 KiB .. + 128 KiB), backend data read.
    conn.call(Nbd::Write, false, 20 * MIB + 65536, 131072, &[7; 131072], t)
        .unwrap();
    conn.call(Nbd::Read, false, 10 * MIB, 196608, &[], t)
        .unwrap();
    let state = map(&uri, "tiercache:state");
    assert_eq!(flags_at(&state, 20 * MIB + 65536), 3, "{state:?}");
    assert_eq!(flags_at(&state, 20 * MIB + 196607), 3, "{state:?}");
    assert_eq!(flags_at(&state, 20 * MIB + 196608), 0, "{state:?}");
    assert_eq!(flags_at(&state, 20 * MIB + 65535), 0, "{state:?}");
    assert_eq!(flags_at(&state, 10 * MIB), 1, "{state:?}");
    assert_eq!(flags_at(&state, 10 * MIB + 196607), 1, "{state:?}");
    assert_eq!(flags_at(&state, 30 * MIB), 0, "{state:?}");
    // Nothing else is resident (nbdinfo may have read the first line itself).
    let resident: u64 = state
        .iter()
        .filter(|e| e.2 & 1 != 0 && e.0 >= 65536)
        .map(|e| e.1)
        .sum();
    assert_eq!(resident, 131072 + 196608, "{state:?}");
    let alloc = map(&uri, "base:allocation");
    assert_eq!(flags_at(&alloc, 20 * MIB + 65536), 0, "{alloc:?}");
    assert_eq!(flags_at(&alloc, 20 * MIB), 3, "{alloc:?}");
    server.stop().unwrap();
}

/// `nbdcopy` of the sparse volume through a cold cache reads the data from the backend and
/// skips the holes: the cache's backend read counter is the 3 MiB of data (and no more than
/// a few lines over), against the whole 64 MiB when nbdcopy is told not to ask for extents.
/// The copy holds the backend's bytes.
#[test]
fn nbdcopy_skips_the_holes_of_a_sparse_volume() {
    if !tiercache_testsupport::tool("nbdcopy") {
        return;
    }
    let backend_read = |extents: bool| {
        let dir = workdir();
        let server = serve(dir.path());
        let out = dir.path().join("copy.img");
        let mut cmd = Command::new("nbdcopy");
        if !extents {
            cmd.arg("--no-extents");
        }
        run(cmd.arg(server.addr()).arg(&out));
        let report = server.stop().unwrap();
        let copy = std::fs::read(&out).unwrap();
        let orig = std::fs::read(dir.path().join("backend.img")).unwrap();
        assert!(copy == orig, "the copy differs from the backend");
        report.engine.cache.backend_bytes_read
    };
    let sparse = backend_read(true);
    let whole = backend_read(false);
    let data = DATA_AT_MIB.len() as u64 * MIB;
    eprintln!("backend bytes read: {sparse} with extents, {whole} without");
    assert!(sparse >= data && sparse <= data + MIB, "{sparse}");
    assert!(whole >= VOLUME, "{whole}");
}

#[test]
fn qemu_img_map_sees_the_holes() {
    if !tiercache_testsupport::tool("qemu-img") {
        return;
    }
    let dir = workdir();
    let server = serve(dir.path());
    let out =
        run(Command::new("qemu-img").args(["map", "--output=json", "-f", "raw", server.addr()]));
    let v: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let data: Vec<(u64, u64)> = v
        .iter()
        .filter(|e| e["data"] == true)
        .map(|e| (e["start"].as_u64().unwrap(), e["length"].as_u64().unwrap()))
        .collect();
    let want: Vec<(u64, u64)> = DATA_AT_MIB.iter().map(|m| (m * MIB, MIB)).collect();
    assert_eq!(data, want, "{out}");
    assert!(
        v.iter().all(|e| e["data"] == true || e["zero"] == true),
        "{out}"
    );
    server.stop().unwrap();
}

/// A fast zero over the file backend (on a file system that punches holes) is done without
/// writing the zeroes: the range reads as zeroes, the bytes beside it are kept, and the
/// backend file has a hole there (`base:allocation`); a plain zero is done too. A block
/// status with `NBD_CMD_FLAG_REQ_ONE` gets one extent per context, within the request.
#[test]
fn fast_zero_is_done_on_a_file_backend_and_req_one_honoured() {
    if !tiercache_testsupport::tool("nbdsh") {
        return;
    }
    let dir = workdir();
    let server = serve(dir.path());
    let script = r#"
h.add_meta_context("base:allocation")
h.add_meta_context("tiercache:state")
h.connect_uri(uri)
assert h.can_fast_zero()
assert h.pread(4096, 1048576) == b"A" * 4096
h.zero(65536, 1048576, nbd.CMD_FLAG_FAST_ZERO)
assert h.pread(65536, 1048576) == bytes(65536)
assert h.pread(4096, 1048576 + 65536) == b"A" * 4096
seen = {}
def got(ctx, off, entries, err):
    seen[ctx] = entries
    return 0
h.block_status(65536, 1048576, got, nbd.CMD_FLAG_REQ_ONE)
assert seen["base:allocation"] == [65536, 3], seen
h.zero(65536, 10485760)
assert h.pread(4096, 10485760) == bytes(4096)
h.block_status(8388608, 0, got, nbd.CMD_FLAG_REQ_ONE)
# The first hole now runs on into the one the fast zero punched.
assert seen["base:allocation"] == [1048576 + 65536, 3], seen
assert len(seen["tiercache:state"]) == 2 and seen["tiercache:state"][0] <= 8388608, seen
seen.clear()
h.block_status(8388608, 0, got)
assert len(seen["base:allocation"]) >= 4, seen
print("ok")
"#;
    // nbdsh runs `python3 -m nbd`: the system's Python, which has the module python3-libnbd
    // installs (not a virtualenv's first on PATH).
    let path = format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default());
    let out = run(Command::new("nbdsh")
        .env("PATH", path)
        .arg("-c")
        .arg(format!(
            "uri = {:?}\nh = nbd.NBD()\n{script}",
            server.addr()
        )));
    assert!(out.contains("ok"), "{out}");
    server.stop().unwrap();
}

/// nbdkit's file plugin serving `file` on a Unix socket (`extra` flags first); killed on drop.
fn nbdkit_file(sock: &Path, file: &Path, extra: &[&str]) -> tiercache_testsupport::ServerProcess {
    tiercache_testsupport::ServerProcess::start(
        Command::new("nbdkit")
            .args(["-f", "--exit-with-parent"])
            .args(extra)
            .arg("-U")
            .arg(sock)
            .arg("file")
            .arg(file),
        sock,
    )
}

#[test]
fn a_remote_backends_holes_show_through_the_cache() {
    if !(tiercache_testsupport::tool("nbdkit") && tiercache_testsupport::tool("nbdinfo")) {
        return;
    }
    for (extra, holes) in [(&[][..], true), (&["--no-sr"][..], false)] {
        let dir = workdir();
        let file = dir.path().join("remote.img");
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(VOLUME).unwrap();
        f.write_all_at(&[9; 65536], 3 * MIB).unwrap();
        f.sync_all().unwrap();
        let remote_sock = dir.path().join("remote.sock");
        let _nbdkit = nbdkit_file(&remote_sock, &file, extra);
        let path = dir.path().join("serve.toml");
        std::fs::write(
            &path,
            format!(
                r#"
[cache]
capacity = "4MiB"
line_size = "64KiB"
[engine]
cache_path = "{d}/cache.img"
backend_path = "nbd+unix:///?socket={d}/remote.sock"
[serve]
socket = "{d}/nbd.sock"
"#,
                d = dir.path().display()
            ),
        )
        .unwrap();
        let setup = tiercache_server::config::load(Some(&path), &[]).unwrap();
        let server = Server::builder(setup).log(|_| {}).start().unwrap();
        let m = map(server.addr(), "base:allocation");
        if holes {
            assert_eq!(flags_at(&m, 0), 3, "{m:?}");
            assert_eq!(flags_at(&m, 3 * MIB), 0, "{m:?}");
            assert_eq!(flags_at(&m, 3 * MIB + 65536), 3, "{m:?}");
            assert_eq!(flags_at(&m, VOLUME - 1), 3, "{m:?}");
        } else {
            // No structured replies, so no block status from the remote: all data.
            assert_eq!(m, vec![(0, VOLUME, 0)]);
        }
        server.stop().unwrap();
    }
}
