//! Admission: register → the guardian's checked one-write → store what was written →
//! hand a return-final request to its observer. See the module invariants in `mod.rs`.
//!
//! `agent admit` never steers: a busy target is refused. `agent send` (one-way) may
//! write into a running turn (seed 001: it keeps its interactive behaviour). A write the
//! agent's terminal took no byte of ends the request `delivery_failed` (stored, one
//! terminal event, nothing written); a write that failed part-way is `indeterminate`.

use super::app_server::{self, Asked, HostAdmit, HostConn};
use super::observer;
use super::receipt::{Class, Correlation, Receipt};
use super::{CAPABILITIES_VERSION, MAX_FINAL_TIMEOUT_MS, MAX_TEXT_BYTES, valid_request_id};
use crate::deadline::unix_ms;
use crate::ipc::GuardianClient;
use crate::store::Store;
use crate::store::agent_requests::{
    ADMITTING, AgentRequest, DELIVERED, Registration, SUBMITTED, Terminal,
};
use crate::wire::codex::{AdmitOutcome, CodexAdmit, CodexTarget, PasteMode};
use crate::wire::guardian::{Request, Response};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a target is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    /// Codex on a winx session's PTY: `socket` is the session's guardian.
    Guardian,
    /// A managed Codex app-server: `socket` is its host's admission socket.
    AppServer { session_id: String },
}

/// A Codex agent and the socket admissions to it go through.
#[derive(Clone, Debug)]
pub struct Located {
    pub target: CodexTarget,
    pub socket: PathBuf,
    /// The winx session's thread (PTY targets) or the app-server's thread.
    pub thread_id: String,
    pub via: Via,
}

/// Who follows a written return-final request.
enum Handoff {
    /// A new request observer process (PTY targets).
    Observer,
    /// The app-server host, over the admission's connection.
    Host(HostConn),
}

/// What asking the target's process produced.
enum Answer {
    /// Definitively nothing written.
    Refused(Class, String),
    /// It answered (the target as checked; an app-server's provider turn).
    Reply(AdmitOutcome, String, Box<Written>),
    /// The request left, its answer was lost: may have been written.
    Lost(String),
}

/// One admission as the caller asked for it.
#[derive(Clone, Debug)]
pub struct Admission {
    pub principal: String,
    pub request_id: String,
    pub agent_id: String,
    pub incarnation: String,
    pub text: String,
    pub paste: PasteMode,
    pub return_final: bool,
    pub final_timeout_ms: u64,
    /// `agent send`: a one-way prompt may be written while a turn runs (steering it).
    /// Ignored for a return-final request and for app-server targets (they take a
    /// `turn/start` only when idle). Not part of the idempotency key.
    pub steer: bool,
}

fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    crate::hex::lower(&h.finalize())
}

impl Admission {
    /// The idempotency key: incarnation, prompt bytes, paste mode, return mode, timeout.
    pub fn key(&self) -> String {
        digest(&[
            self.incarnation.as_bytes(),
            self.text.as_bytes(),
            self.paste.as_str().as_bytes(),
            &[self.return_final as u8],
            &self.final_timeout_ms.to_be_bytes(),
        ])
    }

    fn base(&self) -> Receipt {
        Receipt {
            receipt_version: CAPABILITIES_VERSION,
            receipt_class: Class::Invalid,
            prompt_written: Some(false),
            request_id: self.request_id.clone(),
            agent_id: self.agent_id.clone(),
            incarnation: self.incarnation.clone(),
            return_mode: if self.return_final { "final" } else { "none" }.into(),
            reply_pending: false,
            paste_mode: self.paste.as_str().into(),
            final_timeout_ms: self.final_timeout_ms,
            correlation: None,
            detail: String::new(),
            replayed: false,
        }
    }

    /// The registration row of this admission, owned by `owner` (state `admitting`).
    pub fn registration(&self, owner: String, now_ms: i64) -> AgentRequest {
        AgentRequest {
            principal: self.principal.clone(),
            request_id: self.request_id.clone(),
            key_sha256: self.key(),
            agent_id: self.agent_id.clone(),
            incarnation: self.incarnation.clone(),
            return_final: self.return_final,
            final_timeout_ms: self.final_timeout_ms as i64,
            prompt_sha256: crate::codex::message_digest(&self.text),
            owner,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            ..Default::default()
        }
    }

