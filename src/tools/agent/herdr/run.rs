//! Running the configured Herdr executable once: a literal argument vector (no shell), an
//! environment without inherited `HERDR_*` and with `HERDR_SOCKET_PATH` from the trusted
//! configuration, bounded stdout/stderr, and a finite deadline. Whatever the exit status,
//! both streams come back (`Finished`): Herdr's CLI prints its error envelope on stderr
//! with exit 1, and `answer` reads it.
//!
//! Threads: the child gets its own process group; one thread drains stdout, one stderr
//! (each keeps at most its limit plus one byte), one waits for the exit status. The caller
//! selects over the three channels and the `Deadline`'s channel: a stream over its limit or
//! the deadline kills the whole group (SIGKILL) and answers at once; the waiting thread then
//! reaps the child, and the readers end when the pipes close.

use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, bounded, never, select};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

pub const MAX_STDOUT: usize = 64 * 1024;
pub const MAX_STDERR: usize = 16 * 1024;

/// How one run went wrong before it could finish.
#[derive(Debug)]
pub enum RunError {
    /// The executable could not be started.
    Spawn(std::io::Error),
    /// The deadline passed; the process group was killed.
    Timeout,
    /// `stream` (`stdout` or `stderr`) passed its limit; the process group was killed.
    OutputLimit { stream: &'static str, limit: usize },
}

/// A run that ended by itself within its limits.
#[derive(Debug)]
pub struct Finished {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// What the trusted configuration says about running Herdr.
pub struct Invocation<'a> {
    pub executable: &'a Path,
    pub socket_path: &'a Path,
    /// Inherited variables to remove (every `HERDR_*` of the server's environment).
    pub remove_env: &'a [String],
}

fn drain(mut r: impl Read + Send + 'static, limit: usize) -> Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let got = (&mut r).take(limit as u64 + 1).read_to_end(&mut buf);
        let _ = tx.send(got.map(|_| buf));
    });
    rx
}

fn kill_group(pgid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Err(e) = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL) {
        log::debug!("herdr: killpg {pgid}: {e}");
    }
}

/// Run `args` to its end within `deadline` and the output limits.
pub fn run(inv: &Invocation, args: &[String], deadline: &Deadline) -> Result<Finished, RunError> {
    let mut cmd = Command::new(inv.executable);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for k in inv.remove_env {
        cmd.env_remove(k);
    }
    cmd.env("HERDR_SOCKET_PATH", inv.socket_path);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let pid = child.id();
    let mut out_rx = drain(child.stdout.take().expect("piped stdout"), MAX_STDOUT);
    let mut err_rx = drain(child.stderr.take().expect("piped stderr"), MAX_STDERR);
    let (status_tx, mut status_rx) = bounded::<std::io::Result<ExitStatus>>(1);
    std::thread::spawn(move || {
        let _ = status_tx.send(child.wait());
    });
    let timer = deadline.receiver();
    let (mut out, mut err, mut status) = (None, None, None);
    let over = |b: &Vec<u8>, limit| b.len() > limit;
    while out.is_none() || err.is_none() || status.is_none() {
        select! {
            recv(out_rx) -> r => {
                let b = r.ok().and_then(Result::ok).unwrap_or_default();
                if over(&b, MAX_STDOUT) {
                    kill_group(pid);
                    return Err(RunError::OutputLimit { stream: "stdout", limit: MAX_STDOUT });
                }
                out = Some(b);
                out_rx = never();
            }
            recv(err_rx) -> r => {
                let b = r.ok().and_then(Result::ok).unwrap_or_default();
                if over(&b, MAX_STDERR) {
                    kill_group(pid);
                    return Err(RunError::OutputLimit { stream: "stderr", limit: MAX_STDERR });
                }
                err = Some(b);
                err_rx = never();
            }
            recv(status_rx) -> r => {
                status = Some(r.ok().and_then(Result::ok));
                status_rx = never();
            }
            recv(timer) -> _ => {
                kill_group(pid);
                return Err(RunError::Timeout);
            }
        }
    }
    // Every channel delivered (each is replaced by `never` once it has).
    Ok(Finished {
        code: status.flatten().and_then(|s| s.code()),
        stdout: out.unwrap_or_default(),
        stderr: err.unwrap_or_default(),
    })
}
