//! Edit failures and their envelopes: one place maps engine errors to `status`,
//! `errorCode`, `requiredReads` and the concrete `ReadFiles` recovery action.

use crate::edit::engine::{CommitError, PlanError};
use crate::edit::lock::LockError;
use crate::tools::envelope::{Envelope, NextAction, RequiredRead, Status, ToolOutput};
use crate::tools::error::{SessionPair, ToolError};
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
pub enum EditFailure {
    /// Lines not read at the current revision (or a stale expected revision).
    NeedsRead {
        path: String,
        ranges: Vec<(usize, usize)>,
        reason: String,
    },
    SearchMalformed {
        path: String,
        message: String,
    },
    /// A SEARCH block matched nowhere or several places; `region` is worth re-reading.
    SearchConflict {
        path: String,
        code: ErrorCode,
        message: String,
        region: Option<(usize, usize)>,
    },
    PathDenied {
        path: String,
        reason: String,
    },
    FileUnusable {
        path: String,
        detail: String,
    },
    /// A FIFO, socket or device: mapped by `ToolError::NotRegularFile`.
    NotRegular {
        path: String,
        kind: crate::files::beneath::FileKind,
    },
    PatchInvalid {
        path: String,
        detail: String,
    },
    PartialCommit {
        committed: Vec<String>,
        failed: String,
        untouched: Vec<String>,
        detail: String,
    },
    /// Writing was refused (`EACCES`: file mode, or outside the sandbox's writable set)
    /// before anything was committed (issue 36 item 14): nothing was written.
    WriteDenied {
        path: String,
        detail: String,
        untouched: Vec<String>,
    },
    /// Three SEARCH conflicts on one target in the window: stop retrying, change strategy.
    RecoveryExhausted {
        path: String,
    },
    /// The per-target edit lock could not be taken (state directory unusable); nothing
    /// was read or written.
    LockUnavailable {
        path: String,
        detail: String,
    },
}

