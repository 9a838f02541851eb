//! The adapter's side of winxd: connect (starting winxd when absent) and ask it to ensure
//! a session's guardian. Concurrent starters converge: winxd's lock lets one serve.

use crate::deadline::Deadline;
use crate::ipc::ready::Verdict;
use crate::process::{Role, SELF_EXE};
use crate::wire::daemon::{PROTOCOL, Request, Response};
use crate::wire::error::RuntimeError;
use crate::wire::{Hello, read_frame, write_frame};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How long winxd may take to bind its socket after exec.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one control request may take (a guardian start included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to winxd past the hellos, and the build winxd said it is.
fn connect(socket: &Path) -> Result<(UnixStream, String), RuntimeError> {
    let unreachable = |e: std::io::Error| RuntimeError::DaemonUnreachable {
        socket: socket.to_string_lossy().into_owned(),
        errno: e.raw_os_error(),
        detail: e.to_string(),
    };
    let mut s = UnixStream::connect(socket).map_err(unreachable)?;
    s.set_read_timeout(Some(REQUEST_TIMEOUT))
        .map_err(unreachable)?;
    s.set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(unreachable)?;
    write_frame(&mut s, &Hello::new(PROTOCOL, "adapter")).map_err(unreachable)?;
    let hello: Hello = read_frame(&mut s).map_err(unreachable)?;
    if hello.protocol != PROTOCOL {
        return Err(RuntimeError::ProtocolMismatch {
            peer: format!("winxd {}", hello.build),
            ours: PROTOCOL,
            theirs: hello.protocol,
        });
    }
    Ok((s, hello.build))
}

/// The pid of the winxd at the other end of `s`, as the kernel recorded it when winxd
/// listened (`SO_PEERCRED`): no request, no trust in what winxd says.
pub fn peer_pid(s: &UnixStream) -> Option<i32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(s, PeerCredentials).ok().map(|c| c.pid())
}

/// Whether process `pid` still runs: a signal-0 probe (nothing is sent), and a zombie
/// (exited, not yet reaped) counts as dead. A pid reused by another process reads as
/// alive; the periodic check covers that.
pub fn alive(pid: i32) -> bool {
    let probe = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None);
    !matches!(probe, Err(nix::errno::Errno::ESRCH)) && !zombie(pid)
}

/// Whether `pid` has exited but is not reaped yet: a signal still "reaches" it, so a
/// killed winxd whose parent is slow to reap would look alive (`/proc/<pid>/stat`'s state
/// after the command name is `Z` or `X`).
fn zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

/// Start winxd detached from this process's session and wait for its verdict.
fn start(socket: &Path, env: &[(String, String)]) -> Result<(), RuntimeError> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| RuntimeError::start("winxd readiness pipe", &e.into()))?;
    let w_fd = w.as_raw_fd();
    let mut cmd = Role::Winxd.command();
    cmd.arg("--socket")
        .arg(socket)
        .arg("--ready-fd")
        .arg("3")
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid and dup2 only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::libc::setsid();
            if nix::libc::dup2(w_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RuntimeError::start(format!("exec winxd ({SELF_EXE})"), &e))?;
    drop(w);
    let verdict = crate::ipc::ready::wait_verdict(r, Deadline::after("winxd start", START_TIMEOUT));
    // winxd daemonises by staying in its own session; reap it if it already exited.
    let _ = std::thread::Builder::new()
        .name("winxd-reap".into())
        .spawn(move || {
            let _ = child.wait();
        });
    match verdict {
        Ok(Verdict::Ready | Verdict::AlreadyRunning) => Ok(()),
        Ok(Verdict::Failed { reason }) => Err(RuntimeError::start_failed("winxd start", reason)),
        Err(e) => Err(e.starting("winxd start")),
    }
}

/// One request to a winxd that is already running; never starts one (`doctor` observes).
pub fn request_running(socket: &Path, req: &Request) -> Result<Response, RuntimeError> {
    exchange(connect(socket)?.0, req)
}

