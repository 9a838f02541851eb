//! The audit after every Bash action: what the session's directory holds (bytes, files),
//! what every session directory of the workspace holds, and the directory's generation.
//!
//! Cost: one `openat2` to reach `.winx/tmp` when no link is on the way (`open_root`),
//! `getdents64` per directory (`fsutil::dir_names`) and one `fstatat` per entry, nothing
//! read. The walk is bounded (`MAX_ENTRIES` for the whole workspace, `MAX_DEPTH`
//! levels); a walk cut short counts as over budget, since usage could not be established.

use super::{DirProblem, dir_name, make_dir_at, open_dir_at, open_root};
use crate::fsutil::dir_names;
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstatat, futimens};
use nix::sys::time::TimeSpec;
use sha2::{Digest, Sha256};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Entries visited per audit, over every session directory of the workspace: 78 times
/// the 128-file session budget, and ~10 ms of `fstatat` at worst.
pub const MAX_ENTRIES: usize = 10_000;
/// Directory levels below a session directory.
pub const MAX_DEPTH: usize = 32;
/// The session directory's mtime is the session's lease (see `prune`); it is renewed when
/// older than this, so a busy session costs one `futimens` a minute, not one per action.
const LEASE_RENEW_MS: i64 = 60_000;

/// Bytes and files under one directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Apparent sizes of everything that is not a directory.
    pub bytes: u64,
    /// Everything that is not a directory (regular files, symlinks, FIFOs…).
    pub files: u64,
    /// The walk stopped at a bound before it saw everything.
    pub truncated: bool,
}

/// One audit of a session's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub dir: PathBuf,
    pub session: Usage,
    /// Every `session-*` directory of the workspace, this one included.
    pub workspace_bytes: u64,
    /// 16 hex digits over every entry's path, type, size, mtime and inode: any change
    /// below the directory gives another generation (`release_temporary` checks it).
    pub generation: String,
    /// The directory could not be measured (replaced by a symlink, unreadable).
    pub problem: Option<DirProblem>,
    /// The directory was missing (removed by the agent) and was made again.
    pub recreated: bool,
    /// The directory does not exist and cannot be made (a read-only or foreign
    /// workspace): nothing can be in it, so this blocks nothing.
    pub unavailable: Option<String>,
}

impl Audit {
    /// Over a budget, or usage unknown: ordinary commands wait until this is false.
    pub fn over_budget(&self) -> bool {
        self.problem.is_some()
            || self.session.truncated
            || self.session.bytes > super::SESSION_BYTES
            || self.session.files > super::SESSION_FILES
            || self.workspace_bytes > super::WORKSPACE_BYTES
    }
}

/// Audit the directory of session `key` in `workspace`; `now_ms` renews its lease.
pub fn audit(workspace: &Path, key: &str, now_ms: i64) -> Audit {
    audit_visiting(workspace, key, now_ms, &mut |_| {})
}

