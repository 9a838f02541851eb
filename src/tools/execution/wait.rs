//! `wait`: block until one of up to 32 executions changes after a catalog cursor
//! (`Catalog::wait`, woken by the recorder's commits, never by polling on a timer).
//!
//! Outcomes are distinct: `changed` (with what changed), `timeout` (nothing matching
//! changed; says nothing about completion) and `resync` (the cursor is from a catalog
//! this one cannot continue).

use super::{Ctx, catalog_error, done, execution_id, only, refuse, refuse_to_list, timeout};
use super::{view, with};
use crate::deadline::Deadline;
use crate::history::{CatalogError, Event, Record, WaitFor, Waited};
use crate::tools::envelope::{NextAction, ToolOutput};
use crate::tools::error::{Fix, ToolError};
use serde_json::{Map, Value, json};

const MAX_IDS: usize = 32;
/// The tool's maximum wait: a profile's longer default is capped to it.
const MAX_TIMEOUT_SECONDS: f64 = 30.0;

/// Who is waiting, as far as the default budget goes (seed 000): a local (stdio) client or
/// Claude over HTTP gets 5 s; ChatGPT and Codex over HTTP, whose hosts hold a tool call
/// open much longer and pay a model turn for every repeat, get 50 s (capped by the tool's
/// maximum). The transport sets it per request from the client's `clientInfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitProfile {
    #[default]
    Local,
    ClaudeHttp,
    ChatGptHttp,
}

impl WaitProfile {
    pub fn default_seconds(self) -> f64 {
        match self {
            WaitProfile::Local | WaitProfile::ClaudeHttp => 5.0,
            WaitProfile::ChatGptHttp => 50.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WaitProfile::Local => "local",
            WaitProfile::ClaudeHttp => "claude_http",
            WaitProfile::ChatGptHttp => "chatgpt_http",
        }
    }
}

pub struct WaitReq {
    ids: Vec<String>,
    after: Option<String>,
    events: Vec<Event>,
    /// `events` as the caller gave them (`None`: all), repeated by the next action.
    asked_events: Option<Value>,
    pub(super) budget: std::time::Duration,
    /// The selected allowance in seconds (after the default and the cap).
    seconds: f64,
    /// Where `seconds` came from: `request` or the profile's default.
    defaulted: bool,
    profile: WaitProfile,
    /// `timeout_seconds: 0`: one catalog pass, no waiting.
    poll_once: bool,
}