/// Send `req` and read its answer; winxd's `Busy` and `Error` become the error they name.
fn exchange(mut s: UnixStream, req: &Request) -> Result<Response, RuntimeError> {
    let lost = |what: &str, e: std::io::Error| RuntimeError::Unexpected {
        detail: format!("{what} winxd: {e}"),
    };
    write_frame(&mut s, req).map_err(|e| lost("send to", e))?;
    match read_frame(&mut s).map_err(|e| lost("answer from", e))? {
        Response::Busy { limit } => Err(RuntimeError::DaemonBusy { limit }),
        Response::Error { error } => Err(error),
        other => Ok(other),
    }
}

/// One request to winxd, starting it first when nothing answers on its socket.
/// A winxd of another build answers with a protocol mismatch, which is reported as such
/// (a start would only find it running).
pub fn request(
    socket: &Path,
    env: &[(String, String)],
    req: &Request,
) -> Result<Response, RuntimeError> {
    let s = match connect(socket) {
        Ok((s, _)) => s,
        Err(e @ RuntimeError::ProtocolMismatch { .. }) => return Err(e),
        Err(_) => {
            start(socket, env)?;
            connect(socket)?.0
        }
    };
    exchange(s, req)
}

/// What [`current`] found on winxd's socket.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// A winxd of our build answered.
    Ours,
    /// Nothing answered; we started winxd (or a concurrent starter did).
    Started,
    /// A winxd of build `was` answered; it was replaced by ours (seed 003's planned
    /// restart: only winxd ends; guardians and their shells keep running).
    Replaced { was: String },
}

/// A connection to a winxd of our build, starting one when nothing answers and replacing
/// one of another build: it is asked to shut down (it unlinks its socket and drops its lock
/// before answering, so our start does not wait on it), then ours is started. Concurrent
/// starters converge on winxd's lock.
pub fn current(
    socket: &Path,
    env: &[(String, String)],
) -> Result<(UnixStream, Found), RuntimeError> {
    let ours = crate::build_info::identity();
    let found = match connect(socket) {
        Ok((s, build)) if build == ours => return Ok((s, Found::Ours)),
        Ok((s, build)) => {
            match exchange(s, &Request::Shutdown)? {
                Response::Done => {}
                other => {
                    return Err(RuntimeError::Unexpected {
                        detail: format!("winxd {build} answered Shutdown with {other:?}"),
                    });
                }
            }
            Found::Replaced { was: build }
        }
        // Another protocol cannot be asked to shut down in ours: reported as it is.
        Err(e @ RuntimeError::ProtocolMismatch { .. }) => return Err(e),
        Err(_) => Found::Started,
    };
    start(socket, env)?;
    let (s, build) = connect(socket)?;
    if build != ours {
        // Another build's adapter replaced it first; flapping is bounded by each
        // adapter's check interval (see `runtime::DAEMON_CHECK_EVERY`).
        log::warn!("winxd {build} answers after our start of {ours}");
    }
    Ok((s, found))
}

/// One request to a winxd of our build (see [`current`]): the adapter's way to winxd.
/// Also answers winxd's pid (see [`peer_pid`]).
pub fn request_current(
    socket: &Path,
    env: &[(String, String)],
    req: &Request,
) -> Result<(Response, Option<i32>), RuntimeError> {
    let (s, found) = current(socket, env)?;
    report(&found);
    let pid = peer_pid(&s);
    Ok((exchange(s, req)?, pid))
}

/// Log what [`current`] had to do.
pub fn report(found: &Found) {
    match found {
        Found::Ours => {}
        Found::Started => log::warn!("winxd was not running; started it"),
        Found::Replaced { was } => log::warn!(
            "winxd of build {was} replaced by ours ({}); its guardians keep running",
            crate::build_info::identity()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed winxd whose parent has not reaped it yet is dead, not alive (a make test
    /// run under load kept the zombie long enough that the next call saw "alive" and
    /// never restarted winxd).
    #[test]
    fn an_unreaped_child_is_not_alive() {
        use nix::sys::wait::{Id, WaitPidFlag, waitid};
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Wait for it to exit but leave it unreaped (a zombie).
        waitid(
            Id::Pid(nix::unistd::Pid::from_raw(pid)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        assert!(zombie(pid));
        assert!(!alive(pid));
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(alive(std::process::id() as i32));
    }
}
