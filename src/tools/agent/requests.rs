//! Return-final agent requests over MCP (issue 15): `catalog`, `admit` and `request
//! {op: get|cancel|watch}`, the CLI's `agent catalog|admit|request …` for an MCP caller.
//!
//! Scope: the catalog and admission see only the Codex agents in the caller's own session
//! (its thread's guardian) and the managed app-server targets its principal started;
//! requests and the terminal-event stream are the caller's
//! principal's. Admission is `requests::admit` itself — the same register → checked
//! one-write → store → observer sequence, so an id admitted here and repeated through the
//! CLI (same principal) gets the same stored receipt and never a second write.

use super::super::ToolContext;
use super::super::envelope::{Status, ToolOutput};
use super::super::error::ToolError;
use super::super::error_code::ErrorCode;
use super::super::execution;
use super::{FIELDS, TOOL, bad, fail, may_prompt, prompt_text};
use crate::deadline::Deadline;
use crate::requests::admit::{Admission, Located, Via, admit};
use crate::requests::follow::{Wake, Watcher};
use crate::requests::receipt::{Class, Receipt};
use crate::requests::view::{agent_json, event_json, request_json};
use crate::requests::{MAX_FINAL_TIMEOUT_MS, reconcile, valid_request_id};
use crate::store::Store;
use crate::store::agent_requests::Terminal;
use crate::wire::codex::PasteMode;
use crate::wire::guardian::{Request, Response};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Terminal events per `watch` answer: default and bound.
const WATCH_LIMIT: i64 = 100;
const MAX_WATCH_LIMIT: i64 = 512;
/// Longest inline wait of a `watch` (as every inline wait).
const MAX_WATCH_SECONDS: f64 = 30.0;

fn store_err(e: impl std::fmt::Display) -> ToolError {
    execution::unavailable(e)
}

/// The Codex agents in the caller's session (none when its guardian does not run), then
/// the caller's principal's managed app-server targets.
fn located(ctx: &ToolContext, thread_id: &str) -> Vec<Located> {
    let mut out = in_session(ctx, thread_id);
    if let Ok(store) = ctx.sessions.store() {
        out.extend(crate::requests::managed::located(&store, ctx.principal));
    }
    out
}

fn in_session(ctx: &ToolContext, thread_id: &str) -> Vec<Located> {
    let key = crate::runtime::session_key(ctx.principal, thread_id);
    let Some(client) = ctx.runtime.client(&key) else {
        return Vec::new();
    };
    let _inspecting = ctx.trace.phase(crate::usage::Phase::RuntimeInspection);
    match client.call(&Request::CodexTargets, Duration::ZERO) {
        Ok(Response::CodexTargets { targets }) => targets
            .into_iter()
            .map(|target| Located {
                target,
                socket: client.socket.clone(),
                thread_id: thread_id.to_string(),
                via: Via::Guardian,
            })
            .collect(),
        // A guardian of an older build, or none at all, hosts no targets.
        _ => Vec::new(),
    }
}

/// `catalog`, `admit` or `request` (already known to be one of them).
pub fn call(
    ctx: &ToolContext,
    map: &Map<String, Value>,
    kind: &str,
    action: &Map<String, Value>,
) -> Result<ToolOutput, ToolError> {
    match kind {
        "catalog" => {
            execution::only(action, &[])?;
            let (_, binding) = super::super::session_args(ctx, map, FIELDS)?;
            let agents: Vec<Value> = located(ctx, &binding.thread_id)
                .iter()
                .map(agent_json)
                .collect();
            let text = format!(
                "{} Codex agent(s) in this session.\n{}\n",
                agents.len(),
                Value::Array(agents.clone())
            );
            Ok(execution::done(
                TOOL,
                "agent catalog".into(),
                text,
                json!({"agents": agents, "capabilities": crate::requests::capabilities()}),
            ))
        }
        "admit" => {
            let a = parse_admit(ctx, action)?;
            let (_, binding) = super::super::session_args(ctx, map, FIELDS)?;
            may_prompt(ctx, &binding)?;
            let store = ctx.sessions.store()?;
            let found = located(ctx, &binding.thread_id)
                .into_iter()
                .find(|l| l.target.agent_id == a.agent_id);
            let exe =
                std::env::current_exe().map_err(|e| store_err(format!("own executable: {e}")))?;
            let receipt = {
                let _rpc = ctx.trace.phase(crate::usage::Phase::PromptRpc);
                admit(&store, &a, found.as_ref(), &exe)
            };
            answer(receipt)
        }
        _ => request(ctx, map, action),
    }
}

