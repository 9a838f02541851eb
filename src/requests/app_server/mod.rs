//! Managed Codex app-server targets (issue 15 item 5): a detached host process per
//! target (`agent app-server host`, `host.rs`) runs `codex app-server` on pipes
//! (`child.rs`), follows its thread's notifications, numbers them (the durable event
//! sequence), and serves admissions on a unix socket. This file holds the socket's
//! messages and the client side used by the catalog and by `admit`.
//!
//! Socket protocol: one JSON object per line. `{"op":"status"}` → `HostStatus`;
//! `{"op":"admit",…}` → `HostAdmitReply`; after a `written` return-final reply the
//! admitter stores the receipt (owner = the host) and writes `{"op":"go"}`. End of input
//! without `go` means the admitter died first: the host settles the request, never
//! commits a final for it (the observer's handshake, `observer.rs`).
//!
//! Authentication (issue 36 item 13): every message carries `"secret"`, the host's 32
//! random bytes in hex, which the host wrote to `<socket>.secret` (0600, created with
//! `O_EXCL` in the private runtime directory before the socket listened). A message
//! without it, or with another, gets one `unavailable` refusal and the connection closes:
//! nothing is read from it, nothing written to the app-server. An admission must also name
//! a request the admitter already registered in the store (`host_loop.rs`).

pub mod child;
pub mod host;
pub mod host_loop;

use crate::store::app_server_targets::AppServerTarget;
use crate::wire::codex::{AdmitOutcome, CodexTarget};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a client waits for the host's answer (the host answers an admission once
/// the app-server answered `turn/start`, bounded by `host_loop::TURN_START_WAIT`).
pub const CLIENT_WAIT: Duration = Duration::from_secs(20);
/// Longest message line on the socket.
pub const MAX_MSG: u64 = 256 * 1024;
/// The field of every client message that carries the host's secret.
pub const SECRET_FIELD: &str = "secret";
/// The secret's length in bytes (hex on the wire and in its file).
pub const SECRET_BYTES: usize = 32;

/// Where the host of `socket` keeps its secret: beside the socket.
pub fn secret_path(socket: &Path) -> PathBuf {
    socket.with_extension("secret")
}

/// The secret of the host serving `socket` (its file, read without following a link).
pub fn read_secret(socket: &Path) -> std::io::Result<String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(secret_path(socket))?;
    let mut s = String::new();
    (&mut f)
        .take(2 * SECRET_BYTES as u64 + 1)
        .read_to_string(&mut s)?;
    let s = s.trim_end().to_string();
    if s.len() != 2 * SECRET_BYTES {
        return Err(std::io::Error::other("the host's secret file is malformed"));
    }
    Ok(s)
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum HostMsg {
    Status,
    Admit(HostAdmit),
    Go,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostAdmit {
    pub principal: String,
    pub request_id: String,
    pub incarnation: String,
    pub text: String,
    pub return_final: bool,
    pub prompt_sha256: String,
}

/// The target as the host sees it now.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostStatus {
    /// `idle` or `busy`.
    pub phase: String,
    /// The last provider turn that ended, if any.
    pub baseline_turn: Option<String>,
    /// The last event sequence number.
    pub cursor: u64,
    /// `attached`, `event_log_failed` or `app_server_exited`.
    pub observer: String,
    pub app_pid: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostAdmitReply {
    pub outcome: AdmitOutcome,
    pub detail: String,
    pub armed_cursor: Option<u64>,
    pub baseline_turn: Option<String>,
    /// The turn id `turn/start` answered with.
    pub provider_turn: Option<String>,
}

fn hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    crate::hex::lower(&h.finalize())
}

/// A target's agent id: from the thread and the host's identity.
pub fn agent_id(thread_id: &str, host: (u32, u64)) -> String {
    let h = hex(&[
        b"app-server",
        thread_id.as_bytes(),
        &host.0.to_be_bytes(),
        &host.1.to_be_bytes(),
    ]);
    format!("codex-app-{}", &h[..16])
}

/// The opaque incarnation: agent id, host pid and start time, thread id, session id.
pub fn incarnation(agent: &str, host: (u32, u64), thread_id: &str, session_id: &str) -> String {
    hex(&[
        agent.as_bytes(),
        &host.0.to_be_bytes(),
        &host.1.to_be_bytes(),
        thread_id.as_bytes(),
        session_id.as_bytes(),
    ])[..32]
        .to_string()
}

