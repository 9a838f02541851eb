//! Configuration: raw command-line arguments (validated only) become one typed `Config`,
//! built once at startup and passed explicitly.
//!
//! Invariant: nothing outside this module reads environment variables for configuration.

pub mod agentcli;
pub mod cli;
pub mod credentials;
pub mod http;
pub mod opcli;
pub mod principals;
pub mod sandbox;
pub mod token;
pub mod usage;
pub mod vars;
pub mod winxd;

pub use vars::{ConfigError, DEFAULT_WORKERS};
pub use winxd::{daemon_socket, runtime_dir};

use crate::guardian::shell::resolve as resolve_shell;
use crate::jsonrpc::MAX_MESSAGE_BYTES;
use crate::runtime::{RuntimeConfig, RuntimeKind};
use crate::tools::policy::ToolPolicy;
use std::path::{Path, PathBuf};

/// The principal key of the stdio user (and of the operator's `agent` commands). No HTTP
/// principal has it: theirs are `http:<name>` (`http::key`), and the name is reserved.
pub const LOCAL_PRINCIPAL: &str = "local";

/// The process environment, read once by a binary's `main` and handed to the builders
/// here (the one place configuration comes from the environment).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// `WINX_BUILD_IDENTITY_OVERRIDE`: the build identity this process reports (in every
/// `Hello`, winxd's `Status`, guardian snapshots, `--version`). Each binary's `main` applies
/// it first, so a drill makes a whole process tree look like another build; unset (the
/// production case), the compiled identity stands.
pub fn apply_build_identity(env: vars::Env) {
    if let Some(v) = vars::text(&vars::BUILD_IDENTITY_OVERRIDE, env) {
        crate::build_info::set_identity_override(v.trim().to_string());
    }
}

/// `WINX_PTY_WRITE_TIMEOUT_MS`: how long this process's writes to a terminal wait for it to
/// take input. Applied at start by the adapter (embedded guardians) and each guardian; a
/// bad value is the adapter's startup error (`Config::build`), here the default stands.
pub fn apply_pty_write_timeout(env: vars::Env) {
    if let Ok(ms) = vars::number(&vars::PTY_WRITE_TIMEOUT_MS, env) {
        crate::shell::pty::set_write_timeout_ms(ms);
    }
}

/// A lookup over collected variables, as every builder here takes the environment.
pub fn lookup(vars: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

/// Everything the stdio server needs, decided once.
#[derive(Clone, Debug)]
pub struct Config {
    pub policy: ToolPolicy,
    pub state_dir: PathBuf,
    pub log_level: log::LevelFilter,
    pub workers: usize,
    pub max_message_bytes: usize,
    /// How often a stdio request with a progress token hears from us
    /// (`WINX_PROGRESS_INTERVAL_MS`, default 10 s).
    pub progress_interval: std::time::Duration,
    pub server_instructions: Option<String>,
    /// The principal of a stdio server: the local user.
    pub principal: String,
    /// `WINX_HERDR_CONFIG` (never read here) and the inherited `HERDR_*` names the Herdr
    /// runner removes; the HTTP server marks its principals as `http`.
    pub herdr: crate::tools::agent::herdr::Setting,
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
    /// How often a task following a command rechecks the store for a cancel recorded by
    /// another process (`WINX_TASK_CANCEL_CHECK_MS`, default 5 s).
    pub task_cancel_check: std::time::Duration,
    /// Sessions whose in-memory tool state is kept (`WINX_SESSION_STATES`,
    /// 1..=1,000,000, default `tools::state::DEFAULT_MAX_SESSIONS`).
    pub session_states: usize,
    /// Execution history retention (`WINX_HISTORY_OUTPUT_BYTES`; the clock skew of
    /// `WINX_CLOCK_SKEW_SECS`, for tests).
    pub history: crate::history::Limits,
    /// The usage log (`WINX_USAGE_LOG` and its rotation, retention and clock), if any.
    pub usage: Option<crate::usage::Settings>,
    /// `WINX_LOG_FORMAT=json`: stderr diagnostics as JSON lines.
    pub log_json: bool,
    /// `WINX_USAGE_CLOCK_SKEW_SECS` in ms (also without a log: `report --log` uses it).
    pub usage_clock_skew_ms: i64,
    /// The Landlock sandbox (`WINX_SANDBOX*`), applied by `main` before any thread.
    pub sandbox: crate::sandbox::Plan,
}

/// What `doctor` needs from the environment: presence flags and paths, never values of
/// secrets.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// Every place a control socket may live, in lookup order.
    pub socket_candidates: Vec<PathBuf>,
    /// `workspace`, `extended` or `unconfined` (from `WINX_ALLOW_PATHS`).
    pub file_containment: &'static str,
    pub http_credentials_configured: bool,
}

