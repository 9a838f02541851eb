//! The `Execution` tool: list, get, read, observe and wait over the execution history
//! (seed 000). Read-only: nothing here writes to a shell, and no action consumes the
//! `BashCommand` delivery cursor.

mod explain;
mod observe;
pub mod page;
mod view;
mod wait;

pub use wait::WaitProfile;

use super::ToolContext;
use super::envelope::{Envelope, ToolOutput};
use super::error::{Fix, ToolError};
use super::name::ToolName;
use crate::deadline::Deadline;
use crate::history::{Catalog, CatalogError, READ_BUDGET, Record};
use serde_json::{Map, Value, json};
use std::time::Duration;

const TOOL: ToolName = ToolName::Execution;
const FIELDS: &[&str] = &["thread_id", "workspace_root", "action"];
const ACTIONS: &[&str] = &["list", "get", "explain", "read", "observe", "wait"];
/// `list.limit`: default and bound.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 128;
/// The caller's catalog (its verified scope), answering as `tool`; it reads as the
/// `Catalog` it holds (`x.scope`, `x.list(…)`).
pub(crate) struct Ctx {
    /// The tool answering (`Execution`, or `Agent` for its native observations).
    pub tool: ToolName,
    pub catalog: Catalog,
}

impl std::ops::Deref for Ctx {
    type Target = Catalog;

    fn deref(&self) -> &Catalog {
        &self.catalog
    }
}

/// A refused action with the action to send instead (`instruction` says why it works).
pub(crate) fn refuse(detail: impl Into<String>, instruction: &str, action: Value) -> ToolError {
    ToolError::InvalidAction {
        detail: detail.into(),
        fix: Fix::boxed(instruction, action),
    }
}

/// `list`: how a caller finds the execution ids of its own scope.
pub(crate) fn list_fix() -> Box<Fix> {
    Fix::boxed(
        "List this session's executions to find their ids.",
        json!({"type": "list"}),
    )
}

/// A refusal whose way forward is `list` (an id that is missing or malformed).
pub(crate) fn refuse_to_list(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidAction {
        detail: detail.into(),
        fix: list_fix(),
    }
}

/// `a` with `field` replaced by `v` (`Null`: removed): a corrected action or item.
pub(crate) fn with(a: &Map<String, Value>, field: &str, v: Value) -> Value {
    let mut a = a.clone();
    match v {
        Value::Null => a.remove(field),
        v => a.insert(field.to_string(), v),
    };
    Value::Object(a)
}

pub(crate) fn unavailable(e: impl std::fmt::Display) -> ToolError {
    ToolError::HistoryUnavailable {
        detail: e.to_string(),
    }
}

/// A catalog's refusal as the tool's: a missing id's way forward is `list`; a cursor's
/// depends on the action (the caller replaces `fix`).
pub(crate) fn catalog_error(e: CatalogError) -> ToolError {
    match e {
        CatalogError::NotFound(execution_id) => ToolError::ExecutionNotFound {
            execution_id,
            fix: Some(list_fix()),
        },
        CatalogError::Cursor(detail) => ToolError::InvalidCursor { detail, fix: None },
        CatalogError::Unavailable(e) => unavailable(e),
    }
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    answer(ctx, map).map_err(|e| e.with_call(map))
}

fn answer(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (action, kind) = action_of(map, ACTIONS)?;
    // Shapes and budgets are checked before the session or the history is touched.
    let parsed = parse(kind, action, ctx.wait_profile)?;
    let deadline = parsed.deadline();
    let (_, binding) = super::session_args(ctx, map, FIELDS)?;
    let x = open_within(ctx, &binding, TOOL, &deadline)?;
    run(ctx, &x, parsed, &deadline)
}

/// The caller's scope over the opened, reconciled catalog, answering as `tool`.
pub(crate) fn open(
    ctx: &ToolContext,
    binding: &crate::session::Binding,
    tool: ToolName,
) -> Result<Ctx, ToolError> {
    open_within(
        ctx,
        binding,
        tool,
        &Deadline::after("history reconcile", READ_BUDGET),
    )
}

/// `open` within the call's deadline: the reconcile gets what is left of it.
pub(crate) fn open_within(
    ctx: &ToolContext,
    binding: &crate::session::Binding,
    tool: ToolName,
    deadline: &Deadline,
) -> Result<Ctx, ToolError> {
    let _catalog = ctx.trace.phase(crate::usage::Phase::Catalog);
    let catalog = ctx
        .history
        .catalog(
            ctx.principal,
            &binding.thread_id,
            &binding.workspace_str(),
            ctx.runtime,
            deadline,
        )
        .map_err(unavailable)?;
    Ok(Ctx { tool, catalog })
}

