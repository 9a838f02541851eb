//! Adapter ↔ guardian messages. One request per frame; each request has one response,
//! which may be deferred (a wait) until completion, settling or a deadline.

use serde::{Deserialize, Serialize};

/// Guardian protocol version carried in `Hello`. 2: an execution's bytes start at
/// `journal_offset` in its journal (foreground executions share segment files).
pub const PROTOCOL: u32 = 2;

/// How long, and for what, a request waits before answering.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Wait {
    pub timeout_ms: u64,
    /// Also answer once output has been idle for this long after input (interactive
    /// actions); `None` waits for completion or the timeout only.
    pub settle_ms: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The authoritative state of the session.
    Snapshot,
    /// Run a command in the foreground shell or, with `background`, in its own PTY.
    Run {
        command: String,
        background: bool,
        wait: Wait,
        /// Who admits it (the history record's scope), reported back in `Facts` so any
        /// adapter can record a command whose admitting adapter died before it could.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<ExecScope>,
        /// Run only if the session is still what the caller judged the command against
        /// (`Response::Stale` otherwise); guardians with the `run_expect` capability.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// Undelivered output and state of the foreground command or a background one.
    Status { bg_id: Option<String>, wait: Wait },
    /// Write raw bytes to the foreground shell's terminal or a background PTY.
    Input {
        bytes: Vec<u8>,
        bg_id: Option<String>,
        wait: Wait,
    },
    /// The session transcript from `offset` (an independent cursor, for `attach`); waits
    /// up to `wait` for bytes past `offset`.
    Read { offset: u64, wait: Wait },
    /// The rendered terminal frame of the foreground shell.
    Screen { lines: Option<usize>, diff: bool },
    /// Replace the shell (killing what runs in it); answered once the new one is ready.
    Reset,
    /// Facts about every execution this guardian knows (for the history recorder),
    /// answered once its activity counter passes `after` or when `wait` ends.
    /// With `screen`, the answer carries the foreground command's screen.
    Watch {
        after: u64,
        wait: Wait,
        #[serde(default)]
        screen: bool,
        /// Executions numbered up to `known` were reported to this caller already: their
        /// facts leave out the admission (command text and scope).
        #[serde(default)]
        known: u64,
    },
    /// Add `learn` to the session's known secret values and answer with all of them
    /// (`Response::Secrets`).
    Secrets {
        #[serde(default)]
        learn: SecretValues,
    },
    /// Write `text` and Enter, as one buffer, to the running foreground execution
    /// `execution_id` if the `recognizer` says it waits for input and `runtime` is this
    /// guardian; otherwise write nothing (`Response::Prompt`). `key` names the prompt for
    /// `PromptStatus`.
    Prompt(PromptAsk),
    /// What is known of the prompt `key`, answered once it differs from `seen` or when
    /// `wait` ends (`Response::PromptStatus`).
    PromptStatus {
        key: String,
        seen: Option<PromptStatus>,
        wait: Wait,
    },
    /// The Codex agents running in this session (`Response::CodexTargets`).
    CodexTargets,
    /// Checked one-write admission of a prompt to a Codex agent
    /// (`Response::CodexAdmitted`).
    CodexAdmit(super::codex::CodexAdmit),
    /// End the guardian and everything it runs.
    Shutdown,
}

/// What this build's guardians can do beyond protocol 1, listed in `Snapshot`.
/// `temp_dir`: shells export `WINX_TEMP_DIR` (a guardian without it predates the managed
/// temporary directory, so `release_temporary` cannot rely on it).
pub const CAPABILITIES: &[&str] = &["prompt", "codex_admit", "temp_dir", RUN_EXPECT];

/// The capability of checking `Run`'s `expect` (answering `Response::Stale`).
pub const RUN_EXPECT: &str = "run_expect";

/// What an adapter judged a command against (its mode, its temporary-directory rules, its
/// history record): the guardian it saw and the shell's directory then. A `Run` carrying
/// it runs only if both still hold, so an adapter may judge against a remembered snapshot
/// instead of asking for a fresh one before every command.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Expect {
    pub guardian_pid: u32,
    pub created_at_ms: i64,
    pub cwd: String,
}

impl Expect {
    pub fn of(s: &Snapshot) -> Expect {
        Expect {
            guardian_pid: s.guardian_pid,
            created_at_ms: s.created_at_ms,
            cwd: s.cwd.clone(),
        }
    }

