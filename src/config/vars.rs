//! The one table of environment variables: name, default, accepted range and help. It
//! produces the `--help` environment section and the README's variable table (a test keeps
//! the README in step), and every range error comes from `number`, by the table entry.
//!
//! Invariant: a variable read for configuration has an entry here, and its range is
//! checked by the entry, never by a literal repeated elsewhere.

/// A configuration problem, reported at startup with exit code 2.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Default size of the request worker pool. Small on purpose: tool calls are I/O bound and
/// the machines we target have two cores; long shell waits park on channels, not threads.
pub const DEFAULT_WORKERS: usize = 8;

/// What values a variable accepts, and its default.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Free text (a path, a token, a list); `default` describes what unset means.
    Text { default: &'static str },
    /// A whole number in `min..=max`.
    Number { default: u64, min: u64, max: u64 },
    /// One of `values`.
    OneOf {
        default: &'static str,
        values: &'static [&'static str],
    },
    /// `1` turns the behaviour on; anything else leaves it off.
    Flag,
    /// A log level, or (`RUST_LOG`) a comma-separated filter list.
    Log { filters: bool },
}

/// One environment variable.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

/// Log levels, quietest first.
pub const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// A year: no idle tier or sweep interval longer than this is meant seriously.
const YEAR_SECS: u64 = 365 * 24 * 3600;
/// A day in milliseconds: the ceiling of the HTTP timeouts.
const DAY_MS: u64 = 24 * 3600 * 1000;

