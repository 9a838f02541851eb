//! Path authority for file tools: reads and writes stay inside the workspace (or the
//! `WINX_ALLOW_PATHS` roots, `/` meaning unconfined); `architect` never writes;
//! `code_writer` writes only paths matching its `allowed_globs`.
//!
//! Invariant: decisions are made on canonical paths (symlinks resolved), so a link inside
//! the workspace that points outside it is outside.
//! Invariant: the server's own credential and state files (token files, the principal
//! config, the state and runtime directories) are refused to every file tool whatever the
//! workspace or `WINX_ALLOW_PATHS`; the one exception is a session's own scratch workspace,
//! which lives inside the state directory (`Initialize` binds no other workspace there).

use crate::session::Mode;
use crate::shell::cmdpolicy::path_in_globs;
use std::path::{Path, PathBuf};

/// Extra roots from `WINX_ALLOW_PATHS`, and the server's own files no tool may touch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowPaths {
    pub roots: Vec<PathBuf>,
    pub unconfined: bool,
    /// Canonical credential files (token files, the principal config): always refused.
    secret_files: Vec<PathBuf>,
    /// Canonical private directories (state, runtime): refused except inside the
    /// session's own workspace when that workspace is a scratch directory within them.
    private_dirs: Vec<PathBuf>,
}

impl AllowPaths {
    /// Parse a `:`-separated list; `/` anywhere means unconfined.
    pub fn parse(v: &str) -> AllowPaths {
        let roots: Vec<PathBuf> = v
            .split(':')
            .filter(|p| !p.is_empty())
            .map(|p| {
                PathBuf::from(p)
                    .canonicalize()
                    .unwrap_or_else(|_| PathBuf::from(p))
            })
            .collect();
        AllowPaths {
            unconfined: roots.iter().any(|r| r == Path::new("/")),
            roots,
            ..AllowPaths::default()
        }
    }
}

impl AllowPaths {
    /// Every path, with nothing protected (internal reads that take no agent input).
    pub const fn unconfined() -> AllowPaths {
        AllowPaths {
            roots: Vec::new(),
            unconfined: true,
            secret_files: Vec::new(),
            private_dirs: Vec::new(),
        }
    }

    /// Refuse `file` (a credential) to every file tool.
    pub fn protect_file(&mut self, file: &Path) {
        if let Ok(c) = canonical(file) {
            self.secret_files.push(c);
        }
    }

    /// Refuse everything under `dir` (server state) to every file tool.
    pub fn protect_dir(&mut self, dir: &Path) {
        if let Ok(c) = canonical(dir) {
            self.private_dirs.push(c);
        }
    }

    /// The private directory that contains `workspace`, if any (such a workspace may only
    /// be a session's own scratch directory).
    pub fn private_dir_containing(&self, workspace: &Path) -> Option<&Path> {
        self.private_dirs
            .iter()
            .find(|d| workspace.starts_with(d))
            .map(PathBuf::as_path)
    }

    /// The server's own files and directories inside `root` that a session bound to
    /// `workspace` may not read: what a walk of `root` must leave out.
    pub fn protected_within(&self, workspace: &Path, root: &Path) -> Vec<PathBuf> {
        self.secret_files
            .iter()
            .chain(&self.private_dirs)
            .filter(|p| p.starts_with(root) && self.protected(workspace, p).is_some())
            .cloned()
            .collect()
    }

    /// Why `path` (canonical) is one of the server's own files, if it is.
    fn protected(&self, workspace: &Path, path: &Path) -> Option<String> {
        if let Some(f) = self.secret_files.iter().find(|f| path == f.as_path()) {
            return Some(format!(
                "{} is a credential file of this server; file tools never touch it",
                f.display()
            ));
        }
        let own_scratch = |d: &Path| workspace != d && path.starts_with(workspace);
        self.private_dirs
            .iter()
            .find(|d| path.starts_with(d) && !(workspace.starts_with(d) && own_scratch(d)))
            .map(|d| {
                format!(
                    "{} is inside {}, this server's private state; file tools never touch it",
                    path.display(),
                    d.display()
                )
            })
    }
}

