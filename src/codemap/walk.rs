//! A bounded, symlink-free walk of a directory tree for CodeMap.
//!
//! Each directory is opened from its parent's descriptor with `O_NOFOLLOW`, each file is
//! stat'ed with `AT_SYMLINK_NOFOLLOW` and opened (`open`) from its directory's
//! descriptor the same way, so nothing the walk reaches lies outside the directory it was
//! given, whatever symlinks the tree holds or gains meanwhile. Entries are visited in
//! byte order of their names (depth first), so two walks of an unchanged tree agree.
//!
//! Skipped: symlinks, anything not a directory or regular file, VCS directories (`.git`,
//! `.hg`, `.svn`), winx's own `.winx`, what `.gitignore` files ignore (those of the
//! directories between the base and the walked root count too), and the paths the caller
//! excludes (the server's own state and credentials, `Limits::exclude`).
//!
//! Invariant: a walk reads at most `Limits::max_entries` directory entries, descends at
//! most [`MAX_DIR_DEPTH`] levels and stops at its deadline; it then reports which bound
//! it met (`Walked::truncated`) instead of hanging on a 100,000-file directory.

use super::gitignore::{Ignore, ignored};
use crate::deadline::Deadline;
use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, FcntlArg, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// Directory levels below the walked root: deeper trees are generated or hostile.
pub const MAX_DIR_DEPTH: usize = 64;
/// Largest `.gitignore` read; a larger one is ignored whole.
pub const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;
/// Directory names never descended into.
const SKIPPED_DIRS: &[&[u8]] = &[b".git", b".hg", b".svn", b".winx"];

/// Identity and change stamp of a file, from one `fstatat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Meta {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Meta {
    fn of(st: &FileStat) -> Meta {
        Meta {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size.max(0) as u64,
            mtime_ns: st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec,
        }
    }
}

/// One regular file reached by the walk.
pub struct Visit<'a> {
    /// Path relative to the walk's base, `/`-separated (lossy for non-UTF-8 names).
    pub rel: &'a str,
    pub dir: BorrowedFd<'a>,
    pub name: &'a CStr,
    pub meta: Meta,
}

/// Which bound stopped a walk early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truncated {
    /// `max_entries` directory entries were read.
    Entries(usize),
    /// The walk's deadline passed.
    Deadline,
    /// A directory lay deeper than [`MAX_DIR_DEPTH`].
    Depth,
}

/// What a walk saw besides the files it visited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    pub files: usize,
    pub dirs: usize,
    pub ignored: usize,
    pub symlinks: usize,
    pub truncated: Option<Truncated>,
}

/// The bounds of one walk.
pub struct Limits {
    pub max_entries: usize,
    pub deadline: Deadline,
    /// Paths (relative to the base) never entered or visited: the server's own state and
    /// credentials when they lie inside the walked tree.
    pub exclude: Vec<String>,
}

struct Walker<'v> {
    limits: Limits,
    stack: Vec<Ignore>,
    seen: usize,
    out: Walked,
    visit: &'v mut dyn FnMut(&Visit),
}

