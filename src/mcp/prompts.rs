//! `prompts/list` and `prompts/get`: one prompt, `handoff`, that briefs the next agent on a
//! session of the calling principal — its state, the workspace overview `Initialize`
//! shows, and the latest `ContextSave` memory for that workspace.
//!
//! Invariant: read-only. The prompt never starts a shell, attaches a session or writes a
//! binding: it reads the session store, asks a guardian that is already running for its
//! snapshot, and reads files. Another principal's thread id is answered exactly like an
//! unknown one.

use super::context::{CallContext, Shared};
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::runtime::session_key;
use crate::session::{Binding, SessionError, ids, overview};
use crate::tools::files::context::{self as memories, Memory};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

pub const HANDOFF: &str = "handoff";
/// Longest memory description quoted in a handoff; the memory itself is resumed whole
/// through `Initialize task_id_to_resume`.
const MAX_NOTE_BYTES: usize = 4 * 1024;
/// Memory file names listed in a handoff.
const MAX_NOTE_FILES: usize = 32;

pub fn list() -> Value {
    json!({"prompts": [{
        "name": HANDOFF,
        "title": "Hand off a winx session",
        "description": "Brief the next agent on a winx session: its state (thread id, \
            workspace, mode, shell), the workspace overview and the latest saved task memory.",
        "arguments": [
            {"name": "thread_id", "description": "The session to hand off (from Initialize). \
                Without it, the workspace's session is used, if any.", "required": false},
            {"name": "workspace_root", "description": "The session's workspace (absolute \
                path).", "required": false},
        ],
    }]})
}

pub fn get(
    shared: &Shared,
    ctx: &CallContext,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    match params.get("name") {
        Some(Value::String(n)) if n == HANDOFF => {}
        Some(Value::String(n)) => {
            return Err(RpcError::invalid_params(format!(
                "unknown prompt {n:?}; prompts/list names the prompts of this server"
            ))
            .with_data(json!({"name": n})));
        }
        Some(_) => {
            return Err(RpcError::invalid_params(
                "prompts/get: name must be a string",
            ));
        }
        None => return Err(RpcError::invalid_params("prompts/get: missing name")),
    }
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "prompts/get: arguments must be an object",
            ));
        }
    };
    let thread_id = string_arg(&args, "thread_id")?;
    let workspace = match string_arg(&args, "workspace_root")? {
        Some(w) => Some(ids::canonical_workspace(w).map_err(|detail| {
            RpcError::invalid_params(format!("handoff: workspace_root {w:?}: {detail}"))
        })?),
        None => None,
    };
    let binding = match (thread_id, &workspace) {
        (Some(tid), _) => {
            let b = lookup(shared, ctx, tid)?.ok_or_else(|| unknown_thread(tid))?;
            if let Some(ws) = workspace.as_ref().filter(|ws| **ws != b.workspace_root) {
                return Err(RpcError::invalid_params(format!(
                    "handoff: thread_id {tid:?} is bound to another workspace than {}",
                    ws.display()
                )));
            }
            Some(b)
        }
        // The workspace-affinity session of this principal, if it was ever started.
        (None, Some(ws)) => lookup(shared, ctx, &ids::workspace_thread_id(ctx.principal, ws))?,
        (None, None) => None,
    };
    let (description, text) = match binding {
        Some(b) => (
            format!("Handoff of winx session {}", b.thread_id),
            handoff(shared, ctx, &b),
        ),
        None => (
            "How to start a winx session".to_string(),
            no_session(workspace.as_ref().map(|w| w.display().to_string())),
        ),
    };
    Ok(json!({
        "description": description,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}

fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, RpcError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim())),
        Some(_) => Err(RpcError::invalid_params(format!(
            "handoff: {key} must be a string"
        ))),
    }
}

fn lookup(shared: &Shared, ctx: &CallContext, tid: &str) -> Result<Option<Binding>, RpcError> {
    shared
        .sessions()
        .lookup(ctx.principal, tid)
        .map_err(|e| match e {
            SessionError::StoreUnavailable { detail } => {
                RpcError::new(ErrorCode::InternalError, format!("session store: {detail}"))
            }
            other => RpcError::new(ErrorCode::InternalError, format!("{other:?}")),
        })
}

