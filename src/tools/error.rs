//! Typed tool errors, mapped to the envelope's `status`/`errorCode` in one place.

use super::envelope::{CalledTool, Envelope, NextAction, Status, ToolOutput};
use super::error_code::ErrorCode;
use serde_json::{Value, json};

/// A recoverable failure of a tool call. Each becomes an `isError: true` tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// Arguments do not match the tool's input schema.
    InvalidInput {
        detail: String,
    },
    /// Arguments of a history action (`Execution`, `Agent`) that do not match, with the
    /// action to send instead (the valid range filled in, `list` to find ids, …).
    InvalidAction {
        detail: String,
        fix: Box<Fix>,
    },
    /// No tool by that name exists.
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    /// The tool exists but the caller's policy hides it.
    PolicyBlocked {
        tool: String,
    },
    /// An argument would start a process through a tool the caller's policy hides
    /// (`verify_command` needs `BashCommand`); refused before anything is changed.
    ArgumentNeedsTool {
        argument: &'static str,
        needs: &'static str,
    },
    /// The workspace lies where this principal may not bind one (outside its
    /// `workspace_roots`, or inside the server's private state).
    WorkspaceNotPermitted {
        path: String,
        reason: String,
    },
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
    /// A caller-owned thread ID (thread affinity) is already bound to another workspace.
    WorkspaceAlreadyBound {
        thread_id: String,
        bound_workspace: String,
        requested_workspace: String,
    },
    /// The workspace path does not exist or is not a directory.
    WorkspaceInvalid {
        path: String,
        detail: String,
    },
    /// The state store failed; nothing was changed.
    StoreUnavailable {
        detail: String,
    },
    /// A foreground command is still running in this session.
    CommandAlreadyRunning {
        execution_id: String,
        elapsed_ms: u64,
        pair: SessionPair,
    },
    /// The session's shell or guardian is gone; a reset starts a new one.
    ShellUnavailable {
        detail: String,
        pair: SessionPair,
    },
    /// The adapter could not get the session's processes (winxd, guardian, shell) to
    /// serve it; the typed cause (a quota's limit, a failed start step, a deadline) is
    /// the result's `data.cause`. Built by `ToolError::runtime`.
    Runtime {
        error: crate::wire::error::RuntimeError,
        pair: SessionPair,
    },
    /// The session's mode forbids the command; it was not run.
    CommandDenied {
        reason: String,
    },
    /// `until_complete` was asked for an action that is not a foreground command.
    WaitPolicyIncompatible {
        corrected: Value,
    },
    NoSuchBackgroundCommand {
        bg_id: String,
    },
    BackgroundLimit {
        limit: usize,
    },
    /// A file tool met a FIFO, socket, device (or a symlink that does not resolve) where
    /// it needs a regular file; nothing was opened for I/O, nothing waited on it.
    NotRegularFile {
        path: String,
        kind: crate::files::beneath::FileKind,
    },
    /// No execution by that id in the caller's scope (another scope's ids look the same).
    ExecutionNotFound {
        execution_id: String,
        /// `list`, to find the ids this scope has.
        fix: Option<Box<Fix>>,
    },
    /// A cursor that is forged, truncated, from another scope, execution or source; `fix`
    /// is the same request without it.
    InvalidCursor {
        detail: String,
        fix: Option<Box<Fix>>,
    },
    /// The history catalog could not be read or brought up to date within the budget.
    HistoryUnavailable {
        detail: String,
    },
    /// A task's work was interrupted by an adapter restart and its end was not observed.
    TaskOutcomeUnknown {
        detail: String,
        pair: Option<SessionPair>,
    },
    /// A CodeMap path outside the allowed roots (a symlink out of them included),
    /// missing, or neither a regular file nor a directory; `code` says which.
    PathUnusable {
        path: String,
        code: ErrorCode,
        detail: String,
    },
    /// A repository-map cursor from another snapshot of the tree (`stale`), or not a
    /// CodeMap cursor at all; `retry` is the same call without it.
    MapCursor {
        stale: bool,
        snapshot_hash: Option<String>,
        retry: Value,
    },
    /// An `Agent` failure (a Herdr adapter fault, native prompts unavailable, a prompt the
    /// session may not send); `tools::agent` chooses the code, status and data.
    Agent {
        code: ErrorCode,
        status: Status,
        retryable: bool,
        message: String,
        data: Value,
    },
    /// A refusal about the managed temporary directory; `tools::temporary` chooses every
    /// field.
    Temporary(Box<super::refusal::Refusal>),
}

