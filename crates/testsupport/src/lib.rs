//! Test support shared by the workspace's integration tests (a dev-dependency only).
//!
//! A test that needs an external tool (FUSE, a browser, fio, nbdkit, ...) may skip itself on a
//! developer's machine without it, saying so; on CI (the environment variable `CI` set, as CI
//! services set it) a missing tool fails the test instead, so that a suite cannot pass there by
//! skipping what it was meant to check. `scripts/setup.sh` installs every tool.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

/// Whether the tests run on CI: the environment variable `CI` is set (to anything).
pub fn on_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The guard of a test needing `tool`: `problem` is why it cannot run (`None`: it can).
/// Returns whether the test can run. When it cannot: on CI, panics naming the tool, the problem
/// and how to install it (`package`, by `scripts/setup.sh`); elsewhere prints that the test is
/// skipped and why, and returns `false` (the test then returns). A panic points at the caller.
#[track_caller]
pub fn require(tool: &str, package: &str, problem: Option<String>) -> bool {
    let Some(problem) = problem else {
        return true;
    };
    let message =
        format!("{tool} unavailable ({problem}): `bash scripts/setup.sh` installs {package}");
    assert!(
        !on_ci(),
        "{message}; CI is set, so this test fails instead of skipping"
    );
    eprintln!("skipped: {message}");
    false
}

/// The Debian package `scripts/setup.sh` installs a command-line tool from.
fn package_of(tool: &str) -> &str {
    match tool {
        "qemu-io" | "qemu-nbd" | "qemu-img" => "qemu-utils",
        "nbdcopy" | "nbdinfo" => "libnbd-bin",
        "nbdsh" => "python3-libnbd",
        "fusermount3" => "fuse3",
        "systemd-analyze" => "systemd",
        "psktool" => "gnutls-bin",
        other => other,
    }
}

/// The guard of a test that runs the command-line tool `tool`: whether `tool --version` runs,
/// under [`require`]'s rules (on CI a missing tool fails the test).
#[track_caller]
pub fn tool(tool: &str) -> bool {
    let problem = match std::process::Command::new(tool).arg("--version").output() {
        Ok(_) => None,
        Err(e) => Some(format!("`{tool} --version`: {e}")),
    };
    require(tool, package_of(tool), problem)
}

/// The first of `names` found on `PATH`, as a path.
pub fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why FUSE mounts cannot be made here, if they cannot: no `/dev/fuse`, a `/dev/fuse` this
/// process cannot open (a container started without the device), or no `fusermount3`.
pub fn fuse_problem() -> Option<String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("cannot open /dev/fuse ({e})"));
    }
    if find_on_path(&["fusermount3"]).is_none()
        && !["/usr/bin/fusermount3", "/bin/fusermount3"]
            .iter()
            .any(|p| is_executable(Path::new(p)))
    {
        return Some("no fusermount3".into());
    }
    None
}

/// The guard of a FUSE test: [`require`] with [`fuse_problem`].
#[track_caller]
pub fn fuse() -> bool {
    require("FUSE", "fuse3", fuse_problem())
}

/// A small tmpfs this test mounted (a full file system on demand); unmounted when dropped.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}

/// Mounts a tmpfs of `size` (`mount -t tmpfs -o size=SIZE`, e.g. `"3m"`) on the empty
/// directory `at`, under [`require`]'s rules (it needs root and `mount`, from util-linux):
/// `None` when it cannot be made here and the test skips.
#[track_caller]
pub fn tmpfs(at: &Path, size: &str) -> Option<Tmpfs> {
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .output();
    let problem = match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "mount -t tmpfs failed (needs root): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("mount: {e}")),
    };
    require("a tmpfs mount (root)", "util-linux", problem).then(|| Tmpfs {
        path: at.to_path_buf(),
    })
}

/// A server process a test started (nbdkit, qemu-nbd, ...), listening on a Unix socket;
/// killed and reaped when dropped.
pub struct ServerProcess(std::process::Child);

impl ServerProcess {
    /// Spawns `cmd` (stdin from /dev/null) and waits, at most 20 s, until `sock` accepts a
    /// connection; panics naming the program if it exits or does not listen by then.
    #[track_caller]
    pub fn start(cmd: &mut std::process::Command, sock: &Path) -> ServerProcess {
        Self::start_logged(cmd, sock, None)
    }

