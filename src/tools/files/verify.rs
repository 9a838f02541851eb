//! `verify_command` of the edit tools and the `VerifyEdit` tool: the check runs as a
//! foreground command through the session's guardian under the mode policy; a failing check
//! keeps the committed edit and points at `VerifyEdit`.

use crate::runtime::session_key;
use crate::session::Binding;
use crate::tools::ToolContext;
use crate::tools::args::Args;
use crate::tools::envelope::{Envelope, NextAction, Status, ToolOutput};
use crate::tools::error::{SessionPair, ToolError, mark};
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use crate::wire::guardian::{ProcessStatus, Request, Response, Wait};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Default and maximum wait of `verify_command` (seed 003).
pub const VERIFY_DEFAULT_SECONDS: f64 = 15.0;
pub const VERIFY_MAX_SECONDS: f64 = crate::tools::bash::action::MAX_WAIT_SECONDS;

/// A check to run after an edit.
pub struct Verify {
    pub command: String,
    pub seconds: f64,
}

/// `verify_command` and `verify_wait_for_seconds`, shared by the edit tools.
pub fn verify_args(map: &Map<String, Value>) -> Result<Option<Verify>, ToolError> {
    let a = Args { map };
    let Some(command) = a
        .opt_str("verify_command")?
        .filter(|c| !c.trim().is_empty())
    else {
        return Ok(None);
    };
    let seconds = match map.get("verify_wait_for_seconds") {
        None | Some(Value::Null) => VERIFY_DEFAULT_SECONDS,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| ToolError::InvalidInput {
                detail: "verify_wait_for_seconds must be a number 0..=50".into(),
            })?,
    };
    Ok(Some(Verify {
        command: command.to_string(),
        seconds,
    }))
}

/// Run the check as a foreground command; a failing check keeps the committed edit.
pub fn verify_after(
    ctx: &ToolContext,
    binding: &Binding,
    pair: &SessionPair,
    v: &Verify,
    text: &mut String,
    env: &mut Envelope,
) {
    let key = session_key(ctx.principal, &binding.thread_id);
    let wait = Duration::from_secs_f64(v.seconds.clamp(0.0, VERIFY_MAX_SECONDS));
    let req = Request::Run {
        command: v.command.clone(),
        background: false,
        wait: Wait {
            timeout_ms: wait.as_millis() as u64,
            settle_ms: None,
        },
        scope: Some(crate::tools::bash::record::scope(ctx, pair)),
        expect: None,
    };
    let outcome = match ctx.runtime.attach(&key) {
        Some(e) => {
            let resp = e.client.call(&req, wait).map_err(|e| e.to_string());
            if let Ok(Response::Action(r)) = &resp {
                crate::tools::bash::record::admitted(ctx, pair, &key, &e, &v.command, r);
            }
            resp
        }
        None => Err("no live shell for this session; reset it with Initialize reset_shell".into()),
    };
    let rerun = NextAction {
        tool: "VerifyEdit".into(),
        instruction: "Rerun only the check after corrective changes.".into(),
        arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                          "verify_command": v.command, "verify_wait_for_seconds": v.seconds}),
    };
    match outcome {
        Ok(Response::Action(r)) => {
            let shown = crate::tools::bash::render::action(ctx, &key, pair, "verify", r.clone());
            text.push_str("\n# verify_command\n");
            text.push_str(&shown.text);
            env.data["verification"] = shown.envelope.data.clone();
            match (r.state.process_status, r.state.exit_code) {
                (ProcessStatus::Exited, Some(0)) => {}
                (ProcessStatus::Running, _) => {
                    env.status = Status::Running;
                    env.next_action = shown.envelope.next_action;
                }
                _ => {
                    mark(
                        env,
                        Status::CompletedWithIssues,
                        ErrorCode::VerificationFailed,
                    );
                    env.message = format!(
                        "{}; verification failed (exit {:?})",
                        env.message, r.state.exit_code
                    );
                    env.next_action = Some(rerun);
                }
            }
        }
        Ok(Response::Error(e)) => {
            mark(
                env,
                Status::CompletedWithIssues,
                ErrorCode::VerificationFailed,
            );
            env.message = format!("{}; verification could not run: {e:?}", env.message);
            env.next_action = Some(rerun);
        }
        Ok(_) | Err(_) => {
            mark(
                env,
                Status::CompletedWithIssues,
                ErrorCode::VerificationFailed,
            );
            env.message = format!("{}; verification could not run", env.message);
            env.next_action = Some(rerun);
        }
    }
}

/// `VerifyEdit`: rerun only the check of an earlier edit.
pub fn verify_edit(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (_, binding) = crate::tools::session_args(
        ctx,
        map,
        &[
            "thread_id",
            "workspace_root",
            "verify_command",
            "verify_wait_for_seconds",
        ],
    )?;
    let Some(v): Option<Verify> = verify_args(map)? else {
        return Err(ToolError::InvalidInput {
            detail: "verify_command is required".into(),
        });
    };
    let act = crate::tools::bash::action::Action::Command {
        command: v.command.clone(),
        background: false,
    };
    crate::tools::bash::enforce_mode(&binding, &act, false)?;
    let pair = SessionPair {
        thread_id: binding.thread_id.clone(),
        workspace_root: binding.workspace_str(),
    };
    crate::tools::temporary::before_verify(ctx, &binding, &pair, &v.command)?;
    let mut text = String::new();
    let mut env = Envelope::completed(ToolName::VerifyEdit, "VerifyEdit: check passed", json!({}));
    verify_after(ctx, &binding, &pair, &v, &mut text, &mut env);
    if env.error_code == Some(ErrorCode::VerificationFailed) {
        env.message = "VerifyEdit: check failed".into();
    }
    Ok(ToolOutput {
        images: Vec::new(),
        text,
        envelope: env,
    })
}
