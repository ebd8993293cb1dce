//! The `tiercache:state` metadata context on a two-level export (a RAM level above the cache
//! device, `[ram_level]`), read with `nbdinfo --map=tiercache:state` as an operator would.
//!
//! The semantics (docs/nbd-tls.md's table): the export is one cache to its clients, so a byte
//! is *resident* (1) when either level holds it (a read of it is a hit of the stack) and
//! *dirty* (2) when either holds it newer than the backend. The RAM level holds only clean
//! data (write-through or read-only), so dirty comes from the cache device's level alone.
//! Inclusive (clean RAM victims dropped) and exclusive (clean RAM victims demoted into the
//! level below) stacks report the same: a line the RAM level let go but the level below took
//! stays resident.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tiercache_nbd::client::{Command as Nbd, Connection};
use tiercache_server::{Server, ServerHandle};

const MIB: u64 = 1 << 20;
const LINE: u64 = 65536;

/// A write-back cache of 16 MiB under a RAM level of 1 MiB (16 lines of 64 KiB), inclusive or
/// exclusive, over a 64 MiB backend of zeroes, on a Unix socket.
fn serve(dir: &Path, exclusive: bool) -> ServerHandle {
    let path = dir.join("serve.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[cache]
capacity = "16MiB"
line_size = "64KiB"
write_policy = "write-back"
# Dirty lines stay dirty for the test's length.
cleaning = {{ policy = "lazy", idle_ns = "60s", batch = 64 }}
[ram_level]
capacity = "1MiB"
eviction = "lru"
exclusive = {exclusive}
write_policy = "write-through"
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

/// `nbdinfo --map=tiercache:state` lines as (offset, length, flags).
fn state_map(uri: &str) -> Vec<(u64, u64, u32)> {
    let o = Command::new("nbdinfo")
        .arg("--map=tiercache:state")
        .arg(uri)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "nbdinfo: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
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

/// Bytes of `[from, to)` whose flags are `flags`.
fn bytes_with(m: &[(u64, u64, u32)], from: u64, to: u64, flags: u32) -> u64 {
    m.iter()
        .filter(|e| e.2 == flags)
        .map(|&(o, l, _)| (o + l).min(to).saturating_sub(o.max(from)))
        .sum()
}

fn check_stack(exclusive: bool) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), exclusive);
    let uri = server.addr().to_string();
    let t = Duration::from_secs(10);
    let conn = Connection::open(&uri.parse().unwrap(), t).unwrap();
    // Written: dirty in the cache device's level (and a clean copy in the RAM level).
    conn.call(
        Nbd::Write,
        false,
        20 * MIB,
        2 * LINE as u32,
        &[7; 2 * LINE as usize],
        t,
    )
    .unwrap();
    // Read: 4 MiB, four times the RAM level. Its last lines are in the RAM level; the
    // first ones left it (dropped, or demoted when exclusive) and are in the level below
    // (an inclusive stack filled it on the miss; an exclusive one took them as demotes).
    for at in (10 * MIB..14 * MIB).step_by(LINE as usize) {
        conn.call(Nbd::Read, false, at, LINE as u32, &[], t)
            .unwrap();
    }
    // Read again, from the RAM level (a hit of the stack): nothing moves.
    conn.call(Nbd::Read, false, 14 * MIB - LINE, LINE as u32, &[], t)
        .unwrap();
    let m = state_map(&uri);
    let what = if exclusive { "exclusive" } else { "inclusive" };
    assert_eq!(flags_at(&m, 20 * MIB), 3, "{what}: written {m:?}");
    assert_eq!(flags_at(&m, 20 * MIB + 2 * LINE - 1), 3, "{what}: {m:?}");
    assert_eq!(flags_at(&m, 20 * MIB + 2 * LINE), 0, "{what}: {m:?}");
    assert_eq!(
        bytes_with(&m, 10 * MIB, 14 * MIB, 1),
        4 * MIB,
        "{what}: all that was read is resident in one level or the other: {m:?}"
    );
    assert_eq!(flags_at(&m, 14 * MIB), 0, "{what}: {m:?}");
    assert_eq!(flags_at(&m, 40 * MIB), 0, "{what}: {m:?}");
    // The stack's hits agree: the lines read again came from a level, not the backend,
    // which gave each line read once (and perhaps the first line nbdinfo read itself).
    conn.call(Nbd::Read, false, 10 * MIB, LINE as u32, &[], t)
        .unwrap();
    drop(conn);
    let read = server.stop().unwrap().engine.cache.backend_bytes_read;
    assert!(
        (4 * MIB..=4 * MIB + LINE).contains(&read),
        "{what}: {read} bytes read from the backend"
    );
}

#[test]
fn cache_state_of_a_two_level_export_is_either_level() {
    if !tiercache_testsupport::tool("nbdinfo") {
        return;
    }
    check_stack(false);
    check_stack(true);
}