pub const STATE_DIR: Var = Var {
    name: "WINX_STATE_DIR",
    kind: Kind::Text {
        default: "$XDG_STATE_HOME/winx, else ~/.local/state/winx",
    },
    help: "state directory",
};
pub const LOG: Var = Var {
    name: "WINX_LOG",
    kind: Kind::Log { filters: false },
    help: "stderr log level of winx-code-agent and winxd",
};
pub const RUST_LOG: Var = Var {
    name: "RUST_LOG",
    kind: Kind::Log { filters: true },
    help: "read when WINX_LOG is unset; of `info,winx=debug` the plain level applies",
};
pub const WORKERS: Var = Var {
    name: "WINX_WORKERS",
    kind: Kind::Number {
        default: DEFAULT_WORKERS as u64,
        min: 1,
        max: 256,
    },
    help: "request worker threads",
};
/// A request with a progress token hears from us at least this often by default (clients
/// commonly time out a silent request after 60 s).
pub const DEFAULT_PROGRESS_INTERVAL_MS: u64 = 10_000;
pub const PROGRESS_INTERVAL_MS: Var = Var {
    name: "WINX_PROGRESS_INTERVAL_MS",
    kind: Kind::Number {
        default: DEFAULT_PROGRESS_INTERVAL_MS,
        min: 100,
        max: 3_600_000,
    },
    help: "stdio: a request with a progress token hears notifications/progress this often while it runs",
};
pub const PTY_WRITE_TIMEOUT_MS: Var = Var {
    name: "WINX_PTY_WRITE_TIMEOUT_MS",
    kind: Kind::Number {
        default: crate::shell::pty::DEFAULT_WRITE_TIMEOUT_MS,
        min: 100,
        max: 3_600_000,
    },
    help: "a write to a terminal that takes no input (a stopped or hung program) fails after this long",
};
pub const TASK_CANCEL_CHECK_MS: Var = Var {
    name: "WINX_TASK_CANCEL_CHECK_MS",
    kind: Kind::Number {
        default: 5_000,
        min: 10,
        max: 600_000,
    },
    help: "an MCP Task following a command rechecks the state store this often for a cancel another server process recorded",
};
pub const SERVER_INSTRUCTIONS: Var = Var {
    name: "WINX_SERVER_INSTRUCTIONS",
    kind: Kind::Text { default: "none" },
    help: "extra instructions appended to the handshake and full Initialize answers",
};
pub const HERDR_CONFIG: Var = Var {
    name: "WINX_HERDR_CONFIG",
    kind: Kind::Text {
        default: "none (Herdr off)",
    },
    help: "private (0600) JSON file enabling Agent's Herdr backend; read on Herdr calls only",
};
pub const RUNTIME: Var = Var {
    name: "WINX_RUNTIME",
    kind: Kind::OneOf {
        default: "daemon",
        values: &["daemon", "embedded"],
    },
    help: "daemon: winxd + guardians, shells outlive the server; embedded: in-process",
};
pub const SHELL: Var = Var {
    name: "WINX_SHELL",
    kind: Kind::Text { default: "bash" },
    help: "bash, zsh, or a path",
};
pub const SOCKET: Var = Var {
    name: "WINX_SOCKET",
    kind: Kind::Text {
        default: "$XDG_RUNTIME_DIR/winx/winxd.sock, else /tmp/winx-<uid>/winxd.sock",
    },
    help: "winxd's control socket",
};
pub const NO_REDACT: Var = Var {
    name: "WINX_NO_REDACT",
    kind: Kind::Flag,
    help: "turns off secret redaction in command output",
};
pub const ALLOW_PATHS: Var = Var {
    name: "WINX_ALLOW_PATHS",
    kind: Kind::Text { default: "none" },
    help: "extra roots file tools may use (colon-separated; / = unconfined)",
};
pub const READ_PARALLELISM: Var = Var {
    name: "WINX_READ_PARALLELISM",
    kind: Kind::Number {
        default: crate::files::read::DEFAULT_READ_PARALLELISM as u64,
        min: 1,
        max: crate::files::read::MAX_READ_PARALLELISM as u64,
    },
    help: "threads for batched file reads",
};
pub const MAX_TASKS: Var = Var {
    name: "WINX_MAX_TASKS",
    kind: Kind::Number {
        default: crate::tasks::store::MAX_WORKING as u64,
        min: 1,
        max: 256,
    },
    help: "MCP Tasks working at once; beyond it calls answer inline",
};
pub const SESSION_STATES: Var = Var {
    name: "WINX_SESSION_STATES",
    kind: Kind::Number {
        default: crate::tools::state::DEFAULT_MAX_SESSIONS as u64,
        min: 1,
        max: crate::tools::state::MAX_SESSIONS_LIMIT as u64,
    },
    help: "sessions whose in-memory tool state is kept (least recently used evicted)",
};
pub const HISTORY_OUTPUT_BYTES: Var = Var {
    name: "WINX_HISTORY_OUTPUT_BYTES",
    kind: Kind::Number {
        default: 1024 * 1024,
        min: 4096,
        max: 1024 * 1024 * 1024,
    },
    help: "execution history: output text retained per execution (newest kept)",
};
pub const NO_HISTORY: Var = Var {
    name: "WINX_NO_HISTORY",
    kind: Kind::Flag,
    help: "turns off execution history recording (Execution answers history_unavailable)",
};
pub const TURN_RECOGNIZER_CONFIG: Var = Var {
    name: "WINX_TURN_RECOGNIZER_CONFIG",
    kind: Kind::Text { default: "none" },
    help: "JSON rules {busy, awaiting_input, awaiting_approval} for the configurable turn recognizer (a private file)",
};
pub const HTTP_TOKEN: Var = Var {
    name: "WINX_HTTP_TOKEN",
    kind: Kind::Text { default: "none" },
    help: "single-principal HTTP token when no credential option is given",
};
pub const HTTP_REQUEST_TIMEOUT_MS: Var = Var {
    name: "WINX_HTTP_REQUEST_TIMEOUT_MS",
    kind: Kind::Number {
        default: 120_000,
        min: 1,
        max: DAY_MS,
    },
    help: "HTTP: a request taking longer is answered 408",
};
pub const HTTP_IO_TIMEOUT_MS: Var = Var {
    name: "WINX_HTTP_IO_TIMEOUT_MS",
    kind: Kind::Number {
        default: 30_000,
        min: 1,
        max: DAY_MS,
    },
    help: "HTTP: per-read and per-write socket timeout",
};
pub const HTTP_DRAIN_GRACE_MS: Var = Var {
    name: "WINX_HTTP_DRAIN_GRACE_MS",
    kind: Kind::Number {
        default: 20_000,
        min: 1,
        max: DAY_MS,
    },
    help: "HTTP: after SIGTERM, in-flight requests may finish for this long",
};
pub const UNUSED_SESSION_IDLE_TTL_SECS: Var = Var {
    name: "WINX_UNUSED_SESSION_IDLE_TTL_SECS",
    kind: Kind::Number {
        default: 1_800,
        min: 0,
        max: YEAR_SECS,
    },
    help: "winxd: idle TTL of sessions that never ran a command (0 = never expire)",
};
pub const SESSION_IDLE_TTL_SECS: Var = Var {
    name: "WINX_SESSION_IDLE_TTL_SECS",
    kind: Kind::Number {
        default: 86_400,
        min: 0,
        max: YEAR_SECS,
    },
    help: "winxd: idle TTL of sessions that ran a command (0 = never expire)",
};
pub const TTL_SWEEP_SECS: Var = Var {
    name: "WINX_TTL_SWEEP_SECS",
    kind: Kind::Number {
        default: 60,
        min: 1,
        max: YEAR_SECS,
    },
    help: "winxd: how often the idle TTLs are applied",
};
pub const MAX_GUARDIANS: Var = Var {
    name: "WINX_MAX_GUARDIANS",
    kind: Kind::Number {
        default: 32,
        min: 1,
        max: 1024,
    },
    help: "winxd: live guardian (session) quota",
};
pub const CLOCK_SKEW_SECS: Var = Var {
    name: "WINX_CLOCK_SKEW_SECS",
    kind: Kind::Number {
        default: 0,
        min: 0,
        max: 10 * YEAR_SECS,
    },
    help: "added to the clock for session TTL, history expiry and temporary-directory pruning only (tests)",
};
pub const BUILD_IDENTITY_OVERRIDE: Var = Var {
    name: "WINX_BUILD_IDENTITY_OVERRIDE",
    kind: Kind::Text {
        default: "the compiled identity",
    },
    help: "every winx process reports this build identity instead of its own (upgrade drills, tests)",
};

