//! Typed tool errors, mapped to the envelope's `status`/`errorCode` in one place.

use super::envelope::{Envelope, NextAction, Status, ToolOutput};
use serde_json::{Value, json};

/// A recoverable failure of a tool call. Each becomes an `isError: true` tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// Arguments do not match the tool's input schema.
    InvalidInput { detail: String },
    /// No tool by that name exists.
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    /// The tool exists but the caller's policy hides it.
    PolicyBlocked { tool: String },
    /// The call carries no usable session binding.
    NeedsInitialize {
        reason: String,
        workspace_root: Option<String>,
    },
    /// `thread_id` and `workspace_root` name different sessions.
    BindingConflict {
        thread_id: String,
        bound_workspace: String,
        supplied_workspace: String,
    },
    /// A session's workspace cannot be repointed in place.
    WorkspaceChangeRequiresNewSession {
        thread_id: String,
        bound_workspace: String,
        requested_workspace: String,
    },
    /// The workspace path does not exist or is not a directory.
    WorkspaceInvalid { path: String, detail: String },
    /// The state store failed; nothing was changed.
    StoreUnavailable { detail: String },
}

struct Mapping {
    status: Status,
    code: &'static str,
    retryable: bool,
    retry_same_call: bool,
}

impl ToolError {
    fn mapping(&self) -> Mapping {
        let m = |status, code, retryable, retry_same_call| Mapping {
            status,
            code,
            retryable,
            retry_same_call,
        };
        match self {
            ToolError::InvalidInput { .. } => {
                m(Status::InvalidInput, "invalid_tool_input", true, false)
            }
            ToolError::UnknownTool { .. } => m(Status::InvalidInput, "unknown_tool", false, false),
            ToolError::PolicyBlocked { .. } => {
                m(Status::PolicyBlocked, "policy_blocked", false, false)
            }
            ToolError::NeedsInitialize { .. } => {
                m(Status::NeedsInitialize, "needs_initialize", true, false)
            }
            ToolError::BindingConflict { .. } => {
                m(Status::Conflict, "session_binding_conflict", true, false)
            }
            ToolError::WorkspaceChangeRequiresNewSession { .. } => m(
                Status::Conflict,
                "workspace_change_requires_new_session",
                false,
                false,
            ),
            ToolError::WorkspaceInvalid { .. } => {
                m(Status::InvalidInput, "workspace_invalid", true, false)
            }
            ToolError::StoreUnavailable { .. } => {
                m(Status::Failed, "state_store_unavailable", true, true)
            }
        }
    }

    pub fn error_code(&self) -> &'static str {
        self.mapping().code
    }

    pub fn message(&self) -> String {
        match self {
            ToolError::InvalidInput { detail } => format!("invalid arguments: {detail}"),
            ToolError::UnknownTool { name, available } => format!(
                "unknown tool {name:?}; available tools: {}",
                available.join(", ")
            ),
            ToolError::PolicyBlocked { tool } => {
                format!("tool {tool} is not permitted by this server's tool policy")
            }
            ToolError::NeedsInitialize { reason, .. } => {
                format!("no initialized session for this call: {reason}")
            }
            ToolError::BindingConflict {
                thread_id,
                bound_workspace,
                supplied_workspace,
            } => format!(
                "thread_id {thread_id} is bound to {bound_workspace}, not {supplied_workspace}; \
                 copy both values returned by Initialize unchanged"
            ),
            ToolError::WorkspaceChangeRequiresNewSession {
                thread_id,
                bound_workspace,
                requested_workspace,
            } => format!(
                "session {thread_id} is bound to {bound_workspace}; a session is never repointed \
                 to {requested_workspace}. Start a new session for that project with \
                 Initialize first_call, or keep using the bound pair"
            ),
            ToolError::WorkspaceInvalid { path, detail } => {
                format!("workspace {path:?} cannot be used: {detail}")
            }
            ToolError::StoreUnavailable { detail } => {
                format!("the state store failed and nothing was changed: {detail}")
            }
        }
    }

    fn next_action(&self) -> Option<NextAction> {
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
            _ => None,
        }
    }

    /// The finished tool result for this error.
    pub fn into_output(self, tool: &str) -> ToolOutput {
        let m = self.mapping();
        let message = self.message();
        let data = match &self {
            ToolError::UnknownTool { available, .. } => json!({"available_tools": available}),
            _ => json!({}),
        };
        let envelope = Envelope {
            status: m.status,
            tool: tool.to_string(),
            message: message.clone(),
            error_code: Some(m.code),
            retryable: m.retryable,
            retry_same_call: m.retry_same_call,
            next_action: self.next_action(),
            required_reads: Vec::new(),
            data,
        };
        let mut text = format!("Error ({}): {message}", m.code);
        if let Some(next) = &envelope.next_action {
            text.push_str(&format!("\nNext: {} {}", next.tool, next.arguments));
        }
        ToolOutput { text, envelope }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_initialize_points_at_first_call() {
        let out = ToolError::NeedsInitialize {
            reason: "missing thread_id".into(),
            workspace_root: Some("/w".into()),
        }
        .into_output("ReadFiles");
        let e = &out.envelope;
        assert_eq!(e.status, Status::NeedsInitialize);
        assert_eq!(e.error_code, Some("needs_initialize"));
        let next = e.next_action.as_ref().unwrap();
        assert_eq!(next.tool, "Initialize");
        assert_eq!(next.arguments["workspace_root"], "/w");
        assert!(out.to_result()["isError"].as_bool().unwrap());
    }

    #[test]
    fn conflict_names_the_bound_pair() {
        let out = ToolError::BindingConflict {
            thread_id: "ws_a_1".into(),
            bound_workspace: "/a".into(),
            supplied_workspace: "/b".into(),
        }
        .into_output("Initialize");
        assert_eq!(out.envelope.status, Status::Conflict);
        assert_eq!(
            out.envelope.next_action.unwrap().arguments["workspace_root"],
            "/a"
        );
    }
}
