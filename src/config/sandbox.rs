//! The Landlock sandbox's plan from `WINX_SANDBOX*` (see docs/architecture.md, "Landlock
//! sandbox"): the mode, the startup workspace, and what is writable and readable. The
//! plan is pure (it only checks that the operator's paths exist); `enter` creates the
//! server's own private directories and applies it.

use super::vars::{self, ConfigError, Env};
use crate::sandbox::{Applied, Mode, Plan, Rules};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Readable (and executable) system trees, when they exist. HOME is not among them: it
/// holds credentials (`~/.ssh`, cloud and registry tokens); toolchains under it are named
/// in `WINX_SANDBOX_RO_PATHS`.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run",
    "/proc", "/sys",
];
/// Device trees: existing nodes read, written and ioctl'd (terminals, `/dev/null`).
const DEVICES: &[&str] = &["/dev"];
/// The shared temporary directory, always writable.
const TMP: &str = "/tmp";

/// `WINX_SANDBOX` as a mode.
pub fn mode(env: Env) -> Result<Mode, ConfigError> {
    Ok(match vars::one_of(&vars::SANDBOX, env)? {
        "1" => Mode::Enforce,
        "best-effort" => Mode::BestEffort,
        _ => Mode::Off,
    })
}

/// The startup workspace: `WINX_SANDBOX_WORKSPACE`, else the current directory, resolved.
/// It must exist, be a directory and not be `/` (which would make everything writable).
pub fn workspace(env: Env) -> Result<PathBuf, ConfigError> {
    let name = vars::SANDBOX_WORKSPACE.name;
    let raw = match vars::text(&vars::SANDBOX_WORKSPACE, env) {
        Some(v) => {
            let p = PathBuf::from(v.trim());
            if !p.is_absolute() {
                return Err(ConfigError(format!(
                    "{name} must be an absolute path, got {:?}",
                    p.display()
                )));
            }
            p
        }
        None => std::env::current_dir().map_err(|e| {
            ConfigError(format!(
                "WINX_SANDBOX: cannot read the current directory ({e}); set {name}"
            ))
        })?,
    };
    let ws = raw.canonicalize().map_err(|e| {
        ConfigError(format!(
            "WINX_SANDBOX: the startup workspace {} cannot be used: {e}",
            raw.display()
        ))
    })?;
    if !ws.is_dir() || ws == Path::new("/") {
        return Err(ConfigError(format!(
            "WINX_SANDBOX: the startup workspace must be a directory other than /, got {} \
             (set {name})",
            ws.display()
        )));
    }
    Ok(ws)
}

/// A colon-separated list of absolute paths that exist, resolved.
fn path_list(var: &vars::Var, env: Env) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out = Vec::new();
    for entry in vars::text(var, env).unwrap_or_default().split(':') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let p = Path::new(entry);
        if !p.is_absolute() {
            return Err(ConfigError(format!(
                "{} takes absolute paths, got {entry:?}",
                var.name
            )));
        }
        out.push(
            p.canonicalize()
                .map_err(|e| ConfigError(format!("{}: {entry} cannot be used: {e}", var.name)))?,
        );
    }
    Ok(out)
}

/// `path` with its longest existing prefix resolved (symlinks, `..`) and the rest
/// appended, so a path that does not exist yet can be compared with resolved roots.
pub fn resolve(path: &Path) -> PathBuf {
    let mut absolute = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    absolute.push(path);
    let mut rest = Vec::new();
    let mut probe = absolute.as_path();
    loop {
        if let Ok(real) = probe.canonicalize() {
            let mut out = real;
            for c in rest.iter().rev() {
                out.push(c);
            }
            return out;
        }
        match (probe.parent(), probe.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                probe = parent;
            }
            _ => return absolute,
        }
    }
}

