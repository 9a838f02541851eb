//! The managed app-server host (`agent app-server host`): one detached process per
//! target. It runs the app-server child, numbers every line it prints (the durable event
//! sequence, appended to a 0600 log), serves admissions on a 0600 socket, and runs the
//! event loop (`host_loop.rs`) until the app-server ends.
//!
//! Admission (one loop turn): the same incarnation, the app-server running, the event log
//! writable, the thread idle (no turn running, no `turn/start` unanswered) → arm at the
//! current sequence, write one `turn/start` line, answer once the app-server answered it.
//! The first provider turn after the armed sequence is bound (`AppCorrelation`); its
//! `turn/completed` is the request's outcome. This host's death leaves its requests to
//! `reconcile` (owner gone → `indeterminate`).
//!
//! Clients authenticate (issue 36 item 13): before the socket listens the host writes
//! 32 `getrandom` bytes, hex, to `<socket>.secret` (0600, `O_EXCL`, in the 0700 runtime
//! directory); every message must carry them (`secret`), compared in constant time
//! (`Secret::admits`, the `hmac` crate's `verify_slice`), or the connection gets one
//! refusal and closes.

use super::child::{AppChild, handshake};
use super::host_loop::{FromConn, Host, log_line};
use super::{CLIENT_WAIT, HostAdmitReply, HostMsg, MAX_MSG, SECRET_BYTES, SECRET_FIELD};
use crate::codex::app_server::{Event, Phase};
use crate::deadline::{Deadline, unix_ms};
use crate::store::Store;
use crate::store::app_server_targets::AppServerTarget;
use crate::wire::codex::AdmitOutcome;
use crossbeam_channel::{Sender, bounded, unbounded};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the `initialize` / `thread/start` handshake may take.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(60);
pub struct HostArgs {
    pub state_dir: PathBuf,
    pub runtime_dir: PathBuf,
    pub principal: String,
    pub cwd: PathBuf,
    pub command: Vec<String>,
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
}

/// What a client must prove: the host's secret, kept as its HMAC-SHA256 under a fixed
/// label, so a presented secret is checked by the `hmac` crate's constant-time
/// `verify_slice` (the history cursors' comparison), never by `==` on the text.
pub struct Secret {
    tag: Vec<u8>,
}

const SECRET_LABEL: &[u8] = b"winx app-server host admission";

fn secret_mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC takes any key length")
        .chain_update(SECRET_LABEL)
}

impl Secret {
    fn new(hex: &str) -> Secret {
        Secret {
            tag: secret_mac(hex.as_bytes()).finalize().into_bytes().to_vec(),
        }
    }

    /// Whether `given` is the secret (constant time in its content).
    pub fn admits(&self, given: &str) -> bool {
        given.len() == 2 * SECRET_BYTES
            && secret_mac(given.as_bytes()).verify_slice(&self.tag).is_ok()
    }
}

/// Create the secret file `path` (0600, `O_EXCL`: never an existing file or a link) and
/// return the secret.
fn create_secret(path: &Path) -> std::io::Result<Secret> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    let hex = crate::hex::lower(&bytes);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(hex.as_bytes())?;
    f.sync_all()?;
    Ok(Secret::new(&hex))
}