/// The usage log's settings from `WINX_USAGE_LOG*`; `None` without a log. Every value is
/// checked even without a log, so a typo is a startup error rather than a surprise the
/// day the log is turned on.
pub fn usage_settings(
    env: vars::Env,
    state_dir: &Path,
) -> Result<Option<crate::usage::Settings>, ConfigError> {
    let rotation = crate::usage::Rotation::parse(vars::one_of(&vars::USAGE_LOG_ROTATION, env)?)
        .unwrap_or(crate::usage::Rotation::Daily);
    let keep_days = vars::number(&vars::USAGE_LOG_KEEP_DAYS, env)? as u32;
    let clock_skew_ms = vars::number(&vars::USAGE_CLOCK_SKEW_SECS, env)? as i64 * 1000;
    let Some(path) = vars::text(&vars::USAGE_LOG, env) else {
        return Ok(None);
    };
    let path = PathBuf::from(path.trim());
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(ConfigError(format!(
            "{} must name a file, not a directory: {}",
            vars::USAGE_LOG.name,
            path.display()
        )));
    }
    Ok(Some(crate::usage::Settings {
        path,
        rotation,
        keep_days,
        clock_skew_ms,
        salt_file: state_dir.join("usage-salt"),
    }))
}

fn diagnostics(env: vars::Env) -> Diagnostics {
    let uid = nix::unistd::getuid().as_raw();
    let mut socket_candidates = Vec::new();
    if let Some(s) = vars::text(&vars::SOCKET, env) {
        socket_candidates.push(PathBuf::from(s));
    }
    // Under a sandbox the default places gain the rules' subdirectory (`runtime_dir`).
    let sub = PathBuf::from(sandbox::runtime_subdir(env).unwrap_or_default());
    if let Some(x) = env("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()) {
        socket_candidates.push(PathBuf::from(x).join("winx").join(&sub).join("winxd.sock"));
    }
    socket_candidates.push(
        PathBuf::from(format!("/tmp/winx-{uid}"))
            .join(&sub)
            .join("winxd.sock"),
    );
    let file_containment = match env(vars::ALLOW_PATHS.name).as_deref() {
        None | Some("") => "workspace",
        Some(v) if v.split(':').any(|p| p == "/") => "unconfined",
        Some(_) => "extended",
    };
    Diagnostics {
        socket_candidates,
        file_containment,
        http_credentials_configured: vars::text(&vars::HTTP_TOKEN, env).is_some(),
    }
}

impl Config {
    /// Build from validated arguments and the process environment (injectable for tests).
    pub fn build(
        args: &cli::ServeArgs,
        vars: Vec<(String, String)>,
    ) -> Result<Config, ConfigError> {
        let lookup = lookup(&vars);
        let env: vars::Env = &lookup;
        let policy = ToolPolicy::build(args.tool_profile.as_deref(), &args.allow_tools)
            .map_err(|e| ConfigError(e.to_string()))?;
        let state_dir = state_dir(env).ok_or_else(|| {
            ConfigError("cannot find a state directory: set WINX_STATE_DIR or HOME".into())
        })?;
        let log_level = vars::log_level(env)?;
        let workers = vars::count(&vars::WORKERS, env)?;
        // winxd's variables are checked here too, so a bad value is a startup error of the
        // adapter (exit 2) rather than a winxd that cannot start.
        winxd::lifecycle(env)?;
        // Applied by each process itself (`apply_pty_write_timeout`); checked here.
        vars::number(&vars::PTY_WRITE_TIMEOUT_MS, env)?;
        let mut runtime = runtime_config(env, &state_dir, vars.clone())?;
        let herdr_config = vars::text(&vars::HERDR_CONFIG, env).map(PathBuf::from);
        let sandbox = sandbox::plan(
            env,
            &state_dir,
            &runtime.runtime_dir,
            herdr_config.as_slice(),
        )?;
        sandbox::child_env(&sandbox, &mut runtime.base_env);
        // winxd, guardians and shells never get a credential (`credentials`).
        runtime.base_env.retain(|(k, _)| !credentials::is_secret(k));
        let mut allow_paths = crate::files::policy::AllowPaths::parse(
            &vars::text(&vars::ALLOW_PATHS, env).unwrap_or_default(),
        );
        // The server's own state is never a file tool's business. The runtime directory is
        // ours only when WINX_SOCKET does not name another place (its parent may be shared).
        allow_paths.protect_dir(&state_dir);
        if vars::text(&vars::SOCKET, env).is_none() {
            allow_paths.protect_dir(&runtime.runtime_dir);
        }
        let usage = usage_settings(env, &state_dir)?;
        if let Some(u) = &usage {
            sandbox::check_usage_log(&sandbox, &u.path)?;
        }
        Ok(Config {
            sandbox,
            usage,
            log_json: vars::one_of(&vars::LOG_FORMAT, env)? == "json",
            usage_clock_skew_ms: vars::number(&vars::USAGE_CLOCK_SKEW_SECS, env)? as i64 * 1000,
            runtime,
            redact: !vars::flag(&vars::NO_REDACT, env),
            diagnostics: diagnostics(env),
            allow_paths,
            read_parallelism: vars::count(&vars::READ_PARALLELISM, env)?,
            max_tasks: vars::count(&vars::MAX_TASKS, env)?,
            task_cancel_check: vars::millis(&vars::TASK_CANCEL_CHECK_MS, env)?,
            session_states: vars::count(&vars::SESSION_STATES, env)?,
            history: crate::history::Limits {
                output_bytes: vars::number(&vars::HISTORY_OUTPUT_BYTES, env)?,
                clock_skew_ms: vars::number(&vars::CLOCK_SKEW_SECS, env)? as i64 * 1000,
                turn_rules: turn_rules(env)?,
                enabled: !vars::flag(&vars::NO_HISTORY, env),
                ..Default::default()
            },
            policy,
            state_dir,
            log_level,
            workers,
            max_message_bytes: MAX_MESSAGE_BYTES,
            progress_interval: vars::millis(&vars::PROGRESS_INTERVAL_MS, env)?,
            server_instructions: vars::text(&vars::SERVER_INSTRUCTIONS, env),
            principal: LOCAL_PRINCIPAL.into(),
            herdr: crate::tools::agent::herdr::Setting {
                config: herdr_config,
                http: false,
                inherited: vars
                    .iter()
                    .filter(|(k, _)| k.starts_with("HERDR_"))
                    .map(|(k, _)| k.clone())
                    .collect(),
            },
        })
    }
}

