//! The adapter's view of session runtimes: find or start the guardian of a logical
//! session and talk to it. Embedded guardians run as threads of this process; daemon
//! guardians are processes owned by winxd. Both are reached through their Unix socket.

pub mod daemon;
mod starting;

use crate::deadline::Deadline;
use crate::guardian::{self, Dialect, ShellSpec};
pub use crate::ipc::{ClientError, GuardianClient};
pub use crate::wire::error::RuntimeError;
use crate::wire::guardian::{Labels, RUN_EXPECT, Request, Response, Snapshot};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// How long a snapshot may take: it is answered straight from guardian memory.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);
/// How long an exiting adapter waits for one embedded guardian to end: the guardian's
/// own SIGTERM grace (2 s) plus slack.
const SHUTDOWN_LINGER: Duration = Duration::from_secs(3);
/// How often one adapter process checks that winxd of its build answers (daemon runtime).
/// A check is a connect and two hellos, run on a background thread, so no call waits on
/// it; but each one costs winxd a connection thread, and a busy adapter makes hundreds of
/// calls a second. Every 2 s bounds that to a few per minute per adapter, and bounds how
/// long TTL sweeps and quota reclaim stay stopped after winxd dies while an adapter is in
/// use; it also bounds how often two adapters of different builds replace each other's
/// winxd during a rolling upgrade.
pub const DAEMON_CHECK_EVERY: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    /// Guardians are processes owned by winxd; shells survive the adapter.
    Daemon,
    /// Guardians are threads of the adapter; shells end with it.
    Embedded,
}

/// Settings decided once at startup (see `config`).
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub kind: RuntimeKind,
    /// Private directory for sockets (0700).
    pub runtime_dir: PathBuf,
    /// winxd's control socket (in `runtime_dir` unless `WINX_SOCKET` says otherwise).
    pub daemon_socket: PathBuf,
    /// Private per-session directories (journals, spill files, rc files) live here.
    pub sessions_dir: PathBuf,
    /// Absolute shell path and its dialect.
    pub shell: (String, Dialect),
    /// Environment given to shells (server-only variables are removed at spawn).
    pub base_env: Vec<(String, String)>,
}

/// A guardian that is ready, with its authoritative snapshot.
pub struct Ensured {
    pub client: GuardianClient,
    pub snapshot: Snapshot,
    /// A new shell was started (rather than attaching to a live one).
    pub created: bool,
    /// `snapshot` was remembered, not asked for (`attach_remembered`): it may be stale.
    pub remembered: bool,
}

pub struct Runtime {
    cfg: RuntimeConfig,
    guardians: Mutex<HashMap<String, GuardianClient>>,
    /// Per session, the state a finished command left (`remember`): the next command is
    /// judged against it and sent with an `Expect`, without asking for a snapshot first.
    remembered: Mutex<HashMap<String, Snapshot>>,
    /// One start at a time per session key (`starting`).
    starting: starting::StartLocks,
    /// When the next winxd check may run, and whether one is running.
    next_check: Mutex<Option<Deadline>>,
    checking: Arc<AtomicBool>,
    /// The pid of the winxd this process last reached (0: none yet), so a call can tell
    /// at once that it died.
    daemon_pid: Arc<AtomicI32>,
}

/// File-system-safe key of a logical session (principal-scoped thread id).
pub fn session_key(principal: &str, thread_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(principal.as_bytes());
    h.update([0u8]);
    h.update(thread_id.as_bytes());
    crate::hex::lower(&h.finalize()[..8])
}

