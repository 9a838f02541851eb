//! Commit intents: what makes a multi-file commit all-or-nothing across a crash.
//!
//! Between staging (every new content synced to a temp file) and renaming, a multi-file
//! commit writes an intent naming each target, its temp file and the revisions before and
//! after. A process killed during the renames leaves the intent behind; the next process to
//! edit or initialize finishes the commit (rolls it forward) — but only for a target that
//! is still exactly as the commit found it, so nothing written since is ever overwritten.
//!
//! Invariant: an intent is written only after every temp file is synced, so rolling
//! forward never publishes partial content.
//! Invariant: an intent of a live process is never touched (its pid and start time are
//! recorded and checked).
//! Invariant: a temp file a pending intent names is removed only by that intent's
//! recovery, never by a sweep (`sweep_abandoned`), so recovery can always roll forward.
//! Invariant: recovery finishes an intent under the locks of all its targets
//! (`edit::lock`), so it never races a live commit of the same files.

use crate::files::read::revision_of;
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    pub target: PathBuf,
    pub tmp: PathBuf,
    /// The target's revision when the commit planned it; `None` for a new file.
    pub old_revision: Option<String>,
    pub new_revision: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Intent {
    pub pid: u32,
    /// The process's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), so
    /// a reused pid is not mistaken for the writer.
    pub started: u64,
    pub entries: Vec<Entry>,
}

/// What recovery did with one target.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The temp file was renamed over the target: the commit is complete.
    RolledForward(PathBuf),
    /// The target already held the new content (renamed before the crash).
    AlreadyDone(PathBuf),
    /// The target changed since the commit planned it; the temp file was removed and the
    /// target left as it is.
    Superseded(PathBuf),
}

/// Write `intent` durably into `dir` (created 0700); returns its path.
pub fn write(dir: &Path, intent: &Intent) -> std::io::Result<PathBuf> {
    crate::fsutil::ensure_private_dir(dir)?;
    let mut tag = [0u8; 8];
    let _ = getrandom::fill(&mut tag);
    let tag = crate::hex::lower(&tag);
    let path = dir.join(format!("commit-{tag}.json"));
    let body = serde_json::to_vec(intent).map_err(std::io::Error::other)?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)?;
    f.write_all(&body)?;
    f.sync_all()?;
    super::atomic::sync_dir(dir)?;
    Ok(path)
}

/// The commit finished: its intent is no longer needed.
pub fn done(path: &Path) {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            log::warn!("commit intent {} not removed: {e}", path.display());
        }
        _ => {}
    }
}

/// Every intent file in `dir`.
fn intent_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect()
}

fn read_intent(path: &Path) -> Option<Intent> {
    fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// Temp files named by any intent in `journal` (pending or unreadable: an unreadable
/// intent names nothing we can see, so it protects nothing).
fn pending_temps(journal: &Path) -> std::collections::HashSet<PathBuf> {
    intent_files(journal)
        .iter()
        .filter_map(|p| read_intent(p))
        .flat_map(|i| i.entries.into_iter().map(|e| e.tmp))
        .collect()
}

/// Remove the abandoned temp files in `dir` (`atomic::abandoned_temps`: a dead writer's
/// at once, others after an hour), except those a pending intent in `journal` names.
/// Returns how many were removed.
pub fn sweep_abandoned(dir: &Path, journal: Option<&Path>) -> usize {
    let mut found = super::atomic::abandoned_temps(dir);
    // Intents are read only after their writers were found dead: a dead writer writes
    // no more intents, so none naming these files can appear after this read.
    if let (false, Some(j)) = (found.is_empty(), journal) {
        let keep = pending_temps(j);
        found.retain(|t| !keep.contains(t));
    }
    super::atomic::remove_temps(&found)
}

/// This process, as an intent records it.
pub fn this_process() -> (u32, u64) {
    crate::process::this_process()
}

fn writer_alive(intent: &Intent) -> bool {
    crate::process::is_running(intent.pid, intent.started)
}

/// Finish every commit in `dir` whose writer is gone, each under the locks of its
/// targets in `locks` (taken one intent at a time: the caller holds no lock). Unreadable
/// intents are left for an operator (and logged); nothing is ever guessed.
pub fn recover(dir: &Path, locks: &Path) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for path in intent_files(dir) {
        let Some(intent) = read_intent(&path) else {
            if path.exists() {
                log::warn!("unreadable commit intent {}; left in place", path.display());
            }
            continue;
        };
        if writer_alive(&intent) {
            continue;
        }
        let targets: Vec<PathBuf> = intent.entries.iter().map(|e| e.target.clone()).collect();
        let _held = match super::lock::lock_all(locks, &targets) {
            Ok(h) => h,
            Err(e) => {
                log::warn!("commit intent {} not recovered: {e:?}", path.display());
                continue;
            }
        };
        // Another process may have finished it while we waited for the locks.
        if !path.exists() {
            continue;
        }
        for entry in &intent.entries {
            outcomes.push(finish(entry));
        }
        let dirs: std::collections::BTreeSet<&Path> = intent
            .entries
            .iter()
            .filter_map(|e| e.target.parent())
            .collect();
        for d in &dirs {
            let _ = super::atomic::sync_dir(d);
        }
        done(&path);
        // The dead writer may have left other temp files beside its targets.
        for d in dirs {
            sweep_abandoned(d, Some(dir));
        }
    }
    outcomes
}

