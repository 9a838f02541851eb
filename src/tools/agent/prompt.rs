//! Native `prompt` and receipt `wait` (issue 14 item 2): a prompt is sent at most once per
//! (principal, `prompt_id`), bound to the runtime generation that was checked, and its
//! receipt is persisted before anything is sent.
//!
//! The target is a running execution of the caller's session: the foreground program or
//! a background command (each has its own terminal, and readiness is checked on the
//! target's own screen).
//!
//! Order of a prompt: scope check of the target (history record) → guardian capability
//! and generation (snapshot) → claim the receipt as `uncertain` (an existing claim is
//! answered as stored, never sent again) → the guardian's one-turn readiness check and
//! single write → the receipt becomes `delivered`, or is released when the guardian
//! refused (nothing was written). Anything else leaves `uncertain`: never resent.
//!
//! The guardian writes the text as `agent admit` does (a bracketed paste when the program
//! turned that on, then Enter) and refuses a target whose input box already holds a
//! draft (`composer_not_empty`): the draft and the prompt would be submitted as one.

use super::super::ToolContext;
use super::super::envelope::{Status, ToolOutput};
use super::super::error::ToolError;
use super::super::error_code::ErrorCode;
use super::super::execution;
use super::{PromptArgs, fail};
use crate::deadline::{Deadline, unix_ms};
use crate::ipc::client::GuardianClient;
use crate::store::agent_receipts::{AgentReceipt, Claim};
use crate::wire::guardian::{
    PromptAsk, PromptDelivery, PromptRefusal, PromptStatus, Request, Response, Wait,
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;

/// Receipts per runtime generation (seed 000).
pub const MAX_RECEIPTS: i64 = 64;
/// The guardian's answer to a snapshot or a prompt (it answers within one loop turn; a
/// long text may take the terminal a moment).
const RPC: Duration = Duration::from_secs(10);
/// The guardian capability a native prompt needs.
pub const CAPABILITY: &str = "prompt";

/// Claim, send and settle one prompt at a time in this process: a concurrent call with
/// the same `prompt_id` then finds the settled receipt, not an in-flight `uncertain` one.
/// (Other processes serialise on the receipt's unique row.)
static SENDING: Mutex<()> = Mutex::new(());

fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    crate::hex::lower(&h.finalize())
}

/// The guardian's key of a receipt: the principal and prompt id, hashed.
fn watch_key(r: &AgentReceipt) -> String {
    digest(&[&r.principal, &r.prompt_id])[..32].to_string()
}

fn not_ready(message: String, data: Value) -> ToolError {
    fail(
        ErrorCode::AgentTargetNotReady,
        Status::Failed,
        true,
        message,
        data,
    )
}

fn unavailable(target: &str, detail: String) -> ToolError {
    fail(
        ErrorCode::AgentTargetUnavailable,
        Status::Failed,
        false,
        format!("the target's runtime does not answer ({detail}); nothing was sent"),
        json!({"input_sent": false, "target": target}),
    )
}