/// The configurable recognizer's rules (`WINX_TURN_RECOGNIZER_CONFIG`), checked at start.
fn turn_rules(
    env: vars::Env,
) -> Result<Option<std::sync::Arc<crate::shell::turn::Rules>>, ConfigError> {
    let Some(path) = vars::text(&vars::TURN_RECOGNIZER_CONFIG, env) else {
        return Ok(None);
    };
    crate::shell::turn::load_rules(std::path::Path::new(&path))
        .map(|r| Some(std::sync::Arc::new(r)))
        .map_err(|e| ConfigError(format!("WINX_TURN_RECOGNIZER_CONFIG ({path}): {e}")))
}

/// `$WINX_STATE_DIR`, else `$XDG_STATE_HOME/winx`, else `~/.local/state/winx`.
pub(crate) fn state_dir(env: vars::Env) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(d) = vars::text(&vars::STATE_DIR, env) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = nonempty("XDG_STATE_HOME") {
        return Some(PathBuf::from(d).join("winx"));
    }
    nonempty("HOME").map(|h| PathBuf::from(h).join(".local/state/winx"))
}

fn runtime_config(
    env: vars::Env,
    state_dir: &Path,
    base_env: Vec<(String, String)>,
) -> Result<RuntimeConfig, ConfigError> {
    let kind = match vars::one_of(&vars::RUNTIME, env)? {
        "embedded" => RuntimeKind::Embedded,
        _ => RuntimeKind::Daemon,
    };
    let shell_name = vars::text(&vars::SHELL, env).unwrap_or_else(|| "bash".into());
    let path_var = env("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let shell = resolve_shell(&shell_name, &path_var).ok_or_else(|| {
        ConfigError(format!(
            "shell {shell_name:?} not found (WINX_SHELL / PATH)"
        ))
    })?;
    let runtime_dir = runtime_dir(env);
    let daemon_socket = daemon_socket(env);
    Ok(RuntimeConfig {
        kind,
        daemon_socket,
        runtime_dir,
        sessions_dir: state_dir.join("sessions"),
        shell,
        base_env,
    })
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

    #[test]
    fn usage_log_settings_are_checked_even_without_a_log() {
        let c = build(&[("HOME", "/h")]).unwrap();
        assert!(c.usage.is_none() && !c.log_json);
        let c = build(&[
            ("HOME", "/h"),
            ("WINX_USAGE_LOG", "/l/usage.jsonl"),
            ("WINX_USAGE_LOG_ROTATION", "hourly"),
            ("WINX_USAGE_LOG_KEEP_DAYS", "0"),
            ("WINX_LOG_FORMAT", "json"),
        ])
        .unwrap();
        let u = c.usage.unwrap();
        assert_eq!(u.rotation, crate::usage::Rotation::Hourly);
        assert_eq!(u.keep_days, 0);
        assert_eq!(
            u.salt_file,
            PathBuf::from("/h/.local/state/winx/usage-salt")
        );
        assert!(c.log_json);
        for (k, v) in [
            ("WINX_USAGE_LOG_KEEP_DAYS", "-1"),
            ("WINX_USAGE_LOG_KEEP_DAYS", "99999"),
            ("WINX_USAGE_LOG_ROTATION", "weekly"),
            ("WINX_LOG_FORMAT", "xml"),
        ] {
            let e = build(&[("HOME", "/h"), (k, v)]).unwrap_err();
            assert!(e.0.contains(k), "{e}");
        }
        let e = build(&[("HOME", "/h"), ("WINX_USAGE_LOG", "/l/")]).unwrap_err();
        assert!(e.0.contains("not a directory"), "{e}");
    }
}