    /// Whether the session of guardian `pid` (started at `created_at_ms`), whose shell is
    /// in `cwd`, is the one this expectation was formed against.
    pub fn holds(&self, pid: u32, created_at_ms: i64, cwd: &str) -> bool {
        self.guardian_pid == pid && self.created_at_ms == created_at_ms && self.cwd == cwd
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    /// No command has run yet, or the last one finished and was fully delivered.
    Idle,
    Running,
    Exited,
    /// The shell itself ended; a reset is needed.
    ShellExited,
    /// Never sent by a guardian: the execution history's verdict on a command whose
    /// outcome the runtime lost (its guardian is gone or was replaced, or its shell died
    /// before the end was reported). It has no exit code and is never success.
    Unknown,
}

impl ProcessStatus {
    /// The name on the wire, in tool answers and in the history table.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessStatus::Idle => "idle",
            ProcessStatus::Running => "running",
            ProcessStatus::Exited => "exited",
            ProcessStatus::ShellExited => "shell_exited",
            ProcessStatus::Unknown => "unknown",
        }
    }

    /// The status named `s` (`as_str`'s inverse).
    pub fn parse(s: &str) -> Option<ProcessStatus> {
        [
            ProcessStatus::Idle,
            ProcessStatus::Running,
            ProcessStatus::Exited,
            ProcessStatus::ShellExited,
            ProcessStatus::Unknown,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for ProcessStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The typed state of a command, decided by the runtime only (never parsed from text).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommandState {
    pub process_status: ProcessStatus,
    pub exit_code: Option<i32>,
    pub cwd: String,
    pub bg_command_id: Option<String>,
    pub elapsed_ms: u64,
    pub execution_id: Option<String>,
}

/// The answer to Run / Status / Input.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ActionResult {
    pub state: CommandState,
    /// Raw terminal output not delivered before (lossy UTF-8, markers removed).
    pub output: String,
    /// Byte offsets of `output` in the execution's journal.
    pub offset_start: u64,
    pub offset_end: u64,
    /// Undelivered bytes that no longer fit the in-memory window (they are in the journal).
    pub omitted_bytes: u64,
    /// The execution's complete output on disk: its byte `n` is byte
    /// `journal_offset + n` of the file (see `guardian::journals`).
    pub journal_path: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_offset: u64,
    pub journal_error: Option<String>,
    /// The session's known secret values, for redaction (absent from older guardians).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secrets: SecretValues,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Secret values a session has seen under secret-looking names, passed to whoever
/// renders its output. `Debug` prints only their number, so no log line can hold them.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct SecretValues(pub Vec<String>);

impl SecretValues {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValues({} values)", self.0.len())
    }
}

/// A guardian's runtime identity as history records store it: its pid and start time (a
/// pid alone is reused; a socket path outlives its guardian).
pub fn guardian_identity(pid: u32, created_at_ms: i64) -> String {
    format!("{pid}:{created_at_ms}")
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Snapshot {
    /// Who the session belongs to, as given at start (for operators).
    pub labels: Labels,
    pub guardian_pid: u32,
    pub shell_pid: i32,
    pub shell_alive: bool,
    pub cwd: String,
    pub created_at_ms: i64,
    pub last_activity_ms: i64,
    pub last_command_ms: Option<i64>,
    pub ever_ran_command: bool,
    pub running: Option<String>,
    pub background: Vec<String>,
    pub build: String,
    /// `CAPABILITIES` of the guardian's build (empty from older guardians).
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// What a guardian knows of its executions, for the history recorder. `seq` grows with
/// every output byte, start and end; the bytes themselves are read from `journal_path`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Facts {
    pub seq: u64,
    /// Runtime identity: the guardian process and its start time.
    pub guardian_pid: u32,
    pub created_at_ms: i64,
    /// Running and recently ended executions, oldest first.
    pub executions: Vec<ExecFact>,
    /// The visible screen while a foreground command runs (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenFact>,
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secrets: SecretValues,
}

/// The shell terminal's visible screen, for turn recognition.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScreenFact {
    /// The foreground execution the screen belongs to.
    pub execution_id: String,
    /// Every row, trailing spaces trimmed, trailing empty rows dropped.
    pub text: String,
    /// Milliseconds since the session's last output or input.
    pub quiet_ms: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecFact {
    pub execution_id: String,
    pub bg_command_id: Option<String>,
    /// Output bytes written to the journal so far.
    pub total_bytes: u64,
    pub finished: bool,
    pub exit_code: Option<i32>,
    /// The shell died before the command's end was reported: its outcome is unknown.
    pub shell_died: bool,
    /// The execution's byte `n` is byte `journal_offset + n` of `journal_path`.
    pub journal_path: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_offset: u64,
    pub journal_error: Option<String>,
    /// How the command was admitted (absent for executions the caller already knows, and
    /// for commands run without a scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
}

/// The scope a command was admitted in: principal, thread and workspace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecScope {
    pub principal: String,
    pub thread_id: String,
    pub workspace_root: String,
}

/// A command's admission as its guardian saw it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Admission {
    pub scope: ExecScope,
    pub command: String,
    /// The shell's directory when the command was written.
    pub cwd: String,
    pub started_ms: i64,
}

