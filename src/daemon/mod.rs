//! winxd, the control plane: one per user and runtime directory. It starts guardians,
//! finds them again after its own restart (their sockets outlive it), and answers the
//! adapters' `Ensure` requests.
//!
//! Threads: the accept loop (the caller of `run`), one `winxd-conn` thread per client.
//! Invariant: winxd holds no session state that a guardian does not also hold; losing
//! winxd (SIGKILL, restart) never loses a shell.

pub mod spawn;

use crate::runtime::GuardianClient;
use crate::store::ensure_private_dir;
use crate::wire::daemon::{PROTOCOL, Request, Response};
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

/// Where guardians of this runtime directory put their sockets.
pub fn guardian_socket(runtime_dir: &Path, key: &str) -> PathBuf {
    runtime_dir.join("g").join(format!("{key}.sock"))
}

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
    _lock: fs::File,
}

struct State {
    runtime_dir: PathBuf,
    guardian_bin: PathBuf,
    /// Serialises guardian starts so concurrent `Ensure`s of one key converge.
    starting: Mutex<()>,
}

/// Take the lock and bind the socket.
pub fn start(socket: &Path, guardian_bin: PathBuf) -> Result<Started, String> {
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
            guardian_bin,
            starting: Mutex::new(()),
        }),
        _lock: lock,
    }))
}

impl Daemon {
    /// The accept loop; returns only if the listener fails.
    pub fn serve(self) {
        for conn in self.listener.incoming() {
            let Ok(stream) = conn else { continue };
            let state = self.state.clone();
            let _ = std::thread::Builder::new()
                .name("winxd-conn".into())
                .spawn(move || serve_client(stream, &state));
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
        Request::Ensure { key, .. } => {
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
        Request::List => {
            let mut keys: Vec<String> = fs::read_dir(state.runtime_dir.join("g"))
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            e.file_name()
                                .to_str()?
                                .strip_suffix(".sock")
                                .map(str::to_string)
                        })
                        .filter(|k| alive(&guardian_socket(&state.runtime_dir, k)))
                        .collect()
                })
                .unwrap_or_default();
            keys.sort();
            Response::Sessions { keys }
        }
    }
}