pub const LOG_FORMAT: Var = Var {
    name: "WINX_LOG_FORMAT",
    kind: Kind::OneOf {
        default: "text",
        values: &["text", "json"],
    },
    help: "stderr diagnostics as text lines or JSON lines",
};
pub const USAGE_LOG: Var = Var {
    name: "WINX_USAGE_LOG",
    kind: Kind::Text {
        default: "none (no usage log)",
    },
    help: "usage telemetry JSONL file (privacy-safe events; see `report`)",
};
pub const USAGE_LOG_ROTATION: Var = Var {
    name: "WINX_USAGE_LOG_ROTATION",
    kind: Kind::OneOf {
        default: "daily",
        values: &["daily", "hourly", "never"],
    },
    help: "usage log rotation period (UTC)",
};
pub const USAGE_LOG_KEEP_DAYS: Var = Var {
    name: "WINX_USAGE_LOG_KEEP_DAYS",
    kind: Kind::Number {
        default: 7,
        min: 0,
        max: 3650,
    },
    help: "rotated usage logs are pruned after this many days (0 keeps all)",
};
pub const USAGE_CLOCK_SKEW_SECS: Var = Var {
    name: "WINX_USAGE_CLOCK_SKEW_SECS",
    kind: Kind::Number {
        default: 0,
        min: 0,
        max: 10 * YEAR_SECS,
    },
    help: "added to the usage log's clock: timestamps, rotation, pruning (tests)",
};

