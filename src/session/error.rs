//! Why a session could not be bound or verified. The tools layer converts these into its
//! agent-facing `ToolError` (`From` in `tools/error.rs`); nothing here knows about tools.

/// A failure of the session service; each variant carries what the agent needs to recover.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionError {
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
    /// A caller-owned thread ID is already bound to another workspace.
    WorkspaceAlreadyBound {
        thread_id: String,
        bound_workspace: String,
        requested_workspace: String,
    },
    /// The workspace path does not exist or is not a directory.
    WorkspaceInvalid { path: String, detail: String },
    /// The state store failed; nothing was changed.
    StoreUnavailable { detail: String },
}
