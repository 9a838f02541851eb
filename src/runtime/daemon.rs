//! The adapter's side of winxd: connect (starting winxd when absent) and ask it to ensure
//! a session's guardian. Concurrent starters converge: winxd's lock lets one serve.

use crate::deadline::Deadline;
use crate::ipc::ready::Verdict;
use crate::wire::daemon::{PROTOCOL, Request, Response};
use crate::wire::error::RuntimeError;
use crate::wire::{Hello, read_frame, write_frame};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long winxd may take to bind its socket after exec.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one control request may take (a guardian start included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The sibling executable `name` of the running binary (tests and installs keep the
/// three binaries together).
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn connect(socket: &Path) -> Result<UnixStream, RuntimeError> {
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
    Ok(s)
}

/// Start winxd detached from this process's session and wait for its verdict.
fn start(socket: &Path, env: &[(String, String)]) -> Result<(), RuntimeError> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| RuntimeError::start("winxd readiness pipe", &e.into()))?;
    let w_fd = w.as_raw_fd();
    let bin = sibling("winxd");
    let mut cmd = Command::new(&bin);
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
        .map_err(|e| RuntimeError::start(format!("exec {}", bin.display()), &e))?;
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
    exchange(connect(socket)?, req)
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
        Ok(s) => s,
        Err(e @ RuntimeError::ProtocolMismatch { .. }) => return Err(e),
        Err(_) => {
            start(socket, env)?;
            connect(socket)?
        }
    };
    exchange(s, req)
}
