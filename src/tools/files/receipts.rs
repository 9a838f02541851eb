//! Mutation receipts around edit calls: an identical retry of a committed call (same
//! principal, session, tool and arguments) within 30 minutes is replayed without writing or
//! verifying again while the targets are unchanged; if a target changed since, the retry
//! is refused with `mutation_postcondition_changed` instead of overwriting newer work.
//! Identical calls in flight at the same time are single-flight (`tools::state::flights`).

use crate::deadline::unix_ms;
use crate::edit::engine::revision;
use crate::session::Binding;
use crate::store::receipts::Receipt;
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, NextAction, Status, ToolOutput};
use crate::tools::error::{ToolError, mark};
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// How long a receipt answers identical retries (seed 003).
pub const RECEIPT_WINDOW_MS: i64 = 30 * 60 * 1000;
fn call_key(principal: &str, thread_id: &str, tool: &str, args: &Map<String, Value>) -> String {
    let mut h = Sha256::new();
    for part in [principal, thread_id, tool] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    // serde_json maps are ordered by key, so equal arguments serialise equally.
    h.update(serde_json::to_vec(args).unwrap_or_default());
    crate::hex::lower(&h.finalize())
}

fn store_err(e: crate::store::StoreError) -> ToolError {
    ToolError::StoreUnavailable {
        detail: e.to_string(),
    }
}

/// Run `body` under the receipt rules.
pub fn guarded(
    ctx: &ToolContext,
    tool: ToolName,
    binding: &Binding,
    args: &Map<String, Value>,
    body: impl FnOnce() -> Result<ToolOutput, ToolError>,
) -> Result<ToolOutput, ToolError> {
    let key = call_key(ctx.principal, &binding.thread_id, tool.as_str(), args);
    // The session's state stays held (never evicted) while the call is in flight.
    let state = ctx.states.of(ctx.principal, &binding.thread_id);
    let _flight = state.flights.enter(&key);
    let store = ctx.sessions.store()?;
    let now = unix_ms();
    if let Some(r) = store
        .receipt_get(&key, now - RECEIPT_WINDOW_MS)
        .map_err(store_err)?
    {
        let targets: Vec<(String, String)> = serde_json::from_str(&r.targets).unwrap_or_default();
        let changed: Vec<String> = targets
            .iter()
            .filter(|(p, rev)| {
                // Exactly the committed path: no symlink followed, never a FIFO or device.
                crate::files::beneath::read_canonical(
                    std::path::Path::new(p),
                    crate::edit::engine::MAX_EDIT_FILE_BYTES + 1,
                )
                .ok()
                .flatten()
                .map(|b| revision(&b))
                .as_deref()
                    != Some(rev.as_str())
            })
            .map(|(p, _)| p.clone())
            .collect();
        return Ok(if changed.is_empty() {
            replay(tool, &r)
        } else {
            changed_since(tool, binding, changed)
        });
    }
    let out = body()?;
    let committed = out.envelope.data["edit_applied"] == json!(true)
        && out.envelope.error_code != Some(ErrorCode::PartialCommit);
    if committed {
        let targets: Vec<(String, String)> = out.envelope.data["files"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| {
                        Some((
                            f["path"].as_str()?.to_string(),
                            f["revision"].as_str()?.to_string(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let receipt = Receipt {
            targets: serde_json::to_string(&targets).unwrap_or_default(),
            text: out.text.clone(),
            data: out.envelope.data.to_string(),
            created_at_ms: now,
        };
        // A receipt that cannot be stored costs only replay protection, never the edit.
        if let Err(e) = store.receipt_put(&key, &receipt, now - RECEIPT_WINDOW_MS) {
            log::warn!("mutation receipt not stored: {e}");
        }
    }
    Ok(out)
}

fn replay(tool: ToolName, r: &Receipt) -> ToolOutput {
    let mut data: Value = serde_json::from_str(&r.data).unwrap_or_else(|_| json!({}));
    data["replayed"] = json!(true);
    ToolOutput {
        images: Vec::new(),
        text: format!(
            "(identical call already committed; replayed without writing)\n{}",
            r.text
        ),
        envelope: Envelope::completed(
            tool,
            format!("{tool}: replayed an identical committed call"),
            data,
        ),
    }
}

fn changed_since(tool: ToolName, binding: &Binding, changed: Vec<String>) -> ToolOutput {
    let message = format!(
        "{tool}: this exact call was committed before, and {} changed since; not overwriting newer state",
        changed.join(", ")
    );
    let mut env = Envelope::completed(
        tool,
        message.clone(),
        json!({"edit_applied": false, "changed": changed}),
    );
    mark(
        &mut env,
        Status::Conflict,
        ErrorCode::MutationPostconditionChanged,
    );
    env.next_action = Some(NextAction {
        tool: "ReadFiles".into(),
        instruction: "Re-read the changed files, then decide on a new edit.".into(),
        arguments: json!({"thread_id": binding.thread_id, "workspace_root": binding.workspace_str(), "file_paths": changed}),
    });
    ToolOutput::refusal(env)
}
