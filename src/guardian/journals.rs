//! The session's output journals on disk: one file per execution, made ahead of the
//! command that will use it, and the finished ones beyond `RETAINED_JOURNALS` deleted, both
//! while the event loop is idle (`chore`). Creating or unlinking a file is 60–90 µs of
//! file-system work on ext4; done when a command starts, it sat between the command's
//! output and its answer.
//!
//! Invariants: a journal exists (and holds every byte read so far) before its path is
//! handed to anyone; the newest `RETAINED_JOURNALS` finished journals are never deleted
//! (late deletion only keeps more of them for a while); a journal made ahead is used only
//! by the execution whose number it carries, and one nobody used is deleted at shutdown.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Journals of finished executions kept on disk per session; older ones are deleted so a
/// long session's directory stays bounded. The newest outputs stay retrievable.
pub const RETAINED_JOURNALS: usize = 16;
/// Finished journals waiting for an idle moment to be deleted, at most: a loop that is
/// never idle (a flood) deletes the oldest at once beyond this.
const MAX_DOOMED: usize = 16;

/// An open journal and its path, or why it could not be made.
pub type Made = Result<(PathBuf, File), String>;

/// Create the journal `path` (0600, not through a link).
pub fn create(path: &Path) -> Made {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map(|f| (path.to_path_buf(), f))
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

pub struct Journals {
    dir: PathBuf,
    tag: String,
    /// The journal made ahead, with the execution number it is for.
    ready: Option<(u64, PathBuf, File)>,
    /// Finished journals, oldest first; those beyond `RETAINED_JOURNALS` are doomed.
    finished: VecDeque<String>,
    /// Whether making the next journal ahead is worth it (a command has run here).
    ahead: bool,
}

impl Journals {
    pub fn new(dir: PathBuf, tag: String) -> Journals {
        Journals {
            dir,
            tag,
            ready: None,
            finished: VecDeque::new(),
            ahead: false,
        }
    }

    /// Built in buffers sized up front: a `String` or `PathBuf` that grows is a `realloc`,
    /// which takes the malloc arena's lock (see `poll_set`).
    fn path(&self, n: u64) -> PathBuf {
        use std::fmt::Write;
        let mut name = String::with_capacity(self.tag.len() + 30);
        let _ = write!(name, "exec-{}-{n}.log", self.tag);
        let mut path = PathBuf::with_capacity(self.dir.as_os_str().len() + 1 + name.len());
        path.push(&self.dir);
        path.push(name);
        path
    }

    /// The journal of execution `n`: the one made ahead, else made now.
    pub fn take(&mut self, n: u64) -> Made {
        self.ahead = true;
        match self.ready.take() {
            Some((m, path, file)) if m == n => Ok((path, file)),
            stale => {
                if let Some((_, path, _)) = stale {
                    let _ = std::fs::remove_file(path);
                }
                create(&self.path(n))
            }
        }
    }

    /// A finished execution's journal: kept among the newest, the oldest doomed.
    pub fn retire(&mut self, path: Option<String>) {
        self.finished.extend(path);
        while self.finished.len() > RETAINED_JOURNALS + MAX_DOOMED {
            if let Some(old) = self.finished.pop_front() {
                let _ = std::fs::remove_file(old);
            }
        }
    }

    /// Work left for an idle moment, given the number of the next execution.
    pub fn has_chores(&self, next: u64) -> bool {
        self.finished.len() > RETAINED_JOURNALS || self.wants_ahead(next)
    }

    fn wants_ahead(&self, next: u64) -> bool {
        self.ahead && self.ready.as_ref().is_none_or(|(m, _, _)| *m != next)
    }

    /// One piece of that work: make the next execution's journal first (the next command
    /// needs it), then delete one doomed journal.
    pub fn chore(&mut self, next: u64) {
        if self.wants_ahead(next) {
            if let Some((_, stale, _)) = self.ready.take() {
                let _ = std::fs::remove_file(stale);
            }
            match create(&self.path(next)) {
                Ok((path, file)) => self.ready = Some((next, path, file)),
                // Made again (and the error reported) when the command starts.
                Err(_) => self.ahead = false,
            }
            return;
        }
        if self.finished.len() > RETAINED_JOURNALS
            && let Some(old) = self.finished.pop_front()
        {
            let _ = std::fs::remove_file(old);
        }
    }

    /// The journal made ahead and never used goes; finished ones stay for readers.
    pub fn discard_ready(&mut self) {
        if let Some((_, path, _)) = self.ready.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_next_journal_is_made_ahead_and_used_by_its_execution_only() {
        let tmp = tempfile::tempdir().unwrap();
        let mut j = Journals::new(tmp.path().to_path_buf(), "t".into());
        // Nothing is made ahead before a command ran here.
        assert!(!j.has_chores(1));
        let (first, _) = j.take(1).unwrap();
        assert!(first.ends_with("exec-t-1.log"));
        assert!(j.has_chores(2));
        j.chore(2);
        assert!(!j.has_chores(2));
        assert_eq!(files(tmp.path()), ["exec-t-1.log", "exec-t-2.log"]);
        let (second, _) = j.take(2).unwrap();
        assert!(second.ends_with("exec-t-2.log"));
        // Made ahead for 3, but 4 comes: 3's file goes, 4's is made.
        j.chore(3);
        let (fourth, _) = j.take(4).unwrap();
        assert!(fourth.ends_with("exec-t-4.log"));
        assert_eq!(
            files(tmp.path()),
            ["exec-t-1.log", "exec-t-2.log", "exec-t-4.log"]
        );
        j.chore(5);
        j.discard_ready();
        assert!(!tmp.path().join("exec-t-5.log").exists());
    }

    #[test]
    fn the_newest_finished_journals_stay_and_the_rest_go_when_idle_or_in_a_flood() {
        let tmp = tempfile::tempdir().unwrap();
        let mut j = Journals::new(tmp.path().to_path_buf(), "t".into());
        let total = RETAINED_JOURNALS + 3;
        for n in 1..=total as u64 {
            let (path, _) = j.take(n).unwrap();
            j.retire(Some(path.to_string_lossy().into_owned()));
        }
        // Deleted late, never early.
        assert_eq!(files(tmp.path()).len(), total);
        while j.has_chores(total as u64 + 1) {
            j.chore(total as u64 + 1);
        }
        let left = files(tmp.path());
        // The retained ones plus the one made ahead.
        assert_eq!(left.len(), RETAINED_JOURNALS + 1);
        assert!(!left.contains(&"exec-t-3.log".to_string()));
        assert!(left.contains(&"exec-t-4.log".to_string()));
        // Never idle: beyond the doomed bound the oldest goes at once.
        for n in 100..100 + (RETAINED_JOURNALS + MAX_DOOMED + 5) as u64 {
            let (path, _) = j.take(n).unwrap();
            j.retire(Some(path.to_string_lossy().into_owned()));
        }
        assert_eq!(files(tmp.path()).len(), RETAINED_JOURNALS + MAX_DOOMED);
    }
}
