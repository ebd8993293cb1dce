//! Socket activation: the listening socket a service manager passes (systemd's
//! `sd_listen_fds(3)` protocol). The manager binds the socket (a `.socket` unit), starts the
//! server with the socket open as descriptor 3, `LISTEN_FDS=1` and `LISTEN_PID` set to the
//! server's pid; the server accepts on it instead of binding its own. Variables naming
//! another pid are meant for another process and are ignored, as `sd_listen_fds` does.

use anyhow::{bail, Context, Result};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first descriptor the protocol passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// A listening socket passed by the service manager.
#[derive(Debug)]
pub enum Inherited {
    /// A Unix stream socket (`ListenStream=/path`).
    Unix(UnixListener),
    /// A TCP socket (`ListenStream=127.0.0.1:10809`).
    Tcp(TcpListener),
}

/// Set once descriptor 3 has been taken, so that it is never owned twice.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// What the environment says was passed: `None` when nothing was passed to this process.
fn passed(pid: Option<&str>, fds: Option<&str>, me: u32) -> Result<Option<()>> {
    let (Some(pid), Some(fds)) = (pid, fds) else {
        return Ok(None);
    };
    let pid: u32 = pid
        .trim()
        .parse()
        .with_context(|| format!("LISTEN_PID={pid:?} is not a process id"))?;
    if pid != me {
        return Ok(None);
    }
    let n: u32 = fds
        .trim()
        .parse()
        .with_context(|| format!("LISTEN_FDS={fds:?} is not a count"))?;
    match n {
        0 => Ok(None),
        1 => Ok(Some(())),
        n => bail!(
            "LISTEN_FDS={n}: serve takes one listening socket from the service manager (one \
             ListenStream= in the .socket unit)"
        ),
    }
}

/// Takes the listening socket the service manager passed to this process, if it passed one:
/// descriptor 3 checked to be a listening Unix or TCP stream socket, made close-on-exec.
/// Later calls return `None`: the descriptor has one owner.
pub fn take() -> Result<Option<Inherited>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    if passed(pid.as_deref(), fds.as_deref(), std::process::id())?.is_none() {
        return Ok(None);
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let fd = LISTEN_FDS_START;
    let family = listening_family(fd)?;
    // SAFETY: the service manager's protocol (LISTEN_PID naming this process, LISTEN_FDS = 1)
    // hands this process descriptor 3 open and unowned by anything else in it; `TAKEN` makes
    // this the only place that ever takes ownership of it, once; `listening_family` has checked
    // that it is an open listening stream socket of the family wrapped here.
    let inherited = unsafe {
        match family {
            libc::AF_UNIX => Inherited::Unix(UnixListener::from_raw_fd(fd)),
            _ => Inherited::Tcp(TcpListener::from_raw_fd(fd)),
        }
    };
    Ok(Some(inherited))
}

/// The address family of `fd`, checked to be a listening stream socket (Unix, IPv4 or IPv6),
/// and set close-on-exec so that programs the server starts do not inherit it.
fn listening_family(fd: RawFd) -> Result<libc::c_int> {
    let what = "the socket passed by the service manager (descriptor 3, LISTEN_FDS)";
    let int_opt = |opt: libc::c_int| -> std::io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` is a live, writable c_int and `len` its exact size, which is what these
        // integer socket options write; an fd that is not a socket fails with ENOTSOCK.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(v)
    };
    let family = int_opt(libc::SO_DOMAIN).with_context(|| format!("{what}: not a socket"))?;
    if !matches!(family, libc::AF_UNIX | libc::AF_INET | libc::AF_INET6) {
        bail!("{what}: address family {family}, not a Unix or TCP socket");
    }
    if int_opt(libc::SO_TYPE)? != libc::SOCK_STREAM {
        bail!("{what}: not a stream socket (ListenStream=, not ListenDatagram=)");
    }
    if int_opt(libc::SO_ACCEPTCONN)? == 0 {
        bail!("{what}: not listening (Accept=no is needed: serve accepts the connections)");
    }
    // SAFETY: F_SETFD on a descriptor just checked to be open touches only its flags.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context(what);
    }
    Ok(family)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_variables_naming_this_process_pass_a_socket() {
        assert!(passed(None, None, 7).unwrap().is_none());
        assert!(passed(Some("7"), None, 7).unwrap().is_none());
        assert!(passed(Some("8"), Some("1"), 7).unwrap().is_none());
        assert!(passed(Some("7"), Some("0"), 7).unwrap().is_none());
        assert!(passed(Some("7"), Some("1"), 7).unwrap().is_some());
        let e = passed(Some("7"), Some("2"), 7).unwrap_err().to_string();
        assert!(
            e.contains("LISTEN_FDS=2") && e.contains("one listening socket"),
            "{e}"
        );
        let e = passed(Some("seven"), Some("1"), 7).unwrap_err().to_string();
        assert!(e.contains("LISTEN_PID"), "{e}");
        let e = passed(Some("7"), Some("x"), 7).unwrap_err().to_string();
        assert!(e.contains("LISTEN_FDS"), "{e}");
    }

    #[test]
    fn a_descriptor_that_is_not_a_listening_socket_is_refused() {
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        let e = listening_family(f.as_raw_fd()).unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = listening_family(s.as_raw_fd()).unwrap_err().to_string();
        assert!(e.contains("not a stream socket"), "{e}");
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = listening_family(a.as_raw_fd()).unwrap_err().to_string();
        assert!(e.contains("not listening"), "{e}");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(listening_family(l.as_raw_fd()).unwrap(), libc::AF_INET);
    }
}
