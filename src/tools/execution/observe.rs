//! `observe`: compact status and a page for 1–32 executions in one call
//! (`Catalog::observe`: one refresh per guardian with an open record, then one catalog
//! transaction with its `catalog_cursor`).
//!
//! Invariant: one item's failure (missing id, bad cursor, failed refresh) is that item's
//! `errors` entry; its siblings are answered normally and the call is
//! `completed_with_issues` / `execution_observation_issues`.

use super::page::{self, page_req};
use super::{Ctx, done, execution_id, only, refuse, refuse_to_list, timeout};
use super::{unavailable, view, with};
use crate::deadline::Deadline;
use crate::history::{Observed, Page, PageReq};
use crate::tools::envelope::{Status, ToolOutput};
use crate::tools::error::Fix;
use crate::tools::error::{ToolError, mark};
use crate::tools::error_code::ErrorCode;
use serde_json::{Map, Value, json};
use std::collections::HashSet;

const MAX_ITEMS: usize = 32;
const DEFAULT_ITEM_BYTES: usize = 2048;
const MAX_TOTAL_BYTES: usize = 65536;
const DEFAULT_TIMEOUT_SECONDS: f64 = 5.0;

pub struct Parsed {
    /// Each item's execution id and page.
    items: Vec<(String, PageReq)>,
    pub(super) budget: std::time::Duration,
}

/// Every shape and budget rule, before any session or history access.
pub fn parse(action: &Map<String, Value>) -> Result<Parsed, ToolError> {
    only(action, &["items", "timeout_seconds"])?;
    let raw = match action.get("items") {
        Some(Value::Array(a)) if (1..=MAX_ITEMS).contains(&a.len()) => a,
        Some(Value::Array(a)) if a.len() > MAX_ITEMS => {
            return Err(refuse(
                format!("items must be an array of 1..={MAX_ITEMS} objects"),
                &format!(
                    "Observe at most {MAX_ITEMS} per call; this is the call with the first {MAX_ITEMS}."
                ),
                with(action, "items", Value::Array(a[..MAX_ITEMS].to_vec())),
            ));
        }
        _ => {
            return Err(refuse_to_list(format!(
                "items must be an array of 1..={MAX_ITEMS} objects"
            )));
        }
    };
    let mut items = Vec::with_capacity(raw.len());
    let mut seen = HashSet::new();
    let mut total = 0;
    for (i, v) in raw.iter().enumerate() {
        let Value::Object(o) = v else {
            return Err(refuse_to_list(format!("items[{i}] must be an object")));
        };
        const FIELDS: [&str; 4] = ["execution_id", "source", "page_bytes", "cursor"];
        if let Some(k) = o.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            let kept: Map<String, Value> = o
                .iter()
                .filter(|(k, _)| FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Err(refuse(
                format!("unexpected field items[{i}].{k}"),
                &format!("An item takes {}.", FIELDS.join(", ")),
                with_item(action, i, Value::Object(kept)),
            ));
        }
        let id = execution_id(o.get("execution_id"), &format!("items[{i}].execution_id"))?;
        let req = page_req(o, DEFAULT_ITEM_BYTES).map_err(|e| in_item(e, action, i))?;
        if !seen.insert((id.clone(), req.source)) {
            let mut rest = raw.clone();
            rest.remove(i);
            return Err(refuse(
                format!(
                    "items[{i}] repeats execution {id} with source {}",
                    req.source.as_str()
                ),
                "Ask for each execution and source once.",
                with(action, "items", Value::Array(rest)),
            ));
        }
        total += req.page_bytes;
        items.push((id, req));
    }
    if total > MAX_TOTAL_BYTES {
        let each = MAX_TOTAL_BYTES / raw.len();
        let fitted: Vec<Value> = raw
            .iter()
            .map(|it| match it {
                Value::Object(o) => with(o, "page_bytes", json!(each)),
                other => other.clone(),
            })
            .collect();
        return Err(refuse(
            format!(
                "the items' page_bytes add up to {total}; at most {MAX_TOTAL_BYTES} in one call"
            ),
            &format!(
                "Page sizes add up to at most {MAX_TOTAL_BYTES}: this is the call with \
                 {each} bytes per item (or split the items over several calls)."
            ),
            with(action, "items", Value::Array(fitted)),
        ));
    }
    let budget = timeout(action, DEFAULT_TIMEOUT_SECONDS)?;
    Ok(Parsed { items, budget })
}

