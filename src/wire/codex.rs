//! Guardian messages about Codex agents running in a session (issue 15): which
//! executions hold a Codex rollout open, and the checked one-write admission of a prompt.

use serde::{Deserialize, Serialize};

/// A Codex process found in one of the session's executions (`Request::CodexTargets`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CodexTarget {
    /// Stable for the execution's lifetime: derived from thread, workspace and execution.
    pub agent_id: String,
    pub execution_id: String,
    pub foreground: bool,
    /// The command line that started the execution (display only).
    pub command: String,
    pub pid: u32,
    pub start_time: u64,
    /// Opaque: agent id, pid, start time and the observed conversation id.
    pub incarnation: String,
    pub rollout: String,
    pub conversation_id: Option<String>,
    /// `attached`, or why the observer is not (`no_rollout`, `cwd_mismatch`, `unreadable`).
    pub observer: String,
    /// `idle`, `busy` or `fresh` (no completed turn yet); `unknown` without an observer.
    pub phase: String,
    /// Idle with a completed baseline: its turn id and the cursor a request arms at.
    pub baseline_turn: Option<String>,
    pub cursor: Option<u64>,
}

/// How the prompt's bytes are framed on the terminal.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PasteMode {
    /// `ESC[200~ text ESC[201~` then Enter: the TUI takes the text as one paste, so a
    /// newline inside it never submits early.
    #[default]
    Bracketed,
    /// The text then Enter, as if typed.
    Typed,
}

impl PasteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PasteMode::Bracketed => "bracketed",
            PasteMode::Typed => "typed",
        }
    }
}

/// `Request::CodexAdmit`: write `text` + Enter once to `agent_id` if it is still
/// `incarnation` and its rollout says idle (with a completed baseline when `armable`) —
/// or, with `steer`, also while a turn runs (`agent send`, seed 001).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CodexAdmit {
    pub agent_id: String,
    pub incarnation: String,
    pub text: String,
    pub paste: PasteMode,
    pub armable: bool,
    /// Write even while a provider turn runs (steering it): `agent send`'s one-way
    /// prompt. `agent admit` never steers. Never with `armable` (a return-final request
    /// needs an idle target). Absent from older adapters: no steering.
    #[serde(default)]
    pub steer: bool,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AdmitOutcome {
    /// Written in full, once.
    Written,
    /// A turn is running (or a line is being written): nothing written.
    Busy,
    /// No such agent in this session now: nothing written.
    Unavailable,
    /// The agent is there with another incarnation: nothing written.
    StaleIncarnation,
    /// Idle, but no cursor for a completed baseline turn: nothing written.
    ObserverFailure,
    /// The write failed part-way: some bytes may have reached the agent.
    Indeterminate,
    /// The write failed before its first byte (the terminal took nothing): nothing
    /// reached the agent.
    DeliveryFailed,
}

/// The answer to `Request::CodexAdmit`, with the target as checked.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CodexAdmitReply {
    pub outcome: AdmitOutcome,
    pub detail: String,
    pub target: Option<CodexTarget>,
}