    /// What is wrong with the request itself, if anything.
    pub fn invalid(&self) -> Option<String> {
        if !valid_request_id(&self.request_id) {
            return Some("request_id must be a UUID (8-4-4-4-12 hex digits)".into());
        }
        if self.text.trim().is_empty() {
            return Some("the message is empty".into());
        }
        if self.text.len() > MAX_TEXT_BYTES {
            return Some(format!("the message exceeds {MAX_TEXT_BYTES} bytes"));
        }
        if self.text.contains('\0') || self.text.contains("\x1b[201~") {
            return Some("the message holds a NUL byte or a bracketed-paste end marker".into());
        }
        if self.final_timeout_ms > MAX_FINAL_TIMEOUT_MS {
            return Some(format!(
                "final_timeout_ms exceeds {MAX_FINAL_TIMEOUT_MS} (7 days)"
            ));
        }
        if self.incarnation.is_empty() {
            return Some("an incarnation is required (from `agent catalog`)".into());
        }
        None
    }
}

/// A stored receipt, marked as replayed.
fn stored(row: &AgentRequest, a: &Admission) -> Receipt {
    match row.receipt.as_deref().map(serde_json::from_str::<Receipt>) {
        Some(Ok(mut r)) => {
            r.replayed = true;
            r
        }
        _ => Receipt {
            receipt_class: Class::Indeterminate,
            prompt_written: None,
            detail: "another admission of this request is in progress or ended before it \
                     stored a receipt; repeat the same request to read its outcome, never \
                     resend under a new id"
                .into(),
            replayed: true,
            ..a.base()
        },
    }
}

/// Admit `a` to `located` (None: not in any catalog now). Never writes twice.
pub fn admit(store: &Store, a: &Admission, located: Option<&Located>, exe: &Path) -> Receipt {
    let base = a.base();
    if let Some(why) = a.invalid() {
        return Receipt::rejected(&base, Class::Invalid, &why);
    }
    let row = a.registration(super::this_owner(), unix_ms());
    let internal = |e: &dyn std::fmt::Display| {
        Receipt::rejected(&base, Class::InternalFailure, &format!("state store: {e}"))
    };
    // A registration left by a dead admitter is settled first (indeterminate).
    if let Err(e) = super::reconcile::one(store, &a.principal, &a.request_id) {
        return internal(&e);
    }
    match store.request_register(&row) {
        Err(e) => return internal(&e),
        Ok(Registration::Existing(old)) => return stored(&old, a),
        Ok(Registration::Conflict(_)) => {
            let d = "this request_id was admitted with other input (target incarnation, \
                     message, paste mode, return mode or timeout); use a new request_id";
            return Receipt::rejected(&base, Class::Invalid, d);
        }
        Ok(Registration::New) => {}
    }
    let release = |class: Class, detail: &str| {
        let _ = store.request_release(&a.principal, &a.request_id);
        Receipt::rejected(&base, class, detail)
    };
    let Some(loc) = located else {
        return release(Class::Unavailable, "no such agent in the catalog now");
    };
    if loc.target.incarnation != a.incarnation {
        return release(
            Class::StaleIncarnation,
            "the agent runs as another incarnation now",
        );
    }
    let answer = match &loc.via {
        Via::Guardian => ask_guardian(loc, a),
        Via::AppServer { .. } => ask_host(loc, a),
    };
    let (outcome, detail, w) = match answer {
        Answer::Refused(class, d) => return release(class, &d),
        Answer::Lost(d) => {
            let t = Written {
                target: None,
                provider_turn: None,
                handoff: Handoff::Observer,
            };
            return written(store, a, &base, loc, t, Err(d), exe);
        }
        Answer::Reply(o, d, w) => (o, d, *w),
    };
    match outcome {
        AdmitOutcome::Written => written(store, a, &base, loc, w, Ok(detail), exe),
        AdmitOutcome::Indeterminate => written(store, a, &base, loc, w, Err(detail), exe),
        AdmitOutcome::Busy => release(Class::Busy, &detail),
        AdmitOutcome::Unavailable => release(Class::Unavailable, &detail),
        AdmitOutcome::StaleIncarnation => release(Class::StaleIncarnation, &detail),
        AdmitOutcome::ObserverFailure => release(Class::ObserverFailure, &detail),
        AdmitOutcome::DeliveryFailed => delivery_failed(store, a, &base, &detail),
    }
}

