//! The host's event loop (`host.rs` starts it): the thread's phase from the app-server's
//! notifications, the checked admission (`turn/start` armed at the current event
//! sequence), each followed request's correlation, and its one terminal event.
//!
//! Invariants: a `turn/start` is written only for a request the store already holds
//! (registered by its admitter, `admitting`, for this host's principal, target and
//! incarnation, with the same prompt digest and return mode): the row comes before the
//! turn, never after; a request is committed only once the admitter stored its receipt
//! with this host as owner (`submitted`); a request that became terminal meanwhile (cancel) is
//! dropped at the next look, never overwritten; the app-server ending settles every
//! followed request as `indeterminate`.

use super::child::{AppChild, FromChild};
use super::{HostAdmit, HostAdmitReply, HostStatus};
use crate::codex::app_server::{AppCorrelation, Event, Phase};
use crate::codex::turns::Verdict;
use crate::deadline::{Deadline, unix_ms};
use crate::requests::follow::{HOUSEKEEPING, Wake, Watcher};
use crate::store::Store;
use crate::store::agent_requests::{ADMITTING, SUBMITTED};
use crate::wire::codex::AdmitOutcome;
use crossbeam_channel::{Receiver, Sender, never, select};
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

/// How long an admission waits for the app-server's answer to `turn/start`.
pub const TURN_START_WAIT: Duration = Duration::from_secs(10);
/// After the app-server ended: how long admitters still get to hand requests over.
const EXIT_GRACE: Duration = Duration::from_secs(5);
pub enum FromConn {
    Status(Sender<HostStatus>),
    Admit(HostAdmit, Sender<HostAdmitReply>),
    /// The admitter wrote `go` or went away: look at the request's row.
    Handoff {
        principal: String,
        id: String,
    },
}

pub struct Pending {
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

pub struct Host {
    pub(super) store: Store,
    pub(super) me: (u32, u64),
    /// Whose target this is: admissions for any other principal are refused.
    pub(super) principal: String,
    pub(super) agent_id: String,
    pub(super) thread_id: String,
    pub(super) incarnation: String,
    pub(super) child: AppChild,
    pub(super) phase: Phase,
    pub(super) baseline: Option<String>,
    pub(super) seq: u64,
    pub(super) log: Option<std::fs::File>,
    pub(super) exited: bool,
    pub(super) pending: Vec<Pending>,
}

/// Append line `seq` to the event log; `false` once the log cannot be written.
pub fn log_line(log: &mut Option<std::fs::File>, seq: u64, raw: &[u8]) {
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

/// A wake-up for each change in the state directory: a cancel (or another reader settling
/// a request) commits there and touches the store's signal file, so the host drops the
/// request at once rather than at its next housekeeping tick. `never()` when the
/// directory cannot be watched (the tick still bounds the delay).
fn store_changes(dir: Option<&std::path::Path>) -> Receiver<()> {
    let Some(dir) = dir else { return never() };
    let Ok(w) = Watcher::new() else {
        return never();
    };
    if w.dir(dir).is_err() {
        return never();
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("host-store-watch".into())
        .spawn(move || {
            let forever = Deadline::never("state directory changes");
            loop {
                if w.wait(&forever) == Wake::Look
                    && let Err(crossbeam_channel::TrySendError::Disconnected(_)) = tx.try_send(())
                {
                    return;
                }
            }
        });
    match spawned {
        Ok(_) => rx,
        Err(_) => never(),
    }
}

impl Host {
    pub fn run(&mut self, events: Receiver<FromChild>, conns: Receiver<FromConn>) {
        let mut events = events;
        let changes = store_changes(self.store.path().parent());
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
                recv(changes) -> _ => self.housekeeping(),
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
        } else if let Some(why) = self.unregistered(&a) {
            Some(refuse(AdmitOutcome::Unavailable, &why))
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

    /// Why `a` may not be written, if the store does not hold it as its admitter
    /// registered it: this host's principal, agent and incarnation, still `admitting`, the
    /// same return mode and the digest of this very text. `None`: it may be written.
    fn unregistered(&self, a: &HostAdmit) -> Option<String> {
        if a.principal != self.principal {
            return Some("no such request for this app-server target".into());
        }
        if self
            .pending
            .iter()
            .any(|p| p.principal == a.principal && p.request_id == a.request_id)
        {
            return Some("this request is already being admitted".into());
        }
        let row = match self.store.request_get(&a.principal, &a.request_id) {
            Ok(Some(r)) => r,
            Ok(None) => return Some("no such request in the state store".into()),
            Err(e) => return Some(format!("the state store cannot be read: {e}")),
        };
        let digest = crate::codex::message_digest(&a.text);
        if row.state != ADMITTING {
            return Some(format!("the request is {} already", row.state));
        }
        let same = row.agent_id == self.agent_id
            && row.incarnation == self.incarnation
            && row.return_final == a.return_final
            && row.prompt_sha256 == digest
            && a.prompt_sha256 == digest;
        (!same).then(|| "the request in the state store is not this admission".into())
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
        let owner = crate::requests::owner_key(self.me);
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
        crate::requests::observer::finish(&self.store, principal, id, state, msg, reason, turn);
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
