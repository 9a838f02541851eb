//! Handing each command a guardian accepted to the execution history.

use crate::deadline::unix_ms;
use crate::runtime::Ensured;
use crate::store::history::NewRecord;
use crate::tools::ToolContext;
use crate::tools::error::SessionPair;
use crate::wire::guardian::{ActionResult, ExecScope};

/// The scope a command is admitted in, sent with it so the guardian can report it.
pub fn scope(ctx: &ToolContext, pair: &SessionPair) -> ExecScope {
    ExecScope {
        principal: ctx.principal.to_string(),
        thread_id: pair.thread_id.clone(),
        workspace_root: pair.workspace_root.clone(),
    }
}

/// Record the command `r` answers for (a `Run` answer names its execution). Never blocks:
/// the history recorder writes it.
pub fn admitted(
    ctx: &ToolContext,
    pair: &SessionPair,
    key: &str,
    ensured: &Ensured,
    command: &str,
    r: &ActionResult,
) {
    let Some(execution_id) = r.state.execution_id.clone() else {
        return;
    };
    let snapshot = &ensured.snapshot;
    ctx.history.admit(NewRecord {
        scope: crate::history::scope(ctx.principal, &pair.thread_id, &pair.workspace_root),
        execution_id,
        guardian: snapshot.identity(),
        session_key: key.to_string(),
        socket: ensured.client.socket.to_string_lossy().into_owned(),
        bg_command_id: r.state.bg_command_id.clone(),
        command: command.to_string(),
        cwd: snapshot.cwd.clone(),
        journal_path: r.journal_path.clone(),
        journal_offset: r.journal_offset as i64,
        now_ms: unix_ms(),
    });
}