/// Canonical form of `path`, which may not exist yet: its deepest existing ancestor is
/// canonicalised and the rest appended.
pub fn canonical(path: &Path) -> Result<PathBuf, String> {
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    if let Ok(c) = path.canonicalize() {
        return Ok(c);
    }
    let mut missing = Vec::new();
    let mut cur = path;
    loop {
        let Some(parent) = cur.parent() else {
            return Err(format!("{} has no existing ancestor", path.display()));
        };
        missing.push(cur.file_name().ok_or("path ends in ..")?.to_os_string());
        if let Ok(c) = parent.canonicalize() {
            let mut out = c;
            for m in missing.iter().rev() {
                out.push(m);
            }
            return Ok(out);
        }
        cur = parent;
    }
}

/// May this session read `path` (canonical)?
pub fn may_read(workspace: &Path, allow: &AllowPaths, path: &Path) -> Result<(), String> {
    if let Some(why) = allow.protected(workspace, path) {
        return Err(why);
    }
    if allow.unconfined
        || path.starts_with(workspace)
        || allow.roots.iter().any(|r| path.starts_with(r))
    {
        Ok(())
    } else {
        Err(format!(
            "{} is outside the workspace {}; set WINX_ALLOW_PATHS to extend file access",
            path.display(),
            workspace.display()
        ))
    }
}

/// May this session write `path` (canonical) in `mode`?
pub fn may_write(
    workspace: &Path,
    allow: &AllowPaths,
    mode: &Mode,
    path: &Path,
) -> Result<(), String> {
    may_read(workspace, allow, path)?;
    match mode {
        Mode::Wcgw => Ok(()),
        Mode::Architect => Err("architect mode never writes files".into()),
        Mode::CodeWriter { allowed_globs, .. } => {
            if path_in_globs(workspace, allowed_globs, &path.to_string_lossy()) {
                Ok(())
            } else {
                Err(format!(
                    "{} is outside allowed_globs ({})",
                    path.display(),
                    allowed_globs.join(", ")
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_and_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        let inside = canonical(&ws.join("src/new.rs")).unwrap();
        assert_eq!(inside, ws.join("src/new.rs"));
        let none = AllowPaths::default();
        assert!(may_read(&ws, &none, &inside).is_ok());
        assert!(may_read(&ws, &none, Path::new("/etc/passwd")).is_err());
        assert!(may_read(&ws, &AllowPaths::parse("/"), Path::new("/etc/passwd")).is_ok());
        assert!(may_read(&ws, &AllowPaths::parse("/etc"), Path::new("/etc/passwd")).is_ok());
        assert!(may_write(&ws, &none, &Mode::Architect, &inside).is_err());
        let cw = Mode::CodeWriter {
            allowed_commands: vec!["all".into()],
            allowed_globs: vec!["src/**".into()],
        };
        assert!(may_write(&ws, &none, &cw, &inside).is_ok());
        assert!(may_write(&ws, &none, &cw, &ws.join("README.md")).is_err());
    }

    #[test]
    fn the_servers_own_files_are_refused_whatever_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let state = root.join("state");
        std::fs::create_dir_all(state.join("scratch/alice")).unwrap();
        let token = root.join("alice.token");
        let mut allow = AllowPaths::parse("/");
        allow.protect_dir(&state);
        allow.protect_file(&token);
        let slash = Path::new("/");
        assert!(may_read(slash, &allow, &token).is_err());
        assert!(may_read(slash, &allow, &state.join("winx.db")).is_err());
        assert!(may_read(&state, &allow, &state.join("winx.db")).is_err());
        assert!(may_read(slash, &allow, &root.join("other.txt")).is_ok());
        // A scratch workspace inside the state directory reaches its own files only.
        let scratch = state.join("scratch/alice");
        assert!(may_read(&scratch, &allow, &scratch.join("notes.md")).is_ok());
        assert!(may_read(&scratch, &allow, &state.join("scratch/bob/x")).is_err());
        assert!(may_read(&scratch, &allow, &state.join("winx.db")).is_err());
        assert_eq!(
            allow.private_dir_containing(&scratch),
            Some(state.as_path())
        );
        assert_eq!(allow.private_dir_containing(&root), None);
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("escape")).unwrap();
        let target = canonical(&ws.join("escape/passwd")).unwrap();
        assert!(may_read(&ws, &AllowPaths::default(), &target).is_err());
    }
}
