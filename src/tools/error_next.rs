//! Next actions of tool errors: the call that recovers from each refusal that has one
//! (`ToolError::next_action`), and the `Fix` a refused history action carries (the same
//! tool with a corrected `action`, completed with the caller's pair by `with_call`).
//! Codes without a next action say why in `error_next_tests.rs`.

use super::{SessionPair, ToolError};
use crate::tools::envelope::NextAction;
use serde_json::{Value, json};

/// The call to make instead of a refused history action: the same tool with `action`,
/// and the caller's own `thread_id` + `workspace_root` once `ToolError::with_call` has
/// copied them from the refused call.
#[derive(Debug, Clone, PartialEq)]
pub struct Fix {
    pub instruction: String,
    pub action: Value,
    pub pair: Option<SessionPair>,
}

impl Fix {
    pub fn boxed(instruction: impl Into<String>, action: Value) -> Box<Fix> {
        Box::new(Fix {
            instruction: instruction.into(),
            action,
            pair: None,
        })
    }
}

impl ToolError {
    pub(super) fn next_action(&self) -> Option<NextAction> {
        let first_call = |ws: Option<&str>, instruction: &str| {
            let mut args = json!({"type": "first_call"});
            if let Some(ws) = ws {
                args["workspace_root"] = Value::String(ws.to_string());
            }
            Some(NextAction {
                tool: "Initialize".into(),
                instruction: instruction.into(),
                arguments: args,
            })
        };
        match self {
            ToolError::NeedsInitialize { workspace_root, .. } => first_call(
                workspace_root.as_deref(),
                "Call Initialize first, then pass the returned thread_id and workspace_root on every call.",
            ),
            ToolError::BindingConflict {
                thread_id,
                bound_workspace,
                ..
            } => Some(NextAction {
                tool: "Initialize".into(),
                instruction: "Use the pair Initialize returned; this status call confirms it."
                    .into(),
                arguments: json!({"type": "status", "thread_id": thread_id, "workspace_root": bound_workspace}),
            }),
            ToolError::WorkspaceChangeRequiresNewSession {
                requested_workspace,
                ..
            } => first_call(
                Some(requested_workspace),
                "Start a separate session for the other project and use its returned pair.",
            ),
            ToolError::CommandAlreadyRunning { pair, .. } => Some(NextAction {
                tool: "BashCommand".into(),
                instruction: "Check the running command before starting another.".into(),
                arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                                  "action_json": {"status_check": true}}),
            }),
            ToolError::ShellUnavailable { pair, .. } | ToolError::Runtime { pair, .. } => {
                Some(NextAction {
                    tool: "Initialize".into(),
                    instruction: "Reset the shell, then retry.".into(),
                    arguments: json!({"type": "reset_shell", "thread_id": pair.thread_id,
                                  "workspace_root": pair.workspace_root}),
                })
            }
            ToolError::TaskOutcomeUnknown {
                pair: Some(pair), ..
            } => Some(NextAction {
                tool: "BashCommand".into(),
                instruction: "Check the command's state and output in the session itself.".into(),
                arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                                  "action_json": {"status_check": true}}),
            }),
            ToolError::MapCursor { retry, .. } => Some(NextAction {
                tool: "CodeMap".into(),
                instruction: "Map again from the first page.".into(),
                arguments: retry.clone(),
            }),
            ToolError::WaitPolicyIncompatible { corrected } => Some(NextAction {
                tool: "BashCommand".into(),
                instruction: "Retry with wait_policy return_early.".into(),
                arguments: corrected.clone(),
            }),
            ToolError::WorkspaceAlreadyBound {
                thread_id,
                bound_workspace,
                ..
            } => Some(NextAction {
                tool: "Initialize".into(),
                instruction: "Keep this thread on its bound workspace (this status call \
                              confirms the pair); another project needs another thread_id."
                    .into(),
                arguments: json!({"type": "status", "thread_id": thread_id,
                                  "workspace_root": bound_workspace}),
            }),
            ToolError::Temporary(r) => r.next.clone(),
            _ => None,
        }
    }

    /// The refused history action's `Fix`, if it has one.
    pub(super) fn fix(&self) -> Option<&Fix> {
        match self {
            ToolError::InvalidAction { fix, .. } => Some(fix),
            ToolError::InvalidCursor { fix, .. } | ToolError::ExecutionNotFound { fix, .. } => {
                fix.as_deref()
            }
            _ => None,
        }
    }

    /// Copy the caller's `thread_id` and `workspace_root` (as given, strings only) into
    /// this error's `Fix`, so its next action is a complete call.
    pub fn with_call(mut self, call: &serde_json::Map<String, Value>) -> ToolError {
        let given = |k: &str| call.get(k).and_then(Value::as_str).map(str::to_string);
        let pair = match (given("thread_id"), given("workspace_root")) {
            (Some(thread_id), Some(workspace_root)) => SessionPair {
                thread_id,
                workspace_root,
            },
            _ => return self,
        };
        match &mut self {
            ToolError::InvalidAction { fix, .. } => fix.pair = Some(pair),
            ToolError::InvalidCursor { fix: Some(fix), .. }
            | ToolError::ExecutionNotFound { fix: Some(fix), .. } => fix.pair = Some(pair),
            _ => {}
        }
        self
    }
}

#[cfg(test)]
#[path = "error_next_tests.rs"]
mod tests;