/// The plan for a process whose state directory is `state_dir` and runtime directory
/// `runtime_dir` (both may not exist yet: `enter` creates them). `extra_read` are files
/// this process reads later (the Herdr configuration).
pub fn plan(
    env: Env,
    state_dir: &Path,
    runtime_dir: &Path,
    extra_read: &[PathBuf],
) -> Result<Plan, ConfigError> {
    let mode = mode(env)?;
    if mode == Mode::Off {
        return Ok(Plan::default());
    }
    let workspace = workspace(env)?;
    let mut writable = vec![workspace.clone(), resolve(Path::new(TMP))];
    writable.extend(path_list(&vars::SANDBOX_RW_PATHS, env)?);
    let private = private_dirs(state_dir, runtime_dir);
    let shells_writable = writable.clone();
    writable.extend(private.iter().cloned());
    let mut readable: Vec<PathBuf> = SYSTEM_READ
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .map(resolve)
        .collect();
    // The binaries themselves: the adapter starts winxd, winxd starts guardians.
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(resolve))
    {
        readable.push(dir);
    }
    readable.extend(path_list(&vars::SANDBOX_RO_PATHS, env)?);
    // Shells read neither winx's private directories (carved out of the system trees
    // that hold them, such as /run for $XDG_RUNTIME_DIR) nor its configuration files.
    let shells_readable = carve(&readable, &private);
    readable.extend(extra_read.iter().filter(|p| p.exists()).map(|p| resolve(p)));
    let devices: Vec<PathBuf> = DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .map(resolve)
        .collect();
    dedup(&mut writable);
    dedup(&mut readable);
    let mut shells = Rules {
        writable: shells_writable,
        readable: shells_readable,
        devices: devices.clone(),
    };
    dedup(&mut shells.writable);
    dedup(&mut shells.readable);
    Ok(Plan {
        mode,
        workspace: Some(workspace),
        rules: Rules {
            writable,
            readable,
            devices,
        },
        shells,
        private,
    })
}

/// winx's own directories, which only the server, winxd and guardians use: the state
/// directory, the runtime directory and, for a sandbox's runtime subdirectory, the
/// runtime directory it lies in (the user's other winxd and sessions).
fn private_dirs(state_dir: &Path, runtime_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![resolve(state_dir), resolve(runtime_dir)];
    let name = runtime_dir.file_name().map(|n| n.to_string_lossy());
    if name.is_some_and(|n| n.starts_with("sandbox-"))
        && let Some(base) = runtime_dir.parent()
    {
        out.push(resolve(base));
    }
    out
}

/// `roots` without what lies in `private`: a root holding a private directory is replaced
/// by its entries (recursively down to the private one), so the private directory and
/// nothing else drops out. Entries made later under a replaced root are not covered.
pub fn carve(roots: &[PathBuf], private: &[PathBuf]) -> Vec<PathBuf> {
    fn one(root: &Path, private: &[PathBuf], out: &mut Vec<PathBuf>) {
        if private.iter().any(|p| root.starts_with(p)) {
            return;
        }
        if !private.iter().any(|p| p.starts_with(root)) {
            out.push(root.to_path_buf());
            return;
        }
        // Resolved, and kept only when still beneath `root`: a link can neither lead into
        // a private directory nor widen the rule beyond the root it replaces. A dangling
        // one (nothing a rule could name) is left out.
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.path().canonicalize().ok())
            .filter(|p| p.starts_with(root) && p != root)
            .collect();
        entries.sort();
        entries.dedup();
        for e in entries {
            one(&e, private, out);
        }
    }
    let mut out = Vec::new();
    for r in roots {
        one(r, private, &mut out);
    }
    out
}

/// The private directories a shell still reaches because a root it may use holds them
/// (a state directory under /tmp or the workspace): what `doctor` reports as exposed.
pub fn exposed(plan: &Plan) -> Vec<PathBuf> {
    let shells = &plan.shells;
    plan.private
        .iter()
        .filter(|p| {
            shells
                .writable
                .iter()
                .chain(&shells.readable)
                .any(|r| p.starts_with(r))
        })
        .cloned()
        .collect()
}

/// Keep each root once, and none beneath another (`/bin` resolves into `/usr` on merged
/// systems): one rule per tree.
fn dedup(v: &mut Vec<PathBuf>) {
    let all = v.clone();
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| {
        let nested = all.iter().any(|other| other != p && p.starts_with(other));
        !nested && seen.insert(p.clone())
    });
}

/// Under a sandbox (and without `WINX_SOCKET`), winxd and its guardians live in a runtime
/// subdirectory named by the rules: a winxd carries the Landlock domain of whoever started
/// it into every guardian it starts, so servers with different rules must not share one,
/// and a sandboxed server must never reach a shell started outside its sandbox.
pub fn runtime_subdir(env: Env) -> Option<String> {
    if !matches!(mode(env), Ok(Mode::Enforce | Mode::BestEffort)) {
        return None;
    }
    let ws = workspace(env)
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut h = Sha256::new();
    for part in [
        ws,
        vars::text(&vars::SANDBOX_RW_PATHS, env).unwrap_or_default(),
        vars::text(&vars::SANDBOX_RO_PATHS, env).unwrap_or_default(),
    ] {
        h.update(part.trim().as_bytes());
        h.update([0]);
    }
    let hex = crate::hex::lower(&h.finalize()[..6]);
    Some(format!("sandbox-{hex}"))
}

