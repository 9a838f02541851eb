//! The user-wide limit on background commands (32 across every session), shared by all
//! guardians of one state directory through slot files named after each background
//! process's pid. Counting and taking a slot happen under an exclusive `flock`.
//!
//! Invariant: a slot whose process no longer exists (a guardian that died without
//! cleaning up) is stale and is removed when counted, so the limit never leaks.

use nix::libc;
use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Background commands running at once across every session of this user (issue 3).
pub const MAX_BACKGROUND_TOTAL: usize = 32;

/// The slot directory for sessions living under `sessions_dir/<key>`.
pub fn dir_for(session_dir: &Path) -> PathBuf {
    session_dir.parent().unwrap_or(session_dir).join("bg-slots")
}

fn alive(pid: i32) -> bool {
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Ok(()) | Err(nix::errno::Errno::EPERM)
    )
}

/// Run `start` (which spawns and returns the new pid) only if a slot is free; the slot is
/// recorded before the lock is released. `Err(None)` means the limit is reached.
pub fn with_slot<T>(
    dir: &Path,
    start: impl FnOnce() -> Result<(i32, T), String>,
) -> Result<T, Option<String>> {
    crate::fsutil::ensure_private_dir(dir).map_err(|e| Some(e.to_string()))?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join(".lock"))
        .map_err(|e| Some(e.to_string()))?;
    // Blocking: the critical section is a directory scan and one spawn.
    // SAFETY: flock(2) on a descriptor `lock` owns; no memory is passed.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    let mut live = 0;
    for e in fs::read_dir(dir)
        .map_err(|e| Some(e.to_string()))?
        .flatten()
    {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if alive(pid) {
            live += 1;
        } else {
            let _ = fs::remove_file(e.path());
        }
    }
    if live >= MAX_BACKGROUND_TOTAL {
        return Err(None);
    }
    let (pid, value) = start().map_err(Some)?;
    let _ = fs::write(dir.join(pid.to_string()), b"");
    Ok(value)
}

/// Give back the slot of a finished background process.
pub fn release(dir: &Path, pid: i32) {
    let _ = fs::remove_file(dir.join(pid.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_live_slots_and_drops_stale_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bg-slots");
        // A stale slot (no such process) does not count and is removed.
        crate::fsutil::ensure_private_dir(&dir).unwrap();
        fs::write(dir.join("999999999"), b"").unwrap();
        let me = std::process::id() as i32;
        for _ in 0..MAX_BACKGROUND_TOTAL {
            // Our own pid is alive; each call records it again under the same name, so
            // use distinct live pids: only the count matters here.
            with_slot(&dir, || Ok((me, ()))).unwrap();
        }
        assert!(!dir.join("999999999").exists());
        release(&dir, me);
        assert!(!dir.join(me.to_string()).exists());
    }
}