pub const SANDBOX: Var = Var {
    name: "WINX_SANDBOX",
    kind: Kind::OneOf {
        default: "0",
        values: &["0", "1", "best-effort"],
    },
    help: "Landlock filesystem sandbox (Linux): 1 enforces it (no Landlock: startup error); best-effort runs unsandboxed where the kernel lacks it",
};
pub const SANDBOX_WORKSPACE: Var = Var {
    name: "WINX_SANDBOX_WORKSPACE",
    kind: Kind::Text {
        default: "the current directory at startup",
    },
    help: "sandbox: the startup workspace, writable (an absolute path, not /)",
};
pub const SANDBOX_RW_PATHS: Var = Var {
    name: "WINX_SANDBOX_RW_PATHS",
    kind: Kind::Text { default: "none" },
    help: "sandbox: more writable roots (colon-separated absolute paths that exist)",
};
pub const SANDBOX_RO_PATHS: Var = Var {
    name: "WINX_SANDBOX_RO_PATHS",
    kind: Kind::Text { default: "none" },
    help: "sandbox: more read-only roots, e.g. toolchains under HOME (colon-separated absolute paths that exist)",
};

/// Every variable, in the order `--help` and the README list them.
pub const ALL: &[Var] = &[
    STATE_DIR,
    LOG,
    RUST_LOG,
    LOG_FORMAT,
    WORKERS,
    PROGRESS_INTERVAL_MS,
    PTY_WRITE_TIMEOUT_MS,
    SERVER_INSTRUCTIONS,
    HERDR_CONFIG,
    RUNTIME,
    SHELL,
    SOCKET,
    NO_REDACT,
    ALLOW_PATHS,
    READ_PARALLELISM,
    MAX_TASKS,
    TASK_CANCEL_CHECK_MS,
    SESSION_STATES,
    HISTORY_OUTPUT_BYTES,
    NO_HISTORY,
    TURN_RECOGNIZER_CONFIG,
    HTTP_TOKEN,
    HTTP_REQUEST_TIMEOUT_MS,
    HTTP_IO_TIMEOUT_MS,
    HTTP_DRAIN_GRACE_MS,
    UNUSED_SESSION_IDLE_TTL_SECS,
    SESSION_IDLE_TTL_SECS,
    TTL_SWEEP_SECS,
    MAX_GUARDIANS,
    CLOCK_SKEW_SECS,
    BUILD_IDENTITY_OVERRIDE,
    USAGE_LOG,
    USAGE_LOG_ROTATION,
    USAGE_LOG_KEEP_DAYS,
    USAGE_CLOCK_SKEW_SECS,
    SANDBOX,
    SANDBOX_WORKSPACE,
    SANDBOX_RW_PATHS,
    SANDBOX_RO_PATHS,
];

impl Var {
    /// The default, as the help and README show it.
    pub fn default_text(&self) -> String {
        match self.kind {
            Kind::Text { default } | Kind::OneOf { default, .. } => default.to_string(),
            Kind::Number { default, .. } => default.to_string(),
            Kind::Flag => "off".into(),
            Kind::Log { filters: false } => "warn".into(),
            Kind::Log { filters: true } => "unset".into(),
        }
    }

    /// The accepted values, as the help and README show them.
    pub fn range_text(&self) -> String {
        match self.kind {
            Kind::Text { .. } => "text".into(),
            Kind::Number { min, max, .. } => format!("{min}..={max}"),
            Kind::OneOf { values, .. } => values.join(", "),
            Kind::Flag => "1".into(),
            Kind::Log { filters: false } => LEVELS.join(", "),
            Kind::Log { filters: true } => "level, or level,target=level,…".into(),
        }
    }
}

/// The environment, as every reader here takes it.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `var`'s value, `None` when unset or blank.
pub fn text(var: &Var, env: Env) -> Option<String> {
    env(var.name).filter(|v| !v.trim().is_empty())
}

/// Parse and range-check a number variable by its table entry (unset or blank: its
/// default). The error names the variable and its range.
pub fn number(var: &Var, env: Env) -> Result<u64, ConfigError> {
    let Kind::Number { default, min, max } = var.kind else {
        return Err(ConfigError(format!("{} is not a number", var.name)));
    };
    let Some(v) = text(var, env) else {
        return Ok(default);
    };
    match v.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ConfigError(format!(
            "{} must be a whole number in {min}..={max}, got {v:?}",
            var.name
        ))),
    }
}

/// `var` as a `usize` (every `usize` range in the table fits).
pub fn count(var: &Var, env: Env) -> Result<usize, ConfigError> {
    number(var, env).map(|n| n as usize)
}