/// The `thread_id` + `workspace_root` pair, for next actions that must carry it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPair {
    pub thread_id: String,
    pub workspace_root: String,
}

/// Suggested pause before polling a running command again.
pub const RETRY_AFTER_MS: u64 = 2_000;

struct Mapping {
    status: Status,
    code: ErrorCode,
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
            ToolError::InvalidInput { .. } | ToolError::InvalidAction { .. } => m(
                Status::InvalidInput,
                ErrorCode::InvalidToolInput,
                true,
                false,
            ),
            ToolError::UnknownTool { .. } => {
                m(Status::InvalidInput, ErrorCode::UnknownTool, false, false)
            }
            ToolError::PolicyBlocked { .. }
            | ToolError::ArgumentNeedsTool { .. }
            | ToolError::WorkspaceNotPermitted { .. } => m(
                Status::PolicyBlocked,
                ErrorCode::PolicyBlocked,
                false,
                false,
            ),
            ToolError::NeedsInitialize { .. } => m(
                Status::NeedsInitialize,
                ErrorCode::NeedsInitialize,
                true,
                false,
            ),
            ToolError::BindingConflict { .. } => m(
                Status::Conflict,
                ErrorCode::SessionBindingConflict,
                true,
                false,
            ),
            ToolError::WorkspaceChangeRequiresNewSession { .. } => m(
                Status::Conflict,
                ErrorCode::WorkspaceChangeRequiresNewSession,
                false,
                false,
            ),
            ToolError::WorkspaceInvalid { .. } => m(
                Status::InvalidInput,
                ErrorCode::WorkspaceInvalid,
                true,
                false,
            ),
            ToolError::WorkspaceAlreadyBound { .. } => m(
                Status::Conflict,
                ErrorCode::InitializeWorkspaceAlreadyBound,
                false,
                false,
            ),
            ToolError::StoreUnavailable { .. } => {
                m(Status::Failed, ErrorCode::StateStoreUnavailable, true, true)
            }
            ToolError::CommandAlreadyRunning { .. } => m(
                Status::Conflict,
                ErrorCode::CommandAlreadyRunning,
                true,
                false,
            ),
            ToolError::ShellUnavailable { .. } | ToolError::Runtime { .. } => {
                m(Status::Failed, ErrorCode::ShellUnavailable, true, false)
            }
            ToolError::CommandDenied { .. } => m(
                Status::PolicyBlocked,
                ErrorCode::CommandDeniedByMode,
                false,
                false,
            ),
            ToolError::WaitPolicyIncompatible { .. } => m(
                Status::InvalidInput,
                ErrorCode::WaitPolicyIncompatibleWithAction,
                true,
                false,
            ),
            ToolError::NoSuchBackgroundCommand { .. } => m(
                Status::InvalidInput,
                ErrorCode::NoSuchBackgroundCommand,
                false,
                false,
            ),
            ToolError::BackgroundLimit { .. } => {
                m(Status::Failed, ErrorCode::BackgroundLimit, true, false)
            }
            ToolError::TaskOutcomeUnknown { .. } => {
                m(Status::Failed, ErrorCode::TaskOutcomeUnknown, false, false)
            }
            ToolError::NotRegularFile { .. } => m(
                Status::InvalidInput,
                ErrorCode::NotRegularFile,
                false,
                false,
            ),
            ToolError::ExecutionNotFound { .. } => m(
                Status::InvalidInput,
                ErrorCode::ExecutionNotFound,
                false,
                false,
            ),
            ToolError::InvalidCursor { .. } => {
                m(Status::InvalidInput, ErrorCode::InvalidCursor, true, false)
            }
            ToolError::HistoryUnavailable { .. } => {
                m(Status::Failed, ErrorCode::HistoryUnavailable, true, true)
            }
            ToolError::PathUnusable { code, .. } => match code {
                ErrorCode::PathOutsideAllowedRoots => m(Status::PolicyBlocked, *code, false, false),
                ErrorCode::IoError => m(Status::Failed, *code, true, true),
                _ => m(Status::InvalidInput, *code, false, false),
            },
            ToolError::MapCursor { stale, .. } => {
                let code = if *stale {
                    ErrorCode::StaleCursor
                } else {
                    ErrorCode::InvalidCursor
                };
                m(Status::InvalidInput, code, true, false)
            }
            ToolError::Agent {
                code,
                status,
                retryable,
                ..
            } => m(*status, *code, *retryable, false),
            ToolError::Temporary(r) => m(r.status, r.code, r.retryable, false),
        }
    }

    pub fn error_code(&self) -> ErrorCode {
        self.mapping().code
    }

    pub fn message(&self) -> String {
        match self {
            ToolError::InvalidInput { detail } | ToolError::InvalidAction { detail, .. } => {
                format!("invalid arguments: {detail}")
            }
            ToolError::UnknownTool { name, available } => format!(
                "unknown tool {name:?}; available tools: {}",
                available.join(", ")
            ),
            ToolError::PolicyBlocked { tool } => {
                format!("tool {tool} is not permitted by this server's tool policy")
            }
            ToolError::WorkspaceNotPermitted { path, reason } => {
                format!("workspace {path} is not permitted: {reason}")
            }
            ToolError::ArgumentNeedsTool { argument, needs } => format!(
                "{argument} runs a shell command, which needs {needs}; this server's tool \
                 policy does not permit {needs}, so nothing was changed (call again without \
                 {argument})"
            ),
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
            ToolError::WorkspaceAlreadyBound {
                thread_id,
                bound_workspace,
                requested_workspace,
            } => format!(
                "thread_id {thread_id} is bound to {bound_workspace}; it is never repointed to \
                 {requested_workspace}. Keep the bound pair, or start a new conversation (a new \
                 thread_id) for the other project"
            ),
            ToolError::WorkspaceInvalid { path, detail } => {
                format!("workspace {path:?} cannot be used: {detail}")
            }
            ToolError::StoreUnavailable { detail } => {
                format!("the state store failed and nothing was changed: {detail}")
            }
            ToolError::CommandAlreadyRunning {
                execution_id,
                elapsed_ms,
                ..
            } => format!(
                "command {execution_id} is still running ({:.1} s); check it with status_check, \
                 interrupt it with send_specials [\"Ctrl-c\"], or run this in the background",
                *elapsed_ms as f64 / 1000.0
            ),
            ToolError::ShellUnavailable { detail, .. } => {
                format!("the session's shell is not available: {detail}")
            }
            ToolError::Runtime { error, .. } => {
                format!("the session's shell is not available: {error}")
            }
            ToolError::CommandDenied { reason } => {
                format!("command refused by the session mode: {reason}")
            }
            ToolError::WaitPolicyIncompatible { .. } => {
                "wait_policy until_complete applies only to a foreground command".into()
            }
            ToolError::NoSuchBackgroundCommand { bg_id } => {
                format!(
                    "no background command {bg_id:?} in this session (finished ones expire after a few minutes)"
                )
            }
            ToolError::BackgroundLimit { limit } => {
                format!("{limit} background commands are already running in this session")
            }
            ToolError::TaskOutcomeUnknown { detail, .. } => {
                format!("the task's outcome is unknown: {detail}")
            }
            ToolError::ExecutionNotFound { execution_id, .. } => format!(
                "no execution {execution_id:?} in this session's history (ids from another \
                 session or expired records are not found either); list recent ones with \
                 action {{\"type\": \"list\"}}"
            ),
            ToolError::InvalidCursor { detail, .. } => format!(
                "invalid cursor: {detail}; cursors are opaque and valid only for the execution \
                 and source they came from: start again without a cursor"
            ),
            ToolError::HistoryUnavailable { detail } => {
                format!("the execution history is unavailable: {detail}")
            }
            ToolError::PathUnusable { path, detail, .. } => format!("{path}: {detail}"),
            ToolError::Agent { message, .. } => message.clone(),
            ToolError::MapCursor {
                stale: true,
                snapshot_hash,
                ..
            } => format!(
                "the repository map changed since this cursor was made (snapshot now {}): \
                 files were added, removed or edited, or the query differs; start again \
                 without the cursor",
                snapshot_hash.as_deref().unwrap_or("unknown")
            ),
            ToolError::MapCursor { .. } => {
                "invalid cursor: not a CodeMap cursor; start again without it".into()
            }
            ToolError::NotRegularFile { path, kind } => format!(
                "{path} is {}, not a regular file; file tools read and write only regular \
                 files (it was not opened, so nothing could block on it)",
                kind.describe()
            ),
            ToolError::Temporary(r) => r.message.clone(),
        }
    }

    /// The finished tool result for this error, reported as a result of `tool` (a
    /// `ToolName`, or `CalledTool::Unknown` for a name no tool has).
    pub fn into_output(self, tool: impl Into<CalledTool>) -> ToolOutput {
        let tool: CalledTool = tool.into();
        let m = self.mapping();
        let message = self.message();
        let next_action = self.next_action().or_else(|| {
            self.fix().map(|f| {
                let mut arguments = json!({"action": f.action});
                if let Some(p) = &f.pair {
                    arguments["thread_id"] = json!(p.thread_id);
                    arguments["workspace_root"] = json!(p.workspace_root);
                }
                NextAction {
                    tool: tool.as_str().to_string(),
                    instruction: f.instruction.clone(),
                    arguments,
                }
            })
        });
        let data = match &self {
            ToolError::UnknownTool { available, .. } => json!({"available_tools": available}),
            ToolError::ArgumentNeedsTool { argument, needs } => {
                json!({"argument": argument, "required_tool": needs})
            }
            ToolError::CommandAlreadyRunning {
                execution_id,
                elapsed_ms,
                ..
            } => json!({"execution_id": execution_id, "elapsed_ms": elapsed_ms,
                        "retryAfterMs": RETRY_AFTER_MS}),
            ToolError::NotRegularFile { path, kind } => {
                json!({"path": path, "fileType": kind.describe()})
            }
            ToolError::Runtime { error, .. } => json!({"cause": error}),
            ToolError::PathUnusable { path, .. } => json!({"path": path}),
            ToolError::MapCursor { snapshot_hash, .. } => {
                json!({"snapshot_hash": snapshot_hash})
            }
            ToolError::Agent { data, .. } => data.clone(),
            ToolError::Temporary(r) => r.data.clone(),
            _ => json!({}),
        };
        let envelope = Envelope {
            status: m.status,
            tool,
            message: message.clone(),
            error_code: Some(m.code),
            retryable: m.retryable,
            retry_same_call: m.retry_same_call,
            next_action,
            required_reads: Vec::new(),
            data,
        };
        ToolOutput::refusal(envelope)
    }
}

impl ToolError {
    /// The agent-facing error for a runtime failure of the session `pair` names: every
    /// `RuntimeError` is `shell_unavailable` (a reset or retry may help), with its typed
    /// cause in `data.cause` (a quota refusal carries its `limit` and the prune command).
    /// This needs the pair for the reset action, so it is a constructor, not a bare `From`.
    pub fn runtime(error: crate::wire::error::RuntimeError, pair: SessionPair) -> ToolError {
        ToolError::Runtime { error, pair }
    }
}

/// Marks `env` as a tool-specific outcome that is not a `ToolError` (an undo refused, a
/// failed verification, a ReadImage refusal, a partly failed ReadFiles, a shell that
/// exited): with `ToolError::into_output` and `EditFailure::into_output`, the only way an
/// envelope gets an `errorCode` (`tests/it/tidy.rs` checks no other file sets one).
pub fn mark(env: &mut Envelope, status: Status, code: ErrorCode) {
    env.status = status;
    env.error_code = Some(code);
}

#[path = "error_next.rs"]
mod next;
#[path = "error_session.rs"]
mod session;

pub use next::Fix;

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