/// The agent's terminal took none of the prompt: the request is stored with its receipt
/// and ends `delivery_failed` (one terminal event), so repeating the id reads this
/// receipt and a watcher sees the end. Nothing was written.
fn delivery_failed(store: &Store, a: &Admission, base: &Receipt, detail: &str) -> Receipt {
    let mut receipt = Receipt::rejected(
        base,
        Class::DeliveryFailed,
        &format!(
            "{detail}; nothing was written (a new request_id may admit it again once the \
             agent takes input)"
        ),
    );
    let now = unix_ms();
    let row = AgentRequest {
        principal: a.principal.clone(),
        request_id: a.request_id.clone(),
        state: ADMITTING.into(),
        receipt: Some(receipt.to_json().to_string()),
        owner: super::this_owner(),
        updated_at_ms: now,
        ..Default::default()
    };
    let end = Terminal {
        state: "delivery_failed",
        final_message: None,
        reason: Some(detail),
        turn_id: None,
        at_ms: now,
    };
    match store
        .request_written(&row)
        .and_then(|_| store.request_finish(&a.principal, &a.request_id, &end))
    {
        Ok(_) => {}
        Err(e) => receipt.detail = format!("{}; the state store: {e}", receipt.detail),
    }
    receipt
}

/// The session's guardian: its checked one-write on the PTY.
fn ask_guardian(loc: &Located, a: &Admission) -> Answer {
    let ask = CodexAdmit {
        agent_id: a.agent_id.clone(),
        incarnation: a.incarnation.clone(),
        text: a.text.clone(),
        paste: a.paste,
        armable: a.return_final,
        steer: a.steer && !a.return_final,
    };
    match GuardianClient::new(&loc.socket).try_call(&Request::CodexAdmit(ask), Duration::ZERO) {
        Ok(Response::CodexAdmitted(r)) => {
            let w = Written {
                target: r.target,
                provider_turn: None,
                handoff: Handoff::Observer,
            };
            Answer::Reply(r.outcome, r.detail, Box::new(w))
        }
        Ok(other) => Answer::Refused(
            Class::Unsupported,
            format!("the session's guardian cannot admit prompts (an older build?): {other:?}"),
        ),
        Err(e) if !e.sent => Answer::Refused(Class::Unavailable, e.error.to_string()),
        Err(e) => Answer::Lost(format!(
            "the guardian's answer was lost after the request was sent: {}",
            e.error
        )),
    }
}

/// The app-server host: its checked `turn/start`, armed at its event sequence.
fn ask_host(loc: &Located, a: &Admission) -> Answer {
    if a.paste == PasteMode::Typed {
        let d =
            "an app-server target takes the message as one text input; paste modes do not apply";
        return Answer::Refused(Class::Invalid, d.into());
    }
    let ask = HostAdmit {
        principal: a.principal.clone(),
        request_id: a.request_id.clone(),
        incarnation: a.incarnation.clone(),
        text: a.text.clone(),
        return_final: a.return_final,
        prompt_sha256: crate::codex::message_digest(&a.text),
    };
    match app_server::admit(&loc.socket, ask) {
        Asked::NotSent(d) => Answer::Refused(Class::Unavailable, d),
        Asked::Lost(d) => Answer::Lost(d),
        Asked::Answer(r, conn) => {
            let mut t = loc.target.clone();
            t.cursor = r.armed_cursor;
            t.baseline_turn = r.baseline_turn.clone();
            let w = Written {
                target: Some(t),
                provider_turn: r.provider_turn,
                handoff: Handoff::Host(conn),
            };
            Answer::Reply(r.outcome, r.detail, Box::new(w))
        }
    }
}

/// What the target's process said about a (possibly) written prompt.
struct Written {
    target: Option<CodexTarget>,
    provider_turn: Option<String>,
    handoff: Handoff,
}