/// The `(pid, start)` of a host event log's name (`host-<pid>-<start>.events.jsonl`).
fn log_owner(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix("host-")?.strip_suffix(".events.jsonl")?;
    let (pid, start) = rest.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Remove what hosts that are gone left behind: their event logs (a host removes its own
/// when it ends; one that was killed leaves it for the next host to remove), and, from
/// their rows, their sockets and secrets. Every request a gone host followed is settled
/// in the store, so nothing reads these files again.
fn prune_gone(store: &Store, dir: &Path) {
    for t in store.app_targets_all().unwrap_or_default() {
        if crate::process::is_gone(t.host_pid, t.host_start) {
            super::forget_gone(store, &t);
        }
    }
    prune_logs(dir);
}

/// The event logs of gone hosts (`host-<pid>-<start>.events.jsonl`).
fn prune_logs(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some((pid, start)) = name.to_str().and_then(log_owner) else {
            continue;
        };
        if crate::process::is_gone(pid, start) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Files this host made that must not outlive it (its event log, secret and socket):
/// unlinked by `remove` or when dropped, so every way out of `run` (a start-up error, the
/// end, a panic) removes them.
#[derive(Default)]
struct Made(Vec<PathBuf>);

impl Made {
    fn remove(&mut self) {
        for p in self.0.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Run the host until the app-server ends. `ready` receives one JSON line: the target
/// (or `{"error": …}` when it could not start).
pub fn run(args: &HostArgs, mut ready: impl Write) -> Result<(), String> {
    // A start-up error removes what was made before it is reported.
    let mut made = Made::default();
    let fail = |ready: &mut dyn Write, made: &mut Made, e: String| {
        made.remove();
        let _ = writeln!(ready, "{}", json!({"error": e}));
        e
    };
    let store =
        Store::open(&args.state_dir).map_err(|e| fail(&mut ready, &mut made, e.to_string()))?;
    let me = crate::process::this_process();
    let dir = args.state_dir.join("app-server");
    crate::fsutil::ensure_private_dir(&dir)
        .map_err(|e| fail(&mut ready, &mut made, e.to_string()))?;
    prune_gone(&store, &dir);
    let log_path = dir.join(format!("host-{}-{}.events.jsonl", me.0, me.1));
    let mut log =
        Some(open_log(&log_path).map_err(|e| fail(&mut ready, &mut made, e.to_string()))?);
    made.0.push(log_path.clone());
    let (mut child, events) = AppChild::spawn(&args.command, &args.cwd).map_err(|e| {
        fail(
            &mut ready,
            &mut made,
            format!("start {:?}: {e}", args.command),
        )
    })?;
    let mut seq = 0u64;
    let deadline = Deadline::after("app-server handshake", HANDSHAKE_WAIT);
    let mut seen = |_: &Event, raw: &[u8]| {
        seq += 1;
        log_line(&mut log, seq, raw);
    };
    let (thread_id, session_id) =
        match handshake(&mut child, &events, &args.cwd, &deadline, &mut seen) {
            Ok(ids) => ids,
            Err(e) => {
                child.stop();
                return Err(fail(&mut ready, &mut made, e));
            }
        };
    let agent_id = super::agent_id(&thread_id, me);
    let incarnation = super::incarnation(&agent_id, me, &thread_id, &session_id);
    let sock_dir = args.runtime_dir.join("app-server");
    let socket = sock_dir.join(format!("{agent_id}.sock"));
    let secret_file = super::secret_path(&socket);
    let mut secret = None;
    made.0.extend([secret_file.clone(), socket.clone()]);
    let listener = crate::fsutil::ensure_private_dir(&sock_dir)
        .and_then(|_| {
            // The secret exists before anyone can connect; a file left by a host of the
            // same id (it cannot be running: the id names this process) is replaced.
            let _ = std::fs::remove_file(&secret_file);
            secret = Some(std::sync::Arc::new(create_secret(&secret_file)?));
            let _ = std::fs::remove_file(&socket);
            UnixListener::bind(&socket)
        })
        .and_then(|l| {
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
            Ok(l)
        })
        .map_err(|e| {
            fail(
                &mut ready,
                &mut made,
                format!("admission socket {}: {e}", socket.display()),
            )
        })?;
    let secret = secret.expect("created before the socket was bound");
    let (conn_tx, conn_rx) = unbounded();
    std::thread::Builder::new()
        .name("app-server-accept".into())
        .spawn(move || {
            for s in listener.incoming().flatten() {
                let (tx, secret) = (conn_tx.clone(), secret.clone());
                let _ = std::thread::Builder::new()
                    .name("app-server-conn".into())
                    .spawn(move || serve(s, tx, &secret));
            }
        })
        .map_err(|e| fail(&mut ready, &mut made, e.to_string()))?;
    let row = AppServerTarget {
        agent_id: agent_id.clone(),
        principal: args.principal.clone(),
        incarnation: incarnation.clone(),
        thread_id: thread_id.clone(),
        session_id: session_id.clone(),
        socket: socket.to_string_lossy().into_owned(),
        host_pid: me.0,
        host_start: me.1,
        cwd: args.cwd.to_string_lossy().into_owned(),
        command: args.command.join(" "),
        events_log: log_path.to_string_lossy().into_owned(),
        created_at_ms: unix_ms(),
    };
    store
        .app_target_put(&row)
        .map_err(|e| fail(&mut ready, &mut made, e.to_string()))?;
    let _ = writeln!(
        ready,
        "{}",
        json!({"agent_id": agent_id, "incarnation": incarnation, "target_kind": "app_server",
               "thread_id": thread_id, "session_id": session_id, "socket": row.socket,
               "host_pid": me.0, "app_server_pid": child.pid, "events_log": row.events_log})
    );
    drop(ready);
    let mut host = Host {
        store,
        me,
        principal: args.principal.clone(),
        agent_id: agent_id.clone(),
        thread_id,
        incarnation,
        child,
        phase: Phase::Idle,
        baseline: None,
        seq,
        log,
        exited: false,
        pending: Vec::new(),
    };
    host.run(events, conn_rx);
    let _ = host.store.app_target_delete(&agent_id, me.0, me.1);
    // Every followed request is settled by now (`run` returns once none is pending).
    host.log = None;
    made.remove();
    Ok(())
}

/// Why a message was refused.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// Not a JSON object carrying this host's secret (missing, another, not a string).
    Secret,
    /// The secret is right, but the rest is not a message this host knows (an unknown
    /// `op`, a missing or mistyped field).
    Message(String),
}

impl Refused {
    fn detail(&self) -> String {
        match self {
            Refused::Secret => "refused: the message does not carry this host's secret".into(),
            Refused::Message(e) => format!("refused: the message is not one this host knows: {e}"),
        }
    }
}

/// A message's secret checked and removed, then the message parsed.
fn authenticated(line: &str, secret: &Secret) -> Result<HostMsg, Refused> {
    let mut v: Value = serde_json::from_str(line).map_err(|_| Refused::Secret)?;
    let given = v
        .as_object_mut()
        .and_then(|o| o.remove(SECRET_FIELD))
        .ok_or(Refused::Secret)?;
    if !given.as_str().is_some_and(|g| secret.admits(g)) {
        return Err(Refused::Secret);
    }
    serde_json::from_value(v).map_err(|e| Refused::Message(e.to_string()))
}

/// One client connection: a status or an admission (then its handoff). A message that
/// does not carry the secret gets one refusal and the connection closes.
fn serve(s: UnixStream, tx: Sender<FromConn>, secret: &Secret) {
    let _ = s.set_read_timeout(Some(CLIENT_WAIT));
    let _ = s.set_write_timeout(Some(CLIENT_WAIT));
    let Ok(w) = s.try_clone() else { return };
    let mut r = BufReader::new(s);
    let mut w = w;
    let mut line = String::new();
    let _ = (&mut r).take(MAX_MSG).read_line(&mut line);
    // Only a whole line is a message: a partial write never admits anything.
    if !line.ends_with('\n') {
        return;
    }
    let msg = match authenticated(&line, secret) {
        Ok(msg) => msg,
        Err(refused) => {
            let refusal = HostAdmitReply {
                outcome: AdmitOutcome::Unavailable,
                detail: refused.detail(),
                armed_cursor: None,
                baseline_turn: None,
                provider_turn: None,
            };
            answer(&mut w, &refusal);
            return;
        }
    };
    match msg {
        HostMsg::Status => {
            let (rtx, rrx) = bounded(1);
            if tx.send(FromConn::Status(rtx)).is_ok()
                && let Ok(st) = rrx.recv()
            {
                answer(&mut w, &st);
            }
        }
        HostMsg::Admit(a) => {
            let (rtx, rrx) = bounded(1);
            let (principal, id, rf) = (a.principal.clone(), a.request_id.clone(), a.return_final);
            if tx.send(FromConn::Admit(a, rtx)).is_err() {
                return;
            }
            let Ok(reply) = rrx.recv() else { return };
            answer(&mut w, &reply);
            if reply.outcome == AdmitOutcome::Written && rf {
                // `go`, end of input or a timeout: the row says what happened (this
                // connection is authenticated; the row, not the line, decides).
                let mut go = String::new();
                let _ = (&mut r).take(MAX_MSG).read_line(&mut go);
                let _ = tx.send(FromConn::Handoff { principal, id });
            }
        }
        HostMsg::Go => {}
    }
}

/// One answer line.
fn answer(w: &mut UnixStream, v: &impl serde::Serialize) {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    let _ = w.write_all(&b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_logs_of_gone_hosts_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, start) = crate::process::this_process();
        let mine = dir.path().join(format!("host-{pid}-{start}.events.jsonl"));
        let gone_pid = crate::process::ended_pid();
        let gone = dir.path().join(format!("host-{gone_pid}-1.events.jsonl"));
        let other = dir.path().join("notes.txt");
        for p in [&mine, &gone, &other] {
            std::fs::write(p, "x").unwrap();
        }
        prune_logs(dir.path());
        assert!(mine.exists() && other.exists());
        assert!(!gone.exists());
        assert_eq!(log_owner("host-12-34.events.jsonl"), Some((12, 34)));
        assert_eq!(log_owner("host-x-34.events.jsonl"), None);
    }

    /// A killed host's row names its socket and secret: the next host to start removes
    /// them with the row; a running host's are kept, and a row never names another file.
    #[test]
    fn the_files_of_gone_hosts_are_pruned_with_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let me = crate::process::this_process();
        let gone = (crate::process::ended_pid(), 1);
        let file = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, "x").unwrap();
            p
        };
        let row = |id: &str, host: (u32, u64), socket: &Path| AppServerTarget {
            agent_id: id.into(),
            principal: "p".into(),
            socket: socket.to_string_lossy().into_owned(),
            host_pid: host.0,
            host_start: host.1,
            ..Default::default()
        };
        let (dead_sock, dead_secret) = (file("dead.sock"), file("dead.secret"));
        let (live_sock, live_secret) = (file("live.sock"), file("live.secret"));
        let stranger = file("notes.sock");
        store
            .app_target_put(&row("dead", gone, &dead_sock))
            .unwrap();
        store.app_target_put(&row("live", me, &live_sock)).unwrap();
        store.app_target_put(&row("odd", gone, &stranger)).unwrap();
        prune_gone(&store, dir.path());
        assert!(!dead_sock.exists() && !dead_secret.exists());
        assert!(live_sock.exists() && live_secret.exists() && stranger.exists());
        let left: Vec<String> = store
            .app_targets_all()
            .unwrap()
            .into_iter()
            .map(|t| t.agent_id)
            .collect();
        assert_eq!(left, ["live"]);
    }

    #[test]
    fn only_the_exact_secret_authenticates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.secret");
        let secret = create_secret(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 2 * SECRET_BYTES);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // O_EXCL: an existing file (or a link planted there) is never written through.
        assert!(create_secret(&path).is_err());
        assert!(secret.admits(&text));
        let mut other = text.clone().into_bytes();
        other[0] = if other[0] == b'0' { b'1' } else { b'0' };
        let other = String::from_utf8(other).unwrap();
        for bad in [
            other.as_str(),
            "",
            &text[..62],
            &format!("{text}0"),
            &text.to_uppercase(),
        ] {
            if bad != text {
                assert!(!secret.admits(bad), "{bad}");
            }
        }
        let with = |v: Value| authenticated(&v.to_string(), &secret);
        assert_eq!(
            with(json!({"op": "status", "secret": text})),
            Ok(HostMsg::Status)
        );
        for bad in [
            json!({"op": "status"}),
            json!({"op": "status", "secret": other}),
            json!({"op": "status", "secret": 7}),
            json!(["status"]),
        ] {
            assert_eq!(with(bad), Err(Refused::Secret));
        }
        assert_eq!(authenticated("{", &secret), Err(Refused::Secret));
    }

    /// The right secret with a message the host does not know is refused as such, never
    /// as a missing secret (the client would look for a fault it does not have).
    #[test]
    fn a_malformed_message_with_the_secret_is_refused_for_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.secret");
        let secret = create_secret(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let secret_refusal = Refused::Secret.detail();
        for bad in [
            json!({"op": "stop", "secret": text}),
            json!({"secret": text}),
            json!({"op": "admit", "principal": 7, "secret": text}),
        ] {
            let got = authenticated(&bad.to_string(), &secret).unwrap_err();
            assert!(matches!(got, Refused::Message(_)), "{bad}: {got:?}");
            let detail = got.detail();
            assert_ne!(detail, secret_refusal);
            assert!(
                detail.starts_with("refused: the message is not one"),
                "{detail}"
            );
        }
    }
}
