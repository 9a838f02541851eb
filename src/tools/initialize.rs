//! The `Initialize` tool: binds a conversation to a workspace session (seed 003,
//! "Workspace session coherence", "Session affinity", "Attach-or-create").

use super::ToolContext;
use super::args::Args;
use super::envelope::{Envelope, ToolOutput};
use super::error::SessionPair;
use super::error::ToolError;
use crate::runtime::session_key;
use crate::session::{
    Attached, Binding, Mode, SessionChoice, SessionError, SessionService, ids, overview,
};
use crate::tools::name::ToolName;
use crate::usage::Phase;
use crate::wire::guardian::{Labels, Snapshot};
use serde_json::{Map, Value, json};

const FIELDS: &[&str] = &[
    "type",
    "workspace_root",
    "thread_id",
    "mode",
    "allowed_commands",
    "allowed_globs",
    "task_id_to_resume",
];
const TYPES: &[&str] = &[
    "first_call",
    "status",
    "user_asked_mode_change",
    "reset_shell",
    "user_asked_change_workspace",
];
const MODES: &[&str] = &["wcgw", "architect", "code_writer"];
const TOOL: ToolName = ToolName::Initialize;

/// Parsed arguments.
struct InitArgs<'a> {
    kind: &'a str,
    workspace_root: Option<&'a str>,
    thread_id: Option<&'a str>,
    mode: Option<Mode>,
    task_id_to_resume: Option<&'a str>,
}

fn parse(map: &Map<String, Value>) -> Result<InitArgs<'_>, ToolError> {
    let a = Args::strict(map, FIELDS)?;
    let kind = a
        .opt_enum("type", TYPES)?
        .ok_or_else(|| ToolError::InvalidInput {
            detail: format!("missing required field type (one of {})", TYPES.join(", ")),
        })?;
    let commands = a.opt_str_list("allowed_commands")?;
    let globs = a.opt_str_list("allowed_globs")?;
    let mode = match a.opt_enum("mode", MODES)? {
        None => None,
        Some("wcgw") => Some(Mode::Wcgw),
        Some("architect") => Some(Mode::Architect),
        Some(_) => Some(code_writer(commands.clone(), globs.clone())?),
    };
    if !matches!(mode, Some(Mode::CodeWriter { .. })) && (commands.is_some() || globs.is_some()) {
        return Err(ToolError::InvalidInput {
            detail: "allowed_commands and allowed_globs apply only to mode=code_writer".into(),
        });
    }
    Ok(InitArgs {
        kind,
        workspace_root: a
            .opt_str("workspace_root")?
            .filter(|s| !s.trim().is_empty()),
        thread_id: a.opt_str("thread_id")?.filter(|s| !s.trim().is_empty()),
        mode,
        task_id_to_resume: a
            .opt_str("task_id_to_resume")?
            .filter(|s| !s.trim().is_empty()),
    })
}

/// code_writer needs both allowlists, explicitly: there is no silent default policy.
fn code_writer(
    commands: Option<Vec<String>>,
    globs: Option<Vec<String>>,
) -> Result<Mode, ToolError> {
    let need = |v: Option<Vec<String>>, field: &str| match v {
        Some(v) if !v.is_empty() && v.iter().all(|s| !s.trim().is_empty()) => Ok(v),
        _ => Err(ToolError::InvalidInput {
            detail: format!(
                "mode=code_writer requires a non-empty {field} list of non-empty strings (use [\"all\"] for no restriction)"
            ),
        }),
    };
    Ok(Mode::CodeWriter {
        allowed_commands: need(commands, "allowed_commands")?,
        allowed_globs: need(globs, "allowed_globs")?,
    })
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = parse(map)?;
    // Load a saved task first: an unknown id fails before any session is touched.
    let resumed = match args.task_id_to_resume {
        Some(id) => Some((id, super::files::context::load(ctx, id)?)),
        None => None,
    };
    let resume_in = resumed
        .as_ref()
        .map(|(id, m)| (*id, m.project_root.as_str()));
    let mut out = dispatch_type(ctx, &args, resume_in)?;
    // Every successful type reports the Herdr hint: presence only (seed 000).
    out.envelope.data["agent_backends"] = ctx.herdr.hint();
    if let Some((id, memory)) = resumed {
        out.text.push_str(&super::files::context::render(&memory));
        out.envelope.data["resumed_task"] = json!(id);
    }
    Ok(out)
}