/// The number of an execution id (`<hex>-<n>`): executions of one guardian are numbered
/// in the order it accepted them.
pub fn execution_number(execution_id: &str) -> Option<u64> {
    execution_id.rsplit_once('-')?.1.parse().ok()
}

impl Facts {
    pub fn identity(&self) -> String {
        guardian_identity(self.guardian_pid, self.created_at_ms)
    }
}

impl Snapshot {
    pub fn identity(&self) -> String {
        guardian_identity(self.guardian_pid, self.created_at_ms)
    }
}

/// Identity of a session, fixed at guardian start.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Labels {
    pub thread_id: String,
    pub principal: String,
    pub workspace: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// Transcript bytes from `offset` to `next` (bytes that left the memory window are
    /// counted in `skipped`).
    Output {
        text: String,
        next: u64,
        skipped: u64,
        #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
        secrets: SecretValues,
    },
    Secrets {
        values: SecretValues,
    },
    Facts(Facts),
    Snapshot(Snapshot),
    Action(ActionResult),
    Screen {
        text: String,
        rows: u16,
        cols: u16,
        #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
        secrets: SecretValues,
    },
    Done,
    Prompt(PromptReply),
    PromptStatus(PromptStatus),
    CodexTargets {
        targets: Vec<super::codex::CodexTarget>,
    },
    CodexAdmitted(super::codex::CodexAdmitReply),
    /// A `Run` whose `expect` no longer held was not run: the session as it is now.
    Stale(Snapshot),
    Error(GuardianError),
}

/// Refusals a guardian can answer with.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum GuardianError {
    CommandAlreadyRunning {
        execution_id: String,
        elapsed_ms: u64,
    },
    ShellNotRunning,
    NoSuchBackgroundCommand {
        bg_id: String,
    },
    BackgroundLimit {
        limit: usize,
    },
    Io {
        detail: String,
    },
}

/// A native prompt (`Request::Prompt`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PromptAsk {
    pub execution_id: String,
    pub key: String,
    pub text: String,
    pub recognizer: String,
    /// The guardian identity the caller checked (`guardian_identity`): another one
    /// refuses.
    pub runtime: String,
}

/// How a prompt's text and Enter went to the terminal.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PromptDelivery {
    /// Written in full, once.
    Delivered,
    /// A check failed; nothing was written.
    Refused,
    /// The write failed part-way: some bytes may have reached the program.
    Uncertain,
}

/// Why a prompt was refused (nothing was written).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PromptRefusal {
    /// The runtime identity or shell changed since the caller looked.
    GenerationChanged,
    /// The target (the foreground execution or a background command) has ended.
    Exited,
    /// The target is a background execution: only from guardians built before prompts
    /// to background commands (issue 37 item 3), which had no screen to check there.
    NotForeground,
    /// The target is not running in this session.
    NotRunning,
    /// The screen does not say the program waits for input.
    NotReady,
    /// The recognizer cannot run in the guardian (`configurable`).
    UnsupportedRecognizer,
    /// This guardian already wrote a prompt under this key.
    AlreadySent,
}

/// The answer to `Request::Prompt`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PromptReply {
    pub delivery: PromptDelivery,
    pub refusal: Option<PromptRefusal>,
    /// The generation the prompt is bound to (`<guardian identity>/<shell pid>`).
    pub generation: String,
    /// The activity counter just before the write.
    pub baseline_seq: u64,
    /// The text itself looks like a work or approval marker: activity stays unconfirmed.
    pub suppressed: bool,
    /// The recognizer's state at the check.
    pub state: Option<String>,
}

/// What a guardian knows of a prompt it wrote (`Request::PromptStatus`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PromptStatus {
    /// This guardian wrote the prompt (false: another generation, or never sent).
    pub known: bool,
    /// The generation the prompt was written in.
    pub generation: String,
    pub current_generation: String,
    pub activity_observed: bool,
    pub suppressed: bool,
    /// The target's recognised state now (none once it ended).
    pub state: Option<String>,
    pub exited: bool,
    pub exit_code: Option<i32>,
}
