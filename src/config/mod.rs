//! Configuration: raw command-line arguments (validated only) become one typed `Config`,
//! built once at startup and passed explicitly.
//!
//! Invariant: nothing outside this module reads environment variables for configuration.

pub mod cli;
pub mod http;
pub mod opcli;
pub mod usage;

use crate::guardian::shell::resolve as resolve_shell;
use crate::jsonrpc::MAX_MESSAGE_BYTES;
use crate::runtime::{RuntimeConfig, RuntimeKind};
use crate::tools::policy::ToolPolicy;
use std::path::{Path, PathBuf};

/// Default size of the request worker pool. Small on purpose: tool calls are I/O bound and
/// the machines we target have two cores; long shell waits park on channels, not threads.
pub const DEFAULT_WORKERS: usize = 8;

/// Environment variables the server reads (all at startup, here).
pub mod env {
    pub const STATE_DIR: &str = "WINX_STATE_DIR";
    pub const LOG: &str = "WINX_LOG";
    pub const RUST_LOG: &str = "RUST_LOG";
    pub const WORKERS: &str = "WINX_WORKERS";
    pub const SERVER_INSTRUCTIONS: &str = "WINX_SERVER_INSTRUCTIONS";
    pub const RUNTIME: &str = "WINX_RUNTIME";
    pub const SHELL: &str = "WINX_SHELL";
    pub const SOCKET: &str = "WINX_SOCKET";
    pub const NO_REDACT: &str = "WINX_NO_REDACT";
}

/// Everything the stdio server needs, decided once.
#[derive(Clone, Debug)]
pub struct Config {
    pub policy: ToolPolicy,
    pub state_dir: PathBuf,
    pub log_level: log::LevelFilter,
    pub workers: usize,
    pub max_message_bytes: usize,
    pub server_instructions: Option<String>,
    /// The principal of a stdio server: the local user.
    pub principal: String,
    pub runtime: RuntimeConfig,
    /// Secret redaction of command output (on unless `WINX_NO_REDACT=1`).
    pub redact: bool,
    /// Facts `doctor` reports; never secret values.
    pub diagnostics: Diagnostics,
    /// Extra roots file tools may reach (`WINX_ALLOW_PATHS`; `/` = unconfined).
    pub allow_paths: crate::files::policy::AllowPaths,
    /// Threads for batched reads (`WINX_READ_PARALLELISM`, 1..=32, default 4).
    pub read_parallelism: usize,
    /// MCP Tasks working at once (`WINX_MAX_TASKS`, 1..=256, default 32).
    pub max_tasks: usize,
    /// Sessions whose in-memory tool state is kept (`WINX_SESSION_STATES`,
    /// 1..=1,000,000, default `tools::state::DEFAULT_MAX_SESSIONS`).
    pub session_states: usize,
}

/// What `doctor` needs from the environment: presence flags and paths, never values of
/// secrets.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// Every place a control socket may live, in lookup order.
    pub socket_candidates: Vec<PathBuf>,
    /// `workspace`, `extended` or `unconfined` (from `WINX_ALLOW_PATHS`).
    pub file_containment: &'static str,
    pub usage_log_configured: bool,
    pub http_credentials_configured: bool,
}

fn diagnostics(env: &dyn Fn(&str) -> Option<String>) -> Diagnostics {
    let uid = nix::unistd::getuid().as_raw();
    let mut socket_candidates = Vec::new();
    if let Some(s) = env(env::SOCKET).filter(|s| !s.is_empty()) {
        socket_candidates.push(PathBuf::from(s));
    }
    if let Some(x) = env("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()) {
        socket_candidates.push(PathBuf::from(x).join("winx/winxd.sock"));
    }
    socket_candidates.push(PathBuf::from(format!("/tmp/winx-{uid}/winxd.sock")));
    let file_containment = match env("WINX_ALLOW_PATHS").as_deref() {
        None | Some("") => "workspace",
        Some(v) if v.split(':').any(|p| p == "/") => "unconfined",
        Some(_) => "extended",
    };
    Diagnostics {
        socket_candidates,
        file_containment,
        usage_log_configured: env("WINX_USAGE_LOG").is_some_and(|v| !v.is_empty()),
        http_credentials_configured: env("WINX_HTTP_TOKEN").is_some_and(|v| !v.is_empty()),
    }
}