/// The prompt was (`Ok`) or may have been (`Err`) written: store it, and hand a
/// return-final request to whoever follows it (an observer, or the app-server host).
fn written(
    store: &Store,
    a: &Admission,
    base: &Receipt,
    loc: &Located,
    w: Written,
    outcome: Result<String, String>,
    exe: &Path,
) -> Receipt {
    let now = unix_ms();
    let correlation = w
        .target
        .as_ref()
        .filter(|_| a.return_final)
        .and_then(|t| correlation(loc, t, w.provider_turn.clone()));
    let mut receipt = Receipt {
        receipt_class: Class::Accepted,
        prompt_written: Some(true),
        reply_pending: a.return_final,
        correlation: correlation.clone(),
        detail: String::new(),
        ..base.clone()
    };
    let mut row = AgentRequest {
        principal: a.principal.clone(),
        request_id: a.request_id.clone(),
        state: if a.return_final { SUBMITTED } else { DELIVERED }.into(),
        rollout: correlation.as_ref().map(|c| c.rollout.clone()),
        armed_cursor: correlation.as_ref().map(|c| c.armed_cursor as i64),
        baseline_turn: correlation
            .as_ref()
            .and_then(|c| c.baseline_provider_turn.clone()),
        deadline_unix_ms: (a.final_timeout_ms > 0).then(|| now + a.final_timeout_ms as i64),
        owner: super::this_owner(),
        updated_at_ms: now,
        ..Default::default()
    };
    let failure = match outcome {
        Ok(detail) => {
            receipt.detail = detail;
            None
        }
        Err(detail) => {
            receipt.receipt_class = Class::Indeterminate;
            receipt.prompt_written = None;
            receipt.reply_pending = false;
            receipt.detail = format!("{detail}; do not resend under a new request_id");
            Some(detail)
        }
    };
    let mut go = None;
    if failure.is_none() && a.return_final {
        let dir = store.path().parent().unwrap_or(Path::new("."));
        match w.handoff {
            Handoff::Host(conn) => {
                // The host follows the request: it is the owner from now on.
                row.owner = format!("{}:{}", loc.target.pid, loc.target.start_time);
                go = Some(Go::Host(conn));
            }
            Handoff::Observer => match observer::spawn(exe, dir, &a.principal, &a.request_id) {
                Ok(s) => {
                    row.owner = s.owner();
                    go = Some(Go::Observer(s));
                }
                Err(e) => {
                    receipt.receipt_class = Class::Indeterminate;
                    receipt.reply_pending = false;
                    receipt.detail =
                        format!("written, but the request observer could not start: {e}");
                }
            },
        }
    }
    row.receipt = Some(receipt.to_json().to_string());
    match store.request_written(&row) {
        Ok(true) => {}
        Ok(false) => {
            receipt.detail =
                "written, but the request was settled meanwhile (see request get)".into();
            return receipt;
        }
        Err(e) => {
            receipt.receipt_class = Class::Indeterminate;
            receipt.detail = format!("written, but the state store refused the receipt: {e}");
            return receipt;
        }
    }
    match go {
        Some(Go::Observer(s)) => s.go(),
        Some(Go::Host(c)) => c.go(),
        None if a.return_final => {
            // No observer will correlate this request: its outcome is unknowable.
            let reason = receipt.detail.clone();
            let _ = store.request_finish(
                &a.principal,
                &a.request_id,
                &Terminal {
                    state: "indeterminate",
                    final_message: None,
                    reason: Some(&reason),
                    turn_id: None,
                    at_ms: unix_ms(),
                },
            );
        }
        None => {}
    }
    receipt
}

enum Go {
    Observer(observer::Spawned),
    Host(HostConn),
}

/// What a written return-final request's final is correlated from.
fn correlation(loc: &Located, t: &CodexTarget, turn: Option<String>) -> Option<Correlation> {
    let (source, thread, session, turn) = match &loc.via {
        Via::Guardian => ("codex_rollout", None, None, None),
        Via::AppServer { session_id } => (
            "app_server_events",
            Some(loc.thread_id.clone()),
            Some(session_id.clone()),
            turn,
        ),
    };
    Some(Correlation {
        correlation_source: source.into(),
        baseline_provider_turn: t.baseline_turn.clone(),
        armed_cursor: t.cursor?,
        rollout: t.rollout.clone(),
        target_pid: t.pid,
        target_start_time: t.start_time,
        app_server_thread_id: thread,
        app_server_session_id: session,
        provider_turn: turn,
    })
}

#[cfg(test)]
#[path = "admit_tests.rs"]
pub(crate) mod tests;