/// Send `p` (a checked prompt) to its target in the caller's scope `x`.
pub fn prompt(
    ctx: &ToolContext,
    x: &execution::Ctx,
    p: &PromptArgs,
) -> Result<ToolOutput, ToolError> {
    let text = p.text.as_deref().unwrap_or_default();
    let recognizer = p.recognizer.as_deref().unwrap_or("auto");
    if text.contains(crate::shell::submit::PASTE_END) {
        // Sent as a bracketed paste, it would end the paste early and type the rest.
        return Err(ToolError::InvalidInput {
            detail: "text must not contain the bracketed-paste end marker ESC[201~".into(),
        });
    }
    // A command admitted a moment ago may not be recorded yet: then wait for the recorder.
    let record = match execution::find(x, &p.target) {
        Err(ToolError::ExecutionNotFound { .. }) => execution::fresh(x, &p.target)?,
        found => found?,
    };
    let refused = |why: &str| json!({"input_sent": false, "target": p.target, "reason": why});
    if record.process_status != crate::wire::guardian::ProcessStatus::Running {
        return Err(not_ready(
            format!(
                "{} is {}; nothing was sent",
                p.target, record.process_status
            ),
            refused("exited"),
        ));
    }
    let client = GuardianClient::new(Path::new(&record.socket));
    let now = unix_ms();
    let claim = AgentReceipt {
        principal: x.scope.principal.clone(),
        prompt_id: p.prompt_id.clone(),
        payload_sha256: digest(&[&p.target, recognizer, text]),
        thread_id: x.scope.thread_id.clone(),
        workspace_root: x.scope.workspace_root.clone(),
        target: p.target.clone(),
        recognizer: recognizer.to_string(),
        generation: record.guardian.clone(),
        guardian_key: record.session_key.clone(),
        socket: record.socket.clone(),
        delivery: "uncertain".into(),
        baseline_seq: None,
        suppressed: false,
        activity_observed: false,
        outcome: "waiting".into(),
        created_at_ms: now,
        delivered_at_ms: None,
        updated_at_ms: now,
    };
    let store = ctx.sessions.store()?;
    let one = SENDING.lock();
    let receipt = match store
        .receipt_claim(&claim, MAX_RECEIPTS)
        .map_err(store_err)?
    {
        Claim::Existing(old) => {
            drop(one);
            let old = *old;
            if old.payload_sha256 != claim.payload_sha256
                || old.thread_id != claim.thread_id
                || old.workspace_root != claim.workspace_root
            {
                return Err(fail(
                    ErrorCode::PromptIdConflict,
                    Status::Conflict,
                    false,
                    format!(
                        "prompt_id {} was used for another prompt (other text, target, \
                         recognizer or session); nothing was sent. Choose a new prompt_id \
                         for a new prompt",
                        p.prompt_id
                    ),
                    json!({"input_sent": false, "prompt_id": p.prompt_id}),
                ));
            }
            return answer(follow(ctx, old, p.timeout_seconds, false), true);
        }
        Claim::Full(n) => {
            return Err(fail(
                ErrorCode::AgentReceiptLimit,
                Status::Failed,
                false,
                format!(
                    "this runtime already holds {n} prompt receipts (the limit is \
                     {MAX_RECEIPTS}); nothing was sent"
                ),
                json!({"input_sent": false, "limit": MAX_RECEIPTS}),
            ));
        }
        Claim::New => claim,
    };
    if let Err(e) = check_runtime(ctx, &client, &record, p) {
        // Nothing was sent: the id stays free.
        store
            .receipt_release(&receipt.principal, &receipt.prompt_id)
            .map_err(store_err)?;
        return Err(e);
    }
    let reply = {
        let _rpc = ctx.trace.phase(crate::usage::Phase::PromptRpc);
        client.call(
            &Request::Prompt(PromptAsk {
                execution_id: p.target.clone(),
                key: watch_key(&receipt),
                text: text.to_string(),
                recognizer: recognizer.to_string(),
                runtime: receipt.generation.clone(),
            }),
            RPC,
        )
    };
    let mut receipt = receipt;
    match reply {
        Ok(Response::Prompt(r)) if r.delivery == PromptDelivery::Refused => {
            store
                .receipt_release(&receipt.principal, &receipt.prompt_id)
                .map_err(store_err)?;
            drop(one);
            return Err(refusal(p, r.refusal, r.state));
        }
        Ok(Response::Prompt(r)) => {
            receipt.baseline_seq = Some(r.baseline_seq as i64);
            receipt.suppressed = r.suppressed;
            if r.delivery == PromptDelivery::Delivered {
                receipt.delivery = "delivered".into();
                receipt.delivered_at_ms = Some(unix_ms());
            }
        }
        // No answer: the guardian may have written. The receipt stays `uncertain`.
        Ok(_) | Err(_) => {}
    }
    receipt.updated_at_ms = unix_ms();
    store.receipt_update(&receipt).map_err(store_err)?;
    drop(one);
    let receipt = match receipt.delivery.as_str() {
        "delivered" => follow(ctx, receipt, p.timeout_seconds, false),
        _ => receipt,
    };
    answer(receipt, false)
}

