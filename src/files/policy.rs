//! Path authority for file tools: reads and writes stay inside the workspace (or the
//! `WINX_ALLOW_PATHS` roots, `/` meaning unconfined); `architect` never writes;
//! `code_writer` writes only paths matching its `allowed_globs`.
//!
//! Invariant: decisions are made on canonical paths (symlinks resolved), so a link inside
//! the workspace that points outside it is outside.

use crate::session::Mode;
use crate::shell::cmdpolicy::path_in_globs;
use std::path::{Path, PathBuf};

/// Extra roots from `WINX_ALLOW_PATHS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowPaths {
    pub roots: Vec<PathBuf>,
    pub unconfined: bool,
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
        }
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
