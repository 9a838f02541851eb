//! `SessionError` (the session layer's own errors) as tool errors.

use super::ToolError;

impl From<crate::session::SessionError> for ToolError {
    fn from(e: crate::session::SessionError) -> ToolError {
        use crate::session::SessionError as S;
        match e {
            S::NeedsInitialize {
                reason,
                workspace_root,
            } => ToolError::NeedsInitialize {
                reason,
                workspace_root,
            },
            S::BindingConflict {
                thread_id,
                bound_workspace,
                supplied_workspace,
            } => ToolError::BindingConflict {
                thread_id,
                bound_workspace,
                supplied_workspace,
            },
            S::WorkspaceAlreadyBound {
                thread_id,
                bound_workspace,
                requested_workspace,
            } => ToolError::WorkspaceAlreadyBound {
                thread_id,
                bound_workspace,
                requested_workspace,
            },
            S::WorkspaceInvalid { path, detail } => ToolError::WorkspaceInvalid { path, detail },
            S::StoreUnavailable { detail } => ToolError::StoreUnavailable { detail },
        }
    }
}