    /// [`start`](Self::start) for a server whose output goes to the file `log`: a panic
    /// shows what it wrote (why it did not start).
    #[track_caller]
    pub fn start_logged(
        cmd: &mut std::process::Command,
        sock: &Path,
        log: Option<&Path>,
    ) -> ServerProcess {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let shown = || {
            log.map(|l| {
                format!(
                    "; its log {}:\n{}",
                    l.display(),
                    std::fs::read_to_string(l).unwrap_or_default()
                )
            })
            .unwrap_or_default()
        };
        let child = cmd
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
        let mut p = ServerProcess(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(sock).is_err() {
            if let Ok(Some(status)) = p.0.try_wait() {
                panic!(
                    "{program} exited before listening on {}: {status}{}",
                    sock.display(),
                    shown()
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{program} did not listen on {} within 20 s{}",
                sock.display(),
                shown()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        p
    }
}

impl ServerProcess {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Sends `sig` (as `kill` takes it: `-STOP`, `-CONT`, `-KILL`, ...). After `-STOP` and
    /// `-CONT`, waits (at most 10 s) until every thread of the server shows that state: `kill`
    /// returns once the signal is sent, and on a loaded machine a stopped server's thread could
    /// still answer a request for a while.
    #[track_caller]
    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {}", self.pid());
        let want_stopped = match sig {
            "-STOP" => true,
            "-CONT" => false,
            _ => return,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.all_threads_stopped() != want_stopped {
            assert!(
                std::time::Instant::now() < deadline,
                "server {} did not take {sig}",
                self.pid()
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Whether every thread of the server is stopped (state `T` or `t` in /proc).
    fn all_threads_stopped(&self) -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid())) else {
            return false;
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                // The state follows the command name's closing parenthesis.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next())
                    .is_some_and(|c| c == 'T' || c == 't')
            })
        })
    }

    /// Asks the server to stop (SIGTERM) and waits for it: its exit status, for a test of
    /// a clean shutdown.
    #[track_caller]
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("-TERM");
        self.0
            .wait()
            .unwrap_or_else(|e| panic!("waiting for server {}: {e}", self.pid()))
    }

    /// Kills the server with SIGKILL (no shutdown of its own) and reaps it.
    pub fn kill9(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_process_is_waited_for_and_killed_on_drop() {
        let dir = std::env::temp_dir().join(format!("testsupport-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s.sock");
        let _ = std::fs::remove_file(&sock);
        let script = format!(
            "exec python3 -c 'import socket,time; s=socket.socket(socket.AF_UNIX); \
             s.bind(\"{}\"); s.listen(); time.sleep(60)'",
            sock.display()
        );
        let server = ServerProcess::start(
            std::process::Command::new("sh").args(["-c", &script]),
            &sock,
        );
        let pid = server.pid();
        assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok());
        server.signal("-STOP");
        assert!(server.all_threads_stopped(), "stopped once signal returns");
        server.signal("-CONT");
        assert!(!server.all_threads_stopped(), "running once signal returns");
        drop(server);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "killed and reaped"
        );
        let _ = std::fs::remove_file(&sock);
        let server = ServerProcess::start(
            std::process::Command::new("sh").args(["-c", &script]),
            &sock,
        );
        let status = server.terminate();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15), "terminated by SIGTERM: {status}");
        let exits = std::panic::catch_unwind(|| {
            ServerProcess::start(
                std::process::Command::new("true").arg("x"),
                &dir.join("none"),
            )
        });
        assert!(
            exits.is_err(),
            "a program that exits without listening is a failure"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_present_tool_runs_and_a_shell_is_found() {
        assert!(require("sh", "dash", None));
        assert!(find_on_path(&["no-such-tool-here", "sh"]).is_some());
        assert!(find_on_path(&["no-such-tool-here"]).is_none());
    }

    #[test]
    fn a_missing_tool_skips_here_and_fails_on_ci() {
        let r = std::panic::catch_unwind(|| {
            require("no-such-tool", "no-package", Some("not installed".into()))
        });
        match r {
            Ok(runs) => assert!(!on_ci() && !runs),
            Err(panic) => {
                assert!(on_ci());
                let m = panic.downcast_ref::<String>().unwrap();
                assert!(
                    m.contains("no-such-tool") && m.contains("scripts/setup.sh"),
                    "{m}"
                );
            }
        }
    }
}
