//! Starting the session's shell on a PTY with a private rc file and the prompt marker.
//!
//! Invariant: the user's rc files are never read or written; the private rc deletes itself
//! once sourced, so the marker nonce lives only in the shell's memory.

use crate::shell::marker::{Scanner, bash_prompt, prompt_function};
use crate::shell::pty::{self, SpawnSpec, Spawned};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Which shell dialect the rc file is written in (the wire type: winxd passes it on).
pub use crate::wire::Dialect;

/// Everything needed to (re)start the session's shell.
#[derive(Clone, Debug)]
pub struct ShellSpec {
    /// Absolute path of the shell binary.
    pub program: String,
    pub dialect: Dialect,
    /// Base environment (server-only variables already removed).
    pub env: Vec<(String, String)>,
    pub workspace: String,
    /// Private per-session directory (0700): rc files, journals.
    pub session_dir: PathBuf,
    /// Thread id and principal, reported to operators.
    pub labels: crate::wire::guardian::Labels,
    /// The session's managed temporary directory (`WINX_TEMP_DIR`), when the adapter
    /// named one.
    pub temp_dir: Option<String>,
}

/// Environment variables never passed to the shell: server secrets and settings.
pub fn is_server_only(name: &str) -> bool {
    name.starts_with("WINX_") && name != "WINX_WORKSPACE_ROOT"
}

/// Resolve a shell name (`bash`, `zsh`, or a path) against PATH.
pub fn resolve(name: &str, path_var: &str) -> Option<(String, Dialect)> {
    let dialect = if Path::new(name)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("zsh"))
    {
        Dialect::Zsh
    } else {
        Dialect::Bash
    };
    if name.contains('/') {
        return Path::new(name)
            .is_file()
            .then(|| (name.to_string(), dialect));
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .map(|p| (p.to_string_lossy().into_owned(), dialect))
}

/// A started shell. The marker scanner belongs to it (one nonce per shell).
pub struct Shell {
    pub pid: i32,
    pub master: std::os::fd::OwnedFd,
    pub scanner: Scanner,
    pub alive: bool,
    /// The first marker (end of rc) has been seen.
    pub ready: bool,
    pub exit_code: Option<i32>,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// The environment of every shell and background command: the base environment without
/// server-only variables, plus the terminal and pager settings winx relies on.
fn shell_env(spec: &ShellSpec) -> Vec<String> {
    let mut env: Vec<String> = spec
        .env
        .iter()
        .filter(|(k, _)| {
            !is_server_only(k) && !matches!(k.as_str(), "TERM" | "PAGER" | "GIT_PAGER" | "PS1")
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    env.extend([
        "TERM=xterm-256color".to_string(),
        "PAGER=cat".into(),
        "GIT_PAGER=cat".into(),
        format!("WINX_WORKSPACE_ROOT={}", spec.workspace),
    ]);
    // Set after the filter above, so an inherited `WINX_TEMP_DIR` (a winx inside a winx
    // shell) never leaks in: the value is always this session's directory.
    env.extend(spec.temp_dir.iter().map(|t| format!("WINX_TEMP_DIR={t}")));
    env
}

pub fn start(spec: &ShellSpec, nonce: &str) -> Result<Shell, String> {
    let tag = &nonce[..8.min(nonce.len())];
    let mut env = shell_env(spec);
    // History expansion is off: `!` in a command is an ordinary character (a password,
    // `echo !!`), never a re-run of an earlier line or an `event not found`.
    let common = format!(
        "PS2=''\nunset HISTFILE\nstty -echo 2>/dev/null\ncd -- {ws} 2>/dev/null\n",
        ws = quote(&spec.workspace),
    );
    let (args, rc_path) = match spec.dialect {
        Dialect::Bash => {
            let rc = spec.session_dir.join(format!("rc-{tag}.bash"));
            let text = format!(
                "{common}set +H\nIGNOREEOF=1000\nunset PROMPT_COMMAND\n{prompt}rm -f -- {}\n",
                quote(&rc.to_string_lossy()),
                prompt = bash_prompt(nonce),
            );
            write_private(&rc, &text).map_err(|e| format!("write rc file: {e}"))?;
            let args = vec![
                "--noediting".to_string(),
                "--noprofile".into(),
                "--rcfile".into(),
                rc.to_string_lossy().into_owned(),
                "-i".into(),
            ];
            (args, rc)
        }
        Dialect::Zsh => {
            let dir = spec.session_dir.join(format!("zdot-{tag}"));
            fs::create_dir(&dir).map_err(|e| format!("create zsh dir: {e}"))?;
            let rc = dir.join(".zshrc");
            let text = format!(
                "{common}{prompt}PS1=''\nsetopt ignoreeof no_bang_hist\nunsetopt zle prompt_cr prompt_sp\nprecmd_functions=(__winx_prompt)\nrm -rf -- {}\n",
                quote(&dir.to_string_lossy()),
                prompt = prompt_function(nonce),
            );
            write_private(&rc, &text).map_err(|e| format!("write rc file: {e}"))?;
            env.push(format!("ZDOTDIR={}", dir.to_string_lossy()));
            (vec!["-i".to_string()], rc)
        }
    };
    let layer = shell_layer(spec)?;
    let spawned = pty::spawn(&SpawnSpec {
        program: spec.program.clone(),
        args,
        env,
        cwd: spec.workspace.clone(),
        rows: pty::DEFAULT_ROWS,
        cols: pty::DEFAULT_COLS,
        landlock: layer.as_ref().map(|fd| fd.as_raw_fd()),
    });
    match spawned {
        Ok(Spawned { pid, master }) => Ok(Shell {
            pid,
            master,
            scanner: Scanner::new(nonce),
            alive: true,
            ready: false,
            exit_code: None,
        }),
        Err(e) => {
            let _ = fs::remove_file(&rc_path);
            Err(format!("cannot start {}: {e}", spec.program))
        }
    }
}

/// Spawn a background command on its own PTY with the same environment rules.
pub fn spawn_background(spec: &ShellSpec, cwd: &str, command: &str) -> Result<Spawned, String> {
    let layer = shell_layer(spec)?;
    pty::spawn(&SpawnSpec {
        program: spec.program.clone(),
        args: vec!["-c".into(), command.into()],
        env: shell_env(spec),
        cwd: cwd.into(),
        rows: pty::DEFAULT_ROWS,
        cols: pty::DEFAULT_COLS,
        landlock: layer.as_ref().map(|fd| fd.as_raw_fd()),
    })
    .map_err(|e| format!("cannot start background command: {e}"))
}

/// Under an enforced sandbox, the shells' own Landlock layer (`sandbox::shells`): winx's
/// state and runtime directories out of reach, this session's directory in.
fn shell_layer(spec: &ShellSpec) -> Result<Option<std::os::fd::OwnedFd>, String> {
    crate::sandbox::shells::layer(&spec.session_dir).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_only_variables_are_filtered() {
        assert!(is_server_only("WINX_HTTP_TOKEN"));
        assert!(is_server_only("WINX_USAGE_LOG"));
        assert!(!is_server_only("WINX_WORKSPACE_ROOT"));
        assert!(!is_server_only("HOME"));
    }

    #[test]
    fn resolves_shells_on_path() {
        let (p, d) = resolve("sh", "/usr/bin:/bin").unwrap();
        assert!(p.ends_with("/sh"));
        assert_eq!(d, Dialect::Bash);
        assert!(resolve("no-such-shell-winx", "/usr/bin:/bin").is_none());
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }
}
