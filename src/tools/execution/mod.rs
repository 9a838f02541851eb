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
use super::error::ToolError;
use super::name::ToolName;
use crate::deadline::Deadline;
use crate::history::{Open, cursor};
use crate::store::history::{self as table, Record, Scope};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

const TOOL: ToolName = ToolName::Execution;
const FIELDS: &[&str] = &["thread_id", "workspace_root", "action"];
const ACTIONS: &[&str] = &["list", "get", "explain", "read", "observe", "wait"];
/// `list.limit`: default and bound.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 128;
/// Budget of actions that only read the catalog.
const READ_BUDGET: Duration = Duration::from_secs(5);

/// The caller's verified scope and the open catalog.
pub(crate) struct Ctx {
    /// The tool answering (`Execution`, or `Agent` for its native observations).
    pub tool: ToolName,
    pub open: Arc<Open>,
    pub scope: Scope,
    /// The scope's digest inside cursors.
    pub tag: String,
}

pub(crate) fn bad(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.into(),
    }
}

pub(crate) fn unavailable(e: impl std::fmt::Display) -> ToolError {
    ToolError::HistoryUnavailable {
        detail: e.to_string(),
    }
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
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
    let scope = crate::history::scope(ctx.principal, &binding.thread_id, &binding.workspace_str());
    let tag = cursor::scope_tag(&scope.principal, &scope.thread_id, &scope.workspace_root);
    let _catalog = ctx.trace.phase(crate::usage::Phase::Catalog);
    let open = ctx.history.open().map_err(unavailable)?;
    let key = crate::runtime::session_key(ctx.principal, &binding.thread_id);
    open.reconcile_session(&key, ctx.runtime.client(&key), deadline);
    Ok(Ctx {
        tool,
        open,
        scope,
        tag,
    })
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
    Read(String, page::PageReq),
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
            let limit = int_in(action.get("limit"), "limit", 1..=MAX_LIMIT, DEFAULT_LIMIT)?;
            Parsed::List(limit)
        }
        "get" => {
            only(action, &["execution_id"])?;
            Parsed::Get(id()?)
        }
        "read" => {
            only(action, &["execution_id", "source", "page_bytes", "cursor"])?;
            Parsed::Read(id()?, page_req(action, page::DEFAULT_PAGE_BYTES)?)
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
    let action = match map.get("action") {
        Some(Value::Object(a)) => a,
        Some(_) => return Err(bad("action must be an object with a \"type\"")),
        None => return Err(bad("action is required, e.g. {\"type\": \"list\"}")),
    };
    match action.get("type").and_then(Value::as_str) {
        Some(k) if actions.contains(&k) => Ok((action, k)),
        Some(k) => {
            let shown: String = k.chars().take(64).collect();
            Err(bad(format!(
                "unknown action type {shown:?}; expected one of {}",
                actions.join(", ")
            )))
        }
        None => Err(bad("action.type is required (a string)")),
    }
}

/// Only the listed keys may appear in `action`.
pub(crate) fn only(action: &Map<String, Value>, allowed: &[&str]) -> Result<(), ToolError> {
    match action
        .keys()
        .find(|k| k.as_str() != "type" && !allowed.contains(&k.as_str()))
    {
        Some(k) => Err(bad(format!(
            "unexpected field action.{k}; this action takes {}",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

/// An execution id as the runtime makes them (`<hex>-<n>`), checked before any lookup.
pub(crate) fn execution_id(v: Option<&Value>, field: &str) -> Result<String, ToolError> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("{field} is required (a string)")))?;
    let well_formed = s.len() <= 40
        && s.split_once('-').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
    if !well_formed {
        let shown: String = s.chars().take(48).collect();
        return Err(bad(format!(
            "{field} {shown:?} is not an execution id (ids look like \"19ad3b2c1f0-3\")"
        )));
    }
    Ok(s.to_string())
}

/// An integer in `range`, or `default` when absent.
pub(crate) fn int_in(
    v: Option<&Value>,
    field: &str,
    range: std::ops::RangeInclusive<usize>,
    default: usize,
) -> Result<usize, ToolError> {
    match v {
        None => Ok(default),
        Some(x) => x
            .as_u64()
            .map(|n| n as usize)
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "{field} must be an integer {}..={}",
                    range.start(),
                    range.end()
                ))
            }),
    }
}