fn parse_admit(ctx: &ToolContext, action: &Map<String, Value>) -> Result<Admission, ToolError> {
    let allowed = [
        "target",
        "incarnation",
        "request_id",
        "text",
        "return_final",
        "final_timeout_ms",
        "paste",
    ];
    execution::only(action, &allowed)?;
    let string = |k: &str, what: &str| {
        action
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 256)
            .map(str::to_string)
            .ok_or_else(|| bad(format!("{k} is required: {what}")))
    };
    let request_id = string("request_id", "a UUID you choose, one per prompt")?;
    if !valid_request_id(&request_id) {
        return Err(bad("request_id must be a UUID (8-4-4-4-12 hex digits)"));
    }
    let return_final = match action.get("return_final") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| bad("return_final must be a boolean"))?,
    };
    let final_timeout_ms = match action.get("final_timeout_ms") {
        None => 0,
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= MAX_FINAL_TIMEOUT_MS)
            .ok_or_else(|| {
                bad(format!(
                    "final_timeout_ms must be an integer 0..={MAX_FINAL_TIMEOUT_MS} (0: no deadline)"
                ))
            })?,
    };
    let paste = match action.get("paste").map(|v| v.as_str()) {
        None | Some(Some("bracketed")) => PasteMode::Bracketed,
        Some(Some("typed")) => PasteMode::Typed,
        Some(_) => return Err(bad("paste must be \"bracketed\" (default) or \"typed\"")),
    };
    Ok(Admission {
        principal: ctx.principal.to_string(),
        request_id,
        agent_id: string("target", "an agent_id from the catalog action")?,
        incarnation: string(
            "incarnation",
            "the agent's incarnation from the catalog action",
        )?,
        text: prompt_text(action.get("text"))?,
        paste,
        return_final,
        final_timeout_ms,
        // The tool's admission is authoritative: it never steers a running turn.
        steer: false,
    })
}

/// An accepted receipt is a result; anything else is a failure carrying the receipt.
fn answer(r: Receipt) -> Result<ToolOutput, ToolError> {
    let data = r.to_json();
    let class = r.receipt_class.as_str();
    let written = match r.prompt_written {
        Some(true) => "written",
        Some(false) => "not written",
        None => "possibly written",
    };
    let mut text = format!(
        "Request {} to {}: {class}, prompt {written}{}.\n",
        r.request_id,
        r.agent_id,
        if r.replayed {
            " (stored receipt; nothing was written again)"
        } else {
            ""
        }
    );
    if !r.detail.is_empty() {
        text.push_str(&format!("{}\n", r.detail));
    }
    match r.receipt_class {
        Class::Accepted => {
            if r.reply_pending {
                text.push_str(
                    "The final answer arrives as a terminal event: request {op: watch} or {op: get}.\n",
                );
            }
            Ok(execution::done(TOOL, "agent request".into(), text, data))
        }
        Class::Indeterminate => {
            text.push_str("The prompt may have been written: inspect the agent; never resend under a new request_id.\n");
            Err(fail(
                ErrorCode::AgentDeliveryUncertain,
                Status::Failed,
                false,
                text,
                data,
            ))
        }
        _ => Err(fail(
            ErrorCode::AgentRequestRejected,
            Status::Failed,
            // Nothing was written: a later admission (a new request_id for a failed
            // delivery) may succeed.
            matches!(
                r.receipt_class,
                Class::Busy | Class::InternalFailure | Class::DeliveryFailed
            ),
            text,
            data,
        )),
    }
}

