//! Pruning of stale sessions' directories (seed 003: "stale sessions pruned after 24
//! hours"). Runs at every `Initialize first_call` of the workspace.
//!
//! A session directory is stale when its own mtime — the session's lease, renewed by
//! `Initialize` and by the audit after Bash actions (`audit::renew_lease`) — and the
//! mtime of every entry below it are older than `STALE_AFTER_MS`. So a session that ran
//! nothing for a day loses its helpers, while a background job still writing keeps them.
//! The caller's own session is never pruned. Removal walks from directory fds without
//! following links: a symlink inside is unlinked, never followed; one standing in place of
//! a stale session directory is unlinked itself.

use super::audit::{mtime_ms, session_names};
use super::{DirProblem, STALE_AFTER_MS, dir_name, open_dir_at, open_root};
use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::sys::stat::{SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// Entries looked at or removed per pruning call: a huge stale tree is removed over
/// several calls instead of holding one `Initialize` for long.
const MAX_ENTRIES: usize = 100_000;
const MAX_DEPTH: usize = 64;

/// What one pruning removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Names of the session directories removed whole.
    pub sessions: Vec<String>,
    /// Entries removed (files, links, directories).
    pub entries: u64,
}

/// Remove the stale session directories of `workspace`, never `own_key`'s. `now_ms` is
/// the lifecycle clock (`WINX_CLOCK_SKEW_SECS` applies).
pub fn prune(workspace: &Path, own_key: &str, now_ms: i64) -> Pruned {
    let mut out = Pruned::default();
    let Ok(root) = open_root(workspace) else {
        return out;
    };
    let own = dir_name(own_key);
    let cutoff = now_ms - STALE_AFTER_MS;
    let mut budget = MAX_ENTRIES;
    for name in session_names(&root) {
        if name.to_bytes() == own.as_bytes() || budget == 0 {
            continue;
        }
        let Ok(st) = fstatat(root.as_fd(), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        if mtime_ms(&st) >= cutoff {
            continue;
        }
        let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if fmt != SFlag::S_IFDIR {
            if unlinkat(&root, name.as_c_str(), UnlinkatFlags::NoRemoveDir).is_ok() {
                out.entries += 1;
                out.sessions.push(name.to_string_lossy().into_owned());
            }
            continue;
        }
        let newest = match open_dir_at(&root, name.as_c_str()) {
            Ok(fd) => newest_mtime(fd, 0, &mut budget),
            Err(_) => continue,
        };
        if newest.is_none_or(|m| m >= cutoff) {
            continue;
        }
        if remove_tree(&root, &name, 0, &mut budget, &mut out.entries) {
            out.sessions.push(name.to_string_lossy().into_owned());
        }
    }
    out
}

/// The newest mtime below `fd`; `None` when the walk hit a bound (then nothing is pruned).
fn newest_mtime(fd: OwnedFd, depth: usize, budget: &mut usize) -> Option<i64> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut dir = Dir::from_fd(fd).ok()?;
    let names = entries(&mut dir, budget)?;
    let mut newest = i64::MIN;
    for name in names {
        let st = fstatat(dir.as_fd(), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        newest = newest.max(mtime_ms(&st));
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            let sub = open_dir_at(dir.as_fd(), name.as_c_str()).ok()?;
            newest = newest.max(newest_mtime(sub, depth + 1, budget)?);
        }
    }
    Some(newest)
}

/// The names in `dir` (without `.` and `..`), charged to `budget`; `None` past it.
fn entries(dir: &mut Dir, budget: &mut usize) -> Option<Vec<CString>> {
    let mut names = Vec::new();
    for e in dir.iter().flatten() {
        let n = e.file_name();
        if matches!(n.to_bytes(), b"." | b"..") {
            continue;
        }
        *budget = budget.checked_sub(1)?;
        names.push(n.to_owned());
    }
    Some(names)
}

/// Remove the directory `name` in `parent` and everything below it, without following a
/// link; whether it is gone.
fn remove_tree(
    parent: &impl AsFd,
    name: &CStr,
    depth: usize,
    budget: &mut usize,
    removed: &mut u64,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let fd = match open_dir_at(parent.as_fd(), name) {
        Ok(fd) => fd,
        Err(DirProblem::Missing) => return true,
        Err(_) => return false,
    };
    let Ok(mut dir) = Dir::from_fd(fd) else {
        return false;
    };
    let Some(names) = entries(&mut dir, budget) else {
        return false;
    };
    for n in names {
        let is_dir =
            fstatat(dir.as_fd(), n.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
            });
        if is_dir {
            remove_tree(&dir, &n, depth + 1, budget, removed);
        } else if unlinkat(&dir, n.as_c_str(), UnlinkatFlags::NoRemoveDir).is_ok() {
            *removed += 1;
        }
    }
    let gone = unlinkat(parent, name, UnlinkatFlags::RemoveDir).is_ok();
    *removed += u64::from(gone);
    gone
}