/// `action` with `items[i]` replaced by `item`.
fn with_item(action: &Map<String, Value>, i: usize, item: Value) -> Value {
    let mut items = action.get("items").cloned().unwrap_or_default();
    items[i] = item;
    with(action, "items", items)
}

/// An item's refusal as the whole observe's: a corrected item goes back into its place;
/// a fix that is a whole action (`list`) stays as it is.
fn in_item(e: ToolError, action: &Map<String, Value>, i: usize) -> ToolError {
    match e {
        ToolError::InvalidAction { detail, fix } if fix.action.get("type").is_none() => {
            ToolError::InvalidAction {
                detail: format!("items[{i}]: {detail}"),
                fix: Fix::boxed(fix.instruction, with_item(action, i, fix.action)),
            }
        }
        other => other,
    }
}

fn item_error(stage: &str, code: ErrorCode, message: String) -> Value {
    json!({"stage": stage, "errorCode": code.as_str(), "message": message})
}

/// Observe within `deadline`, the call's one deadline (see `Parsed::deadline`).
pub fn run(x: &Ctx, parsed: Parsed, deadline: &Deadline) -> Result<ToolOutput, ToolError> {
    let seen = x.observe(&parsed.items, deadline).map_err(unavailable)?;
    let mut issues = false;
    let mut text = String::new();
    let mut items = Vec::with_capacity(seen.items.len());
    for o in &seen.items {
        let (item, status, errors) = item(o);
        issues |= errors;
        let shown = o.page.as_ref().map_or("", Page::text);
        text.push_str(&format!(
            "{} {status}: {}\n",
            o.execution_id,
            shown.trim_end()
        ));
        items.push(item);
    }
    let data = json!({
        "items": items,
        "catalog_cursor": seen.catalog_cursor,
    });
    let mut out = done(
        x.tool,
        format!("observe: {} item(s)", parsed.items.len()),
        text,
        data,
    );
    if issues {
        mark(
            &mut out.envelope,
            Status::CompletedWithIssues,
            ErrorCode::ExecutionObservationIssues,
        );
    }
    Ok(out)
}

/// An observed item as `data.items[i]` shows it, its status, and whether it has errors.
fn item(o: &Observed) -> (Value, &'static str, bool) {
    let mut errors = Vec::new();
    let source = o.source.as_str();
    let Some(r) = &o.record else {
        let e = ToolError::ExecutionNotFound {
            execution_id: o.execution_id.clone(),
            fix: None,
        };
        errors.push(item_error("read", e.error_code(), e.message()));
        let v = json!({"execution_id": o.execution_id, "source": source, "status": "missing",
                       "execution": null, "page": null, "errors": errors});
        return (v, "missing", true);
    };
    if let Some(e) = &o.refresh_error {
        let message = format!("live refresh failed (retained data shown): {e}");
        errors.push(item_error("refresh", ErrorCode::ShellUnavailable, message));
    }
    if let Some(detail) = &o.cursor_error {
        let e = ToolError::InvalidCursor {
            detail: detail.clone(),
            fix: None,
        };
        errors.push(item_error("read", e.error_code(), e.message()));
    }
    let issues = !errors.is_empty();
    let status = if issues {
        "observed_with_issues"
    } else {
        "observed"
    };
    let v = json!({"execution_id": r.execution_id, "source": source, "status": status,
                   "execution": view::compact(r), "page": o.page.as_ref().map(page::json),
                   "errors": errors});
    (v, status, issues)
}
