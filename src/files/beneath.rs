//! Opening a path beneath a root, component by component, without following symlinks, and
//! refusing what is not a regular file without ever blocking in `open`.
//!
//! Rule (the whole symlink policy of the file tools): a path is first canonicalised
//! (`policy::canonical`, symlinks resolved) and the canonical path is authorised; then it
//! is opened from a directory fd of the root that contains it (the workspace, a
//! `WINX_ALLOW_PATHS` root, or `/` when unconfined) with `openat(O_NOFOLLOW)` for every
//! component. A canonical path holds no symlinks, so a symlink met during the walk means the
//! tree changed after canonicalisation (say a directory exchanged for a link to elsewhere):
//! the attempt is abandoned and the whole resolution (canonicalise, authorise, walk) is
//! repeated, at most [`ATTEMPTS`] times. A symlink inside the workspace that points inside
//! it therefore still works; one that points outside fails authorisation; one that appears
//! mid-operation is never followed.
//!
//! Invariant: every file the file tools read or replace is reached through directory fds
//! opened with `O_NOFOLLOW` beneath an authorised root, and every open of a final
//! component is `O_NONBLOCK | O_NOFOLLOW` after an `fstatat` that saw a regular file, then
//! checked again with `fstat` (FIFOs, sockets and devices are refused, never opened for
//! I/O and never waited on).

use super::policy::{self, AllowPaths};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, FcntlArg, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Resolutions tried before a path that keeps changing under us is refused: one change
/// is a concurrent rename worth retrying, three in a row is someone racing us.
pub const ATTEMPTS: usize = 3;

/// What a path turned out to be, when it is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    /// A symlink where the canonical path has none: dangling, or swapped in while opening.
    Symlink,
}

impl FileKind {
    fn of(st: &FileStat) -> Option<FileKind> {
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => Some(FileKind::Directory),
            SFlag::S_IFIFO => Some(FileKind::Fifo),
            SFlag::S_IFCHR => Some(FileKind::CharDevice),
            SFlag::S_IFBLK => Some(FileKind::BlockDevice),
            SFlag::S_IFSOCK => Some(FileKind::Socket),
            SFlag::S_IFLNK => Some(FileKind::Symlink),
            _ => None,
        }
    }

    /// For messages: "a FIFO (named pipe)", "a character device", …
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Symlink => "a symbolic link that does not resolve (or changed while opened)",
        }
    }
}

/// Why a path could not be opened beneath its root.
#[derive(Debug)]
pub enum BeneathError {
    /// The file (or a directory above it) does not exist.
    NotFound,
    /// Authorisation refused the canonical path.
    Denied(String),
    /// The final component exists but is not a regular file.
    NotRegular(FileKind),
    /// The path kept changing under us (a directory replaced by a symlink) for every attempt.
    Changed,
    Io(io::Error),
}

impl fmt::Display for BeneathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BeneathError::NotFound => f.write_str("no such file"),
            BeneathError::Denied(reason) => f.write_str(reason),
            BeneathError::NotRegular(kind) => {
                write!(f, "not a regular file: it is {}", kind.describe())
            }
            BeneathError::Changed => write!(
                f,
                "the path changed while it was being opened ({ATTEMPTS} times: a directory was \
                 replaced by a symlink); nothing was read or written"
            ),
            BeneathError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<Errno> for BeneathError {
    fn from(e: Errno) -> Self {
        match e {
            Errno::ENOENT => BeneathError::NotFound,
            e => BeneathError::Io(e.into()),
        }
    }
}

/// The roots a session may reach: its workspace and `WINX_ALLOW_PATHS`.
#[derive(Clone, Copy)]
pub struct Roots<'a> {
    pub workspace: &'a Path,
    pub allow: &'a AllowPaths,
}

/// Which root `canonical` is opened beneath: the longest of the workspace and the extra
/// roots containing it, else `/` (unconfined sessions, or callers that checked already).
pub fn root_for<'p>(canonical: &Path, roots: &'p Roots<'p>) -> &'p Path {
    std::iter::once(roots.workspace)
        .chain(roots.allow.roots.iter().map(PathBuf::as_path))
        .filter(|r| canonical.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .unwrap_or(Path::new("/"))
}

/// A directory entry reached beneath a root: its parent's fd (the deepest directory that
/// exists, plus the directories still to create), its name and its canonical path.
#[derive(Clone, Debug)]
pub struct Entry {
    base: Arc<OwnedFd>,
    missing: Vec<OsString>,
    name: OsString,
    pub path: PathBuf,
}

fn dir_flags(path_only: bool) -> OFlag {
    let access = if path_only {
        OFlag::O_PATH
    } else {
        OFlag::O_RDONLY
    };
    access | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Open directory `name` in `dir` without following a symlink. The parent of a target is
/// opened readable (it is synced and swept); others need only search permission.
fn open_dir(dir: &impl AsFd, name: &OsStr, last: bool) -> Result<OwnedFd, Errno> {
    match openat(dir, name, dir_flags(!last), Mode::empty()) {
        Err(Errno::EACCES) if last => openat(dir, name, dir_flags(true), Mode::empty()),
        r => r,
    }
}

/// Whether `name` in `dir` is a symlink now (then the tree changed since canonicalisation).
fn is_symlink(dir: &impl AsFd, name: &OsStr) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileKind::of(&st) == Some(FileKind::Symlink))
}

