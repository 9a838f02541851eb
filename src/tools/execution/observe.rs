//! `observe`: compact status and a page for 1–32 executions in one call. Each distinct
//! guardian with an open record is refreshed once; then every item's metadata and page
//! come from one catalog transaction, with that transaction's `catalog_cursor`.
//!
//! Invariant: one item's failure (missing id, bad cursor, failed refresh) is that item's
//! `errors` entry; its siblings are answered normally and the call is
//! `completed_with_issues` / `execution_observation_issues`.

use super::page::{self, PageReq};
use super::{Ctx, done, execution_id, only, page_req, refuse, refuse_to_list, timeout};
use super::{unavailable, view, with};
use crate::deadline::Deadline;
use crate::history::cursor::Kind;
use crate::ipc::GuardianClient;
use crate::store::history::{self as table, ProcessStatus};
use crate::tools::envelope::{Status, ToolOutput};
use crate::tools::error::Fix;
use crate::tools::error::{ToolError, mark};
use crate::tools::error_code::ErrorCode;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashSet};

const MAX_ITEMS: usize = 32;
const DEFAULT_ITEM_BYTES: usize = 2048;
const MAX_TOTAL_BYTES: usize = 65536;
const DEFAULT_TIMEOUT_SECONDS: f64 = 5.0;

pub struct Item {
    execution_id: String,
    req: PageReq,
}

pub struct Parsed {
    items: Vec<Item>,
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
                    req.source
                ),
                "Ask for each execution and source once.",
                with(action, "items", Value::Array(rest)),
            ));
        }
        total += req.page_bytes;
        items.push(Item {
            execution_id: id,
            req,
        });
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
    let deadline = *deadline;
    x.open.sync(&deadline).map_err(unavailable)?;
    let ids: Vec<&str> = parsed
        .items
        .iter()
        .map(|i| i.execution_id.as_str())
        .collect();
    let before = x
        .open
        .read(|c| {
            ids.iter()
                .map(|id| Ok((id.to_string(), table::get(c, &x.scope, id)?)))
                .collect::<rusqlite::Result<BTreeMap<_, _>>>()
        })
        .map_err(unavailable)?;
    // One refresh per guardian with an open record among the items.
    let mut refresh_errors: BTreeMap<String, String> = BTreeMap::new();
    let mut refreshed = HashSet::new();
    for r in before.values().flatten() {
        let open = r.process_status == ProcessStatus::Running || r.output_pending;
        if open && refreshed.insert(r.guardian.clone()) {
            let client = GuardianClient::new(std::path::Path::new(&r.socket));
            if let Err(e) = x.open.refresh(&client, &deadline) {
                refresh_errors.insert(r.guardian.clone(), e);
            }
        }
    }
    if deadline.expired() {
        return Err(unavailable(
            "the observation deadline passed before the catalog was read",
        ));
    }
    let (items, seq) = x
        .open
        .read(|c| {
            c.execute_batch("BEGIN")?;
            let out = read_items(c, x, &parsed.items, &refresh_errors);
            // A pooled connection must never keep a transaction open.
            let end = c.execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
            let out = out?;
            end.map(|_| out)
        })
        .map_err(unavailable)?;
    let issues = items
        .iter()
        .any(|i| i["errors"].as_array().is_some_and(|e| !e.is_empty()));
    let mut text = String::new();
    for i in &items {
        text.push_str(&format!(
            "{} {}: {}\n",
            i["execution_id"].as_str().unwrap_or(""),
            i["status"].as_str().unwrap_or(""),
            i["page"]["text"].as_str().unwrap_or("").trim_end()
        ));
    }
    let data = json!({
        "items": items,
        "catalog_cursor": x.open.key.seal(&x.tag, &Kind::Catalog { seq }),
    });
    let mut out = done(
        x.tool,
        format!("observe: {} item(s)", ids.len()),
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

fn read_items(
    c: &rusqlite::Connection,
    x: &Ctx,
    items: &[Item],
    refresh_errors: &BTreeMap<String, String>,
) -> rusqlite::Result<(Vec<Value>, i64)> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut errors = Vec::new();
        let Some(r) = table::get(c, &x.scope, &item.execution_id)? else {
            let e = ToolError::ExecutionNotFound {
                execution_id: item.execution_id.clone(),
                fix: None,
            };
            errors.push(item_error("read", e.error_code(), e.message()));
            out.push(
                json!({"execution_id": item.execution_id, "source": item.req.source,
                            "status": "missing", "execution": null, "page": null,
                            "errors": errors}),
            );
            continue;
        };
        if let Some(e) = refresh_errors.get(&r.guardian) {
            let message = format!("live refresh failed (retained data shown): {e}");
            errors.push(item_error("refresh", ErrorCode::ShellUnavailable, message));
        }
        let page = match page::page(c, &x.open.key, &x.tag, &r, &item.req) {
            Ok(p) => Some(p),
            Err(page::PageError::Cursor(detail)) => {
                let e = ToolError::InvalidCursor { detail, fix: None };
                errors.push(item_error("read", e.error_code(), e.message()));
                None
            }
            Err(page::PageError::Db(e)) => return Err(e),
        };
        let status = if errors.is_empty() {
            "observed"
        } else {
            "observed_with_issues"
        };
        out.push(
            json!({"execution_id": r.execution_id, "source": item.req.source,
                        "status": status, "execution": view::compact(&r), "page": page,
                        "errors": errors}),
        );
    }
    Ok((out, crate::store::history_scope::seq(c, &x.scope)?))
}
