//! Staging and publishing within a directory fd (`files::beneath::Entry`): the temp file is
//! created with `openat(O_CREAT | O_EXCL | O_NOFOLLOW)` in the target's directory and
//! renamed over the target with `renameat` in that same directory, so a directory swapped
//! for a symlink after the path was resolved can never redirect the write elsewhere.

use super::{NEW_FILE_MODE, Staged, temp_path};
use crate::files::beneath::Entry;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

/// Where a staged temp file lives: its directory fd, its name and its target's name.
pub struct At {
    dir: Arc<OwnedFd>,
    tmp: OsString,
    target: OsString,
}

impl At {
    pub(super) fn publish(&self) -> std::io::Result<()> {
        let r = renameat(
            &*self.dir,
            self.tmp.as_os_str(),
            &*self.dir,
            self.target.as_os_str(),
        );
        if r.is_err() {
            self.discard();
        }
        Ok(r?)
    }

    pub(super) fn discard(&self) {
        let _ = unlinkat(&*self.dir, self.tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
}

/// Write `bytes` to a synced temp file in `entry`'s directory (created if missing), with
/// the target's permissions (or `NEW_FILE_MODE`).
pub fn stage_at(entry: &Entry, bytes: &[u8]) -> std::io::Result<Staged> {
    let dir = entry.dir()?;
    let mode = match fstatat(&*dir, entry.name(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => {
            st.st_mode & 0o7777
        }
        _ => NEW_FILE_MODE,
    };
    let tmp_path = temp_path(&entry.path);
    let tmp: OsString = tmp_path.file_name().unwrap_or_default().to_os_string();
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let at = At {
        dir,
        tmp,
        target: entry.name().to_os_string(),
    };
    let result = (|| {
        let fd = openat(
            &*at.dir,
            at.tmp.as_os_str(),
            flags,
            Mode::from_bits_truncate(mode),
        )?;
        let mut f = File::from(fd);
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    match result {
        Ok(()) => Ok(Staged {
            tmp: tmp_path,
            target: entry.path.clone(),
            at: Some(at),
        }),
        Err(e) => {
            at.discard();
            Err(e)
        }
    }
}

/// Make renames in the directory of `entry` durable.
pub fn sync_dir_at(entry: &Entry) -> std::io::Result<()> {
    Ok(nix::unistd::fsync(&*entry.dir()?)?)
}

/// `write` within the directory of `entry`: stage, rename, sync.
pub fn write_at(entry: &Entry, bytes: &[u8]) -> std::io::Result<()> {
    stage_at(entry, bytes)?.publish()?;
    sync_dir_at(entry)
}

/// Remove the file `entry` names, by name within its directory.
pub fn remove_at(entry: &Entry) -> std::io::Result<()> {
    let dir = entry.dir()?;
    Ok(unlinkat(&*dir, entry.name(), UnlinkatFlags::NoRemoveDir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::beneath::entry_canonical;

    /// The directory is swapped for a link to elsewhere between staging and renaming: the
    /// rename still lands in the directory the entry was resolved to, and nothing is
    /// written where the link points.
    #[test]
    fn a_swap_after_staging_cannot_redirect_the_rename() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (sub, outside) = (base.join("sub"), base.join("outside"));
        fs::create_dir(&sub).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(sub.join("f.txt"), "old").unwrap();
        fs::write(outside.join("f.txt"), "outside").unwrap();
        let entry = entry_canonical(&sub.join("f.txt")).unwrap();
        let staged = stage_at(&entry, b"new").unwrap();
        fs::rename(&sub, base.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, &sub).unwrap();
        staged.publish().unwrap();
        sync_dir_at(&entry).unwrap();
        assert_eq!(fs::read_to_string(base.join("moved/f.txt")).unwrap(), "new");
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(fs::read_dir(base.join("moved")).unwrap().count(), 1);
    }
}
