//! winxd, the control plane: one per user and runtime directory. It starts guardians,
//! finds them again after its own restart (their sockets outlive it), and answers the
//! adapters' `Ensure` requests.
//!
//! Threads: the accept loop (the caller of `run`), one `winxd-conn` thread per client.
//! Invariant: winxd holds no session state that a guardian does not also hold; losing
//! winxd (SIGKILL, restart) never loses a shell.

pub mod lifecycle;
pub mod spawn;

use crate::deadline::Deadline;
use crate::fsutil::ensure_private_dir;
use crate::ipc::{GuardianClient, guardian_socket};
use crate::wire::daemon::{Lifecycle, PROTOCOL, Request, Response};
use crate::wire::guardian;
use crate::wire::{Hello, read_frame, write_frame};
use parking_lot::Mutex;
use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a client may take to send a frame; a stuck client costs only its own thread.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an existing guardian has to answer the liveness snapshot.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// What happened at startup, for the starter's readiness pipe.
pub enum Started {
    /// We hold the lock and serve; `serve` runs the accept loop.
    Serving(Daemon),
    /// Another winxd holds the lock.
    AlreadyRunning,
}

pub struct Daemon {
    listener: UnixListener,
    state: Arc<State>,
}

struct State {
    runtime_dir: PathBuf,
    socket: PathBuf,
    guardian_bin: PathBuf,
    lifecycle: Lifecycle,
    /// The `winxd.lock` handle; dropped (unlocking) on `Shutdown` before answering, so a
    /// successor can start as soon as we answer.
    lock: Mutex<Option<fs::File>>,
    /// Serialises guardian starts so concurrent `Ensure`s of one key converge.
    starting: Mutex<()>,
}

/// Take the lock and bind the socket.
pub fn start(
    socket: &Path,
    guardian_bin: PathBuf,
    lifecycle: Lifecycle,
) -> Result<Started, String> {
    let dir = socket
        .parent()
        .ok_or("socket path has no directory")?
        .to_path_buf();
    ensure_private_dir(&dir).map_err(|e| e.to_string())?;
    ensure_private_dir(&dir.join("g")).map_err(|e| e.to_string())?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join("winxd.lock"))
        .map_err(|e| format!("open lock file: {e}"))?;
    if unsafe { nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB) } != 0 {
        return Ok(Started::AlreadyRunning);
    }
    // We hold the lock: any socket file left behind is stale.
    let _ = fs::remove_file(socket);
    let listener =
        UnixListener::bind(socket).map_err(|e| format!("bind {}: {e}", socket.display()))?;
    fs::set_permissions(socket, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    Ok(Started::Serving(Daemon {
        listener,
        state: Arc::new(State {
            runtime_dir: dir,
            socket: socket.to_path_buf(),
            guardian_bin,
            lifecycle,
            lock: Mutex::new(Some(lock)),
            starting: Mutex::new(()),
        }),
    }))
}

impl Daemon {
    /// The accept loop. A `Shutdown` request ends the process (releasing the lock).
    pub fn serve(self) {
        let sweeper_state = self.state.clone();
        let _ = std::thread::Builder::new()
            .name("ttl-sweeper".into())
            .spawn(move || sweeper(&sweeper_state));
        for conn in self.listener.incoming() {
            let Ok(stream) = conn else { continue };
            let state = self.state.clone();
            let _ = std::thread::Builder::new()
                .name("winxd-conn".into())
                .spawn(move || serve_client(stream, &state));
        }
    }
}

/// Apply the TTL tiers every `sweep_secs`, for the life of the process.
fn sweeper(state: &State) {
    loop {
        let tick = Deadline::after(
            "ttl sweep",
            Duration::from_secs(state.lifecycle.sweep_secs.max(1)),
        );
        let _ = tick.receiver().recv();
        let l = state.lifecycle;
        let removed = lifecycle::remove_where(&state.runtime_dir, l.now_ms(), |s, now| {
            lifecycle::expired_by_tier(s, &l, now)
        });
        if !removed.is_empty() {
            log::info!("ttl sweep removed {removed:?}");
        }
    }
}

fn same_user(stream: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(stream, PeerCredentials).is_ok_and(|c| c.uid() == nix::unistd::getuid().as_raw())
}

fn serve_client(mut s: UnixStream, state: &State) {
    if !same_user(&s) {
        log::warn!("refusing a client of another user");
        return;
    }
    let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
    let hello: std::io::Result<Hello> = read_frame(&mut s);
    let Ok(hello) = hello else { return };
    if write_frame(&mut s, &Hello::new(PROTOCOL, "winxd")).is_err() || hello.protocol != PROTOCOL {
        return;
    }
    loop {
        let req: std::io::Result<Request> = read_frame(&mut s);
        let Ok(req) = req else { return };
        let resp = handle(state, &req);
        if write_frame(&mut s, &resp).is_err() {
            return;
        }
        if req == Request::Shutdown {
            log::info!("winxd shutting down on request; guardians keep running");
            std::process::exit(0);
        }
    }
}

fn alive(socket: &Path) -> bool {
    matches!(
        GuardianClient::new(socket).call(&guardian::Request::Snapshot, PROBE_WAIT),
        Ok(guardian::Response::Snapshot(_))
    )
}

fn handle(state: &State, req: &Request) -> Response {
    match req {
        Request::Ensure { key, .. } => ensure(state, key, req),
        Request::List => Response::Sessions {
            sessions: lifecycle::live_sessions(&state.runtime_dir),
        },
        Request::Kill { thread_id } => Response::Removed {
            thread_ids: lifecycle::remove_where(&state.runtime_dir, 0, |s, _| {
                thread_id.as_ref().is_none_or(|t| *t == s.labels.thread_id)
            }),
        },
        Request::Prune { idle_seconds } => {
            let l = state.lifecycle;
            let now = l.now_ms();
            let thread_ids = match idle_seconds {
                None => lifecycle::remove_where(&state.runtime_dir, now, |s, now| {
                    lifecycle::expired_by_tier(s, &l, now)
                }),
                Some(n) => lifecycle::remove_where(&state.runtime_dir, now, |s, now| {
                    lifecycle::idle_for(s, *n, now)
                }),
            };
            Response::Removed { thread_ids }
        }
        Request::Status => Response::Status {
            build: crate::build_info::identity(),
            pid: std::process::id(),
            lifecycle: state.lifecycle,
            socket: state.socket.to_string_lossy().into_owned(),
        },
        Request::Shutdown => {
            // Unreachable and unlocked before we answer; the connection thread exits the
            // process once the answer is written.
            let _ = fs::remove_file(&state.socket);
            state.lock.lock().take();
            Response::Done
        }
    }
}

fn ensure(state: &State, key: &str, req: &Request) -> Response {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Response::Error {
            message: "session keys are alphanumeric".into(),
        };
    }
    let socket = guardian_socket(&state.runtime_dir, key);
    let _one_at_a_time = state.starting.lock();
    if alive(&socket) {
        return Response::Ensured {
            socket: socket.to_string_lossy().into_owned(),
            created: false,
        };
    }
    if let Err(message) = lifecycle::make_room(&state.runtime_dir, &state.lifecycle) {
        return Response::Error { message };
    }
    match spawn::guardian(&state.guardian_bin, &socket, req) {
        Ok(pid) => {
            log::info!("started guardian {pid} for session {key}");
            Response::Ensured {
                socket: socket.to_string_lossy().into_owned(),
                created: true,
            }
        }
        Err(message) => Response::Error { message },
    }
}
