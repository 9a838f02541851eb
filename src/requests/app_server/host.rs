//! The managed app-server host (`agent app-server host`): one detached process per
//! target. It runs the app-server child, numbers every line it prints (the durable event
//! sequence, appended to a 0600 log), keeps the thread's phase, answers admissions on its
//! socket, and commits each return-final request's one terminal event.
//!
//! Admission (one loop turn): the same incarnation, the app-server running, the event log
//! writable, the thread idle (no turn running, no `turn/start` unanswered) → arm at the
//! current sequence, write one `turn/start` line, answer once the app-server answered it.
//! The first provider turn after the armed sequence is bound (`AppCorrelation`); its
//! `turn/completed` is the request's outcome.
//!
//! Invariants: a request is committed only once the admitter stored its receipt with
//! this host as owner (`submitted`); a request that became terminal meanwhile (cancel) is
//! dropped, never overwritten; the app-server ending settles every followed request as
//! `indeterminate`; this host's death leaves its requests to `reconcile` (owner gone).

use super::child::{AppChild, FromChild, handshake};
use super::{CLIENT_WAIT, HostAdmit, HostAdmitReply, HostMsg, HostStatus, MAX_MSG};
use crate::codex::app_server::{AppCorrelation, Event, Phase};
use crate::codex::turns::Verdict;
use crate::deadline::{Deadline, unix_ms};
use crate::requests::follow::HOUSEKEEPING;
use crate::store::Store;
use crate::store::agent_requests::{ADMITTING, SUBMITTED, Terminal};
use crate::store::app_server_targets::AppServerTarget;
use crate::wire::codex::AdmitOutcome;
use crossbeam_channel::{Receiver, Sender, bounded, never, select, unbounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an admission waits for the app-server's answer to `turn/start`.
pub const TURN_START_WAIT: Duration = Duration::from_secs(10);
/// How long the `initialize` / `thread/start` handshake may take.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(60);
/// After the app-server ended: how long admitters still get to hand requests over.
const EXIT_GRACE: Duration = Duration::from_secs(5);

pub struct HostArgs {
    pub state_dir: PathBuf,
    pub runtime_dir: PathBuf,
    pub principal: String,
    pub cwd: PathBuf,
    pub command: Vec<String>,
}

enum FromConn {
    Status(Sender<HostStatus>),
    Admit(HostAdmit, Sender<HostAdmitReply>),
    /// The admitter wrote `go` or went away: look at the request's row.
    Handoff {
        principal: String,
        id: String,
    },
}

struct Pending {
    principal: String,
    request_id: String,
    return_final: bool,
    rpc: i64,
    armed: u64,
    /// Until the app-server answers `turn/start`.
    reply: Option<(Sender<HostAdmitReply>, Deadline)>,
    corr: AppCorrelation,
    verdict: Option<Verdict>,
    /// The row is `submitted` with this host as owner: it may be committed.
    handed: bool,
    deadline_ms: Option<i64>,
}

struct Host {
    store: Store,
    me: (u32, u64),
    thread_id: String,
    incarnation: String,
    child: AppChild,
    phase: Phase,
    baseline: Option<String>,
    seq: u64,
    log: Option<std::fs::File>,
    exited: bool,
    pending: Vec<Pending>,
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
}

/// Append line `seq` to the event log; `false` once the log cannot be written.
fn log_line(log: &mut Option<std::fs::File>, seq: u64, raw: &[u8]) {
    let message = serde_json::from_slice::<Value>(raw)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()));
    let mut line = json!({"seq": seq, "message": message}).to_string();
    line.push('\n');
    if let Some(f) = log
        && f.write_all(line.as_bytes()).is_err()
    {
        *log = None;
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

impl Host {
    fn run(&mut self, events: Receiver<FromChild>, conns: Receiver<FromConn>) {
        let mut events = events;
        let mut grace: Option<Deadline> = None;
        loop {
            if let Some(g) = &grace
                && (self.pending.is_empty() || g.expired())
            {
                return;
            }
            let tick = self.next_wake(grace.as_ref()).receiver();
            select! {
                recv(events) -> m => match m {
                    Ok(FromChild::Line(e, raw)) => self.on_line(e, &raw),
                    Ok(FromChild::Closed) | Err(_) => {
                        self.on_exit();
                        events = never();
                        grace = Some(Deadline::after("app-server exit grace", EXIT_GRACE));
                    }
                },
                recv(conns) -> m => if let Ok(m) = m { self.on_conn(m) },
                recv(tick) -> _ => self.housekeeping(),
            }
            self.commit_ready();
        }
    }

    fn next_wake(&self, grace: Option<&Deadline>) -> Deadline {
        let now = unix_ms();
        let mut wait = HOUSEKEEPING;
        for p in &self.pending {
            if let Some((_, d)) = &p.reply {
                wait = wait.min(d.remaining().unwrap_or(wait));
            }
            if let (true, Some(at)) = (p.handed, p.deadline_ms) {
                wait = wait.min(Duration::from_millis((at - now).max(0) as u64));
            }
        }
        if let Some(g) = grace {
            wait = wait.min(g.remaining().unwrap_or(wait));
        }
        Deadline::after("app-server host housekeeping", wait)
    }

    fn status(&self) -> HostStatus {
        HostStatus {
            phase: self.phase.as_str().into(),
            baseline_turn: self.baseline.clone(),
            cursor: self.seq,
            observer: match (self.exited, self.log.is_some()) {
                (true, _) => "app_server_exited",
                (false, false) => "event_log_failed",
                (false, true) => "attached",
            }
            .into(),
            app_pid: self.child.pid,
        }
    }

    fn on_line(&mut self, e: Event, raw: &[u8]) {
        self.seq += 1;
        log_line(&mut self.log, self.seq, raw);
        let ours = |t: &str| t == self.thread_id;
        match &e {
            Event::ServerRequest { id, method } => {
                let _ = self.child.refuse(id, method);
            }
            Event::Response { id, result } => self.on_response(*id, result),
            Event::TurnStarted { thread_id, turn_id } if ours(thread_id) => {
                self.phase = Phase::Busy(turn_id.clone())
            }
            Event::TurnCompleted {
                thread_id, turn_id, ..
            } if ours(thread_id) => {
                if self.phase == Phase::Busy(turn_id.clone()) {
                    self.phase = Phase::Idle;
                }
                self.baseline = Some(turn_id.clone());
            }
            _ => {}
        }
        for p in self.pending.iter_mut().filter(|p| p.return_final) {
            if p.verdict.is_none() {
                match p.corr.on(&e) {
                    Verdict::Pending => {}
                    v => p.verdict = Some(v),
                }
            }
        }
    }

    fn on_response(&mut self, id: i64, result: &Result<Value, String>) {
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.rpc == id && p.reply.is_some())
        else {
            return;
        };
        let p = &mut self.pending[i];
        let Some((tx, _)) = p.reply.take() else {
            return;
        };
        match result {
            Ok(v) => {
                let turn = v
                    .get("turn")
                    .and_then(|t| t.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(t) = &turn
                    && p.verdict.is_none()
                    && let v @ (Verdict::Completed { .. }
                    | Verdict::Aborted { .. }
                    | Verdict::Indeterminate { .. }) = p.corr.expect(t)
                {
                    p.verdict = Some(v);
                }
                let _ = tx.send(HostAdmitReply {
                    outcome: AdmitOutcome::Written,
                    detail: "turn/start accepted by the app-server".into(),
                    armed_cursor: Some(p.armed),
                    baseline_turn: self.baseline.clone(),
                    provider_turn: turn,
                });
                if !p.return_final {
                    self.pending.remove(i);
                }
            }
            Err(msg) => {
                // The app-server refused the turn: nothing reached the agent.
                let _ = tx.send(HostAdmitReply {
                    outcome: AdmitOutcome::Unavailable,
                    detail: format!("the app-server refused turn/start: {msg}"),
                    armed_cursor: None,
                    baseline_turn: None,
                    provider_turn: None,
                });
                self.pending.remove(i);
                if self.phase == Phase::Starting {
                    self.phase = Phase::Idle;
                }
            }
        }
    }

    fn on_conn(&mut self, m: FromConn) {
        match m {
            FromConn::Status(tx) => {
                let _ = tx.send(self.status());
            }
            FromConn::Admit(a, tx) => self.admit(a, tx),
            FromConn::Handoff { principal, id } => {
                if let Some(i) = self
                    .pending
                    .iter()
                    .position(|p| p.principal == principal && p.request_id == id)
                {
                    self.check(i);
                }
            }
        }
    }

    fn admit(&mut self, a: HostAdmit, tx: Sender<HostAdmitReply>) {
        let refuse = |outcome, detail: &str| HostAdmitReply {
            outcome,
            detail: detail.to_string(),
            armed_cursor: None,
            baseline_turn: None,
            provider_turn: None,
        };
        let answer = if a.incarnation != self.incarnation {
            Some(refuse(
                AdmitOutcome::StaleIncarnation,
                "the app-server target runs as another incarnation now",
            ))
        } else if self.exited {
            Some(refuse(
                AdmitOutcome::Unavailable,
                "the app-server has exited",
            ))
        } else if self.log.is_none() {
            Some(refuse(
                AdmitOutcome::ObserverFailure,
                "the durable event log cannot be written: no correlation is possible",
            ))
        } else if self.phase != Phase::Idle {
            let d = match &self.phase {
                Phase::Busy(t) => format!("provider turn {t} is running"),
                _ => "a turn is being started".into(),
            };
            Some(refuse(AdmitOutcome::Busy, &d))
        } else {
            None
        };
        if let Some(r) = answer {
            let _ = tx.send(r);
            return;
        }
        let armed = self.seq;
        let params = json!({"threadId": self.thread_id,
                            "input": [{"type": "text", "text": a.text, "text_elements": []}]});
        match self.child.request("turn/start", params) {
            Ok(rpc) => {
                self.phase = Phase::Starting;
                self.pending.push(Pending {
                    principal: a.principal,
                    request_id: a.request_id,
                    return_final: a.return_final,
                    rpc,
                    armed,
                    reply: Some((tx, Deadline::after("turn/start answer", TURN_START_WAIT))),
                    corr: AppCorrelation::new(&self.thread_id, &a.prompt_sha256),
                    verdict: None,
                    handed: false,
                    deadline_ms: None,
                });
            }
            Err(e) => {
                let _ = tx.send(refuse(
                    AdmitOutcome::Indeterminate,
                    &format!("writing turn/start to the app-server failed: {e}"),
                ));
            }
        }
    }

    /// Look at pending request `i`'s row: hand it over, drop it, or settle a dead
    /// admitter's registration.
    fn check(&mut self, i: usize) {
        let p = &mut self.pending[i];
        let row = match self.store.request_get(&p.principal, &p.request_id) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("app-server host: read request: {e}");
                return;
            }
        };
        let owner = format!("{}:{}", self.me.0, self.me.1);
        match row {
            Some(r) if r.state == SUBMITTED && r.owner == owner => {
                p.handed = true;
                p.deadline_ms = r.deadline_unix_ms;
            }
            Some(r) if r.state == ADMITTING => {
                // The admitter has not stored the receipt yet, or died before it did.
                let _ = crate::requests::reconcile::one(&self.store, &p.principal, &p.request_id);
            }
            // Terminal (cancelled, settled), delivered, another owner, or gone.
            _ => {
                self.pending.remove(i);
            }
        }
    }

    fn housekeeping(&mut self) {
        let now = unix_ms();
        let mut i = 0;
        while i < self.pending.len() {
            let before = self.pending.len();
            let p = &mut self.pending[i];
            if let Some((_, d)) = &p.reply {
                if d.expired()
                    && let Some((tx, _)) = p.reply.take()
                {
                    let _ = tx.send(HostAdmitReply {
                        outcome: AdmitOutcome::Indeterminate,
                        detail: "the app-server did not answer turn/start in time".into(),
                        armed_cursor: None,
                        baseline_turn: None,
                        provider_turn: None,
                    });
                    self.pending.remove(i);
                    continue;
                }
            } else if p.handed && p.verdict.is_none() && p.deadline_ms.is_some_and(|at| at <= now) {
                let (pr, id) = (p.principal.clone(), p.request_id.clone());
                let turn = p.corr.bound.clone();
                let why = "the final did not arrive within final_timeout_ms";
                self.finish(&pr, &id, "timed_out", None, Some(why), turn.as_deref());
                self.pending.remove(i);
                continue;
            } else {
                self.check(i);
            }
            if self.pending.len() == before {
                i += 1;
            }
        }
    }

    fn on_exit(&mut self) {
        self.exited = true;
        self.child.stop();
        let reason = "the app-server exited before the bound provider turn completed";
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            if let Some((tx, _)) = p.reply.take() {
                let _ = tx.send(HostAdmitReply {
                    outcome: AdmitOutcome::Indeterminate,
                    detail: "the app-server exited before it answered turn/start".into(),
                    armed_cursor: None,
                    baseline_turn: None,
                    provider_turn: None,
                });
                self.pending.remove(i);
                continue;
            }
            if p.verdict.is_none() {
                p.verdict = Some(Verdict::Indeterminate {
                    reason: reason.into(),
                });
            }
            i += 1;
        }
    }

    fn finish(
        &self,
        principal: &str,
        id: &str,
        state: &str,
        msg: Option<&str>,
        reason: Option<&str>,
        turn: Option<&str>,
    ) {
        let t = Terminal {
            state,
            final_message: msg,
            reason,
            turn_id: turn,
            at_ms: unix_ms(),
        };
        if let Err(e) = self.store.request_finish(principal, id, &t) {
            log::error!("request {id}: could not record {state}: {e}");
        }
    }

    /// Commit every handed request whose outcome is known.
    fn commit_ready(&mut self) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            let (true, Some(v)) = (p.handed, &p.verdict) else {
                i += 1;
                continue;
            };
            let bound = p.corr.bound.clone();
            let (pr, id) = (p.principal.clone(), p.request_id.clone());
            match v.clone() {
                Verdict::Completed {
                    turn_id,
                    final_message,
                } => self.finish(
                    &pr,
                    &id,
                    "completed",
                    Some(final_message.as_deref().unwrap_or("")),
                    None,
                    Some(&turn_id),
                ),
                Verdict::Aborted { turn_id, reason } => {
                    self.finish(&pr, &id, "aborted", None, Some(&reason), Some(&turn_id))
                }
                Verdict::Indeterminate { reason } => self.finish(
                    &pr,
                    &id,
                    "indeterminate",
                    None,
                    Some(&reason),
                    bound.as_deref(),
                ),
                Verdict::Pending => {}
            }
            self.pending.remove(i);
        }
    }
}
