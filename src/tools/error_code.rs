//! `ErrorCode`: the closed set of `errorCode` values the server puts in an envelope.
//!
//! Every envelope's `errorCode` is one of these; the shared `outputSchema` lists them all.
//! `ToolError` (in `error.rs`) and `EditFailure` (in `files/edit_error.rs`) choose the code
//! for their failures; the few tool-specific results (`undo_refused`, `verification_failed`,
//! a ReadImage refusal, ...) name a variant here instead of spelling a string.

use serde::Serialize;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// A stable, machine-readable failure class: the envelope's `errorCode`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $text)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order (the schema's `enum`).
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears on the wire (snake_case).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)*
                }
            }
        }
    };
}

error_codes! {
    // Call-level failures, chosen by `ToolError`.
    InvalidToolInput => "invalid_tool_input",
    UnknownTool => "unknown_tool",
    PolicyBlocked => "policy_blocked",
    NeedsInitialize => "needs_initialize",
    SessionBindingConflict => "session_binding_conflict",
    WorkspaceChangeRequiresNewSession => "workspace_change_requires_new_session",
    WorkspaceInvalid => "workspace_invalid",
    InitializeWorkspaceAlreadyBound => "initialize_workspace_already_bound",
    StateStoreUnavailable => "state_store_unavailable",
    CommandAlreadyRunning => "command_already_running",
    ShellUnavailable => "shell_unavailable",
    CommandDeniedByMode => "command_denied_by_mode",
    WaitPolicyIncompatibleWithAction => "wait_policy_incompatible_with_action",
    NoSuchBackgroundCommand => "no_such_background_command",
    BackgroundLimit => "background_limit",
    TaskOutcomeUnknown => "task_outcome_unknown",
    NotRegularFile => "not_regular_file",
    // BashCommand.
    /// The session's shell exited; a reset starts a new one.
    ShellExited => "shell_exited",
    // Execution history.
    ExecutionNotFound => "execution_not_found",
    InvalidCursor => "invalid_cursor",
    HistoryUnavailable => "history_unavailable",
    /// Some `observe` items failed; the others are in the same result.
    ExecutionObservationIssues => "execution_observation_issues",
    // Agent.
    /// Native prompt receipts are not in this build; nothing was sent.
    AgentPromptUnavailable => "agent_prompt_unavailable",
    /// The target is not waiting for input (or ended, or is not the foreground program);
    /// nothing was sent.
    AgentTargetNotReady => "agent_target_not_ready",
    /// The target's guardian does not answer; nothing was sent.
    AgentTargetUnavailable => "agent_target_unavailable",
    /// The `prompt_id` holds another prompt's receipt; nothing was sent.
    PromptIdConflict => "prompt_id_conflict",
    /// 64 receipts in this runtime generation; nothing was sent.
    AgentReceiptLimit => "agent_receipt_limit",
    AgentReceiptNotFound => "agent_receipt_not_found",
    /// A native prompt may or may not have reached the program; never resend it.
    AgentDeliveryUncertain => "agent_delivery_uncertain",
    /// A return-final admission was refused (`receipt_class` says why); nothing was written.
    AgentRequestRejected => "agent_request_rejected",
    HerdrDisabled => "herdr_disabled",
    HerdrConfiguration => "herdr_configuration",
    HerdrUnavailable => "herdr_unavailable",
    InvalidHerdrResponse => "invalid_herdr_response",
    HerdrOutputLimit => "herdr_output_limit",
    HerdrTimeout => "herdr_timeout",
    HerdrFailed => "herdr_failed",
    HerdrScopeDenied => "herdr_scope_denied",
    InvalidHerdrRequest => "invalid_herdr_request",
    /// A Herdr prompt whose subprocess did not finish: it may or may not have been sent.
    HerdrDeliveryUncertain => "herdr_delivery_uncertain",
    // Edits, chosen by `EditFailure`.
    ReadRequired => "read_required",
    SearchBlockMalformed => "search_block_malformed",
    SearchBlockNotFound => "search_block_not_found",
    SearchBlockAmbiguous => "search_block_ambiguous",
    PathNotAllowed => "path_not_allowed",
    FileUnusable => "file_unusable",
    InvalidPatch => "invalid_patch",
    PartialCommit => "partial_commit",
    RecoveryExhausted => "recovery_exhausted",
    EditLockUnavailable => "edit_lock_unavailable",
    MutationPostconditionChanged => "mutation_postcondition_changed",
    VerificationFailed => "verification_failed",
    UndoRefused => "undo_refused",
    // CodeMap.
    /// A map cursor from another snapshot of the tree (or another query).
    StaleCursor => "stale_cursor",
    // The managed temporary directory (`tools::temporary`).
    /// A shell write bypassing `$WINX_TEMP_DIR` (`/tmp/…`, a new scratch file at the
    /// project root); nothing was run.
    TemporaryArtifactPolicy => "temporary_artifact_policy",
    /// The session's temporary directory is over budget (or unmeasurable): only commands
    /// that inspect or remove run until it is back under.
    TemporaryBudgetExceeded => "temporary_budget_exceeded",
    /// This session used its 24 helper files / 64 helper-map calls.
    DerivedCodeMapBudgetExhausted => "derived_code_map_budget_exhausted",
    /// `release_temporary`: the directory changed since the given generation; nothing
    /// was released.
    TemporaryGenerationChanged => "temporary_generation_changed",
    /// `release_temporary`: a command is active, or the runtime cannot tell; nothing was
    /// released.
    TemporaryReleaseBlocked => "temporary_release_blocked",
    /// `release_temporary`: some named helpers were kept (each with its reason).
    TemporaryReleasePartial => "temporary_release_partial",
    // ReadFiles: some files failed (each failure's own code is in `data.failures`).
    ReadFailed => "read_failed",
    // ReadImage.
    PathOutsideAllowedRoots => "path_outside_allowed_roots",
    IsDirectory => "is_directory",
    FileNotFound => "file_not_found",
    PermissionDenied => "permission_denied",
    IoError => "io_error",
    FileTooLarge => "file_too_large",
    ImageTooLarge => "image_too_large",
    ImageDecodeFailed => "image_decode_failed",
    ImageEncodeFailed => "image_encode_failed",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_as_str_agree_and_codes_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert!(
                c.as_str()
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '_')
            );
        }
    }
}