/// A `*_MS` variable as a duration.
pub fn millis(var: &Var, env: Env) -> Result<std::time::Duration, ConfigError> {
    number(var, env).map(std::time::Duration::from_millis)
}

/// One of `var`'s values (unset or blank: its default).
pub fn one_of(var: &Var, env: Env) -> Result<&'static str, ConfigError> {
    let Kind::OneOf { default, values } = var.kind else {
        return Err(ConfigError(format!("{} is not a choice", var.name)));
    };
    let Some(v) = text(var, env) else {
        return Ok(default);
    };
    values
        .iter()
        .find(|x| **x == v.trim())
        .copied()
        .ok_or_else(|| {
            ConfigError(format!(
                "{} must be one of {}, got {v:?}",
                var.name,
                values.join(", ")
            ))
        })
}

/// A `Flag` variable: on only when it is `1`.
pub fn flag(var: &Var, env: Env) -> bool {
    env(var.name).is_some_and(|v| v.trim() == "1")
}

/// The stderr log level: `WINX_LOG`, else `RUST_LOG`, else warn. An error names the
/// variable at fault.
pub fn log_level(env: Env) -> Result<log::LevelFilter, ConfigError> {
    if let Some(v) = text(&LOG, env) {
        return parse_level(&v)
            .ok_or_else(|| ConfigError(format!("invalid log level {v:?} in {}", LOG.name)));
    }
    match text(&RUST_LOG, env) {
        None => Ok(log::LevelFilter::Warn),
        Some(v) => parse_filters(&v).ok_or_else(|| {
            ConfigError(format!(
                "invalid log filter {v:?} in {} (levels: {})",
                RUST_LOG.name,
                LEVELS.join(", ")
            ))
        }),
    }
}

fn parse_level(v: &str) -> Option<log::LevelFilter> {
    match v.trim().to_ascii_lowercase().as_str() {
        "off" => Some(log::LevelFilter::Off),
        "error" => Some(log::LevelFilter::Error),
        "warn" | "warning" => Some(log::LevelFilter::Warn),
        "info" => Some(log::LevelFilter::Info),
        "debug" => Some(log::LevelFilter::Debug),
        "trace" => Some(log::LevelFilter::Trace),
        _ => None,
    }
}

/// An env_logger-style filter list (`info,winx=debug`, `winx=debug`, `warn/regex`).
/// We log under one level, so per-target entries cannot be applied as such: the plain
/// level wins (the most verbose, if several); without one, the most verbose target level,
/// so nothing asked for is hidden. A bare target name means trace, as in env_logger.
fn parse_filters(v: &str) -> Option<log::LevelFilter> {
    let spec = v.split('/').next().unwrap_or_default();
    let (mut plain, mut targeted) = (None, None);
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once('=') {
            Some((_, level)) => targeted = targeted.max(Some(parse_level(level)?)),
            None => match parse_level(entry) {
                Some(level) => plain = plain.max(Some(level)),
                None => targeted = targeted.max(Some(log::LevelFilter::Trace)),
            },
        }
    }
    plain.or(targeted).or(Some(log::LevelFilter::Warn))
}

/// The `--help` section listing every variable.
pub fn help_section() -> String {
    let mut out = String::from("Environment:\n");
    for v in ALL {
        out.push_str(&format!(
            "  {:<34} {}\n  {:<34} default {}; {}\n",
            v.name,
            v.help,
            "",
            v.default_text(),
            v.range_text()
        ));
    }
    out
}

/// The README's variable table, one row per entry.
pub fn readme_rows() -> Vec<[String; 4]> {
    ALL.iter()
        .map(|v| {
            [
                format!("`{}`", v.name),
                format!("`{}`", v.default_text()),
                format!("`{}`", v.range_text()),
                v.help.to_string(),
            ]
        })
        .collect()
}

/// The README's variable table as Markdown (header included).
pub fn readme_table() -> String {
    let mut out = String::from("| variable | default | range | meaning |\n|---|---|---|---|\n");
    for row in readme_rows() {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

#[cfg(test)]
#[path = "vars_tests.rs"]
mod tests;