/// `timeout_seconds` in 0..=30 (fractions allowed), or `default` (absent or `null`).
pub(crate) fn timeout(v: Option<&Value>, default: f64) -> Result<Duration, ToolError> {
    let secs = match v {
        None | Some(Value::Null) => default,
        Some(x) => x
            .as_f64()
            .filter(|s| s.is_finite() && (0.0..=30.0).contains(s))
            .ok_or_else(|| bad("timeout_seconds must be a number 0..=30"))?,
    };
    // Zero grants one 250 ms pass (seed 000).
    Ok(match secs {
        0.0 => Duration::from_millis(250),
        s => Duration::from_secs_f64(s),
    })
}

pub(crate) fn find(x: &Ctx, id: &str) -> Result<Record, ToolError> {
    x.open
        .read(|c| table::get(c, &x.scope, id))
        .map_err(unavailable)?
        .ok_or_else(|| ToolError::ExecutionNotFound {
            execution_id: id.to_string(),
        })
}

fn synced(x: &Ctx) -> Result<Deadline, ToolError> {
    let deadline = Deadline::after("history read", READ_BUDGET);
    x.open.sync(&deadline).map_err(unavailable)?;
    Ok(deadline)
}

/// The record of `id`, refreshed once from its guardian while it is open (running or
/// still capturing). A failed refresh leaves the retained data, which is still answered.
pub(crate) fn fresh(x: &Ctx, id: &str) -> Result<Record, ToolError> {
    let deadline = synced(x)?;
    let r = find(x, id)?;
    if r.process_status != "running" && !r.output_pending {
        return Ok(r);
    }
    let client = crate::ipc::GuardianClient::new(std::path::Path::new(&r.socket));
    match x.open.refresh(&client, &deadline) {
        Ok(()) => find(x, id),
        Err(e) => {
            log::debug!("history refresh of {id}: {e}");
            Ok(r)
        }
    }
}

fn list(x: &Ctx, limit: usize) -> Result<ToolOutput, ToolError> {
    synced(x)?;
    let (records, seq) = x
        .open
        .read(|c| Ok((table::list(c, &x.scope, limit)?, table::seq(c)?)))
        .map_err(unavailable)?;
    let mut text = format!("{} execution(s), newest first\n", records.len());
    for r in &records {
        text.push_str(&view::line(r));
        text.push('\n');
    }
    let data = json!({
        "executions": records.iter().map(view::compact).collect::<Vec<_>>(),
        "catalog_cursor": x.open.key.seal(&x.tag, &cursor::Kind::Catalog { seq }),
    });
    Ok(done(x.tool, format!("list: {}", records.len()), text, data))
}

fn get(x: &Ctx, id: &str) -> Result<ToolOutput, ToolError> {
    let r = fresh(x, id)?;
    let text = format!("{}\ncwd: {}\n", view::line(&r), r.cwd);
    Ok(done(x.tool, format!("get: {id}"), text, view::full(&r)))
}

fn read(x: &Ctx, id: &str, req: &page::PageReq) -> Result<ToolOutput, ToolError> {
    let r = fresh(x, id)?;
    let page = x
        .open
        .read(|c| Ok(page::page(c, &x.open.key, &x.tag, &r, req)))
        .map_err(unavailable)?
        .map_err(page_error)?;
    let text = page["text"].as_str().unwrap_or_default().to_string();
    let data = json!({"execution": view::compact(&r), "page": page});
    Ok(done(
        x.tool,
        format!("read: {id} {}", req.source),
        text,
        data,
    ))
}

/// `source`, `page_bytes` and `cursor` of a read or an observe item.
pub(crate) fn page_req(
    a: &Map<String, Value>,
    default_bytes: usize,
) -> Result<page::PageReq, ToolError> {
    let source = match a.get("source") {
        None => "output",
        Some(v) => page::SOURCES
            .iter()
            .copied()
            .find(|s| v.as_str() == Some(s))
            .ok_or_else(|| bad("source must be one of output, screen, detection"))?,
    };
    let bounds = page::MIN_PAGE_BYTES..=page::MAX_PAGE_BYTES;
    let page_bytes = int_in(a.get("page_bytes"), "page_bytes", bounds, default_bytes)?;
    let cursor = match a.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("cursor must be a string from an earlier next_cursor")),
    };
    Ok(page::PageReq {
        source,
        page_bytes,
        cursor,
    })
}

pub(crate) fn page_error(e: page::PageError) -> ToolError {
    match e {
        page::PageError::Cursor(detail) => ToolError::InvalidCursor { detail },
        page::PageError::Db(e) => unavailable(e),
    }
}

/// A completed answer of `tool`; `message` follows the tool's name.
pub(crate) fn done(tool: ToolName, message: String, text: String, data: Value) -> ToolOutput {
    ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(tool, format!("{tool} {message}"), data),
    }
}
