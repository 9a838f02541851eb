//! `EditFiles` `release_temporary` (seed 000, "Release managed temporary helpers"):
//! explicit removal of individually named helpers of this session's managed directory.
//!
//! Order of checks, each one before anything is removed:
//! 1. arguments: `{generation, files: [{path, revision}]}`, 1..=32 files;
//! 2. an audit of the directory: unmeasurable (a symlink in its place) → blocked;
//! 3. the generation: the directory must be exactly as the agent last saw it (any entry
//!    added, removed or changed below it gives another one) → else
//!    `temporary_generation_changed` with the current one, nothing released — except when
//!    every named file is already gone: then the call is a replay of a release whose answer
//!    was lost, answered `already_absent` per file;
//! 4. the guardian (the runtime owner of the session's processes): it must answer, be
//!    of a build that exports `WINX_TEMP_DIR`, and run no foreground and no background
//!    command → else `temporary_release_blocked`, nothing released (unresolved ownership
//!    leaves files in place);
//! 5. per file: below this session's directory (lexically: no `..`, not another session),
//!    read by this session at `revision` (a `ReadFiles` permit), no symlink on the way,
//!    a regular file whose bytes still have that revision → removed; otherwise kept with
//!    its reason. Kept files make the result `partially_failed`
//!    (`temporary_release_partial`); released ones stay released, so a retry names only
//!    the kept ones (released ones would now be `already_absent`).
//!
//! Known gap: a command started by a concurrent call between check 4 and the removal (a
//! window of microseconds, only by the same agent) is not seen.

use super::{Refusal, key, refuse, usage_json};
use crate::session::Binding;
use crate::temporary::release::{Kept, relative_below, release};
use crate::tools::ToolContext;
use crate::tools::args::Args;
use crate::tools::envelope::{Envelope, NextAction, Status, ToolOutput};
use crate::tools::error::{SessionPair, ToolError, mark};
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use crate::wire::guardian::Snapshot;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// Helpers per call: a batch, not a sweep (`rm` in the shell removes many).
pub const MAX_FILES: usize = 32;

struct Item {
    raw: String,
    path: PathBuf,
    revision: String,
}

fn bad(detail: &str) -> ToolError {
    ToolError::InvalidInput {
        detail: format!("release_temporary: {detail}"),
    }
}

fn parse(b: &Binding, spec: &Value) -> Result<(String, Vec<Item>), ToolError> {
    let obj = spec
        .as_object()
        .ok_or_else(|| bad("must be an object {generation, files}"))?;
    let a = Args::strict(obj, &["generation", "files"])?;
    let generation = a.req_str("generation")?.to_string();
    let files = match obj.get("files") {
        Some(Value::Array(f)) if !f.is_empty() && f.len() <= MAX_FILES => f,
        _ => return Err(bad(&format!("files must hold 1..={MAX_FILES} objects"))),
    };
    let mut items = Vec::new();
    for f in files {
        let m: &Map<String, Value> = f.as_object().ok_or_else(|| bad("files are objects"))?;
        let fa = Args::strict(m, &["path", "revision"])?;
        let raw = fa.req_str("path")?.to_string();
        items.push(Item {
            path: crate::temporary::policy::clean(&crate::tools::files::absolute(
                &b.workspace_root,
                &raw,
            )),
            raw,
            revision: fa.req_str("revision")?.to_string(),
        });
    }
    Ok((generation, items))
}