/// An open connection to a host.
pub struct HostConn {
    reader: BufReader<UnixStream>,
    secret: String,
}

impl HostConn {
    /// Connect to the host of `socket`, with the secret from the file beside it.
    pub fn connect(socket: &Path) -> std::io::Result<HostConn> {
        let secret = read_secret(socket)?;
        let s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(CLIENT_WAIT))?;
        s.set_write_timeout(Some(CLIENT_WAIT))?;
        Ok(HostConn {
            reader: BufReader::new(s),
            secret,
        })
    }

    /// Send `m` with the secret.
    pub fn send(&mut self, m: &HostMsg) -> std::io::Result<()> {
        let mut v = serde_json::to_value(m).map_err(std::io::Error::other)?;
        if let serde_json::Value::Object(o) = &mut v {
            o.insert(SECRET_FIELD.into(), self.secret.clone().into());
        }
        let mut b = serde_json::to_vec(&v).map_err(std::io::Error::other)?;
        b.push(b'\n');
        self.reader.get_mut().write_all(&b)
    }

    pub fn recv<T: for<'a> Deserialize<'a>>(&mut self) -> std::io::Result<T> {
        let mut line = String::new();
        (&mut self.reader).take(MAX_MSG).read_line(&mut line)?;
        if line.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        serde_json::from_str(&line).map_err(std::io::Error::other)
    }

    /// Let the host commit the request's terminal event (its row is written).
    pub fn go(mut self) {
        let _ = self.send(&HostMsg::Go);
    }
}

/// Forget the target of a host that is gone: its socket and secret (a host killed by a
/// signal leaves both), then its row. Only files named for its agent id are removed, so a
/// row never names another file to delete.
pub fn forget_gone(store: &crate::store::Store, t: &AppServerTarget) {
    let socket = Path::new(&t.socket);
    if socket.file_name() == Some(std::ffi::OsStr::new(&format!("{}.sock", t.agent_id))) {
        let _ = std::fs::remove_file(secret_path(socket));
        let _ = std::fs::remove_file(socket);
    }
    let _ = store.app_target_delete(&t.agent_id, t.host_pid, t.host_start);
}

/// Ask the host of `t` how its target is now.
pub fn status(t: &AppServerTarget) -> std::io::Result<HostStatus> {
    let mut c = HostConn::connect(Path::new(&t.socket))?;
    c.send(&HostMsg::Status)?;
    c.recv()
}

/// The catalog's view of a managed target.
pub fn target(t: &AppServerTarget, s: &HostStatus) -> CodexTarget {
    let ready = s.phase == "idle" && s.observer == "attached";
    CodexTarget {
        agent_id: t.agent_id.clone(),
        execution_id: String::new(),
        foreground: false,
        command: t.command.clone(),
        pid: t.host_pid,
        start_time: t.host_start,
        incarnation: t.incarnation.clone(),
        rollout: t.events_log.clone(),
        conversation_id: Some(t.thread_id.clone()),
        observer: s.observer.clone(),
        phase: s.phase.clone(),
        baseline_turn: s.baseline_turn.clone(),
        cursor: ready.then_some(s.cursor),
    }
}

/// What asking a host to admit produced.
pub enum Asked {
    /// The host answered; with the connection to send `go` on.
    Answer(HostAdmitReply, HostConn),
    /// The request never reached the host.
    NotSent(String),
    /// The request was sent but its answer was lost.
    Lost(String),
}

pub fn admit(socket: &Path, a: HostAdmit) -> Asked {
    let mut c = match HostConn::connect(socket) {
        Ok(c) => c,
        Err(e) => return Asked::NotSent(format!("the app-server host does not answer: {e}")),
    };
    if let Err(e) = c.send(&HostMsg::Admit(a)) {
        // A unix stream write either queued the whole line or failed before the host
        // could read a complete message: the host acts only on a whole line.
        return Asked::NotSent(format!("the app-server host closed the connection: {e}"));
    }
    match c.recv::<HostAdmitReply>() {
        Ok(r) => Asked::Answer(r, c),
        Err(e) => Asked::Lost(format!(
            "the app-server host's answer was lost after the request was sent: {e}"
        )),
    }
}