impl Runtime {
    pub fn new(cfg: RuntimeConfig) -> Runtime {
        Runtime {
            cfg,
            guardians: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashMap::new()),
            starting: Default::default(),
            next_check: Mutex::new(None),
            checking: Arc::new(AtomicBool::new(false)),
            daemon_pid: Arc::new(AtomicI32::new(0)),
        }
    }

    /// Daemon runtime: make sure winxd of our build runs, at most once per
    /// `DAEMON_CHECK_EVERY`, on a one-shot background thread (the caller never waits on the
    /// check, a start of winxd, or a replacement). Guardians answer without winxd, so
    /// nothing else would notice it is gone and bring back TTL sweeps and quota reclaim.
    /// A winxd this process reached that no longer exists is checked at once, whatever the
    /// interval (a signal-0 probe of its pid per call): it is back after the very next call.
    pub fn watch_daemon(&self) {
        if self.cfg.kind != RuntimeKind::Daemon {
            return;
        }
        let known = self.daemon_pid.load(Ordering::Acquire);
        let died = known > 0 && !daemon::alive(known);
        {
            let mut next = self.next_check.lock();
            if !died && next.as_ref().is_some_and(|d| !d.expired()) {
                return;
            }
            *next = Some(Deadline::after("winxd check", DAEMON_CHECK_EVERY));
        }
        if self.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let (socket, env) = (self.cfg.daemon_socket.clone(), self.cfg.base_env.clone());
        let checking = self.checking.clone();
        let pid = self.daemon_pid.clone();
        let spawned = std::thread::Builder::new()
            .name("winxd-check".into())
            .spawn(move || {
                match daemon::current(&socket, &env) {
                    Ok((s, found)) => {
                        pid.store(daemon::peer_pid(&s).unwrap_or(0), Ordering::Release);
                        daemon::report(&found);
                    }
                    Err(e) => log::warn!("winxd check: {e}"),
                }
                checking.store(false, Ordering::Release);
            });
        if let Err(e) = spawned {
            log::warn!("cannot start the winxd check: {e}");
            self.checking.store(false, Ordering::Release);
        }
    }

    pub fn kind(&self) -> RuntimeKind {
        self.cfg.kind
    }

    pub fn session_dir(&self, key: &str) -> PathBuf {
        self.cfg.sessions_dir.join(key)
    }

    fn socket_path(&self, key: &str) -> PathBuf {
        match self.cfg.kind {
            RuntimeKind::Daemon => crate::ipc::guardian_socket(&self.cfg.runtime_dir, key),
            RuntimeKind::Embedded => self
                .cfg
                .runtime_dir
                .join(format!("e{}", std::process::id()))
                .join(format!("{key}.sock")),
        }
    }

    /// The environment every new shell starts from.
    pub fn base_env(&self) -> &[(String, String)] {
        &self.cfg.base_env
    }

    /// A client for the guardian `key` would have, without asking anything (it may not
    /// answer); `None` when this runtime cannot have one.
    pub fn client(&self, key: &str) -> Option<GuardianClient> {
        let known = self.guardians.lock().get(key).cloned();
        match (known, self.cfg.kind) {
            (Some(c), _) => Some(c),
            (None, RuntimeKind::Daemon) => Some(GuardianClient::new(&self.socket_path(key))),
            (None, RuntimeKind::Embedded) => None,
        }
    }

    /// The guardian of `key` if one is live, with its snapshot.
    pub fn attach(&self, key: &str) -> Option<Ensured> {
        self.watch_daemon();
        let known = self.guardians.lock().get(key).cloned();
        // A daemon guardian may have been started by an earlier adapter: its socket is
        // where the key says.
        let client = match (known, self.cfg.kind) {
            (Some(c), _) => c,
            (None, RuntimeKind::Daemon) => GuardianClient::new(&self.socket_path(key)),
            (None, RuntimeKind::Embedded) => return None,
        };
        match client.call(&Request::Snapshot, SNAPSHOT_WAIT) {
            Ok(Response::Snapshot(snapshot)) => {
                self.guardians
                    .lock()
                    .insert(key.to_string(), client.clone());
                self.remember(key, snapshot.clone());
                Some(Ensured {
                    client,
                    snapshot,
                    created: false,
                    remembered: false,
                })
            }
            _ => {
                self.forget(key);
                None
            }
        }
    }

    /// Like `attach`, but a snapshot remembered for `key` (`remember`) serves instead of
    /// asking the guardian, once. It may be stale: judge a command against it only to send
    /// that command with its `Expect`, which the guardian checks (`Response::Stale`).
    pub fn attach_remembered(&self, key: &str) -> Option<Ensured> {
        let remembered = self.remembered.lock().remove(key);
        let client = self.guardians.lock().get(key).cloned();
        match (remembered, client) {
            (Some(snapshot), Some(client)) => {
                self.watch_daemon();
                Some(Ensured {
                    client,
                    snapshot,
                    created: false,
                    remembered: true,
                })
            }
            _ => self.attach(key),
        }
    }

    /// Remember the state of `key` (as a snapshot or a finished command showed it), for
    /// the next `attach_remembered`. Only guardians that check an `Expect` are remembered.
    pub fn remember(&self, key: &str, snapshot: Snapshot) {
        let checks = snapshot.capabilities.iter().any(|c| c == RUN_EXPECT);
        if checks && self.guardians.lock().contains_key(key) {
            self.remembered.lock().insert(key.to_string(), snapshot);
        }
    }

    /// Attach to the live guardian of `key`, or start one in `workspace`.
    pub fn ensure(
        &self,
        key: &str,
        workspace: &Path,
        labels: Labels,
    ) -> Result<Ensured, RuntimeError> {
        // One start at a time per session: concurrent first calls of `key` converge on one
        // shell; other sessions' starts never wait for this one.
        let turn = self.starting.turn(key);
        let _guard = turn.hold();
        if let Some(e) = self.attach(key) {
            return Ok(e);
        }
        let socket = self.socket_path(key);
        if let Some(dir) = socket.parent() {
            crate::fsutil::ensure_private_dir(dir)
                .map_err(|e| RuntimeError::start("session socket directory", &e))?;
        }
        let spec = ShellSpec {
            program: self.cfg.shell.0.clone(),
            dialect: self.cfg.shell.1,
            env: self.cfg.base_env.clone(),
            workspace: workspace.to_string_lossy().into_owned(),
            session_dir: self.session_dir(key),
            labels,
            temp_dir: Some(
                crate::temporary::session_dir(workspace, key)
                    .to_string_lossy()
                    .into_owned(),
            ),
        };
        let client = match self.cfg.kind {
            RuntimeKind::Embedded => {
                let lp = guardian::spawn_embedded(spec, &socket)
                    .map_err(|e| RuntimeError::start_failed("embedded guardian start", e))?;
                GuardianClient::new(&socket).in_process(std::sync::Arc::new(lp))
            }
            RuntimeKind::Daemon => GuardianClient::new(&self.ensure_via_daemon(key, &spec)?),
        };
        self.guardians
            .lock()
            .insert(key.to_string(), client.clone());
        let snapshot = match client.call(&Request::Snapshot, SNAPSHOT_WAIT) {
            Ok(Response::Snapshot(s)) => s,
            Ok(other) => {
                return Err(RuntimeError::unexpected(format!(
                    "unexpected guardian answer {other:?}"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Ensured {
            client,
            snapshot,
            created: true,
            remembered: false,
        })
    }

    /// Replace the shell of a live guardian; answers once the new shell is ready.
    pub fn reset(&self, client: &GuardianClient) -> Result<Snapshot, RuntimeError> {
        match client.call(&Request::Reset, guardian::SHELL_START_TIMEOUT) {
            Ok(Response::Snapshot(s)) => Ok(s),
            Ok(Response::Error(e)) => {
                Err(RuntimeError::start_failed("shell reset", format!("{e:?}")))
            }
            Ok(other) => Err(RuntimeError::unexpected(format!(
                "unexpected guardian answer {other:?}"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    fn ensure_via_daemon(&self, key: &str, spec: &ShellSpec) -> Result<PathBuf, RuntimeError> {
        use crate::wire::daemon::{Request as D, Response as R};
        let req = D::Ensure {
            key: key.to_string(),
            workspace: spec.workspace.clone(),
            shell: spec.program.clone(),
            dialect: spec.dialect,
            session_dir: spec.session_dir.to_string_lossy().into_owned(),
            env: self.cfg.base_env.clone(),
            labels: spec.labels.clone(),
            temp_dir: spec.temp_dir.clone(),
        };
        let (answer, pid) =
            daemon::request_current(&self.cfg.daemon_socket, &self.cfg.base_env, &req)?;
        self.daemon_pid.store(pid.unwrap_or(0), Ordering::Release);
        match answer {
            R::Ensured { socket, .. } => Ok(PathBuf::from(socket)),
            other => Err(RuntimeError::unexpected(format!(
                "unexpected winxd answer {other:?}"
            ))),
        }
    }

    /// Forget a guardian this process knows (after it reported gone).
    pub fn forget(&self, key: &str) {
        self.guardians.lock().remove(key);
        self.unremember(key);
    }

    /// Drop what was remembered of `key` (its shell may be anywhere now).
    pub fn unremember(&self, key: &str) {
        self.remembered.lock().remove(key);
    }
}

impl Runtime {
    /// Embedded sessions last as long as the process: end their shells, and wait for each
    /// guardian thread to finish its shutdown (SIGTERM, grace, SIGKILL of what is left,
    /// detached children included). A server calls this before it exits, whoever still
    /// holds the runtime; `Drop` calls it too. Sessions already ended are not ended again;
    /// the daemon runtime's sessions outlive the process by design and are left alone.
    pub fn end_embedded_sessions(&self) {
        if self.cfg.kind != RuntimeKind::Embedded {
            return;
        }
        let clients: Vec<GuardianClient> = self.guardians.lock().drain().map(|(_, c)| c).collect();
        for client in clients {
            let _ = client.shutdown_and_wait(SHUTDOWN_LINGER);
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.end_embedded_sessions();
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An embedded runtime rooted in a test directory.
    pub fn embedded(root: &Path) -> Runtime {
        let shell = crate::guardian::shell::resolve("bash", "/usr/bin:/bin").expect("bash");
        Runtime::new(RuntimeConfig {
            kind: RuntimeKind::Embedded,
            daemon_socket: root.join("run/winxd.sock"),
            runtime_dir: root.join("run"),
            sessions_dir: root.join("sessions"),
            shell,
            base_env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        })
    }
}
