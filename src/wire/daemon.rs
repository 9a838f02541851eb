//! Adapter ↔ winxd messages. One request per frame, one response each.

use super::guardian::{Labels, Snapshot};
use serde::{Deserialize, Serialize};

/// Control protocol version carried in `Hello`. 2: `Error` carries a `RuntimeError`.
pub const PROTOCOL: u32 = 2;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Attach to the guardian of `key`, or start it. Answered with `Ensured`.
    Ensure {
        key: String,
        workspace: String,
        shell: String,
        dialect: super::Dialect,
        session_dir: String,
        env: Vec<(String, String)>,
        labels: Labels,
        /// The session's managed temporary directory, exported as `WINX_TEMP_DIR` to every
        /// PTY (absent from older adapters).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temp_dir: Option<String>,
    },
    /// Every live guardian, with its snapshot.
    List,
    /// Shut down the guardians whose thread id matches (`None`: all of them).
    Kill { thread_id: Option<String> },
    /// Remove idle sessions: the configured tiers, or both tiers set to `idle_seconds`.
    Prune { idle_seconds: Option<u64> },
    /// The daemon's settings and build, for `doctor`.
    Status,
    /// Stop serving and exit (guardians keep running).
    Shutdown,
}

/// What `list` shows of a session.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionInfo {
    pub key: String,
    pub snapshot: Snapshot,
}

/// winxd's lifecycle settings, read from its environment at start.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lifecycle {
    /// Idle TTL of sessions that never ran a command (0 disables the tier).
    pub unused_ttl_secs: u64,
    /// Idle TTL of sessions that ran a command (0 disables the tier).
    pub used_ttl_secs: u64,
    pub max_guardians: usize,
    pub sweep_secs: u64,
    /// Added to the wall clock for lifecycle decisions only (`WINX_CLOCK_SKEW_SECS`), so
    /// TTL behaviour can be exercised without waiting hours. 0 in normal operation.
    pub clock_skew_secs: i64,
}

impl Lifecycle {
    /// "Now" as lifecycle decisions see it.
    pub fn now_ms(&self) -> i64 {
        crate::deadline::unix_ms() + self.clock_skew_secs.saturating_mul(1000)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Ensured {
        socket: String,
        created: bool,
    },
    Sessions {
        sessions: Vec<SessionInfo>,
    },
    /// How many guardians a Kill or Prune removed, by thread id.
    Removed {
        thread_ids: Vec<String>,
    },
    Status {
        build: String,
        pid: u32,
        lifecycle: Lifecycle,
        socket: String,
    },
    Done,
    /// The request failed; what failed is typed, so the adapter can act on it.
    Error {
        error: super::error::RuntimeError,
    },
    /// winxd already serves `limit` control connections; retry once one has ended.
    Busy {
        limit: usize,
    },
}
