//! Starting a `winx-guardian` process (this binary in its guardian role): detached in its own session, with a readiness pipe
//! on fd 3 that carries "ok" or the reason it failed. An exec failure is reported by
//! `Command::spawn` itself (std's CLOEXEC exec-error pipe), never a silent dead session.

use crate::deadline::Deadline;
use crate::process::{Role, SELF_EXE};
use crate::sandbox::is_sandbox_var;
use crate::wire::daemon::Request;
use crate::wire::error::RuntimeError;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How long a guardian may take from exec to a ready shell.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// The fd number on which the guardian finds its readiness pipe.
pub const READY_FD: i32 = 3;

/// Spawn the guardian for an `Ensure` request and wait until it reports ready. Its
/// environment is the requester's without any `WINX_SANDBOX*` variable, plus winxd's own
/// (`sandbox_env`): the guardian's sandbox is winxd's to decide.
pub fn guardian(
    socket: &Path,
    req: &Request,
    sandbox_env: &[(String, String)],
) -> Result<u32, RuntimeError> {
    let Request::Ensure {
        workspace,
        shell,
        dialect,
        session_dir,
        env,
        labels,
        temp_dir,
        ..
    } = req
    else {
        return Err(RuntimeError::unexpected("not an ensure request"));
    };
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| RuntimeError::start("guardian readiness pipe", &e.into()))?;
    let ready_w_fd = ready_w.as_raw_fd();
    let mut cmd = Role::Guardian.command();
    cmd.arg("--socket")
        .arg(socket)
        .arg("--session-dir")
        .arg(session_dir)
        .arg("--workspace")
        .arg(workspace)
        .arg("--shell")
        .arg(shell)
        .arg("--dialect")
        .arg(dialect.as_str())
        .arg("--ready-fd")
        .arg(READY_FD.to_string())
        .arg("--thread-id")
        .arg(&labels.thread_id)
        .arg("--principal")
        .arg(&labels.principal)
        .args(temp_dir.iter().flat_map(|t| ["--temp-dir", t.as_str()]))
        .env_clear()
        .envs(env.iter().filter(|(k, _)| !is_sandbox_var(k)).cloned())
        .envs(sandbox_env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: only async-signal-safe calls between fork and exec: setsid and dup2.
    unsafe {
        cmd.pre_exec(move || {
            nix::libc::setsid();
            // dup2 clears CLOEXEC on the copy, so fd 3 survives exec.
            if nix::libc::dup2(ready_w_fd, READY_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RuntimeError::start(format!("exec winx-guardian ({SELF_EXE})"), &e))?;
    drop(ready_w);
    let pid = child.id();
    let outcome = read_ready(ready_r);
    // Reap the guardian whenever it exits, so it never lingers as a zombie of winxd.
    let _ = std::thread::Builder::new()
        .name(format!("reap-{pid}"))
        .spawn(move || {
            let _ = child.wait();
        });
    match outcome {
        Ok(()) => Ok(pid),
        Err(e) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            Err(e)
        }
    }
}

/// Wait for the guardian's verdict on its readiness pipe, bounded by `READY_TIMEOUT`.
fn read_ready(fd: OwnedFd) -> Result<(), RuntimeError> {
    use crate::ipc::ready::{Verdict, wait_verdict};
    const STEP: &str = "guardian start";
    match wait_verdict(fd, Deadline::after(STEP, READY_TIMEOUT)) {
        Ok(Verdict::Ready) => Ok(()),
        Ok(Verdict::Failed { reason }) => Err(RuntimeError::start_failed(STEP, reason)),
        Ok(Verdict::AlreadyRunning) => Err(RuntimeError::start_failed(
            STEP,
            "the guardian reported another instance",
        )),
        Err(e) => Err(e.starting(STEP)),
    }
}
