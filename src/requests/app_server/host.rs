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

use super::child::{AppChild, handshake};
use super::host_loop::{FromConn, Host, log_line};
use super::{CLIENT_WAIT, HostMsg, MAX_MSG};
use crate::codex::app_server::{Event, Phase};
use crate::deadline::{Deadline, unix_ms};
use crate::store::Store;
use crate::store::app_server_targets::AppServerTarget;
use crate::wire::codex::AdmitOutcome;
use crossbeam_channel::{Sender, bounded, unbounded};
use serde_json::json;
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

/// The `(pid, start)` of a host event log's name (`host-<pid>-<start>.events.jsonl`).
fn log_owner(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix("host-")?.strip_suffix(".events.jsonl")?;
    let (pid, start) = rest.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Remove the event logs of hosts that are gone (a host removes its own when it ends
/// cleanly; one that was killed leaves it for the next host to remove). Every request a
/// gone host followed is settled in the store, so nothing reads these logs again.
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

/// Run the host until the app-server ends. `ready` receives one JSON line: the target
/// (or `{"error": …}` when it could not start).
pub fn run(args: &HostArgs, mut ready: impl Write) -> Result<(), String> {
    let fail = |ready: &mut dyn Write, e: String| {
        let _ = writeln!(ready, "{}", json!({"error": e}));
        e
    };
    let store = Store::open(&args.state_dir).map_err(|e| fail(&mut ready, e.to_string()))?;
    let me = crate::process::this_process();
    let dir = args.state_dir.join("app-server");
    crate::fsutil::ensure_private_dir(&dir).map_err(|e| fail(&mut ready, e.to_string()))?;
    prune_logs(&dir);
    let log_path = dir.join(format!("host-{}-{}.events.jsonl", me.0, me.1));
    let mut log = Some(open_log(&log_path).map_err(|e| fail(&mut ready, e.to_string()))?);
    let (mut child, events) = AppChild::spawn(&args.command, &args.cwd)
        .map_err(|e| fail(&mut ready, format!("start {:?}: {e}", args.command)))?;
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
                return Err(fail(&mut ready, e));
            }
        };
    let agent_id = super::agent_id(&thread_id, me);
    let incarnation = super::incarnation(&agent_id, me, &thread_id, &session_id);
    let sock_dir = args.runtime_dir.join("app-server");
    let socket = sock_dir.join(format!("{agent_id}.sock"));
    let listener = crate::fsutil::ensure_private_dir(&sock_dir)
        .and_then(|_| {
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
                format!("admission socket {}: {e}", socket.display()),
            )
        })?;
    let (conn_tx, conn_rx) = unbounded();
    std::thread::Builder::new()
        .name("app-server-accept".into())
        .spawn(move || {
            for s in listener.incoming().flatten() {
                let tx = conn_tx.clone();
                let _ = std::thread::Builder::new()
                    .name("app-server-conn".into())
                    .spawn(move || serve(s, tx));
            }
        })
        .map_err(|e| fail(&mut ready, e.to_string()))?;
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
        .map_err(|e| fail(&mut ready, e.to_string()))?;
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
    let _ = std::fs::remove_file(&socket);
    // Every followed request is settled by now (`run` returns once none is pending).
    host.log = None;
    let _ = std::fs::remove_file(&log_path);
    Ok(())
}

/// One client connection: a status or an admission (then its handoff).
fn serve(s: UnixStream, tx: Sender<FromConn>) {
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
    match serde_json::from_str::<HostMsg>(&line) {
        Ok(HostMsg::Status) => {
            let (rtx, rrx) = bounded(1);
            if tx.send(FromConn::Status(rtx)).is_ok()
                && let Ok(st) = rrx.recv()
            {
                answer(&mut w, &st);
            }
        }
        Ok(HostMsg::Admit(a)) => {
            let (rtx, rrx) = bounded(1);
            let (principal, id, rf) = (a.principal.clone(), a.request_id.clone(), a.return_final);
            if tx.send(FromConn::Admit(a, rtx)).is_err() {
                return;
            }
            let Ok(reply) = rrx.recv() else { return };
            answer(&mut w, &reply);
            if reply.outcome == AdmitOutcome::Written && rf {
                // `go`, end of input or a timeout: the row says what happened.
                let mut go = String::new();
                let _ = (&mut r).take(MAX_MSG).read_line(&mut go);
                let _ = tx.send(FromConn::Handoff { principal, id });
            }
        }
        _ => {}
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
}
