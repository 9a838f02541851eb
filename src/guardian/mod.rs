//! The guardian role: one logical session's shell, PTYs and output journals behind a Unix
//! socket. Runs as its own process (`winx-guardian`, daemon runtime) or as a thread of the
//! adapter (embedded runtime); both run the same `EventLoop`.
//!
//! Invariant: the guardian never opens SQLite; it keeps journals and clocks and answers
//! requests, and the adapter records whatever must persist.

pub mod activity;
pub mod client_io;
pub mod codex_targets;
pub mod completion;
pub mod event_loop;
pub mod exec;
pub mod facts;
pub mod harvest;
pub mod journals;
mod poll_set;
pub mod prompt;
pub mod prompt_watch;
pub mod reaper;
pub mod screen;
pub mod session;
pub mod shell;
pub mod sigchld;
pub mod slots;
mod waiter;

use crate::deadline::Deadline;
use crossbeam_channel::{bounded, select};
use event_loop::EventLoop;
pub use event_loop::{InProcessLoop, SHELL_START_TIMEOUT};
use session::Session;
pub use shell::{Dialect, ShellSpec};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Bind the session socket (0600, replacing a stale file) and start the shell.
fn prepare(spec: &ShellSpec, socket: &Path) -> Result<(UnixListener, Session), String> {
    crate::fsutil::ensure_private_dir(&spec.session_dir).map_err(|e| e.to_string())?;
    if socket.exists() {
        fs::remove_file(socket).map_err(|e| format!("remove stale socket: {e}"))?;
    }
    let listener =
        UnixListener::bind(socket).map_err(|e| format!("bind {}: {e}", socket.display()))?;
    fs::set_permissions(socket, fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("chmod socket: {e}"))?;
    let session = Session::start(spec.clone())?;
    Ok((listener, session))
}

/// Start a guardian on a thread of this process and wait until its shell is ready. The
/// loop it returns serves a foreground command without the socket (`InProcessLoop`).
pub fn spawn_embedded(spec: ShellSpec, socket: &Path) -> Result<InProcessLoop, String> {
    let (listener, session) = prepare(&spec, socket)?;
    let (tx, rx) = bounded::<Result<(), String>>(1);
    let lp = EventLoop::new(
        listener,
        socket,
        session,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    )
    .map_err(|e| e.to_string())?
    .shared();
    let socket_owned = socket.to_path_buf();
    let driven = lp.clone();
    std::thread::Builder::new()
        .name("guardian".into())
        .spawn(move || {
            event_loop::drive(&driven);
            let _ = fs::remove_file(socket_owned);
        })
        .map_err(|e| e.to_string())?;
    let deadline = Deadline::after(
        "shell start",
        SHELL_START_TIMEOUT + std::time::Duration::from_secs(1),
    );
    select! {
        recv(rx) -> r => r.unwrap_or_else(|_| Err("the guardian stopped during startup".into())),
        recv(deadline.receiver()) -> _ => Err(format!("{} timed out", deadline.name())),
    }?;
    Ok(InProcessLoop(lp))
}

/// Run as the `winx-guardian` process: serve until shut down. `ready` is called once with
/// the outcome of the first shell start (the daemon's status pipe).
pub fn run_process(
    spec: ShellSpec,
    socket: &Path,
    ready: event_loop::OnReady,
) -> Result<(), String> {
    // Before the first shell starts, so no orphan of the session can reach init.
    let adopting = reaper::become_subreaper();
    let (listener, session) = match prepare(&spec, socket) {
        Ok(x) => x,
        Err(e) => {
            ready(Err(e.clone()));
            return Err(e);
        }
    };
    let mut lp = EventLoop::new(listener, socket, session, ready).map_err(|e| e.to_string())?;
    if adopting {
        lp = lp.adopting_orphans();
    } else {
        log::warn!("PR_SET_CHILD_SUBREAPER refused: orphans of this session go to init");
    }
    lp.run();
    let _ = fs::remove_file(socket);
    Ok(())
}

#[cfg(test)]
mod tests;