/// One walk of `canonical` beneath `root`. `Ok(None)` means a component was a symlink.
fn walk(root: &Path, canonical: &Path, create: bool) -> Result<Option<Entry>, BeneathError> {
    let rel = canonical.strip_prefix(root).map_err(|_| {
        BeneathError::Denied(format!(
            "{} is not beneath {}",
            canonical.display(),
            root.display()
        ))
    })?;
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n.to_os_string()),
            _ => {
                return Err(BeneathError::Denied(format!(
                    "{} is not a canonical path",
                    canonical.display()
                )));
            }
        }
    }
    let Some(name) = names.pop() else {
        return Err(BeneathError::NotRegular(FileKind::Directory));
    };
    let root_fd = nix::fcntl::open(root, dir_flags(!names.is_empty()), Mode::empty())
        .or_else(|_| nix::fcntl::open(root, dir_flags(true), Mode::empty()))?;
    let mut cur = root_fd;
    let count = names.len();
    for (i, n) in names.iter().enumerate() {
        match open_dir(&cur, n, i + 1 == count) {
            Ok(fd) => cur = fd,
            Err(Errno::ENOENT) if create => {
                return Ok(Some(Entry {
                    base: Arc::new(cur),
                    missing: names[i..].to_vec(),
                    name,
                    path: canonical.to_path_buf(),
                }));
            }
            Err(Errno::ENOTDIR | Errno::ELOOP) if is_symlink(&cur, n) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(Entry {
        base: Arc::new(cur),
        missing: Vec::new(),
        name,
        path: canonical.to_path_buf(),
    }))
}

/// Canonicalise `path`, authorise it with `check`, and run `then` on its entry beneath its
/// root; repeated when a symlink appears during the walk (see the module rule).
pub fn resolve<T>(
    roots: &Roots,
    path: &Path,
    create: bool,
    check: impl Fn(&Path) -> Result<(), String>,
    then: impl Fn(&Entry) -> Result<Option<T>, BeneathError>,
) -> Result<T, BeneathError> {
    for _ in 0..ATTEMPTS {
        let canonical = policy::canonical(path).map_err(BeneathError::Denied)?;
        check(&canonical).map_err(BeneathError::Denied)?;
        let Some(entry) = walk(root_for(&canonical, roots), &canonical, create)? else {
            continue;
        };
        if let Some(t) = then(&entry)? {
            return Ok(t);
        }
    }
    Err(BeneathError::Changed)
}

/// Open `path` for reading if this session may read it: a regular file, reached beneath
/// its root, opened without blocking. Returns the canonical path too.
pub fn open_read(roots: &Roots, path: &Path) -> Result<(PathBuf, File), BeneathError> {
    let check = |c: &Path| policy::may_read(roots.workspace, roots.allow, c);
    resolve(roots, path, false, check, |e| {
        Ok(e.open_regular()?.map(|f| (e.path.clone(), f)))
    })
    .and_then(|(p, f)| match f {
        Some(f) => Ok((p, f)),
        None => Err(BeneathError::NotFound),
    })
}

/// Read the canonical, already authorised `path` (at most `limit` bytes) exactly: no
/// symlink followed, nothing but a regular file. `Ok(None)` when it does not exist.
pub fn read_canonical(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, BeneathError> {
    let entry = match walk(Path::new("/"), path, false) {
        Ok(Some(e)) => e,
        Ok(None) => return Err(BeneathError::Changed),
        Err(BeneathError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(Some(file)) = entry.open_regular()? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(BeneathError::Io)?;
    Ok(Some(bytes))
}

/// The entry of a canonical, already authorised `path`, walked from `/` without following
/// symlinks (for replaying or undoing a commit whose target was authorised earlier).
pub fn entry_canonical(path: &Path) -> Result<Entry, BeneathError> {
    walk(Path::new("/"), path, true)?.ok_or(BeneathError::Changed)
}

impl Entry {
    /// The final component's name.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// The parent directory, creating the missing directories (`mkdirat`, each opened
    /// without following a symlink) first.
    pub fn dir(&self) -> io::Result<Arc<OwnedFd>> {
        let mut cur = self.base.clone();
        for n in &self.missing {
            match nix::sys::stat::mkdirat(&*cur, n.as_os_str(), Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            cur = Arc::new(open_dir(&*cur, n, true)?);
        }
        Ok(cur)
    }

    /// Stat of the final component, not following a symlink; `None` when absent.
    pub fn stat(&self) -> io::Result<Option<FileStat>> {
        if !self.missing.is_empty() {
            return Ok(None);
        }
        match fstatat(
            &*self.base,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Open the final component for reading. `Ok(Some(None))` when it does not exist;
    /// `Ok(None)` when it is a symlink (the caller resolves again); a FIFO, socket, device
    /// or directory is `NotRegular`. Never blocks: `O_NONBLOCK`, then `fstat` on the fd.
    pub fn open_regular(&self) -> Result<Option<Option<File>>, BeneathError> {
        let Some(st) = self.stat().map_err(BeneathError::Io)? else {
            return Ok(Some(None));
        };
        match FileKind::of(&st) {
            Some(FileKind::Symlink) => return Ok(None),
            Some(kind) => return Err(BeneathError::NotRegular(kind)),
            None => {}
        }
        let flags = OFlag::O_RDONLY
            | OFlag::O_NONBLOCK
            | OFlag::O_NOFOLLOW
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let fd = match openat(&*self.base, self.name.as_os_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Ok(None),
            Err(Errno::ENOENT) => return Ok(Some(None)),
            Err(e) => return Err(e.into()),
        };
        // Swapped between the stat and the open: check what was actually opened.
        if let Some(kind) = FileKind::of(&fstat(&fd)?) {
            return Err(BeneathError::NotRegular(kind));
        }
        nix::fcntl::fcntl(&fd, FcntlArg::F_SETFL(OFlag::empty()))?;
        Ok(Some(Some(File::from(fd))))
    }
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