fn request(
    ctx: &ToolContext,
    map: &Map<String, Value>,
    action: &Map<String, Value>,
) -> Result<ToolOutput, ToolError> {
    let op = action.get("op").and_then(Value::as_str);
    let allowed: &[&str] = match op {
        Some("get") | Some("cancel") => &["op", "request_id"],
        Some("watch") => &["op", "after", "limit", "timeout_seconds"],
        _ => return Err(bad("request needs op: \"get\", \"cancel\" or \"watch\"")),
    };
    execution::only(action, allowed)?;
    // The session check keeps requests behind the same door as every other action.
    super::super::session_args(ctx, map, FIELDS)?;
    let store = ctx.sessions.store()?;
    let p = ctx.principal;
    if op == Some("watch") {
        return watch(&store, p, action);
    }
    let id = action
        .get("request_id")
        .and_then(Value::as_str)
        .filter(|s| valid_request_id(s))
        .ok_or_else(|| bad("request_id must be a UUID"))?;
    reconcile::one(&store, p, id).map_err(store_err)?;
    let mut cancelled = None;
    if op == Some("cancel") {
        let t = Terminal {
            state: "cancelled",
            final_message: None,
            reason: Some("cancelled by the caller; the agent's turn itself is not interrupted"),
            turn_id: None,
            at_ms: crate::deadline::unix_ms(),
        };
        cancelled = Some(
            store
                .request_finish(p, id, &t)
                .map_err(store_err)?
                .is_some(),
        );
    }
    let Some(r) = store.request_get(p, id).map_err(store_err)? else {
        return Err(fail(
            ErrorCode::AgentReceiptNotFound,
            Status::Failed,
            false,
            format!("no request {id} for this principal"),
            json!({"request_id": id}),
        ));
    };
    let mut data = request_json(&store, &r);
    if let Some(c) = cancelled {
        data["cancelled"] = json!(c);
    }
    let text = format!("Request {id}: {}.\n{data}\n", r.state);
    Ok(execution::done(TOOL, "agent request".into(), text, data))
}

/// Terminal events after `after`, in order; waits up to `timeout_seconds` for the first.
fn watch(store: &Store, p: &str, action: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let after = match action.get("after") {
        None => 0,
        Some(v) => v
            .as_i64()
            .filter(|n| *n >= 0)
            .ok_or_else(|| bad("after must be a terminal_event_sequence (an integer ≥ 0)"))?,
    };
    let limit = match action.get("limit") {
        None => WATCH_LIMIT,
        Some(v) => v
            .as_i64()
            .filter(|n| (1..=MAX_WATCH_LIMIT).contains(n))
            .ok_or_else(|| bad(format!("limit must be an integer 1..={MAX_WATCH_LIMIT}")))?,
    };
    let seconds = match action.get("timeout_seconds") {
        None => 0.0,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && (0.0..=MAX_WATCH_SECONDS).contains(s))
            .ok_or_else(|| bad("timeout_seconds must be a number 0..=30"))?,
    };
    let deadline = Deadline::after("request watch", Duration::from_secs_f64(seconds));
    // Observers write the state directory (and touch its signal file after each terminal
    // event): its changes wake the wait. Armed only for a wait, then the stream is read
    // again so an event committed meanwhile is not slept through.
    let mut watcher: Option<Watcher> = None;
    let events = loop {
        reconcile::all(store).map_err(store_err)?;
        let batch = store
            .request_events_after(p, after, limit)
            .map_err(store_err)?;
        if !batch.is_empty() || deadline.expired() {
            break batch;
        }
        match &watcher {
            None => {
                let w = Watcher::new().map_err(store_err)?;
                if let Some(dir) = store.path().parent() {
                    w.dir(dir).map_err(store_err)?;
                }
                watcher = Some(w);
            }
            Some(w) if w.wait(&deadline) == Wake::TimedOut => break batch,
            Some(_) => {}
        }
    };
    let next_after = events.last().map_or(after, |e| e.seq);
    let list: Vec<Value> = events.iter().map(event_json).collect();
    let text = format!(
        "{} terminal event(s) after {after}; continue with after={next_after}.\n{}\n",
        list.len(),
        Value::Array(list.clone())
    );
    Ok(execution::done(
        TOOL,
        "agent request".into(),
        text,
        json!({"events": list, "next_after": next_after,
               "has_more": list.len() as i64 == limit}),
    ))
}