/// The environment the server's children get: the resolved startup workspace is passed
/// on, so a winxd or guardian started from another directory makes the same plan.
pub fn child_env(plan: &Plan, env: &mut Vec<(String, String)>) {
    if let Some(ws) = &plan.workspace {
        env.retain(|(k, _)| k != vars::SANDBOX_WORKSPACE.name);
        env.push((
            vars::SANDBOX_WORKSPACE.name.to_string(),
            ws.to_string_lossy().into_owned(),
        ));
    }
}

/// The `WINX_SANDBOX*` variables a winxd hands every guardian it starts, in place of the
/// requester's (issue 36, item 1): a guardian's sandbox comes from winxd's own
/// configuration, never from whoever asked for the session.
pub fn guardian_env(env: Env, plan: &Plan) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        &vars::SANDBOX,
        &vars::SANDBOX_RW_PATHS,
        &vars::SANDBOX_RO_PATHS,
    ]
    .iter()
    .filter_map(|v| vars::text(v, env).map(|t| (v.name.to_string(), t)))
    .collect();
    if let Some(ws) = &plan.workspace {
        out.push((
            vars::SANDBOX_WORKSPACE.name.to_string(),
            ws.to_string_lossy().into_owned(),
        ));
    }
    out
}

/// Startup fails rather than run a usage writer the sandbox would not let write (seed
/// 003: never an unconstrained writer outside the policy).
pub fn check_usage_log(plan: &Plan, log: &Path) -> Result<(), ConfigError> {
    if plan.mode == Mode::Off {
        return Ok(());
    }
    let resolved = resolve(log);
    if plan.rules.writable_covers(&resolved) {
        return Ok(());
    }
    let roots: Vec<String> = plan
        .rules
        .writable
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Err(ConfigError(format!(
        "{} ({}) lies outside the sandbox's writable set ({}); put the log under one of \
         them or add its directory to {}",
        vars::USAGE_LOG.name,
        resolved.display(),
        roots.join(", "),
        vars::SANDBOX_RW_PATHS.name
    )))
}

/// Create the server's own private directories the rules name (a Landlock rule needs an
/// existing directory), then apply the plan to this process. Called by each binary's
/// `main` before any thread exists.
pub fn enter(plan: &Plan, own_dirs: &[&Path]) -> Result<Applied, String> {
    if plan.mode == Mode::Off {
        return Ok(Applied::Off);
    }
    for dir in own_dirs {
        crate::fsutil::ensure_private_dir(dir).map_err(|e| format!("WINX_SANDBOX: {e}"))?;
    }
    let applied = crate::sandbox::apply(plan).map_err(|e| e.to_string())?;
    if let Applied::Enforced { .. } = applied {
        crate::sandbox::shells::confine(plan.shells.clone());
    }
    Ok(applied)
}