/// The same answer whether the id never existed or belongs to another principal.
fn unknown_thread(tid: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "handoff: thread_id {tid:?} is not a known session; call Initialize \
         (type=first_call, workspace_root=<project>) to get one"
    ))
    .with_data(json!({"thread_id": tid}))
}

fn no_session(workspace: Option<String>) -> String {
    let ws = workspace.unwrap_or_else(|| "<project>".into());
    format!(
        "# Handoff: no winx session yet\n\n\
         There is no winx session to hand off{}. Start one with the Initialize tool: \
         type=first_call, workspace_root={ws}. Pass the thread_id and workspace_root it \
         returns unchanged on every later call, then ask for this prompt again with \
         thread_id=<that id> to brief the next agent.\n",
        if ws == "<project>" {
            " (no thread_id was given)"
        } else {
            " for this workspace"
        }
    )
}

fn handoff(shared: &Shared, ctx: &CallContext, b: &Binding) -> String {
    let ws = b.workspace_str();
    let mut t = format!(
        "# Handoff: winx session {tid}\n\n\
         You are taking over a winx session from another agent. Keep using it: pass \
         thread_id={tid} and workspace_root={ws} unchanged on every tool call. Read before \
         editing; follow each result's nextAction.\n\n## Session\n\
         - thread_id: {tid}\n- workspace_root: {ws}\n- mode: {mode}\n- created_at_unix_ms: {created}\n",
        tid = b.thread_id,
        mode = b.mode.describe(),
        created = b.created_at_ms,
    );
    // Only a guardian that is already running is asked; none is started.
    match shared
        .runtime
        .attach(&session_key(ctx.principal, &b.thread_id))
    {
        Some(e) => {
            let s = e.snapshot;
            let _ = writeln!(
                t,
                "- shell: pid {} ({}), cwd {}",
                s.shell_pid,
                if s.shell_alive { "alive" } else { "exited" },
                s.cwd
            );
            let _ = writeln!(
                t,
                "- command running: {}",
                s.running.as_deref().unwrap_or("none")
            );
            if !s.background.is_empty() {
                let _ = writeln!(t, "- background commands: {}", s.background.join(", "));
            }
        }
        None => t.push_str("- shell: not running (the next BashCommand starts one)\n"),
    }
    let o = overview::build(&b.workspace_root);
    let _ = write!(t, "\n## Workspace ({} files)\n{}", o.files_seen, o.tree);
    for (name, body) in &o.guidelines {
        let _ = write!(t, "\n## {name}\n{body}\n");
    }
    t.push_str("\n## Notes\n");
    match memories::latest_for(
        shared.sessions().state_dir(),
        ctx.principal,
        &b.workspace_root,
    ) {
        Some(m) => notes(&mut t, &m),
        None => {
            t.push_str("No task memory was saved for this workspace (ContextSave saves one).\n")
        }
    }
    t
}

fn notes(t: &mut String, m: &Memory) {
    let mut end = m.description.len().min(MAX_NOTE_BYTES);
    while !m.description.is_char_boundary(end) {
        end -= 1;
    }
    let _ = writeln!(
        t,
        "Latest task memory {:?} (project {}, saved_at_unix_ms {}):\n{}{}",
        m.id,
        m.project_root,
        m.saved_at_unix_ms,
        &m.description[..end],
        if end < m.description.len() {
            " …(truncated)"
        } else {
            ""
        }
    );
    if !m.files.is_empty() {
        let names: Vec<&str> = m
            .files
            .iter()
            .take(MAX_NOTE_FILES)
            .map(|(p, _, _)| p.as_str())
            .collect();
        let _ = writeln!(t, "Files saved with it: {}", names.join(", "));
    }
    let _ = writeln!(
        t,
        "Resume it with Initialize task_id_to_resume={:?} to get the saved files' contents.",
        m.id
    );
}
