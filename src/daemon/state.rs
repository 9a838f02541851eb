//! winxd's shared state and its request handlers: what every connection thread (and the
//! sweeper) reads. Handlers are plain functions from a request to its response.

use super::{lifecycle, spawn};
use crate::ipc::{GuardianClient, guardian_socket};
use crate::wire::daemon::{Lifecycle, Request, Response};
use crate::wire::error::RuntimeError;
use crate::wire::guardian;
use parking_lot::Mutex;
use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an existing guardian has to answer the liveness snapshot.
const PROBE_WAIT: Duration = Duration::from_secs(2);

pub struct State {
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
    pub lifecycle: Lifecycle,
    /// winxd's own `WINX_SANDBOX*` variables, which every guardian gets in place of the
    /// requester's: a session's sandbox is winxd's, never the client's to choose.
    pub guardian_env: Vec<(String, String)>,
    /// The `winxd.lock` handle; dropped (unlocking) on `Shutdown` before answering, so a
    /// successor can start as soon as we answer.
    pub lock: Mutex<Option<fs::File>>,
    /// Serialises guardian starts so concurrent `Ensure`s of one key converge.
    pub starting: Mutex<()>,
}

/// The peer runs as our user (winxd serves no one else).
pub fn same_user(stream: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(stream, PeerCredentials).is_ok_and(|c| c.uid() == nix::unistd::getuid().as_raw())
}

fn alive(socket: &Path) -> bool {
    matches!(
        GuardianClient::new(socket).call(&guardian::Request::Snapshot, PROBE_WAIT),
        Ok(guardian::Response::Snapshot(_))
    )
}

/// The answer to one request.
pub fn handle(state: &State, req: &Request) -> Response {
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
            // Unreachable and unlocked before we answer, so a successor can start at once;
            // the connection thread then tells the main thread, which stops.
            // Under the start gate: a starter never sees "no socket, lock still held".
            let gate = super::gate(&state.runtime_dir);
            let _ = fs::remove_file(&state.socket);
            state.lock.lock().take();
            drop(gate);
            Response::Done
        }
    }
}

fn ensure(state: &State, key: &str, req: &Request) -> Response {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Response::Error {
            error: RuntimeError::unexpected("session keys are alphanumeric"),
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
    if let Err(error) = lifecycle::make_room(&state.runtime_dir, &state.lifecycle) {
        return Response::Error { error };
    }
    match spawn::guardian(&socket, req, &state.guardian_env) {
        Ok(pid) => {
            log::info!("started guardian {pid} for session {key}");
            Response::Ensured {
                socket: socket.to_string_lossy().into_owned(),
                created: true,
            }
        }
        Err(error) => Response::Error { error },
    }
}
