//! Per-target advisory locks shared by every process on one state directory: what makes
//! plan, revision check and rename of a file one step, so two adapters (or two threads of
//! one) never commit over each other's edit.
//!
//! A target's lock is an exclusive `flock` on `<state>/locks/<sha256(canonical path)>`
//! (directory 0700, files 0600), not on the target: a commit renames a new inode over the
//! target, so a lock on the target's inode would not outlive the first commit. `flock`
//! locks belong to an open file description, so two threads of one process exclude each
//! other just like two processes, and the kernel drops the lock of a process that dies.
//!
//! The holder unlinks its lock file before unlocking, so no file is left per path ever
//! edited; a waiter that then wins the old, unlinked inode sees the path no longer names
//! it and starts over on the current file.
//!
//! Invariant: a caller takes every lock it needs in one `lock_all` call (sorted by lock
//! name, so two multi-file edits can never deadlock) and takes no other lock while
//! holding them.
//! Invariant: a lock is held only across local file work of one commit (read, plan,
//! write and sync temp files, rename), never across a shell command or a network wait.

use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Hex digits of the SHA-256 of a canonical path in its lock file's name (128 bits: no
/// two paths of one machine share a lock).
const LOCK_NAME_HEX: usize = 32;

/// Why the locks of a commit could not be taken. Nothing was read or written.
#[derive(Debug)]
pub struct LockError {
    pub target: PathBuf,
    pub detail: String,
}

/// Locks held until dropped.
#[must_use = "the locks are released when this is dropped"]
pub struct Held {
    locks: Vec<(PathBuf, File)>,
}

impl Drop for Held {
    fn drop(&mut self) {
        for (path, file) in self.locks.drain(..).rev() {
            // Unlink while still holding the lock: see the module docs.
            let _ = std::fs::remove_file(&path);
            drop(file);
        }
    }
}

/// The lock file of `target` (a canonical path) in `dir`.
pub fn lock_path(dir: &Path, target: &Path) -> PathBuf {
    let digest = Sha256::digest(target.as_os_str().as_encoded_bytes());
    let hex = crate::hex::lower(&digest);
    dir.join(&hex[..LOCK_NAME_HEX])
}

/// Take the lock of every target (canonical paths; duplicates allowed) in `dir`, blocking
/// while another commit of the same file is in progress.
pub fn lock_all(dir: &Path, targets: &[PathBuf]) -> Result<Held, LockError> {
    let mut wanted: Vec<(PathBuf, &Path)> = targets
        .iter()
        .map(|t| (lock_path(dir, t), t.as_path()))
        .collect();
    wanted.sort();
    wanted.dedup_by(|a, b| a.0 == b.0);
    let mut held = Held { locks: Vec::new() };
    if wanted.is_empty() {
        return Ok(held);
    }
    crate::fsutil::ensure_private_dir(dir).map_err(|e| LockError {
        target: wanted[0].1.to_path_buf(),
        detail: format!("lock directory {}: {e}", dir.display()),
    })?;
    for (path, target) in wanted {
        let file = lock_one(&path).map_err(|e| LockError {
            target: target.to_path_buf(),
            detail: format!("lock file {}: {e}", path.display()),
        })?;
        held.locks.push((path, file));
    }
    Ok(held)
}

fn lock_one(path: &Path) -> std::io::Result<File> {
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)?;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { nix::libc::flock(file.as_raw_fd(), nix::libc::LOCK_EX) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // The previous holder may have unlinked this inode while we waited: then the
        // lock we hold is nobody's, and the path's current file is the real one.
        let ours = file.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => return Ok(file),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn one_holder_per_target_and_nothing_left_behind() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("locks");
        let (a, b) = (PathBuf::from("/w/a.rs"), PathBuf::from("/w/b.rs"));
        let held = lock_all(&dir, &[b.clone(), a.clone(), a.clone()]).unwrap();
        assert_eq!(held.locks.len(), 2, "duplicates are locked once");
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let f = std::fs::metadata(lock_path(&dir, &a)).unwrap();
        assert_eq!(f.permissions().mode() & 0o777, 0o600);
        // Another thread wanting `a` waits for the release; one wanting only another
        // file does not.
        let released = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (dir, a, released) = (dir.clone(), a.clone(), released.clone());
            std::thread::spawn(move || {
                let _h = lock_all(&dir, &[a]).unwrap();
                assert!(released.load(Ordering::SeqCst), "the lock was shared");
            })
        };
        drop(lock_all(&dir, &[PathBuf::from("/w/c.rs")]).unwrap());
        released.store(true, Ordering::SeqCst);
        drop(held);
        waiter.join().unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[test]
    fn contended_locks_exclude_and_unlinked_inodes_are_not_trusted() {
        let state = tempfile::tempdir().unwrap();
        let dir = Arc::new(state.path().join("locks"));
        let inside = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (dir, inside) = (dir.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        // Overlapping sets in opposite orders: sorted locking never deadlocks.
                        let mut t = vec![PathBuf::from("/w/x"), PathBuf::from("/w/y")];
                        if i % 2 == 1 {
                            t.reverse();
                        }
                        let _h = lock_all(&dir, &t).unwrap();
                        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                        inside.store(false, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