/// `resume_in`: the task being resumed and the project it was saved in.
fn dispatch_type(
    ctx: &ToolContext,
    args: &InitArgs,
    resume_in: Option<(&str, &str)>,
) -> Result<ToolOutput, ToolError> {
    match args.kind {
        "first_call" => {
            // A restarted adapter finishes interrupted multi-file commits before the agent
            // reads anything.
            super::files::edits::recover_interrupted_commits(ctx);
            first_call(ctx, args, resume_in)
        }
        "status" => {
            let (b, recovered) = verify(ctx, args)?;
            attached(ctx, &b, "status", recovered, false)
        }
        "user_asked_mode_change" => {
            let Some(mode) = args.mode.clone() else {
                return Err(ToolError::InvalidInput {
                    detail: "user_asked_mode_change requires mode".into(),
                });
            };
            let (b, recovered) = verify(ctx, args)?;
            let b = ctx.sessions.set_mode(ctx.principal, &b, mode)?;
            attached(ctx, &b, "mode_changed", recovered, false)
        }
        "reset_shell" => {
            let (b, recovered) = verify(ctx, args)?;
            ctx.sessions.reset(ctx.principal, &b)?;
            attached(ctx, &b, "reset", recovered, true)
        }
        _ => change_workspace(ctx, args),
    }
}

fn verify(ctx: &ToolContext, args: &InitArgs) -> Result<(Binding, bool), ToolError> {
    let _admission = ctx.trace.phase(Phase::SessionAdmission);
    let verified = ctx
        .sessions
        .verify(ctx.principal, args.thread_id, args.workspace_root)?;
    super::workspace_permitted(ctx, &verified.0.workspace_root)?;
    Ok(verified)
}

fn first_call(
    ctx: &ToolContext,
    args: &InitArgs,
    resume_in: Option<(&str, &str)>,
) -> Result<ToolOutput, ToolError> {
    let validation = ctx.trace.phase(Phase::WorkspaceValidation);
    let workspace = match (args.workspace_root, resume_in) {
        (Some(ws), _) => {
            ids::canonical_workspace(ws).map_err(|detail| ToolError::WorkspaceInvalid {
                path: ws.into(),
                detail,
            })?
        }
        // Resuming without a workspace is keyed by the saved task: its project when that
        // still exists, else a scratch directory of that task.
        (None, Some((id, project))) => match ids::canonical_workspace(project) {
            Ok(dir) => dir,
            Err(_) => ctx.sessions.scratch_workspace_for_task(ctx.principal, id)?,
        },
        (None, None) => ctx.sessions.scratch_workspace(ctx.principal)?,
    };
    super::workspace_permitted(ctx, &workspace)?;
    drop(validation);
    let admission = ctx.trace.phase(Phase::SessionAdmission);
    let choice = SessionChoice {
        affinity: ctx.affinity,
        conversation: ctx.conversation,
        supplied_thread_id: args.thread_id,
    };
    let thread_id = SessionService::choose_thread_id(ctx.principal, &workspace, &choice);
    let Attached {
        binding,
        existed,
        recovered,
        mode_changed,
    } = ctx
        .sessions
        .attach_or_create(ctx.principal, &workspace, &thread_id, args.mode.clone())?;
    drop(admission);
    let transition = if existed {
        "attached_existing"
    } else {
        "created"
    };
    let shell = ensure_shell(ctx, &binding, false)?;
    let mut out = answer(ctx, &binding, transition, recovered, !existed, &shell);
    out.envelope.data["mode_changed"] = json!(mode_changed);
    Ok(out)
}