/// Walk `root` (a canonical directory inside `base`, or `base` itself), calling `visit`
/// for every regular file in order. Paths are relative to `base`.
pub fn walk(
    base: &Path,
    root: &Path,
    limits: Limits,
    visit: &mut dyn FnMut(&Visit),
) -> io::Result<Walked> {
    let rel_root = root
        .strip_prefix(base)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut w = Walker {
        limits,
        stack: Vec::new(),
        seen: 0,
        out: Walked::default(),
        visit,
    };
    // The `.gitignore` files of the directories from `base` down to `root`.
    let mut dir = base.to_path_buf();
    let mut prefix = String::new();
    w.load_ignore_at(&dir, &prefix);
    for part in Path::new(&rel_root).components() {
        dir.push(part);
        prefix.push_str(&part.as_os_str().to_string_lossy());
        prefix.push('/');
        w.load_ignore_at(&dir, &prefix);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = Dir::open(root, flags, Mode::empty()).map_err(io::Error::from)?;
    w.dir(fd, &prefix, 0);
    Ok(w.out)
}

/// Open a visited file for reading: no symlink followed, never blocking, and only if it
/// is still the regular file the walk stat'ed.
pub fn open(v: &Visit) -> io::Result<File> {
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = openat(v.dir, v.name, flags, Mode::empty()).map_err(io::Error::from)?;
    let st = fstat(&fd).map_err(io::Error::from)?;
    let regular = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
    if !regular || st.st_ino != v.meta.ino {
        return Err(io::Error::other("the file changed while it was read"));
    }
    nix::fcntl::fcntl(&fd, FcntlArg::F_SETFL(OFlag::empty())).map_err(io::Error::from)?;
    Ok(File::from(fd))
}

/// At most `limit` bytes of a file.
pub fn read_limited(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl Walker<'_> {
    fn load_ignore_at(&mut self, dir: &Path, prefix: &str) {
        let path = dir.join(".gitignore");
        let regular = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_GITIGNORE_BYTES);
        if let Some(text) = regular.then(|| std::fs::read(&path).ok()).flatten() {
            self.stack.push(Ignore::parse(prefix, &text));
        }
    }

    /// The `.gitignore` of the directory open at `fd`, if any.
    fn ignore_in(fd: &Dir, prefix: &str) -> Option<Ignore> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let file = openat(fd.as_fd(), ".gitignore", flags, Mode::empty()).ok()?;
        let st = fstat(&file).ok()?;
        let regular = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
        if !regular || st.st_size as u64 > MAX_GITIGNORE_BYTES {
            return None;
        }
        let text = read_limited(File::from(file), MAX_GITIGNORE_BYTES).ok()?;
        Some(Ignore::parse(prefix, &text))
    }

    fn stop(&mut self, why: Truncated) {
        self.out.truncated.get_or_insert(why);
    }

    fn dir(&mut self, mut fd: Dir, prefix: &str, depth: usize) {
        if self.out.truncated.is_some() {
            return;
        }
        if depth > MAX_DIR_DEPTH {
            self.stop(Truncated::Depth);
            return;
        }
        self.out.dirs += 1;
        // The root's own `.gitignore` was loaded with its ancestors'.
        let pushed = if depth > 0 {
            Self::ignore_in(&fd, prefix)
                .map(|ig| self.stack.push(ig))
                .is_some()
        } else {
            false
        };
        let mut entries: Vec<(std::ffi::CString, Option<Type>)> = Vec::new();
        for e in fd.iter().flatten() {
            let name = e.file_name();
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            self.seen += 1;
            if self.seen > self.limits.max_entries {
                self.stop(Truncated::Entries(self.limits.max_entries));
                break;
            }
            entries.push((name.to_owned(), e.file_type()));
        }
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, kind) in entries {
            if self.limits.deadline.expired() {
                self.stop(Truncated::Deadline);
            }
            if self.out.truncated.is_some()
                && !matches!(self.out.truncated, Some(Truncated::Entries(_)))
            {
                break;
            }
            self.entry(&fd, prefix, &name, kind, depth);
        }
        if pushed {
            self.stack.pop();
        }
    }

    fn entry(&mut self, fd: &Dir, prefix: &str, name: &CStr, kind: Option<Type>, depth: usize) {
        let bytes = name.to_bytes();
        let st = match kind {
            Some(Type::Symlink) => None,
            _ => fstatat(fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).ok(),
        };
        let Some(st) = st else {
            self.out.symlinks += usize::from(kind == Some(Type::Symlink));
            return;
        };
        let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        let rel = format!("{prefix}{}", String::from_utf8_lossy(bytes));
        if self.limits.exclude.contains(&rel) {
            self.out.ignored += 1;
            return;
        }
        if fmt == SFlag::S_IFLNK {
            self.out.symlinks += 1;
        } else if fmt == SFlag::S_IFDIR {
            if SKIPPED_DIRS.contains(&bytes) || ignored(&self.stack, &rel, true) {
                self.out.ignored += 1;
                return;
            }
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            match Dir::openat(fd.as_fd(), name, flags, Mode::empty()) {
                Ok(sub) => self.dir(sub, &format!("{rel}/"), depth + 1),
                Err(Errno::ELOOP | Errno::ENOTDIR) => self.out.symlinks += 1,
                Err(_) => {}
            }
        } else if fmt == SFlag::S_IFREG {
            if ignored(&self.stack, &rel, false) {
                self.out.ignored += 1;
                return;
            }
            self.out.files += 1;
            let v = Visit {
                rel: &rel,
                dir: fd.as_fd(),
                name,
                meta: Meta::of(&st),
            };
            (self.visit)(&v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max_entries: usize) -> Limits {
        Limits {
            max_entries,
            deadline: Deadline::after("test walk", Duration::from_secs(30)),
            exclude: vec!["skip".into()],
        }
    }

    fn rels(base: &Path, root: &Path, max: usize) -> (Vec<String>, Walked) {
        let mut seen = Vec::new();
        let walked = walk(base, root, limits(max), &mut |v| {
            seen.push(v.rel.to_string())
        })
        .unwrap();
        (seen, walked)
    }

    #[test]
    fn order_links_ignores_and_bounds() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        for f in [
            "b/2.rs",
            "b/1.rs",
            "a.rs",
            "skip/x.rs",
            ".git/config",
            "out/gen.rs",
        ] {
            let p = base.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::fs::write(base.join(".gitignore"), "out/\n").unwrap();
        std::os::unix::fs::symlink("/etc", base.join("link")).unwrap();
        let (seen, walked) = rels(&base, &base, 1000);
        assert_eq!(seen, [".gitignore", "a.rs", "b/1.rs", "b/2.rs"]);
        assert_eq!((walked.symlinks, walked.truncated), (1, None));
        assert_eq!(walked.ignored, 3, ".git, out/ and the excluded skip/");
        // A subdirectory keeps paths relative to the base.
        assert_eq!(rels(&base, &base.join("b"), 1000).0, ["b/1.rs", "b/2.rs"]);
        // The entry budget stops the walk and says so.
        let (_, walked) = rels(&base, &base, 3);
        assert_eq!(walked.truncated, Some(Truncated::Entries(3)));
    }

    #[test]
    fn depth_is_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let mut deep = base.clone();
        for _ in 0..MAX_DIR_DEPTH + 3 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("x.rs"), "x").unwrap();
        let (seen, walked) = rels(&base, &base, 100_000);
        assert!(seen.is_empty());
        assert_eq!(walked.truncated, Some(Truncated::Depth));
    }
}