/// `audit`, handing `visit` every directory below `.winx/tmp` (and that one) just before
/// its entries are read, so a watch added there misses no change the reading did not see.
pub fn audit_visiting(
    workspace: &Path,
    key: &str,
    now_ms: i64,
    visit: &mut dyn FnMut(BorrowedFd<'_>),
) -> Audit {
    let mut a = Audit {
        dir: super::session_dir(workspace, key),
        session: Usage::default(),
        workspace_bytes: 0,
        generation: String::new(),
        problem: None,
        recreated: false,
        unavailable: None,
    };
    let root = match open_root(workspace) {
        Ok(fd) => fd,
        Err(DirProblem::Missing) => {
            // Removed whole (`rm -rf .winx`): made again, empty.
            match super::ensure(workspace, key) {
                Ok(_) => a.recreated = true,
                Err(DirProblem::Io(e)) => a.unavailable = Some(e),
                Err(p) => a.problem = Some(p),
            }
            a.generation = empty_generation();
            return a;
        }
        Err(p) => {
            a.problem = Some(p);
            return a;
        }
    };
    visit(root.as_fd());
    let own = dir_name(key);
    let mut w = Walk { seen: 0, visit };
    let mut hash = Sha256::new();
    match open_dir_at(&root, own.as_str()) {
        Ok(fd) => {
            renew_lease(&fd, now_ms);
            w.walk(fd, "", 0, &mut a.session, Some(&mut hash));
        }
        Err(DirProblem::Missing) => match make_dir_at(&root, own.as_str()) {
            Ok(_) => a.recreated = true,
            Err(DirProblem::Io(e)) => a.unavailable = Some(e),
            Err(p) => a.problem = Some(p),
        },
        Err(p) => a.problem = Some(p),
    }
    a.generation = hex8(hash);
    a.workspace_bytes = a.session.bytes;
    for name in session_names(&root) {
        if name.to_bytes() == own.as_bytes() {
            continue;
        }
        let Ok(fd) = open_dir_at(&root, name.as_c_str()) else {
            continue;
        };
        let mut other = Usage::default();
        w.walk(fd, "", 0, &mut other, None);
        a.workspace_bytes = a.workspace_bytes.saturating_add(other.bytes);
        // Other sessions' usage beyond the bound is unknown: the workspace total is then
        // a lower bound, and unknown counts as over.
        a.session.truncated |= other.truncated;
    }
    a
}

fn hex8(hash: Sha256) -> String {
    crate::hex::lower(&hash.finalize()[..8])
}

/// The generation of an empty directory.
pub fn empty_generation() -> String {
    hex8(Sha256::new())
}

/// The `session-*` entries of `.winx/tmp`, unsorted.
/// `root` is read from its current offset: pass it freshly opened.
pub(crate) fn session_names(root: &OwnedFd) -> Vec<CString> {
    let mut names = dir_names(root.as_fd(), MAX_ENTRIES).unwrap_or_default();
    names.retain(|n| n.to_bytes().starts_with(b"session-"));
    names
}

/// The mtime of `st` in ms since the epoch.
pub(crate) fn mtime_ms(st: &FileStat) -> i64 {
    st.st_mtime * 1000 + st.st_mtime_nsec / 1_000_000
}

/// Also tightens the directory to 0700 if a command loosened it (helpers are private to
/// the user), so a status call needs no separate `ensure`.
fn renew_lease(dir: &OwnedFd, now_ms: i64) {
    let Ok(st) = nix::sys::stat::fstat(dir) else {
        return;
    };
    if st.st_mode & 0o7777 != 0o700 {
        let _ = fchmod(dir, Mode::from_bits_truncate(0o700));
    }
    if now_ms - mtime_ms(&st) > LEASE_RENEW_MS {
        let now = TimeSpec::UTIME_NOW;
        let _ = futimens(dir, &now, &now);
    }
}

/// One audit's walk: entries counted in `seen` (bounded by `MAX_ENTRIES`), every
/// directory handed to `visit` before it is read.
struct Walk<'a> {
    seen: usize,
    visit: &'a mut dyn FnMut(BorrowedFd<'_>),
}

impl Walk<'_> {
    /// Add what `fd` holds to `usage`; `hash` feeds the generation (own directory only;
    /// entries are hashed in byte order of their names, so the result is stable).
    fn walk(
        &mut self,
        fd: OwnedFd,
        prefix: &str,
        depth: usize,
        usage: &mut Usage,
        mut hash: Option<&mut Sha256>,
    ) {
        if depth > MAX_DEPTH {
            usage.truncated = true;
            return;
        }
        (self.visit)(fd.as_fd());
        // One name past the bound, to know the bound was passed.
        let left = (MAX_ENTRIES + 1).saturating_sub(self.seen);
        let Ok(mut names) = dir_names(fd.as_fd(), left) else {
            return;
        };
        if self.seen + names.len() > MAX_ENTRIES {
            names.truncate(MAX_ENTRIES.saturating_sub(self.seen));
            usage.truncated = true;
        }
        self.seen += names.len();
        if hash.is_some() {
            names.sort_unstable();
        }
        for name in names {
            let Ok(st) = fstatat(&fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            let rel = format!("{prefix}{}", name.to_string_lossy());
            if let Some(h) = hash.as_deref_mut() {
                h.update(rel.as_bytes());
                h.update([0u8]);
                for n in [
                    fmt.bits() as i64,
                    st.st_size,
                    st.st_mtime,
                    st.st_mtime_nsec,
                    st.st_ino as i64,
                ] {
                    h.update(n.to_le_bytes());
                }
            }
            if fmt == SFlag::S_IFDIR {
                if let Ok(sub) = open_dir_at(&fd, name.as_c_str()) {
                    let rel = format!("{rel}/");
                    self.walk(sub, &rel, depth + 1, usage, hash.as_deref_mut());
                }
            } else {
                usage.files += 1;
                usage.bytes = usage.bytes.saturating_add(st.st_size.max(0) as u64);
            }
        }
    }
}
