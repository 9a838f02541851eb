//! Committing planned file contents atomically: a temp file in the same directory, fsync,
//! permissions copied, rename over the target, directory fsync. A crash leaves the old or
//! the new file, never a half-written one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of files the edit engine creates.
pub const NEW_FILE_MODE: u32 = 0o644;

fn temp_path(target: &Path) -> PathBuf {
    let mut rnd = [0u8; 8];
    let _ = getrandom::fill(&mut rnd);
    let tag: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.winx-{tag}.tmp"))
}

/// A temp file holding new content, synced to disk, not yet renamed over its target.
pub struct Staged {
    tmp: PathBuf,
    pub target: PathBuf,
}

impl Staged {
    /// Rename over the target (atomic on one file system).
    pub fn publish(self) -> std::io::Result<()> {
        let r = fs::rename(&self.tmp, &self.target);
        if r.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        r
    }

    /// Abandon the staged content.
    pub fn discard(self) {
        let _ = fs::remove_file(&self.tmp);
    }
}

/// Write `bytes` to a synced temp file beside `target`, with the target's permissions
/// (or `NEW_FILE_MODE`).
pub fn stage(target: &Path, bytes: &[u8]) -> std::io::Result<Staged> {
    let mode = fs::metadata(target)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(NEW_FILE_MODE);
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(target);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    match result {
        Ok(()) => Ok(Staged {
            tmp,
            target: target.to_path_buf(),
        }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Make renames in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replace `target` with `bytes` atomically, keeping its permissions.
pub fn write(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    stage(target, bytes)?.publish()?;
    match target.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crash can only land before a rename (the target is still old, a temp file may be
    /// left beside it) or after it (the target is new): never a half-written target.
    #[test]
    fn every_moment_of_a_commit_leaves_old_or_new() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f.txt");
        let old = "o".repeat(1 << 20);
        let new = "n".repeat(1 << 20);
        fs::write(&p, &old).unwrap();
        let staged = stage(&p, new.as_bytes()).unwrap();
        // "Crash" here: the target is untouched.
        assert_eq!(fs::read_to_string(&p).unwrap(), old);
        staged.publish().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), new);
        // An abandoned stage (the crash case) never touches the target.
        let abandoned = stage(&p, b"partial").unwrap();
        abandoned.discard();
        assert_eq!(fs::read_to_string(&p).unwrap(), new);
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn replaces_and_keeps_permissions() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("script.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let n = tmp.path().join("sub/new.txt");
        write(&n, b"x").unwrap();
        assert_eq!(
            fs::metadata(&n).unwrap().permissions().mode() & 0o777,
            NEW_FILE_MODE
        );
        // No temp files are left behind.
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
