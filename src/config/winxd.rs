//! winxd's configuration: its socket, lifecycle settings and log level, from its flags and
//! the variables of the table (`vars.rs`). Also where the runtime directory is decided,
//! which the adapter shares.

use super::vars::{self, ConfigError, Env, SOCKET, text};
use crate::wire::daemon::Lifecycle;
use std::path::{Path, PathBuf};

/// Everything winxd decides at start (changing it needs `restart-daemon`).
#[derive(Clone, Debug)]
pub struct WinxdConfig {
    pub socket: PathBuf,
    pub lifecycle: Lifecycle,
    pub log_level: log::LevelFilter,
    /// `WINX_LOG_FORMAT=json`.
    pub log_json: bool,
    /// The Landlock sandbox winxd applies to itself (and so to every guardian it starts);
    /// a winxd started by a sandboxed adapter already runs inside that adapter's.
    pub sandbox: crate::sandbox::Plan,
    /// The directories the sandbox's rules name that winxd creates before applying it.
    pub own_dirs: Vec<PathBuf>,
    /// The `WINX_SANDBOX*` variables every guardian gets in place of the requester's
    /// (`sandbox::guardian_env`).
    pub guardian_env: Vec<(String, String)>,
}

impl WinxdConfig {
    /// From `--socket` (if given) and the environment.
    pub fn build(socket: Option<PathBuf>, env: Env) -> Result<WinxdConfig, ConfigError> {
        let socket = socket.unwrap_or_else(|| daemon_socket(env));
        let (sandbox, own_dirs) = own_sandbox(env, &socket, None)?;
        Ok(WinxdConfig {
            guardian_env: super::sandbox::guardian_env(env, &sandbox),
            sandbox,
            own_dirs,
            socket,
            lifecycle: lifecycle(env)?,
            log_level: vars::log_level(env)?,
            log_json: vars::one_of(&vars::LOG_FORMAT, env)? == "json",
        })
    }
}

/// The sandbox plan of winxd (runtime directory: its socket's) or of a guardian (runtime
/// directory: the parent of its socket's `g/`; its session directory writable too), and
/// the private directories to create before applying it. Both take the state directory
/// from the environment the adapter handed down.
pub fn own_sandbox(
    env: Env,
    socket: &Path,
    session_dir: Option<&Path>,
) -> Result<(crate::sandbox::Plan, Vec<PathBuf>), ConfigError> {
    if super::sandbox::mode(env)? == crate::sandbox::Mode::Off {
        return Ok(Default::default());
    }
    let mut runtime = socket.parent().unwrap_or(Path::new("/")).to_path_buf();
    if session_dir.is_some() && runtime.ends_with("g") {
        runtime.pop();
    }
    let state = super::state_dir(env)
        .or_else(|| session_dir.map(Path::to_path_buf))
        .ok_or_else(|| {
            ConfigError(
                "WINX_SANDBOX: cannot find a state directory: set WINX_STATE_DIR or HOME".into(),
            )
        })?;
    let mut plan = super::sandbox::plan(env, &state, &runtime, &[])?;
    let mut own_dirs = vec![state, runtime];
    if let Some(dir) = session_dir {
        plan.rules.writable.push(super::sandbox::resolve(dir));
        own_dirs.push(dir.to_path_buf());
    }
    Ok((plan, own_dirs))
}

/// The lifecycle settings, each checked by its table entry.
pub fn lifecycle(env: Env) -> Result<Lifecycle, ConfigError> {
    Ok(Lifecycle {
        unused_ttl_secs: vars::number(&vars::UNUSED_SESSION_IDLE_TTL_SECS, env)?,
        used_ttl_secs: vars::number(&vars::SESSION_IDLE_TTL_SECS, env)?,
        max_guardians: vars::count(&vars::MAX_GUARDIANS, env)?,
        sweep_secs: vars::number(&vars::TTL_SWEEP_SECS, env)?,
        // In range 0..=10 years, so it fits an i64.
        clock_skew_secs: vars::number(&vars::CLOCK_SKEW_SECS, env)? as i64,
    })
}

/// winxd's socket: `WINX_SOCKET`, else `winxd.sock` in the runtime directory.
pub fn daemon_socket(env: Env) -> PathBuf {
    text(&SOCKET, env)
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime_dir(env).join("winxd.sock"))
}

/// `WINX_SOCKET`'s directory, else `$XDG_RUNTIME_DIR/winx` when that directory is ours and
/// private, else `/tmp/winx-<uid>`; under a sandbox, the rules' subdirectory of either
/// (`sandbox::runtime_subdir`).
pub fn runtime_dir(env: Env) -> PathBuf {
    if text(&SOCKET, env).is_some() {
        return base_runtime_dir(env);
    }
    let base = base_runtime_dir(env);
    match super::sandbox::runtime_subdir(env) {
        Some(sub) => base.join(sub),
        None => base,
    }
}

fn base_runtime_dir(env: Env) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::getuid().as_raw();
    if let Some(sock) = text(&SOCKET, env)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_defaults_and_range_errors() {
        let none = |_: &str| None;
        let l = lifecycle(&none).unwrap();
        assert_eq!(
            (
                l.unused_ttl_secs,
                l.used_ttl_secs,
                l.max_guardians,
                l.sweep_secs
            ),
            (1_800, 86_400, 32, 60)
        );
        let zero_sweep = |k: &str| (k == "WINX_TTL_SWEEP_SECS").then(|| "0".to_string());
        let e = lifecycle(&zero_sweep).unwrap_err();
        assert!(e.0.starts_with("WINX_TTL_SWEEP_SECS must be"), "{e}");
    }
}