pub fn parse(action: &Map<String, Value>, profile: WaitProfile) -> Result<WaitReq, ToolError> {
    only(
        action,
        &["execution_ids", "after", "events", "timeout_seconds"],
    )?;
    let detail = format!("execution_ids must be an array of 1..={MAX_IDS} ids");
    let raw = match action.get("execution_ids") {
        Some(Value::Array(a)) if (1..=MAX_IDS).contains(&a.len()) => a,
        Some(Value::Array(a)) if a.len() > MAX_IDS => {
            return Err(refuse(
                detail,
                &format!(
                    "One wait watches at most {MAX_IDS}; this is the call with the first {MAX_IDS}."
                ),
                with(action, "execution_ids", Value::Array(a[..MAX_IDS].to_vec())),
            ));
        }
        _ => return Err(refuse_to_list(detail)),
    };
    let mut ids = Vec::new();
    for (i, v) in raw.iter().enumerate() {
        let id = execution_id(Some(v), &format!("execution_ids[{i}]"))?;
        if ids.contains(&id) {
            let mut once: Vec<&Value> = Vec::new();
            for v in raw {
                if !once.contains(&v) {
                    once.push(v);
                }
            }
            return Err(refuse(
                format!("execution_ids repeats {id}"),
                "Name each execution once.",
                with(action, "execution_ids", json!(once)),
            ));
        }
        ids.push(id);
    }
    let events = match action.get("events") {
        None => Event::ALL.to_vec(),
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|e| {
                e.as_str().and_then(Event::parse).ok_or_else(|| {
                    no_events(action, format!("events may hold only {}", event_names()))
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(no_events(action, "events must be a non-empty array".into())),
    };
    let after = match action.get("after") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(refuse(
                "after must be a catalog_cursor string",
                "Without after, the wait starts from the catalog as it reads it first.",
                with(action, "after", Value::Null),
            ));
        }
    };
    // `null` is the default, as if absent.
    let asked = action.get("timeout_seconds").filter(|v| !v.is_null());
    let default = profile.default_seconds().min(MAX_TIMEOUT_SECONDS);
    let budget = timeout(action, default)?;
    let seconds = asked.and_then(Value::as_f64).unwrap_or(default);
    Ok(WaitReq {
        ids,
        after,
        events,
        asked_events: action.get("events").cloned(),
        budget,
        seconds,
        defaulted: asked.is_none(),
        profile,
        poll_once: seconds == 0.0,
    })
}

/// Every event's name, comma-separated.
fn event_names() -> String {
    Event::ALL.map(Event::as_str).join(", ")
}

/// A refused `events`: the fix waits for every event.
fn no_events(action: &Map<String, Value>, detail: String) -> ToolError {
    refuse(
        detail,
        &format!(
            "events is a non-empty array of {}; without it, every event counts.",
            event_names()
        ),
        with(action, "events", Value::Null),
    )
}

/// Wait within `deadline`, the call's one deadline (started before session admission, so
/// admission, reconcile and catalog I/O all count against the budget).
pub fn run(x: &Ctx, req: WaitReq, deadline: &Deadline) -> Result<ToolOutput, ToolError> {
    let w = WaitFor {
        ids: &req.ids,
        after: req.after.as_deref(),
        events: &req.events,
        poll_once: req.poll_once,
    };
    let waited = x.wait(&w, deadline).map_err(|e| match e {
        CatalogError::Cursor(detail) => {
            let mut fresh = json!({"type": "wait", "execution_ids": req.ids,
                                   "timeout_seconds": req.seconds});
            if let Some(events) = &req.asked_events {
                fresh["events"] = events.clone();
            }
            ToolError::InvalidCursor {
                detail,
                fix: Some(Fix::boxed(
                    "Wait without after: the baseline is the catalog as the wait first \
                     reads it.",
                    fresh,
                )),
            }
        }
        other => catalog_error(other),
    })?;
    Ok(answer(x, &req, waited))
}

fn answer(x: &Ctx, req: &WaitReq, w: Waited) -> ToolOutput {
    let outcome = w.outcome.as_str();
    let missing: Vec<&str> = w
        .records
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(id, _)| id.as_str())
        .collect();
    let found: Vec<&Record> = w.records.iter().filter_map(|(_, r)| r.as_ref()).collect();
    let mut text = format!("wait: {outcome}\n");
    for r in &found {
        text.push_str(&view::line(r));
        text.push('\n');
    }
    let changed: Vec<Value> = w
        .changed
        .iter()
        .map(|(id, ev)| {
            let ev: Vec<&str> = ev.iter().map(|e| e.as_str()).collect();
            json!({"execution_id": id, "events": ev})
        })
        .collect();
    let data = json!({
        "outcome": outcome,
        "changed": changed,
        "executions": found.iter().map(|r| view::compact(r)).collect::<Vec<_>>(),
        "missing": missing,
        "catalog_cursor": w.catalog_cursor,
        "effectiveWait": {
            "timeout_seconds": req.seconds,
            "source": if req.defaulted { "profile_default" } else { "request" },
            "profile": req.profile.as_str(),
        },
    });
    let mut out = done(x.tool, format!("wait: {outcome}"), text, data);
    out.envelope.next_action = Some(again(x, req, w.catalog_cursor));
    out
}

/// The same wait again from the new baseline: same executions, events and timeout.
fn again(x: &Ctx, req: &WaitReq, cursor: String) -> NextAction {
    let mut action = json!({"type": "wait", "execution_ids": req.ids, "after": cursor,
                            "timeout_seconds": req.seconds});
    if let Some(events) = &req.asked_events {
        action["events"] = events.clone();
    }
    NextAction {
        tool: x.tool.as_str().into(),
        instruction: "To keep watching, wait again from this baseline (same executions, \
                      events and timeout)."
            .into(),
        arguments: json!({"thread_id": x.scope.thread_id, "workspace_root": x.scope.workspace_root,
                          "action": action}),
    }
}