/// A configuration problem, reported at startup with exit code 2.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Config {
    /// Build from validated arguments and the process environment (injectable for tests).
    pub fn build(
        args: &cli::ServeArgs,
        vars: Vec<(String, String)>,
    ) -> Result<Config, ConfigError> {
        let lookup = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let env: &dyn Fn(&str) -> Option<String> = &lookup;
        let policy = ToolPolicy::build(args.tool_profile.as_deref(), &args.allow_tools)
            .map_err(|e| ConfigError(e.to_string()))?;
        let state_dir = state_dir(env).ok_or_else(|| {
            ConfigError("cannot find a state directory: set WINX_STATE_DIR or HOME".into())
        })?;
        let log_level = match env(env::LOG).or_else(|| env(env::RUST_LOG)) {
            None => log::LevelFilter::Warn,
            Some(v) => parse_level(&v)
                .ok_or_else(|| ConfigError(format!("invalid log level {v:?} in WINX_LOG")))?,
        };
        let workers = match env(env::WORKERS) {
            None => DEFAULT_WORKERS,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => n,
                _ => {
                    return Err(ConfigError(format!(
                        "WINX_WORKERS must be 1..=256, got {v:?}"
                    )));
                }
            },
        };
        let runtime = runtime_config(env, &state_dir, vars.clone())?;
        let mut allow_paths =
            crate::files::policy::AllowPaths::parse(&env("WINX_ALLOW_PATHS").unwrap_or_default());
        // The server's own state is never a file tool's business. The runtime directory is
        // ours only when WINX_SOCKET does not name another place (its parent may be shared).
        allow_paths.protect_dir(&state_dir);
        if env(env::SOCKET).is_none_or(|s| s.is_empty()) {
            allow_paths.protect_dir(&runtime.runtime_dir);
        }
        Ok(Config {
            runtime,
            redact: env(env::NO_REDACT).is_none_or(|v| v != "1"),
            diagnostics: diagnostics(env),
            allow_paths,
            read_parallelism: match env("WINX_READ_PARALLELISM") {
                None => crate::files::read::DEFAULT_READ_PARALLELISM,
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if (1..=crate::files::read::MAX_READ_PARALLELISM).contains(&n) => n,
                    _ => {
                        return Err(ConfigError(format!(
                            "WINX_READ_PARALLELISM must be 1..=32, got {v:?}"
                        )));
                    }
                },
            },
            max_tasks: match env("WINX_MAX_TASKS") {
                None => crate::tasks::store::MAX_WORKING,
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if (1..=256).contains(&n) => n,
                    _ => {
                        return Err(ConfigError(format!(
                            "WINX_MAX_TASKS must be 1..=256, got {v:?}"
                        )));
                    }
                },
            },
            session_states: match env("WINX_SESSION_STATES") {
                None => crate::tools::state::DEFAULT_MAX_SESSIONS,
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if (1..=crate::tools::state::MAX_SESSIONS_LIMIT).contains(&n) => n,
                    _ => {
                        return Err(ConfigError(format!(
                            "WINX_SESSION_STATES must be 1..=1000000, got {v:?}"
                        )));
                    }
                },
            },
            policy,
            state_dir,
            log_level,
            workers,
            max_message_bytes: MAX_MESSAGE_BYTES,
            server_instructions: env(env::SERVER_INSTRUCTIONS).filter(|s| !s.trim().is_empty()),
            principal: "local".into(),
        })
    }
}

/// `$WINX_STATE_DIR`, else `$XDG_STATE_HOME/winx`, else `~/.local/state/winx`.
fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(d) = nonempty(env::STATE_DIR) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = nonempty("XDG_STATE_HOME") {
        return Some(PathBuf::from(d).join("winx"));
    }
    nonempty("HOME").map(|h| PathBuf::from(h).join(".local/state/winx"))
}

fn runtime_config(
    env: &dyn Fn(&str) -> Option<String>,
    state_dir: &Path,
    base_env: Vec<(String, String)>,
) -> Result<RuntimeConfig, ConfigError> {
    let kind = match env(env::RUNTIME).as_deref() {
        None | Some("") | Some("daemon") => RuntimeKind::Daemon,
        Some("embedded") => RuntimeKind::Embedded,
        Some(other) => {
            return Err(ConfigError(format!(
                "WINX_RUNTIME must be daemon or embedded, got {other:?}"
            )));
        }
    };
    let shell_name = env(env::SHELL)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "bash".into());
    let path_var = env("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let shell = resolve_shell(&shell_name, &path_var).ok_or_else(|| {
        ConfigError(format!(
            "shell {shell_name:?} not found (WINX_SHELL / PATH)"
        ))
    })?;
    let runtime_dir = runtime_dir(env);
    let daemon_socket = env(env::SOCKET)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime_dir.join("winxd.sock"));
    Ok(RuntimeConfig {
        kind,
        daemon_socket,
        runtime_dir,
        sessions_dir: state_dir.join("sessions"),
        shell,
        base_env,
    })
}

/// `WINX_SOCKET`'s directory, else `$XDG_RUNTIME_DIR/winx` when that directory is ours and
/// private, else `/tmp/winx-<uid>`.
pub fn runtime_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::getuid().as_raw();
    if let Some(sock) = env(env::SOCKET).filter(|s| !s.is_empty())
        && let Some(dir) = Path::new(&sock).parent()
    {
        return dir.to_path_buf();
    }
    if let Some(xdg) = env("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()) {
        let ok = std::fs::metadata(&xdg)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
        if ok {
            return PathBuf::from(xdg).join("winx");
        }
    }
    PathBuf::from(format!("/tmp/winx-{uid}"))
}

/// Accepts a plain level name (`RUST_LOG=debug`); module filters are not supported.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn build(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut v: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.push(("PATH".into(), "/usr/bin:/bin".into()));
        Config::build(&cli::ServeArgs::default(), v)
    }

    #[test]
    fn state_dir_precedence() {
        let c = build(&[("HOME", "/h"), ("XDG_STATE_HOME", "/x")]).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/x/winx"));
        let c = build(&[("HOME", "/h"), ("WINX_STATE_DIR", "/s")]).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/s"));
        let c = build(&[("HOME", "/h")]).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/h/.local/state/winx"));
        assert!(build(&[]).is_err());
    }

    #[test]
    fn log_level_and_workers() {
        let c = build(&[("HOME", "/h"), ("WINX_LOG", "debug")]).unwrap();
        assert_eq!(c.log_level, log::LevelFilter::Debug);
        assert!(build(&[("HOME", "/h"), ("WINX_LOG", "loud")]).is_err());
        assert!(build(&[("HOME", "/h"), ("WINX_WORKERS", "0")]).is_err());
        assert_eq!(
            build(&[("HOME", "/h"), ("WINX_WORKERS", "3")])
                .unwrap()
                .workers,
            3
        );
    }
}
