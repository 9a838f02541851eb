//! Opening a path whose every component is known not to be a symlink, in one system call:
//! `openat2` with `RESOLVE_NO_SYMLINKS`. Where a path is usually free of links (a
//! canonical workspace and what lies below it), this replaces a component-by-component
//! walk or a `realpath` (a `readlink` per component) on the hot path; any failure sends
//! the caller back to that slower, exact way, which then says what is wrong.

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

/// `path` (absolute, or relative to `dir`) opened as a directory with `flags` added, when
/// no component of it is a symlink; `None` otherwise, and also when the kernel cannot
/// tell (no `openat2` before Linux 5.6, or a seccomp filter that refuses it).
pub fn open_dir_without_links(dir: impl AsFd, path: &Path, flags: OFlag) -> Option<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .mode(Mode::empty())
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(dir, path, how).ok()
}

/// Whether `arg` is already canonical: an existing directory, reached through no symlink,
/// spelled without `.`, `..`, repeated or trailing slashes. Two system calls (`openat2`
/// with `O_PATH`, `close`) instead of a `readlink` per component and a `stat`.
pub fn is_canonical_dir(arg: &str) -> bool {
    let p = Path::new(arg);
    let plain = p
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    // `components` drops a trailing slash and repeated ones; the spelling must match.
    let respelled = p.components().collect::<std::path::PathBuf>();
    plain
        && p.is_absolute()
        && respelled.as_os_str() == p.as_os_str()
        && open_dir_without_links(nix::fcntl::AT_FDCWD, p, OFlag::O_PATH).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_spelling_of_a_linkless_directory_is_canonical() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().canonicalize().unwrap();
        let dir = real.join("d");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(real.join("f"), "").unwrap();
        std::os::unix::fs::symlink(&dir, real.join("link")).unwrap();
        let s = |p: &Path| p.to_str().unwrap().to_string();
        assert!(is_canonical_dir(&s(&dir)));
        for not in [
            s(&real.join("link")),
            format!("{}/", s(&dir)),
            format!("{}/./d", s(&real)),
            format!("{}/d/../d", s(&real)),
            format!("{}//d", s(&real)),
            s(&real.join("f")),
            s(&real.join("missing")),
            "relative/d".into(),
        ] {
            assert!(!is_canonical_dir(&not), "{not} is not canonical");
        }
        // What it accepts, `canonicalize` leaves as it is.
        assert_eq!(dir.canonicalize().unwrap(), dir);
        assert!(
            open_dir_without_links(nix::fcntl::AT_FDCWD, &real.join("link/"), OFlag::O_RDONLY)
                .is_none()
        );
    }
}
