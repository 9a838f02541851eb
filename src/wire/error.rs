//! `RuntimeError`: why the adapter could not get a session process (winxd, a guardian, its
//! shell) to serve it. Serde-serialisable, so winxd sends it as its `Error` answer and the
//! adapter maps it to the agent-facing `ToolError` once (`tools/error.rs`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A failure between the adapter and its session processes. Every variant carries what an
/// operator or agent needs to act on it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuntimeError {
    /// Nothing answers on winxd's socket and it could not be reached after a start.
    DaemonUnreachable {
        socket: String,
        errno: Option<i32>,
        detail: String,
    },
    /// winxd's live-guardian quota is reached and every session is in use.
    Quota {
        limit: usize,
        /// The operator command that frees idle sessions.
        prune: String,
    },
    /// winxd is serving its limit of control connections; a retry shortly succeeds.
    DaemonBusy { limit: usize },
    /// A session process did not start: `step` names what failed (`exec winxd`,
    /// `guardian start`, `session directory`, …).
    ShellStart {
        step: String,
        errno: Option<i32>,
        detail: String,
    },
    /// The other process is of another build: it speaks protocol `theirs`, we `ours`.
    ProtocolMismatch {
        peer: String,
        ours: u32,
        theirs: u32,
    },
    /// The named deadline passed first.
    Timeout { deadline: String },
    /// The session's guardian went away (its socket is gone, or it hung up).
    GuardianGone { detail: String },
    /// A request or answer that does not belong (a bad session key, an unexpected answer).
    Unexpected { detail: String },
}

/// The command a quota refusal tells the operator to run.
pub const PRUNE_HINT: &str = "winx-code-agent prune --idle-seconds 0";

impl RuntimeError {
    /// `ShellStart` from an I/O error, keeping its errno.
    pub fn start(step: impl Into<String>, e: &std::io::Error) -> RuntimeError {
        RuntimeError::ShellStart {
            step: step.into(),
            errno: e.raw_os_error(),
            detail: e.to_string(),
        }
    }

    /// `ShellStart` from a reason that has no errno (a readiness verdict's text).
    pub fn start_failed(step: impl Into<String>, detail: impl Into<String>) -> RuntimeError {
        RuntimeError::ShellStart {
            step: step.into(),
            errno: None,
            detail: detail.into(),
        }
    }

    pub fn unexpected(detail: impl Into<String>) -> RuntimeError {
        RuntimeError::Unexpected {
            detail: detail.into(),
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::DaemonUnreachable { socket, detail, .. } => {
                write!(f, "connect to winxd at {socket}: {detail}")
            }
            RuntimeError::Quota { limit, prune } => write!(
                f,
                "the live guardian quota ({limit}) is reached and every session is in use; \
                 free idle sessions with `{prune}` (active commands are kept) or raise \
                 WINX_MAX_GUARDIANS"
            ),
            RuntimeError::DaemonBusy { limit } => write!(
                f,
                "winxd is serving its limit of {limit} control connections; retry shortly"
            ),
            RuntimeError::ShellStart { step, detail, .. } => write!(f, "{step}: {detail}"),
            RuntimeError::ProtocolMismatch { peer, ours, theirs } => {
                write!(f, "{peer} speaks protocol {theirs}, we speak {ours}")
            }
            RuntimeError::Timeout { deadline } => write!(f, "{deadline} timed out"),
            RuntimeError::GuardianGone { detail } => {
                write!(f, "session guardian unavailable: {detail}")
            }
            RuntimeError::Unexpected { detail } => f.write_str(detail),
        }
    }
}

impl std::error::Error for RuntimeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_tagged_json() {
        let e = RuntimeError::Quota {
            limit: 2,
            prune: PRUNE_HINT.into(),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["kind"], "quota");
        assert_eq!(v["limit"], 2);
        assert_eq!(serde_json::from_value::<RuntimeError>(v).unwrap(), e);
        assert!(e.to_string().contains(PRUNE_HINT));
    }
}