/// The target's guardian answers, can check readiness, and is the one that ran the
/// target. Asked after the receipt is claimed (so an adapter killed while the guardian
/// is slow leaves `uncertain`, never a silent send), and before the prompt is sent.
fn check_runtime(
    ctx: &ToolContext,
    client: &GuardianClient,
    record: &crate::store::history::Record,
    p: &PromptArgs,
) -> Result<(), ToolError> {
    let refused = |why: &str| json!({"input_sent": false, "target": p.target, "reason": why});
    let snapshot = {
        let _inspecting = ctx.trace.phase(crate::usage::Phase::RuntimeInspection);
        match client.call(&Request::Snapshot, RPC) {
            Ok(Response::Snapshot(s)) => s,
            Ok(other) => return Err(unavailable(&p.target, format!("answered {other:?}"))),
            Err(e) => return Err(unavailable(&p.target, e.to_string())),
        }
    };
    if !snapshot.capabilities.iter().any(|c| c == CAPABILITY) {
        return Err(fail(
            ErrorCode::AgentPromptUnavailable,
            Status::Failed,
            false,
            format!(
                "this session's guardian (build {}) cannot check readiness before writing, \
                 so nothing was sent; Initialize reset_shell starts a current one (it ends \
                 what runs in the shell)",
                snapshot.build
            ),
            json!({"input_sent": false, "prompt_id": p.prompt_id}),
        ));
    }
    if snapshot.identity() != record.guardian {
        return Err(not_ready(
            format!(
                "{} belongs to a runtime that is gone; nothing was sent",
                p.target
            ),
            refused("generation_changed"),
        ));
    }
    Ok(())
}

fn store_err(e: crate::store::StoreError) -> ToolError {
    ToolError::StoreUnavailable {
        detail: e.to_string(),
    }
}

fn refusal(p: &PromptArgs, r: Option<PromptRefusal>, state: Option<String>) -> ToolError {
    let state = state.unwrap_or_else(|| "unknown".into());
    let (why, message) = match r {
        Some(PromptRefusal::NotReady) if state == "composer_holds_text" => (
            "composer_not_empty",
            format!(
                "{}'s input box already holds text (a draft typed there, or left by an \
                 earlier write); nothing was sent, since the prompt would be merged with it. \
                 Look at the screen (Execution read, source screen), submit or clear that \
                 draft, then prompt again",
                p.target
            ),
        ),
        Some(PromptRefusal::NotReady) if state == "composer_not_found" => (
            "composer_not_found",
            format!(
                "{} shows its input screen, but its input box is not where the terminal \
                 cursor is, so it cannot be checked for a draft; nothing was sent. Look at \
                 the screen (Execution read, source screen) before prompting again",
                p.target
            ),
        ),
        Some(PromptRefusal::NotReady) => (
            "not_ready",
            format!(
                "{} is not waiting for input (recognised state: {state}); nothing was sent. \
                 Wait until it is (Agent wait or Execution wait), then prompt again",
                p.target
            ),
        ),
        Some(PromptRefusal::Exited) => (
            "exited",
            format!("{} has ended; nothing was sent", p.target),
        ),
        Some(PromptRefusal::GenerationChanged) => (
            "generation_changed",
            "the session's shell was replaced since it was checked; nothing was sent".into(),
        ),
        Some(PromptRefusal::NotForeground) => (
            "not_foreground",
            format!(
                "{} is a background command and this session's guardian predates prompts \
                 to background commands; nothing was sent. Initialize reset_shell starts a \
                 current one (it ends what runs in the shell)",
                p.target
            ),
        ),
        Some(PromptRefusal::UnsupportedRecognizer) => (
            "unsupported_recognizer",
            "this recognizer cannot check readiness in the guardian (use auto, generic, \
             claude_code or codex); nothing was sent"
                .into(),
        ),
        Some(PromptRefusal::AlreadySent) => (
            "already_sent",
            "the runtime already wrote a prompt with this id; nothing was sent again".into(),
        ),
        Some(PromptRefusal::NotRunning) | None => (
            "not_running",
            format!(
                "{} is not the program running in this session; nothing was sent",
                p.target
            ),
        ),
    };
    not_ready(
        message,
        json!({"input_sent": false, "target": p.target, "reason": why, "state": state}),
    )
}

/// `wait` with `prompt_id`: observe the stored receipt, sending nothing.
pub fn wait(
    ctx: &ToolContext,
    x: &execution::Ctx,
    p: &PromptArgs,
) -> Result<ToolOutput, ToolError> {
    let store = ctx.sessions.store()?;
    let found = store
        .receipt_of(&x.scope.principal, &p.prompt_id)
        .map_err(store_err)?
        .filter(|r| {
            r.thread_id == x.scope.thread_id
                && r.workspace_root == x.scope.workspace_root
                && r.target == p.target
        });
    let Some(r) = found else {
        return Err(fail(
            ErrorCode::AgentReceiptNotFound,
            Status::Failed,
            false,
            format!(
                "no receipt for prompt_id {} and target {} in this session",
                p.prompt_id, p.target
            ),
            json!({"prompt_id": p.prompt_id, "target": p.target}),
        ));
    };
    answer(follow(ctx, r, p.timeout_seconds, p.until_activity), false)
}