/// Whether any component of `p` is `..` (the lists are resolved, so none should be).
#[cfg(test)]
fn has_parent_dir(p: &Path) -> bool {
    p.components().any(|c| c == std::path::Component::ParentDir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn off_by_default_and_values_are_checked() {
        let none = env_of(&[]);
        assert_eq!(mode(&none).unwrap(), Mode::Off);
        let p = plan(&none, Path::new("/s"), Path::new("/r"), &[]).unwrap();
        assert_eq!(p, Plan::default());
        let bad = env_of(&[("WINX_SANDBOX", "yes")]);
        assert!(mode(&bad).unwrap_err().0.contains("0, 1, best-effort"));
        assert!(runtime_subdir(&none).is_none());
    }

    #[test]
    fn the_plan_names_workspace_tmp_state_runtime_and_the_operators_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let rw = tmp.path().join("rw");
        let ro = tmp.path().join("ro");
        for d in [&ws, &rw, &ro] {
            std::fs::create_dir(d).unwrap();
        }
        let vars = [
            ("WINX_SANDBOX", "1"),
            ("WINX_SANDBOX_WORKSPACE", ws.to_str().unwrap()),
            ("WINX_SANDBOX_RW_PATHS", rw.to_str().unwrap()),
            ("WINX_SANDBOX_RO_PATHS", ro.to_str().unwrap()),
        ];
        let env = env_of(&vars);
        let state = tmp.path().join("state/not/yet");
        let p = plan(&env, &state, Path::new("/tmp/winx-x"), &[]).unwrap();
        assert_eq!(p.mode, Mode::Enforce);
        let ws = ws.canonicalize().unwrap();
        assert_eq!(p.workspace.as_deref(), Some(ws.as_path()));
        for w in [&ws, &rw.canonicalize().unwrap(), &resolve(&state)] {
            // (A temporary directory lies under /tmp, so /tmp's rule may cover these.)
            assert!(
                p.rules.writable_covers(w),
                "{w:?} in {:?}",
                p.rules.writable
            );
        }
        assert!(p.rules.writable_covers(&resolve(Path::new("/tmp/x"))));
        assert!(p.rules.readable.contains(&ro.canonicalize().unwrap()));
        assert!(!p.rules.writable.contains(&ro.canonicalize().unwrap()));
        assert!(p.rules.readable.iter().all(|r| !has_parent_dir(r)));
        assert!(runtime_subdir(&env).unwrap().starts_with("sandbox-"));
    }

    #[test]
    fn shells_lose_the_private_directories_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for d in [
            "sys/a",
            "sys/run/user/winx/sandbox-1",
            "sys/run/other",
            "ws",
            "rw",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("sys/run/file"), "").unwrap();
        // A link back into the private directory, and one out of the root: both dropped.
        std::os::unix::fs::symlink(root.join("sys/run/user/winx"), root.join("sys/run/w")).unwrap();
        std::os::unix::fs::symlink(&root, root.join("sys/run/up")).unwrap();
        let private = [root.join("sys/run/user/winx")];
        let carved = carve(&[root.join("sys")], &private);
        let want: Vec<PathBuf> = ["sys/a", "sys/run/file", "sys/run/other"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        assert_eq!(carved, want);
        assert_eq!(carve(&[root.join("ws")], &private), [root.join("ws")]);

        let ws = root.join("ws");
        let vars = [
            ("WINX_SANDBOX", "1"),
            ("WINX_SANDBOX_WORKSPACE", ws.to_str().unwrap()),
        ];
        let env = env_of(&vars);
        let (state, run) = (
            root.join("rw/state"),
            root.join("sys/run/user/winx/sandbox-1"),
        );
        let p = plan(&env, &state, &run, &[]).unwrap();
        assert!(p.rules.writable_covers(&state) && p.rules.writable_covers(&run));
        assert!(!p.shells.writable.contains(&state) && !p.shells.writable.contains(&run));
        assert!(p.private.contains(&root.join("sys/run/user/winx")), "{p:?}");
        // Under /tmp (where this test's tree usually lies) the state stays reachable:
        // reported as exposed.
        let under_tmp = state.starts_with(resolve(Path::new(TMP)));
        assert_eq!(exposed(&p).contains(&state), under_tmp, "{p:?}");
    }

    #[test]
    fn bad_paths_are_startup_errors() {
        for (k, v, says) in [
            ("WINX_SANDBOX_WORKSPACE", "relative/dir", "absolute"),
            ("WINX_SANDBOX_WORKSPACE", "/", "other than /"),
            (
                "WINX_SANDBOX_WORKSPACE",
                "/no/such/winx/dir",
                "cannot be used",
            ),
            (
                "WINX_SANDBOX_RW_PATHS",
                "/no/such/winx/dir",
                "WINX_SANDBOX_RW_PATHS",
            ),
            ("WINX_SANDBOX_RO_PATHS", "rel", "absolute"),
        ] {
            let vars = [("WINX_SANDBOX", "1"), (k, v)];
            let env = env_of(&vars);
            let e = plan(&env, Path::new("/s"), Path::new("/r"), &[]).unwrap_err();
            assert!(e.0.contains(says), "{k}={v}: {e}");
        }
    }

    #[test]
    fn a_usage_log_outside_the_writable_set_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let vars = [
            ("WINX_SANDBOX", "best-effort"),
            ("WINX_SANDBOX_WORKSPACE", tmp.path().to_str().unwrap()),
        ];
        let env = env_of(&vars);
        let p = plan(&env, Path::new("/nonexistent-state"), Path::new("/r"), &[]).unwrap();
        check_usage_log(&p, &tmp.path().join("logs/usage.jsonl")).unwrap();
        check_usage_log(&p, Path::new("/tmp/usage.jsonl")).unwrap();
        let e = check_usage_log(&p, Path::new("/var/log/winx/usage.jsonl")).unwrap_err();
        assert!(
            e.0.contains("WINX_USAGE_LOG") && e.0.contains("outside the sandbox's writable set"),
            "{e}"
        );
        check_usage_log(&Plan::default(), Path::new("/var/log/u.jsonl")).unwrap();
    }
}