pub fn call(ctx: &ToolContext, b: &Binding, spec: &Value) -> Result<ToolOutput, ToolError> {
    let (generation, items) = parse(b, spec)?;
    let pair = SessionPair {
        thread_id: b.thread_id.clone(),
        workspace_root: b.workspace_str(),
    };
    let k = key(ctx, b);
    let dir = crate::temporary::session_dir(&b.workspace_root, &k);
    let blocked = |why: String, next: Option<NextAction>| {
        refuse(Refusal {
            code: ErrorCode::TemporaryReleaseBlocked,
            status: Status::Conflict,
            retryable: true,
            message: format!("nothing was released: {why}"),
            data: json!({"reason": why}),
            next,
        })
    };
    let before = super::audit(ctx, b, true);
    if let Some(p) = &before.problem {
        return Err(blocked(
            format!("the managed directory is unusable ({p})"),
            None,
        ));
    }
    if before.generation != generation {
        let gone = items
            .iter()
            .all(|i| std::fs::symlink_metadata(&i.path).is_err());
        if gone {
            let outcomes = items.iter().map(|i| (i, Ok("already_absent"))).collect();
            return Ok(answer(ctx, b, outcomes));
        }
        return Err(refuse(Refusal {
            code: ErrorCode::TemporaryGenerationChanged,
            status: Status::NeedsRead,
            retryable: true,
            message: format!(
                "the managed directory changed since generation {generation} (now {}); nothing \
                 was released: read the helpers again and retry with the new generation",
                before.generation
            ),
            data: json!({"generation": before.generation, "temporary": usage_json(&before)}),
            next: Some(NextAction {
                tool: "ReadFiles".into(),
                instruction: format!(
                    "Re-read what you release, then retry with generation {}.",
                    before.generation
                ),
                arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                    "file_paths": items.iter().map(|i| i.raw.clone()).collect::<Vec<_>>()}),
            }),
        }));
    }
    let status_check = Some(NextAction {
        tool: "BashCommand".into(),
        instruction: "Wait for the session's commands to end, then retry.".into(),
        arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                          "action_json": {"status_check": true}}),
    });
    match ctx.runtime.attach(&k).map(|e| e.snapshot) {
        None => {
            return Err(blocked(
                "no live shell answers for this session, so its commands cannot be checked".into(),
                None,
            ));
        }
        Some(s) if !s.capabilities.iter().any(|c| c == "temp_dir") => {
            return Err(blocked(
                "the session's shell predates managed temporary directories (reset it)".into(),
                None,
            ));
        }
        Some(Snapshot {
            running,
            background,
            ..
        }) if running.is_some() || !background.is_empty() => {
            let active: Vec<String> = running.into_iter().chain(background).collect();
            return Err(blocked(
                format!("commands are active in the session ({})", active.join(", ")),
                status_check,
            ));
        }
        Some(_) => {}
    }
    let state = ctx.states.of(ctx.principal, &b.thread_id);
    let mut outcomes = Vec::new();
    for i in &items {
        let Some(parts) = relative_below(&dir, &i.path) else {
            outcomes.push((i, Err("outside_session_dir".to_string())));
            continue;
        };
        state.coverage.hydrate(&i.path, &i.revision, || {
            crate::tools::files::permits::load(ctx, &b.thread_id, &i.path)
        });
        if !state.coverage.holds(&i.path, &i.revision) {
            outcomes.push((i, Err("not_read_at_revision".to_string())));
            continue;
        }
        let done = release(&b.workspace_root, &k, &parts, &i.revision, |bytes| {
            crate::files::read::revision_of(bytes)
        });
        outcomes.push((i, done.map(|()| "released").map_err(kept_reason)));
    }
    Ok(answer(ctx, b, outcomes))
}

fn kept_reason(k: Kept) -> String {
    match k {
        Kept::Outside => "outside_session_dir".into(),
        Kept::NotFound => "not_found".into(),
        Kept::Symlink => "symlink".into(),
        Kept::NotRegular => "not_regular_file".into(),
        Kept::RevisionChanged { .. } => "revision_changed".into(),
        Kept::Io(e) => format!("io_error: {e}"),
    }
}

fn answer(
    ctx: &ToolContext,
    b: &Binding,
    outcomes: Vec<(&Item, Result<&'static str, String>)>,
) -> ToolOutput {
    let after = super::audit(ctx, b, true);
    let mut text = String::new();
    let mut files = Vec::new();
    let mut kept = 0;
    for (i, o) in &outcomes {
        let (state, reason) = match o {
            Ok(s) => (*s, None),
            Err(r) => {
                kept += 1;
                ("kept", Some(r.as_str()))
            }
        };
        text.push_str(&format!("{state}: {}", i.raw));
        if let Some(r) = reason {
            text.push_str(&format!(" ({r})"));
        }
        text.push('\n');
        files.push(json!({"path": i.raw, "outcome": state, "reason": reason}));
    }
    text.push_str(&format!(
        "temporary: {} bytes, {} files; generation {}\n",
        after.session.bytes, after.session.files, after.generation
    ));
    let released = outcomes.len() - kept;
    let data = json!({"files": files, "released": released, "kept": kept,
                      "temporary": usage_json(&after)});
    let message = format!("EditFiles release_temporary: {released} released, {kept} kept");
    let mut envelope = Envelope::completed(ToolName::EditFiles, message, data);
    if kept > 0 {
        mark(
            &mut envelope,
            Status::PartiallyFailed,
            ErrorCode::TemporaryReleasePartial,
        );
    }
    ToolOutput {
        text,
        envelope,
        images: Vec::new(),
    }
}