/// Run a checked action (shared by `Execution` and `Agent`'s native backend).
pub(crate) fn run(
    ctx: &ToolContext,
    x: &Ctx,
    parsed: Parsed,
    deadline: &Deadline,
) -> Result<ToolOutput, ToolError> {
    let _catalog = ctx.trace.phase(crate::usage::Phase::Catalog);
    match parsed {
        Parsed::List(limit) => list(x, limit),
        Parsed::Get(id) => get(x, &id),
        Parsed::Read(id, req) => read(x, &id, &req),
        Parsed::Explain(req) => explain::run(x, req),
        Parsed::Observe(items) => observe::run(x, items, deadline),
        Parsed::Wait(req) => {
            // Inclusive: the wait is also part of the catalog phase around it.
            let _waiting = ctx.trace.phase(crate::usage::Phase::Wait);
            wait::run(x, req, deadline)
        }
    }
}

/// An action with its arguments checked.
pub(crate) enum Parsed {
    List(usize),
    Get(String),
    Read(String, crate::history::PageReq),
    Explain(explain::ExplainReq),
    Observe(observe::Parsed),
    Wait(wait::WaitReq),
}

impl Parsed {
    /// The call's one deadline, started before session admission so that admission,
    /// reconcile and catalog access all count against it: an observe's or a wait's budget,
    /// or the catalog read budget.
    pub(crate) fn deadline(&self) -> Deadline {
        match self {
            Parsed::Observe(o) => Deadline::after("observe", o.budget),
            Parsed::Wait(w) => Deadline::after("wait", w.budget),
            _ => Deadline::after("history read", READ_BUDGET),
        }
    }
}

pub(crate) fn parse(
    kind: &str,
    action: &Map<String, Value>,
    profile: WaitProfile,
) -> Result<Parsed, ToolError> {
    let id = || execution_id(action.get("execution_id"), "execution_id");
    Ok(match kind {
        "list" => {
            only(action, &["limit"])?;
            let limit = int_in(action, "limit", 1..=MAX_LIMIT, DEFAULT_LIMIT)?;
            Parsed::List(limit)
        }
        "get" => {
            only(action, &["execution_id"])?;
            Parsed::Get(id()?)
        }
        "read" => {
            only(action, &["execution_id", "source", "page_bytes", "cursor"])?;
            Parsed::Read(id()?, page::page_req(action, page::DEFAULT_PAGE_BYTES)?)
        }
        "explain" => Parsed::Explain(explain::parse(action)?),
        "observe" => Parsed::Observe(observe::parse(action)?),
        _ => Parsed::Wait(wait::parse(action, profile)?),
    })
}

/// The `action` object of a call and its `type`, which must be one of `actions`.
pub(crate) fn action_of<'a>(
    map: &'a Map<String, Value>,
    actions: &[&'static str],
) -> Result<(&'a Map<String, Value>, &'a str), ToolError> {
    let types = format!(
        "action.type is one of {}; list shows this session's executions.",
        actions.join(", ")
    );
    let refused = |detail: String| refuse(detail, &types, json!({"type": "list"}));
    let action = match map.get("action") {
        Some(Value::Object(a)) => a,
        Some(_) => return Err(refused("action must be an object with a \"type\"".into())),
        None => {
            return Err(refused(
                "action is required, e.g. {\"type\": \"list\"}".into(),
            ));
        }
    };
    match action.get("type").and_then(Value::as_str) {
        Some(k) if actions.contains(&k) => Ok((action, k)),
        Some(k) => {
            let shown: String = k.chars().take(64).collect();
            Err(refused(format!(
                "unknown action type {shown:?}; expected one of {}",
                actions.join(", ")
            )))
        }
        None => Err(refused("action.type is required (a string)".into())),
    }
}

/// Only the listed keys may appear in `action`; the fix is the action without the others.
pub(crate) fn only(action: &Map<String, Value>, allowed: &[&str]) -> Result<(), ToolError> {
    let known = |k: &str| k == "type" || allowed.contains(&k);
    match action.keys().find(|k| !known(k)) {
        Some(k) => {
            let kept: Map<String, Value> = action
                .iter()
                .filter(|(k, _)| known(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Err(refuse(
                format!(
                    "unexpected field action.{k}; this action takes {}",
                    allowed.join(", ")
                ),
                "Send the action without the fields it does not take.",
                Value::Object(kept),
            ))
        }
        None => Ok(()),
    }
}

/// An execution id as the runtime makes them (`<hex>-<n>`), checked before any lookup.
pub(crate) fn execution_id(v: Option<&Value>, field: &str) -> Result<String, ToolError> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| refuse_to_list(format!("{field} is required (a string)")))?;
    let well_formed = s.len() <= 40
        && s.split_once('-').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
    if !well_formed {
        let shown: String = s.chars().take(48).collect();
        return Err(refuse_to_list(format!(
            "{field} {shown:?} is not an execution id (ids look like \"19ad3b2c1f0-3\")"
        )));
    }
    Ok(s.to_string())
}