fn s(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

impl EditFailure {
    pub fn from_plan(e: PlanError) -> EditFailure {
        match e {
            PlanError::NeedsRead {
                path,
                ranges,
                reason,
            } => EditFailure::NeedsRead {
                path: s(&path),
                ranges,
                reason,
            },
            PlanError::Format { path, error } => EditFailure::SearchMalformed {
                path: s(&path),
                message: format!(
                    "{error}\nExpected format:\n{}",
                    crate::edit::search_replace::FormatError::help()
                ),
            },
            PlanError::Match { path, error } => {
                let region = match &error {
                    crate::edit::search_replace::MatchError::NotFound {
                        closest: Some(c), ..
                    } => Some((c.start_line.saturating_sub(3).max(1), c.end_line + 3)),
                    _ => None,
                };
                EditFailure::SearchConflict {
                    path: s(&path),
                    code: match &error {
                        crate::edit::search_replace::MatchError::NotFound { .. } => {
                            ErrorCode::SearchBlockNotFound
                        }
                        crate::edit::search_replace::MatchError::Ambiguous { .. } => {
                            ErrorCode::SearchBlockAmbiguous
                        }
                    },
                    message: error.to_string(),
                    region,
                }
            }
            PlanError::Patch { path, detail } => EditFailure::PatchInvalid {
                path: s(&path),
                detail,
            },
            PlanError::Denied { path, reason } => EditFailure::PathDenied {
                path: s(&path),
                reason,
            },
            PlanError::NotRegular { path, kind } => EditFailure::NotRegular {
                path: s(&path),
                kind,
            },
            PlanError::NotText { path, detail } | PlanError::Io { path, detail } => {
                EditFailure::FileUnusable {
                    path: s(&path),
                    detail,
                }
            }
        }
    }

    pub fn from_commit(e: CommitError) -> EditFailure {
        match e {
            // The read permit is for content the file no longer has: the same answer as a
            // stale revision found while planning.
            CommitError::Changed { path, now, lines } => EditFailure::NeedsRead {
                path: s(&path),
                ranges: vec![(1, lines.max(1))],
                reason: format!(
                    "another writer changed the file while this edit was committing (now {}); nothing was written",
                    now.as_deref().unwrap_or("deleted")
                ),
            },
            CommitError::Partial(p) if p.committed.is_empty() && p.permission_denied => {
                EditFailure::WriteDenied {
                    path: s(&p.failed),
                    detail: p.detail,
                    untouched: p.untouched.iter().map(|p| s(p)).collect(),
                }
            }
            CommitError::Partial(p) => EditFailure::PartialCommit {
                committed: p.committed.iter().map(|p| s(p)).collect(),
                failed: s(&p.failed),
                untouched: p.untouched.iter().map(|p| s(p)).collect(),
                detail: p.detail,
            },
        }
    }

    pub fn from_lock(e: LockError) -> EditFailure {
        EditFailure::LockUnavailable {
            path: s(&e.target),
            detail: e.detail,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            EditFailure::NeedsRead { .. } => ErrorCode::ReadRequired,
            EditFailure::SearchMalformed { .. } => ErrorCode::SearchBlockMalformed,
            EditFailure::SearchConflict { code, .. } => *code,
            EditFailure::PathDenied { .. } => ErrorCode::PathNotAllowed,
            EditFailure::FileUnusable { .. } => ErrorCode::FileUnusable,
            EditFailure::NotRegular { path, kind } => ToolError::NotRegularFile {
                path: path.clone(),
                kind: *kind,
            }
            .error_code(),
            EditFailure::PatchInvalid { .. } => ErrorCode::InvalidPatch,
            EditFailure::PartialCommit { .. } => ErrorCode::PartialCommit,
            EditFailure::WriteDenied { .. } => ErrorCode::PermissionDenied,
            EditFailure::RecoveryExhausted { .. } => ErrorCode::RecoveryExhausted,
            EditFailure::LockUnavailable { .. } => ErrorCode::EditLockUnavailable,
        }
    }

    pub fn into_output(self, tool: ToolName, pair: &SessionPair) -> ToolOutput {
        let code = self.code();
        let read_action = |path: &str, ranges: &[String], why: &str| NextAction {
            tool: "ReadFiles".into(),
            instruction: why.into(),
            arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                "file_paths": ranges.iter().map(|r| format!("{path}:{r}")).collect::<Vec<_>>()}),
        };
        let (status, message, next, reads, retryable, data): (
            Status,
            String,
            Option<NextAction>,
            Vec<RequiredRead>,
            bool,
            Value,
        ) = match &self {
            EditFailure::NeedsRead {
                path,
                ranges,
                reason,
            } => {
                let rs: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
                (
                    Status::NeedsRead,
                    format!(
                        "{tool} failed: read {path} lines {} first ({reason})",
                        rs.join(", ")
                    ),
                    Some(read_action(
                        path,
                        &rs,
                        "Perform every required read before retrying the edit.",
                    )),
                    vec![RequiredRead {
                        path: path.clone(),
                        ranges: rs,
                    }],
                    true,
                    json!({"edit_applied": false}),
                )
            }
            EditFailure::SearchConflict {
                path,
                message,
                region,
                ..
            } => {
                let next = region.map(|(a, b)| {
                    read_action(
                        path,
                        &[format!("{a}-{b}")],
                        "Re-read the closest region, then fix the SEARCH block.",
                    )
                });
                (
                    Status::Conflict,
                    format!("{tool} failed on {path}: {message}"),
                    next,
                    vec![],
                    true,
                    json!({"edit_applied": false}),
                )
            }
            EditFailure::SearchMalformed { path, message } => (
                Status::InvalidInput,
                format!("{tool}: malformed blocks for {path}: {message}"),
                None,
                vec![],
                true,
                json!({"edit_applied": false}),
            ),
            EditFailure::PathDenied { path, reason } => (
                Status::PolicyBlocked,
                format!("{tool}: {path}: {reason}"),
                None,
                vec![],
                false,
                json!({"edit_applied": false}),
            ),
            EditFailure::FileUnusable { path, detail }
            | EditFailure::PatchInvalid { path, detail } => (
                Status::InvalidInput,
                format!("{tool}: {path}: {detail}"),
                None,
                vec![],
                true,
                json!({"edit_applied": false}),
            ),
            EditFailure::PartialCommit {
                committed,
                failed,
                untouched,
                detail,
            } => (
                Status::Failed,
                format!(
                    "{tool}: committed {committed:?}, then {failed} failed ({detail}); untouched: {untouched:?}"
                ),
                None,
                vec![],
                false,
                json!({"edit_applied": !committed.is_empty(), "committed": committed, "failed": failed, "untouched": untouched}),
            ),
            EditFailure::WriteDenied {
                path,
                detail,
                untouched,
            } => {
                let dir = std::path::Path::new(path)
                    .parent()
                    .map_or_else(|| path.clone(), s);
                let quote = |p: &str| format!("'{}'", p.replace('\'', "'\\''"));
                (
                    Status::Failed,
                    format!(
                        "{tool}: writing {path} was refused ({detail}); nothing was written. \
                         Its directory is not writable here (file mode, or outside the \
                         sandbox's writable set: the workspace, /tmp and WINX_SANDBOX_RW_PATHS)"
                    ),
                    Some(NextAction {
                        tool: "BashCommand".into(),
                        instruction: "Nothing was written. See who may write the directory; \
                                      write the change inside a writable directory instead, \
                                      or ask the user to make this one writable."
                            .into(),
                        arguments: json!({"thread_id": pair.thread_id,
                            "workspace_root": pair.workspace_root,
                            "action_json": {"command": format!("ls -ld -- {}", quote(&dir))}}),
                    }),
                    vec![],
                    false,
                    json!({"edit_applied": false, "committed": [], "failed": path,
                           "untouched": untouched}),
                )
            }
            EditFailure::NotRegular { path, kind } => (
                Status::InvalidInput,
                format!(
                    "{tool}: {}",
                    ToolError::NotRegularFile {
                        path: path.clone(),
                        kind: *kind
                    }
                    .message()
                ),
                None,
                vec![],
                false,
                json!({"edit_applied": false, "path": path, "fileType": kind.describe()}),
            ),
            EditFailure::LockUnavailable { path, detail } => (
                Status::Failed,
                format!("{tool}: cannot lock {path} for the edit: {detail}"),
                None,
                vec![],
                true,
                json!({"edit_applied": false}),
            ),
            EditFailure::RecoveryExhausted { path } => (
                Status::Conflict,
                format!(
                    "{tool}: three SEARCH conflicts on {path} in a row; stop retrying blocks: re-read the file and rewrite the region (or the whole file)"
                ),
                None,
                vec![],
                false,
                json!({"edit_applied": false}),
            ),
        };
        ToolOutput::refusal(Envelope {
            status,
            tool: tool.into(),
            message,
            error_code: Some(code),
            retryable,
            retry_same_call: false,
            next_action: next,
            required_reads: reads,
            data,
        })
    }
}