/// The outcome a status means for receipt `r`.
fn outcome(r: &AgentReceipt, s: &PromptStatus) -> &'static str {
    if !s.known {
        // The guardian that wrote it no longer knows it (replaced, or the watch was
        // dropped); one that never got it has nothing to report.
        return match r.delivery.as_str() {
            "delivered" => "generation_changed",
            _ => "waiting",
        };
    }
    if s.current_generation != s.generation {
        return "generation_changed";
    }
    if s.exited {
        return "exited";
    }
    match (s.activity_observed, s.state.as_deref()) {
        (true, Some("awaiting_approval")) => "awaiting_approval",
        (true, Some("awaiting_input" | "idle")) => "awaiting_input",
        _ => "waiting",
    }
}

/// Observe `r` at its guardian for up to `timeout_seconds` (until its outcome leaves
/// `waiting`, or with `until_activity` until activity is observed), store what was
/// learned and return it. A guardian that does not answer is a changed generation.
fn follow(
    ctx: &ToolContext,
    mut r: AgentReceipt,
    timeout_seconds: f64,
    until_activity: bool,
) -> AgentReceipt {
    let _waiting = ctx.trace.phase(crate::usage::Phase::Wait);
    let deadline = Deadline::after("prompt wait", Duration::from_secs_f64(timeout_seconds));
    let client = GuardianClient::new(Path::new(&r.socket));
    let key = watch_key(&r);
    let mut seen: Option<PromptStatus> = None;
    loop {
        let left = deadline.remaining().unwrap_or_default();
        let req = Request::PromptStatus {
            key: key.clone(),
            seen: seen.clone(),
            wait: Wait {
                timeout_ms: left.as_millis() as u64,
                settle_ms: None,
            },
        };
        let status = match client.call(&req, left) {
            Ok(Response::PromptStatus(s)) => s,
            _ => {
                r.outcome = "generation_changed".into();
                break;
            }
        };
        r.activity_observed |= status.activity_observed;
        r.suppressed |= status.suppressed && status.known;
        r.outcome = outcome(&r, &status).into();
        let done = r.outcome != "waiting" || (until_activity && r.activity_observed);
        if done || deadline.expired() {
            break;
        }
        seen = Some(status);
    }
    if r.outcome == "waiting"
        && timeout_seconds > 0.0
        && deadline.expired()
        && !(until_activity && r.activity_observed)
    {
        r.outcome = "timed_out".into();
    }
    r.updated_at_ms = unix_ms();
    if let Ok(store) = ctx.sessions.store()
        && let Err(e) = store.receipt_update(&r)
    {
        log::warn!("cannot store a prompt receipt's observation: {e}");
    }
    r
}

/// The receipt as the tool answers it.
fn answer(r: AgentReceipt, replayed: bool) -> Result<ToolOutput, ToolError> {
    let input_sent = match r.delivery.as_str() {
        "delivered" => json!(true),
        _ => json!("unknown"),
    };
    let data = json!({
        "prompt_id": r.prompt_id,
        "target": r.target,
        "delivery": r.delivery,
        "input_sent": input_sent,
        "activity_observed": r.activity_observed,
        "activity_confirmable": !r.suppressed,
        "outcome": r.outcome,
        "runtime": r.generation,
        "recognizer": r.recognizer,
        "replayed": replayed,
        "created_at_unix_ms": r.created_at_ms,
        "delivered_at_unix_ms": r.delivered_at_ms,
    });
    let mut text = format!(
        "Prompt {} to {}: delivery {}, activity {}, outcome {}{}.\n",
        r.prompt_id,
        r.target,
        r.delivery,
        if r.activity_observed {
            "observed"
        } else {
            "not observed"
        },
        r.outcome,
        if replayed {
            " (stored receipt; nothing was sent again)"
        } else {
            ""
        },
    );
    if r.suppressed {
        text.push_str(
            "The prompt's own text looks like a work or approval marker, so activity stays unconfirmed for this receipt.\n",
        );
    }
    if r.delivery == "uncertain" {
        text.push_str("Delivery is uncertain: inspect the execution before deciding anything; never resend automatically.\n");
        return Err(fail(
            ErrorCode::AgentDeliveryUncertain,
            Status::Failed,
            false,
            text,
            data,
        ));
    }
    Ok(execution::done(
        super::TOOL,
        "prompt receipt".into(),
        text,
        data,
    ))
}
