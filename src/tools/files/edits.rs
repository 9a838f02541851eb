//! Running edits through the engine for any edit tool: lock the targets, plan, commit,
//! carry the read permit over the change (`permits::after_change`), count SEARCH
//! conflicts, and run the optional verification command.
//!
//! Invariant: plan and commit of a file happen under its `edit::lock` lock, shared with
//! every adapter on the state directory; edits of different files never wait on each
//! other, and no lock is held during verification.

use super::edit_error::EditFailure;
use super::lock_dir;
use super::verify::{Verify, verify_after};
use crate::deadline::unix_ms;
use crate::edit::engine::{self, EditContext, FileEdit, PlanError};
use crate::edit::lock;
use crate::session::Binding;
use crate::tools::ToolContext;
use crate::tools::bash::action::Action;
use crate::tools::envelope::{Envelope, ToolOutput};
use crate::tools::error::{SessionPair, ToolError};
use crate::tools::name::ToolName;
use crate::tools::state::SessionState;
use crate::tools::state::conflicts::CONFLICTS_BEFORE_EXHAUSTED;
use serde_json::json;

/// Where multi-file commits record their intent (`edit::journal`).
fn commit_journal(ctx: &ToolContext) -> std::path::PathBuf {
    ctx.sessions.state_dir().join("commits")
}

/// Finish the commits a crashed process left half done (before anything reads or edits).
/// Takes each intent's target locks itself: call it holding none.
pub fn recover_interrupted_commits(ctx: &ToolContext) {
    recover(&commit_journal(ctx), &lock_dir(ctx));
}

fn recover(journal: &std::path::Path, locks: &std::path::Path) {
    for o in crate::edit::journal::recover(journal, locks) {
        log::info!("interrupted commit recovery: {o:?}");
    }
}

/// Plan and commit `edits` for the caller under the mutation-receipt rules (`args` are the
/// call's arguments, the receipt key); failures come back as finished results.
pub fn run(
    ctx: &ToolContext,
    tool: ToolName,
    binding: &Binding,
    args: &serde_json::Map<String, serde_json::Value>,
    edits: Vec<FileEdit>,
    verify: Option<Verify>,
) -> Result<ToolOutput, ToolError> {
    super::receipts::guarded(ctx, tool, binding, args, || {
        run_once(ctx, tool, binding, edits, verify)
    })
}

fn run_once(
    ctx: &ToolContext,
    tool: ToolName,
    binding: &Binding,
    edits: Vec<FileEdit>,
    verify: Option<Verify>,
) -> Result<ToolOutput, ToolError> {
    let pair = SessionPair {
        thread_id: binding.thread_id.clone(),
        workspace_root: binding.workspace_str(),
    };
    let state = ctx.states.of(ctx.principal, &binding.thread_id);
    if let Some(v) = &verify {
        let act = Action::Command {
            command: v.command.clone(),
            background: false,
        };
        crate::tools::bash::enforce_mode(binding, &act, false)?;
        crate::tools::temporary::before_verify(ctx, binding, &pair, &v.command)?;
    }
    let stored = |p: &std::path::Path| super::permits::load(ctx, &binding.thread_id, p);
    let ectx = EditContext {
        coverage: &state.coverage,
        stored: &stored,
        workspace: &binding.workspace_root,
        allow: ctx.allow_paths,
        mode: &binding.mode,
    };
    let journal = commit_journal(ctx);
    let locks = lock_dir(ctx);
    recover(&journal, &locks);
    // Lock keys are canonical paths, as the engine plans them; a path that does not
    // canonicalise fails in `plan` with its own error.
    let targets: Vec<std::path::PathBuf> = edits
        .iter()
        .filter_map(|e| crate::files::policy::canonical(&e.path).ok())
        .collect();
    let planned = {
        let _held = match lock::lock_all(&locks, &targets) {
            Ok(h) => h,
            Err(e) => return Ok(EditFailure::from_lock(e).into_output(tool, &pair)),
        };
        let planned = match engine::plan(&ectx, &edits) {
            Ok(p) => p,
            Err(e) => return Ok(failure(tool, &state, &pair, e)),
        };
        if let Some(p) = planned.iter().find(|p| !targets.contains(&p.path)) {
            let moved = EditFailure::LockUnavailable {
                path: p.path.to_string_lossy().into_owned(),
                detail: "the path resolved to another file while it was being locked (a \
                         symlink changed); nothing was written, retry"
                    .into(),
            };
            return Ok(moved.into_output(tool, &pair));
        }
        if let Err(e) = engine::commit(&planned, Some(&journal)) {
            return Ok(EditFailure::from_commit(e).into_output(tool, &pair));
        }
        planned
    };
    super::undo::record(&state, &planned);
    let mut text = String::new();
    let mut files = Vec::new();
    for p in &planned {
        state.conflicts.lock().clear(&p.path.to_string_lossy());
        let written = super::permits::Change::Edit {
            written: &p.touched,
        };
        let new = (p.new_revision.as_str(), p.new.as_bytes());
        super::permits::after_change(&state.coverage, &p.path, &p.old, new, written);
        let verb = if p.existed { "Edited" } else { "Created" };
        text.push_str(&format!(
            "{verb} {} ({})\n{}",
            p.path.display(),
            p.new_revision,
            p.diff
        ));
        files.push(json!({"path": p.path, "revision": p.new_revision, "created": !p.existed}));
    }
    let mut env = Envelope::completed(
        tool,
        format!("{tool}: {} file(s) committed", planned.len()),
        json!({"edit_applied": true, "files": files}),
    );
    if let Some(v) = verify {
        verify_after(ctx, binding, &pair, &v, &mut text, &mut env);
    }
    Ok(ToolOutput {
        images: Vec::new(),
        text,
        envelope: env,
    })
}

fn failure(tool: ToolName, state: &SessionState, pair: &SessionPair, e: PlanError) -> ToolOutput {
    let f = EditFailure::from_plan(e);
    if let EditFailure::SearchConflict { path, .. } = &f {
        let seen = state.conflicts.lock().count(path, unix_ms());
        if seen >= CONFLICTS_BEFORE_EXHAUSTED {
            return EditFailure::RecoveryExhausted { path: path.clone() }.into_output(tool, pair);
        }
    }
    f.into_output(tool, pair)
}
