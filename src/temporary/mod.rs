//! The managed temporary directory of a session (seed 003, "LLM orchestration contract"):
//! `<workspace>/.winx/tmp/session-<key>/`, created 0700 at `Initialize` and exported to
//! every PTY as `WINX_TEMP_DIR`. This module knows the paths, creates the directory,
//! audits what it holds (`audit`), prunes stale sessions' directories (`prune`), removes
//! one named helper (`release`) and judges command lines that bypass it (`policy`).
//!
//! Invariant: every directory here is reached from the workspace's fd with `O_NOFOLLOW`
//! for each component (or in one `openat2` that refuses any symlink on the path), so a
//! symlink put in place of `.winx`, `tmp` or a session directory is never followed: not
//! by the audit, the pruning or a release.
//! Invariant: nothing here deletes because of a budget; only `prune` (24 h stale
//! sessions of others) and `release` (one file the agent named) remove anything.

pub mod audit;
pub mod policy;
pub mod prune;
pub mod release;
pub mod watch;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Seed 003's budgets. Bytes are apparent sizes (`st_size`), so a sparse file counts at
/// its full length: the budget is about what a helper may hold, not the blocks it uses.
pub const SESSION_BYTES: u64 = 64 * 1024 * 1024;
pub const SESSION_FILES: u64 = 128;
pub const WORKSPACE_BYTES: u64 = 256 * 1024 * 1024;
/// A session directory untouched for this long belongs to a stale session (seed 003).
pub const STALE_AFTER_MS: i64 = 24 * 3600 * 1000;

/// `.winx/tmp` below the workspace, as components.
const ROOT: [&str; 2] = [".winx", "tmp"];
/// Written once into a new `.winx/`: git then ignores the whole directory, so helpers
/// never show up as untracked project files.
const GITIGNORE: &[u8] = b"# winx: session helpers, never project files\n*\n";

/// `<workspace>/.winx/tmp`.
pub fn root(workspace: &Path) -> PathBuf {
    workspace.join(ROOT[0]).join(ROOT[1])
}

/// The name of a session's directory inside `root` (`key`: the runtime's session key,
/// 16 hex digits, principal-scoped).
pub fn dir_name(key: &str) -> String {
    format!("session-{key}")
}

/// `<workspace>/.winx/tmp/session-<key>`.
pub fn session_dir(workspace: &Path, key: &str) -> PathBuf {
    root(workspace).join(dir_name(key))
}

/// Why a directory on the managed path could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirProblem {
    /// Absent (the agent removed it, or it was never made).
    Missing,
    /// Something other than a directory stands there: a symlink (never followed), a file.
    NotADirectory(String),
    Io(String),
}

impl std::fmt::Display for DirProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirProblem::Missing => f.write_str("missing"),
            DirProblem::NotADirectory(c) => write!(f, "{c} is not a directory (a symlink?)"),
            DirProblem::Io(e) => f.write_str(e),
        }
    }
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Open `name` in `dir` as a directory, never following a symlink.
pub(crate) fn open_dir_at<P>(dir: impl AsFd, name: &P) -> Result<OwnedFd, DirProblem>
where
    P: ?Sized + nix::NixPath + std::fmt::Debug,
{
    openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(|e| match e {
        Errno::ENOENT => DirProblem::Missing,
        Errno::ELOOP | Errno::ENOTDIR => DirProblem::NotADirectory(format!("{name:?}")),
        e => DirProblem::Io(format!("open {name:?}: {e}")),
    })
}

/// The workspace's `.winx/tmp`, opened component by component without following links.
/// A path with no link anywhere (the usual case: the workspace is canonical) is opened in
/// one `openat2`; anything else takes the walk, which says what is wrong.
pub fn open_root(workspace: &Path) -> Result<OwnedFd, DirProblem> {
    if let Some(fd) = crate::fsutil::open_dir_without_links(
        nix::fcntl::AT_FDCWD,
        &root(workspace),
        OFlag::O_RDONLY,
    ) {
        return Ok(fd);
    }
    let ws = nix::fcntl::open(workspace, DIR_FLAGS, Mode::empty())
        .map_err(|e| DirProblem::Io(format!("open workspace: {e}")))?;
    let winx = open_dir_at(&ws, ROOT[0])?;
    open_dir_at(&winx, ROOT[1])
}

/// Create (or find) the session's directory, 0700, and return its path. `.winx` and
/// `.winx/tmp` are created 0700 when missing; a new `.winx` gets a `.gitignore` of `*`.
/// A symlink anywhere on the way is refused, never followed.
pub fn ensure(workspace: &Path, key: &str) -> Result<PathBuf, DirProblem> {
    let ws = nix::fcntl::open(workspace, DIR_FLAGS, Mode::empty())
        .map_err(|e| DirProblem::Io(format!("open workspace: {e}")))?;
    let (winx, created) = make_dir_at(&ws, ROOT[0])?;
    if created {
        write_gitignore(&winx);
    }
    let (tmp, _) = make_dir_at(&winx, ROOT[1])?;
    let (dir, _) = make_dir_at(&tmp, &dir_name(key))?;
    // An existing directory is tightened too: helpers are private to the user.
    let _ = fchmod(&dir, Mode::from_bits_truncate(0o700));
    Ok(session_dir(workspace, key))
}

/// `mkdirat(name, 0700)` unless present, then open it without following links; whether
/// this call created it.
pub(crate) fn make_dir_at(dir: impl AsFd, name: &str) -> Result<(OwnedFd, bool), DirProblem> {
    let created = match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
        Ok(()) => true,
        Err(Errno::EEXIST) => false,
        Err(e) => return Err(DirProblem::Io(format!("create {name}: {e}"))),
    };
    Ok((open_dir_at(&dir, name)?, created))
}

fn write_gitignore(winx: &OwnedFd) {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if let Ok(fd) = openat(winx, ".gitignore", flags, Mode::from_bits_truncate(0o600)) {
        let _ = std::fs::File::from(fd).write_all(GITIGNORE);
    }
}

/// Whether `path` (absolute, lexically clean) lies in the workspace's `.winx/tmp`.
pub fn within_root(workspace: &Path, path: &Path) -> bool {
    path.starts_with(root(workspace))
}

/// `io::Error` of a `DirProblem`, for callers that report I/O errors.
impl From<DirProblem> for io::Error {
    fn from(p: DirProblem) -> io::Error {
        io::Error::other(p.to_string())
    }
}

#[cfg(test)]
mod tests;