fn finish(e: &Entry) -> Outcome {
    let current = fs::read(&e.target).ok().map(|b| revision_of(&b));
    let outcome = if current.as_deref() == Some(e.new_revision.as_str()) {
        Outcome::AlreadyDone(e.target.clone())
    } else if current == e.old_revision && e.tmp.is_file() {
        match fs::rename(&e.tmp, &e.target) {
            Ok(()) => Outcome::RolledForward(e.target.clone()),
            Err(err) => {
                log::warn!("rolling {} forward failed: {err}", e.target.display());
                Outcome::Superseded(e.target.clone())
            }
        }
    } else {
        Outcome::Superseded(e.target.clone())
    };
    if !matches!(outcome, Outcome::RolledForward(_)) {
        let _ = fs::remove_file(&e.tmp);
    }
    match &outcome {
        Outcome::RolledForward(t) => log::warn!(
            "finished an interrupted commit: {} now holds {}",
            t.display(),
            e.new_revision
        ),
        Outcome::Superseded(t) => log::warn!(
            "an interrupted commit of {} was not finished: the file changed since",
            t.display()
        ),
        Outcome::AlreadyDone(_) => {}
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged(dir: &Path, name: &str, old: Option<&str>, new: &str) -> Entry {
        let target = dir.join(name);
        if let Some(o) = old {
            fs::write(&target, o).unwrap();
        }
        let tmp = dir.join(format!(".{name}.winx-0000000000000000.tmp"));
        fs::write(&tmp, new).unwrap();
        Entry {
            target,
            tmp,
            old_revision: old.map(|o| revision_of(o.as_bytes())),
            new_revision: revision_of(new.as_bytes()),
        }
    }

    #[test]
    fn a_dead_writers_commit_is_rolled_forward_where_safe() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let d = ws.path();
        let pending = staged(d, "a.txt", Some("old a"), "new a");
        let done_before = staged(d, "b.txt", Some("old b"), "new b");
        fs::rename(&done_before.tmp, &done_before.target).unwrap();
        let changed = staged(d, "c.txt", Some("old c"), "new c");
        fs::write(&changed.target, "someone else's c").unwrap();
        let created = staged(d, "d.txt", None, "new d");
        // No live process has pid 0x7fffffff with start time 1.
        let intent = Intent {
            pid: 0x7fff_ffff,
            started: 1,
            entries: vec![pending, done_before, changed, created],
        };
        let jdir = state.path().join("commits");
        let written = write(&jdir, &intent).unwrap();
        let outcomes = recover(&jdir, &state.path().join("locks"));
        assert_eq!(
            outcomes,
            [
                Outcome::RolledForward(d.join("a.txt")),
                Outcome::AlreadyDone(d.join("b.txt")),
                Outcome::Superseded(d.join("c.txt")),
                Outcome::RolledForward(d.join("d.txt")),
            ]
        );
        assert_eq!(fs::read_to_string(d.join("a.txt")).unwrap(), "new a");
        assert_eq!(
            fs::read_to_string(d.join("c.txt")).unwrap(),
            "someone else's c"
        );
        assert_eq!(fs::read_to_string(d.join("d.txt")).unwrap(), "new d");
        // No temp file and no intent is left.
        assert!(!written.exists());
        let names: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_live_writers_commit_is_left_alone() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let e = staged(ws.path(), "a.txt", Some("old"), "new");
        let (pid, started) = this_process();
        assert!(started > 0);
        let jdir = state.path().join("commits");
        let written = write(
            &jdir,
            &Intent {
                pid,
                started,
                entries: vec![e.clone()],
            },
        )
        .unwrap();
        assert!(recover(&jdir, &state.path().join("locks")).is_empty());
        assert_eq!(fs::read_to_string(&e.target).unwrap(), "old");
        assert!(e.tmp.exists() && written.exists());
        // An unreadable intent is left in place too.
        fs::write(jdir.join("commit-junk.json"), b"{not json").unwrap();
        assert!(recover(&jdir, &state.path().join("locks")).is_empty());
        assert!(jdir.join("commit-junk.json").exists());
    }

    #[test]
    fn a_sweep_leaves_the_temp_files_of_pending_intents_to_their_recovery() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let d = ws.path();
        // A dead writer's temp files: one its pending intent names, one it was staging
        // for a commit that never got an intent.
        let named = d.join(".a.txt.winx-2147483647-1-0000000000000000.tmp");
        let stray = d.join(".b.txt.winx-2147483647-1-1111111111111111.tmp");
        fs::write(&named, "new").unwrap();
        fs::write(&stray, "lost").unwrap();
        fs::write(d.join("a.txt"), "old").unwrap();
        let jdir = state.path().join("commits");
        let entry = Entry {
            target: d.join("a.txt"),
            tmp: named.clone(),
            old_revision: Some(revision_of(b"old")),
            new_revision: revision_of(b"new"),
        };
        let intent = Intent {
            pid: 0x7fff_ffff,
            started: 1,
            entries: vec![entry],
        };
        write(&jdir, &intent).unwrap();
        assert_eq!(sweep_abandoned(d, Some(&jdir)), 1);
        assert!(named.exists() && !stray.exists());
        // Recovery still finds what it needs to roll the commit forward.
        let outcomes = recover(&jdir, &state.path().join("locks"));
        assert_eq!(outcomes, [Outcome::RolledForward(d.join("a.txt"))]);
        assert_eq!(fs::read_to_string(d.join("a.txt")).unwrap(), "new");
    }
}