/// A remote project change never repoints a session: same workspace is a status call,
/// another one fails closed.
fn change_workspace(ctx: &ToolContext, args: &InitArgs) -> Result<ToolOutput, ToolError> {
    let Some(thread_id) = args.thread_id else {
        return Err(ToolError::NeedsInitialize {
            reason: "thread_id is missing".into(),
            workspace_root: args.workspace_root.map(str::to_string),
        });
    };
    let Some(requested) = args.workspace_root else {
        return Err(ToolError::InvalidInput {
            detail: "user_asked_change_workspace requires workspace_root (the new project)".into(),
        });
    };
    let requested =
        ids::canonical_workspace(requested).map_err(|detail| ToolError::WorkspaceInvalid {
            path: requested.into(),
            detail,
        })?;
    match ctx.sessions.verify(
        ctx.principal,
        Some(thread_id),
        Some(&requested.to_string_lossy()),
    ) {
        Ok((b, recovered)) => attached(ctx, &b, "status", recovered, false),
        Err(SessionError::BindingConflict {
            thread_id,
            bound_workspace,
            supplied_workspace,
        }) => Err(ToolError::WorkspaceChangeRequiresNewSession {
            thread_id,
            bound_workspace,
            requested_workspace: supplied_workspace,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Build the answer. `full` adds the workspace overview and guidelines; repeated calls
/// for a known session answer compactly.
/// Attach (or reset) the shell of an already verified session and answer compactly.
fn attached(
    ctx: &ToolContext,
    b: &Binding,
    transition: &str,
    recovered: bool,
    reset: bool,
) -> Result<ToolOutput, ToolError> {
    let shell = ensure_shell(ctx, b, reset)?;
    Ok(answer(
        ctx,
        b,
        transition,
        recovered || shell.created,
        false,
        &shell,
    ))
}

/// The session's shell as Initialize reports it.
struct ShellInfo {
    snapshot: Snapshot,
    /// A new shell was started for this call.
    created: bool,
}

/// Attach to the session's shell, starting one if none is live; `reset` replaces a live one.
fn ensure_shell(ctx: &ToolContext, b: &Binding, reset: bool) -> Result<ShellInfo, ToolError> {
    let key = session_key(ctx.principal, &b.thread_id);
    let unavailable = |e| {
        ToolError::runtime(
            e,
            SessionPair {
                thread_id: b.thread_id.clone(),
                workspace_root: b.workspace_str(),
            },
        )
    };
    let labels = Labels {
        thread_id: b.thread_id.clone(),
        principal: ctx.principal.to_string(),
        workspace: b.workspace_str(),
    };
    let _inspecting = ctx.trace.phase(Phase::RuntimeInspection);
    let e = ctx
        .runtime
        .ensure(&key, &b.workspace_root, labels)
        .map_err(unavailable)?;
    if reset && !e.created {
        let snapshot = ctx.runtime.reset(&e.client).map_err(unavailable)?;
        return Ok(ShellInfo {
            snapshot,
            created: false,
        });
    }
    Ok(ShellInfo {
        snapshot: e.snapshot,
        created: e.created,
    })
}

fn answer(
    ctx: &ToolContext,
    b: &Binding,
    transition: &str,
    recovered: bool,
    full: bool,
    shell: &ShellInfo,
) -> ToolOutput {
    let ws = b.workspace_str();
    let mut text = format!(
        "Session {transition}.\nthread_id: {}\nworkspace_root: {ws}\nmode: {}\n\
         Pass thread_id and workspace_root unchanged on every later call.\n",
        b.thread_id,
        b.mode.describe()
    );
    if recovered {
        text.push_str("This adapter had no live state for the session; it was recovered from the state store.\n");
    }
    let mut data = json!({
        "thread_id": b.thread_id,
        "workspace_root": ws,
        "transition": transition,
        "mode": b.mode,
        "response_mode": if full { "full" } else { "compact" },
        "initialize_recovered_missing_session": recovered,
        "created_at_unix_ms": b.created_at_ms,
        "tools": ctx.policy.served().map(|t| t.as_str()).collect::<Vec<_>>(),
        "shell": {
            "pid": shell.snapshot.shell_pid,
            "alive": shell.snapshot.shell_alive,
            "cwd": shell.snapshot.cwd,
            "running": shell.snapshot.running,
            "background": shell.snapshot.background,
            "started_now": shell.created,
        },
    });
    // First calls also prune the workspace's stale session directories (24 h).
    let first = matches!(transition, "created" | "attached_existing");
    let (temporary, line) = super::temporary::initialize(ctx, b, first);
    data["temporary"] = temporary;
    data["temp_dir"] = data["temporary"]["dir"].clone();
    text.push_str(&line);
    text.push_str(&format!(
        "shell: pid {}, cwd {}{}\n",
        shell.snapshot.shell_pid,
        shell.snapshot.cwd,
        match &shell.snapshot.running {
            Some(id) => format!(", command {id} still running"),
            None => String::new(),
        }
    ));
    if full {
        let o = overview::build(&b.workspace_root);
        text.push_str(&format!(
            "\n# Workspace ({} files)\n{}",
            o.files_seen, o.tree
        ));
        for (name, body) in &o.guidelines {
            text.push_str(&format!("\n# {name}\n{body}\n"));
        }
        if let Some(extra) = ctx.extra_instructions {
            text.push_str(&format!("\n# Server instructions\n{extra}\n"));
        }
        data["files_in_overview"] = json!(o.files_seen);
        data["guidelines"] = json!(o.guidelines.iter().map(|(n, _)| n).collect::<Vec<_>>());
    } else if transition == "attached_existing" {
        text.push_str(
            "Attached to the existing session; workspace overview unchanged and not repeated.\n",
        );
    }
    let message = format!("Initialize {transition}: {}", b.thread_id);
    ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(TOOL, message, data),
    }
}
