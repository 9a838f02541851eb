//! Removing one helper the agent named (`EditFiles` `release_temporary`): reached from the
//! session directory's fd without following a link, checked against the revision the
//! agent read, then unlinked from its directory's fd.

use super::{DirProblem, dir_name, open_dir_at, open_root};
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

/// Why one helper was left in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The path is not below this session's directory (`..`, another session, absolute
    /// elsewhere).
    Outside,
    NotFound,
    /// A symlink on the way or at the end: never followed, never removed.
    Symlink,
    /// A directory, FIFO, socket or device.
    NotRegular,
    /// The bytes are not the revision the agent read.
    RevisionChanged {
        current: String,
    },
    Io(String),
}

/// `path`'s components below `dir` (both absolute, lexically clean); `None` when `path`
/// is not strictly below it or names `.`/`..`.
pub fn relative_below<'p>(dir: &Path, path: &'p Path) -> Option<Vec<&'p std::ffi::OsStr>> {
    let rest = path.strip_prefix(dir).ok()?;
    let parts: Option<Vec<_>> = rest
        .components()
        .map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    parts.filter(|p| !p.is_empty())
}

/// Remove `parts` (relative to session `key`'s directory) when `revision_of(bytes)` is
/// `revision`. Files larger than the session budget cannot have been read whole: refused
/// as changed.
pub fn release(
    workspace: &Path,
    key: &str,
    parts: &[&std::ffi::OsStr],
    revision: &str,
    revision_of: impl Fn(&[u8]) -> String,
) -> Result<(), Kept> {
    let problem = |p: DirProblem| match p {
        DirProblem::Missing => Kept::NotFound,
        DirProblem::NotADirectory(_) => Kept::Symlink,
        DirProblem::Io(e) => Kept::Io(e),
    };
    let root = open_root(workspace).map_err(problem)?;
    let mut dir: OwnedFd = open_dir_at(&root, dir_name(key).as_str()).map_err(problem)?;
    let (last, middle) = parts.split_last().ok_or(Kept::Outside)?;
    for p in middle {
        dir = open_dir_at(&dir, *p).map_err(problem)?;
    }
    let st = fstatat(dir.as_fd(), *last, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| match e {
        nix::errno::Errno::ENOENT => Kept::NotFound,
        e => Kept::Io(e.to_string()),
    })?;
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => {}
        SFlag::S_IFLNK => return Err(Kept::Symlink),
        _ => return Err(Kept::NotRegular),
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(&dir, *last, flags, Mode::empty()).map_err(|e| Kept::Io(e.to_string()))?;
    let fst = fstat(&fd).map_err(|e| Kept::Io(e.to_string()))?;
    if fst.st_ino != st.st_ino {
        return Err(Kept::RevisionChanged {
            current: "replaced while checked".into(),
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(super::SESSION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Kept::Io(e.to_string()))?;
    let current = revision_of(&bytes);
    if current != revision {
        return Err(Kept::RevisionChanged { current });
    }
    // The name must still be the inode that was checked.
    let again = fstatat(dir.as_fd(), *last, AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(|e| Kept::Io(e.to_string()))?;
    if again.st_ino != st.st_ino {
        return Err(Kept::RevisionChanged {
            current: "replaced while checked".into(),
        });
    }
    unlinkat(&dir, *last, UnlinkatFlags::NoRemoveDir).map_err(|e| Kept::Io(e.to_string()))
}