/// `a[field]`, an integer in `range`, or `default` when absent. The fix is `a` with the
/// value moved to the nearest bound (`default` for a value that is not a number).
pub(crate) fn int_in(
    a: &Map<String, Value>,
    field: &str,
    range: std::ops::RangeInclusive<usize>,
    default: usize,
) -> Result<usize, ToolError> {
    let Some(x) = a.get(field) else {
        return Ok(default);
    };
    if let Some(n) = x.as_u64().map(|n| n as usize).filter(|n| range.contains(n)) {
        return Ok(n);
    }
    let (lo, hi) = (*range.start(), *range.end());
    let near = match x.as_f64() {
        Some(f) if f < lo as f64 => lo,
        Some(f) if f > hi as f64 => hi,
        _ => default,
    };
    Err(refuse(
        format!("{field} must be an integer {lo}..={hi}"),
        &format!("{field} takes {lo}..={hi}; this is the call with {near}."),
        with(a, field, json!(near)),
    ))
}

/// `a.timeout_seconds` in 0..=30 (fractions allowed), or `default` (absent or `null`).
/// The fix is `a` with the nearest valid timeout.
pub(crate) fn timeout(a: &Map<String, Value>, default: f64) -> Result<Duration, ToolError> {
    let secs = match a.get("timeout_seconds") {
        None | Some(Value::Null) => default,
        Some(x) => match x
            .as_f64()
            .filter(|s| s.is_finite() && (0.0..=30.0).contains(s))
        {
            Some(s) => s,
            None => {
                let near = x.as_f64().filter(|s| *s > 30.0).map_or(default, |_| 30.0);
                return Err(refuse(
                    "timeout_seconds must be a number 0..=30",
                    &format!("timeout_seconds takes 0..=30; this is the call with {near}."),
                    with(a, "timeout_seconds", json!(near)),
                ));
            }
        },
    };
    // Zero grants one 250 ms pass (seed 000).
    Ok(match secs {
        0.0 => Duration::from_millis(250),
        s => Duration::from_secs_f64(s),
    })
}

/// The record of `id` as the catalog holds it now.
pub(crate) fn find(x: &Ctx, id: &str) -> Result<Record, ToolError> {
    x.find(id).map_err(catalog_error)
}

/// The record of `id`, synced and refreshed once from its guardian while it is open.
pub(crate) fn fresh(x: &Ctx, id: &str) -> Result<Record, ToolError> {
    x.get(id).map_err(catalog_error)
}

fn list(x: &Ctx, limit: usize) -> Result<ToolOutput, ToolError> {
    let listing = x.list(limit).map_err(unavailable)?;
    let records = &listing.records;
    let mut text = format!("{} execution(s), newest first\n", records.len());
    for r in records {
        text.push_str(&view::line(r));
        text.push('\n');
    }
    let data = json!({
        "executions": records.iter().map(view::compact).collect::<Vec<_>>(),
        "catalog_cursor": listing.catalog_cursor,
    });
    Ok(done(x.tool, format!("list: {}", records.len()), text, data))
}

fn get(x: &Ctx, id: &str) -> Result<ToolOutput, ToolError> {
    let r = fresh(x, id)?;
    let text = format!("{}\ncwd: {}\n", view::line(&r), view::display(&r.cwd));
    Ok(done(x.tool, format!("get: {id}"), text, view::full(&r)))
}

fn read(x: &Ctx, id: &str, req: &crate::history::PageReq) -> Result<ToolOutput, ToolError> {
    let source = req.source.as_str();
    let (r, page) = x.read(id, req).map_err(|e| match e {
        CatalogError::Cursor(detail) => ToolError::InvalidCursor {
            detail,
            fix: Some(Fix::boxed(
                "Read from the start of the retained text, without a cursor.",
                json!({"type": "read", "execution_id": id, "source": source,
                       "page_bytes": req.page_bytes}),
            )),
        },
        other => catalog_error(other),
    })?;
    let text = page.text().to_string();
    let data = json!({"execution": view::compact(&r), "page": page::json(&page)});
    Ok(done(x.tool, format!("read: {id} {source}"), text, data))
}

/// A completed answer of `tool`; `message` follows the tool's name.
pub(crate) fn done(tool: ToolName, message: String, text: String, data: Value) -> ToolOutput {
    ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(tool, format!("{tool} {message}"), data),
    }
}
