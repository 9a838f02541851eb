//! `UndoEdit` and its checkpoints: the pre-edit bytes of each committed edit, kept per
//! session in memory (`tools::state::undo`, bounded), restored only if the files are
//! still exactly as the edit left them.

use crate::edit::atomic;
use crate::edit::engine::{MAX_EDIT_FILE_BYTES, Planned, revision};
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, Status, ToolOutput};
use crate::tools::error::{ToolError, mark};
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use crate::tools::state::undo::FileState;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// Remember what a committed edit replaced, in `state`'s checkpoints (bounded there).
pub fn record(state: &crate::tools::state::SessionState, planned: &[Planned]) {
    let cp: Vec<FileState> = planned
        .iter()
        .map(|p| FileState {
            path: p.path.clone(),
            before: p.existed.then(|| p.old.clone()),
            after_revision: p.new_revision.clone(),
        })
        .collect();
    state.undo.lock().push(cp);
}

const FIELDS: &[&str] = &["thread_id", "workspace_root", "file_path"];

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let state = ctx.states.of(ctx.principal, &binding.thread_id);
    let wanted = a
        .opt_str("file_path")?
        .map(|p| crate::files::policy::canonical(&super::absolute(&binding.workspace_root, p)))
        .transpose()
        .map_err(|detail| ToolError::InvalidInput { detail })?;
    // Held until the checkpoint is taken off: this session's other undos and edit records
    // wait for it, no other session does.
    let mut stack = state.undo.lock();
    let idx = stack.newest(|cp| {
        wanted
            .as_ref()
            .is_none_or(|w| cp.iter().any(|f| &f.path == w))
    });
    let Some(idx) = idx else {
        return Ok(refusal(
            "no edit of this session to undo (checkpoints live in this adapter's memory)",
        ));
    };
    // Under the files' edit locks (after the checkpoint mutex: edits record checkpoints
    // only once their locks are released), so no commit lands between check and write.
    let Some(cp) = stack.get(idx) else {
        return Ok(refusal("no edit of this session to undo"));
    };
    let paths: Vec<PathBuf> = cp.iter().map(|f| f.path.clone()).collect();
    let _held = match crate::edit::lock::lock_all(&super::lock_dir(ctx), &paths) {
        Ok(h) => h,
        Err(e) => return Ok(refusal(&format!("undo refused: {}", e.detail))),
    };
    // Refuse if any file changed since the edit: never overwrite newer work. The bytes
    // checked are what the undo replaces (its permit is carried from them).
    let mut now_bytes = std::collections::HashMap::new();
    for f in cp {
        // Exactly the committed path: no symlink followed, never a FIFO or device.
        let now = crate::files::beneath::read_canonical(&f.path, MAX_EDIT_FILE_BYTES + 1)
            .ok()
            .flatten();
        if now.as_deref().map(revision).as_deref() != Some(f.after_revision.as_str()) {
            return Ok(refusal(&format!(
                "{} changed since the edit; undo refused",
                f.path.display()
            )));
        }
        now_bytes.insert(f.path.clone(), now.unwrap_or_default());
    }
    let Some(cp) = stack.remove(idx) else {
        return Ok(refusal("no edit of this session to undo"));
    };
    drop(stack);
    let mut restored = Vec::new();
    for f in &cp {
        let now = now_bytes.remove(&f.path).unwrap_or_default();
        let result = crate::files::beneath::entry_canonical(&f.path)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|entry| match &f.before {
                Some(bytes) => atomic::write_at(&entry, bytes),
                None => atomic::remove_at(&entry),
            });
        if let Err(e) = result {
            return Ok(refusal(&format!(
                "restoring {} failed: {e}",
                f.path.display()
            )));
        }
        if let Some(before) = &f.before {
            super::permits::after_change(
                &state.coverage,
                &f.path,
                &now,
                (&revision(before), before),
                super::permits::Change::Undo,
            );
        }
        restored.push(json!({"path": f.path, "removed": f.before.is_none()}));
    }
    let text = cp
        .iter()
        .map(|f| format!("Restored {}\n", f.path.display()))
        .collect::<String>();
    Ok(ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(
            ToolName::UndoEdit,
            "UndoEdit: restored the files of one edit",
            json!({"files": restored}),
        ),
    })
}

fn refusal(message: &str) -> ToolOutput {
    let mut env = Envelope::completed(ToolName::UndoEdit, message, json!({}));
    mark(&mut env, Status::Conflict, ErrorCode::UndoRefused);
    ToolOutput::refusal(env)
}
