//! The one edit engine behind every edit tool: plan every file in memory, check the read
//! permits and revisions, then commit each file atomically.
//!
//! Invariant: if any file fails to plan, nothing is written. A failure after some renames
//! is reported as a partial commit naming what was committed and what was left untouched.
//! Invariant: a target is renamed over only while it still holds the bytes it was planned
//! from (checked after staging, right before the renames); the caller holds the targets'
//! `edit::lock` locks from before `plan` until `commit` returns, so no other winx commit
//! can slip in between.

use super::atomic;
use super::journal;
use super::line_patch::{self, Patch};
use super::search_replace::{self, FormatError, MatchError};
use crate::files::beneath::{self, BeneathError, Roots};
use crate::files::coverage::Coverage;
use crate::files::policy::{self, AllowPaths};
use crate::session::Mode;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest file the engine edits in memory.
pub const MAX_EDIT_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Lines of unified diff included in an answer; the rest is summarised.
pub const MAX_DIFF_LINES: usize = 60;

#[derive(Clone, Debug)]
pub enum Op {
    /// Write the whole file (or create it).
    Replace { content: String },
    /// Apply SEARCH/REPLACE blocks.
    SearchReplace { text: String },
    /// Apply line patches against `expected_revision` (a compare-and-swap token).
    LinePatch {
        patches: Vec<Patch>,
        expected_revision: String,
    },
}

#[derive(Clone, Debug)]
pub struct FileEdit {
    pub path: PathBuf,
    pub op: Op,
}

/// Why a file could not be planned. Nothing has been written when one is returned.
#[derive(Debug)]
pub enum PlanError {
    NeedsRead {
        path: PathBuf,
        ranges: Vec<(usize, usize)>,
        reason: String,
    },
    Format {
        path: PathBuf,
        error: FormatError,
    },
    Match {
        path: PathBuf,
        error: MatchError,
    },
    Patch {
        path: PathBuf,
        detail: String,
    },
    Denied {
        path: PathBuf,
        reason: String,
    },
    /// A FIFO, socket or device: refused without opening it for I/O.
    NotRegular {
        path: PathBuf,
        kind: beneath::FileKind,
    },
    NotText {
        path: PathBuf,
        detail: String,
    },
    Io {
        path: PathBuf,
        detail: String,
    },
}

/// A file ready to commit.
#[derive(Clone, Debug)]
pub struct Planned {
    pub path: PathBuf,
    /// The target reached beneath its root (`files::beneath`): staged and renamed within
    /// that directory fd. `None` commits by path (recovery and tests).
    pub at: Option<beneath::Entry>,
    pub existed: bool,
    pub old: Vec<u8>,
    pub new: String,
    pub new_revision: String,
    /// Lines of the new content the agent's own edit produced (held afterwards, with what
    /// it had read outside the change and what the diff showed: decision 046).
    pub touched: Vec<(usize, usize)>,
    pub diff: String,
}

/// Some files were committed before one failed.
#[derive(Debug)]
pub struct PartialCommit {
    pub committed: Vec<PathBuf>,
    pub failed: PathBuf,
    pub untouched: Vec<PathBuf>,
    pub detail: String,
    /// The failure was a refused permission (`EACCES`/`EPERM`: file mode, or the sandbox).
    pub permission_denied: bool,
}

/// Why a commit did not complete.
#[derive(Debug)]
pub enum CommitError {
    /// A target no longer holds what it was planned from (changed by a writer outside
    /// winx's locks after planning); nothing was written. `lines` is its length now.
    Changed {
        path: PathBuf,
        now: Option<String>,
        lines: usize,
    },
    Partial(PartialCommit),
}

/// What the engine needs to know about the caller.
pub struct EditContext<'a> {
    /// The calling session's read permits.
    pub coverage: &'a Coverage,
    /// The session's permit of a path kept outside memory (the state store), asked only
    /// when `coverage` holds nothing for the file's current revision.
    pub stored: &'a StoredPermits<'a>,
    pub workspace: &'a Path,
    pub allow: &'a AllowPaths,
    pub mode: &'a Mode,
}

pub use crate::files::read::revision_of as revision;

/// A lookup of a stored permit: (revision, ranges) of a canonical path.
pub type StoredPermits<'a> = dyn Fn(&Path) -> Option<(String, Vec<(usize, usize)>)> + 'a;

fn line_count(s: &str) -> usize {
    s.lines().count()
}

/// Plan every edit; the first failure aborts the whole call.
pub fn plan(ctx: &EditContext, edits: &[FileEdit]) -> Result<Vec<Planned>, PlanError> {
    edits.iter().map(|e| plan_one(ctx, e)).collect()
}

fn plan_one(ctx: &EditContext, edit: &FileEdit) -> Result<Planned, PlanError> {
    let path = policy::canonical(&edit.path).map_err(|reason| PlanError::Denied {
        path: edit.path.clone(),
        reason,
    })?;
    policy::may_write(ctx.workspace, ctx.allow, ctx.mode, &path).map_err(|reason| {
        PlanError::Denied {
            path: path.clone(),
            reason,
        }
    })?;
    let io = |detail: String| PlanError::Io {
        path: path.clone(),
        detail,
    };
    let (entry, old) = open_target(ctx, edit, &path)?;
    let existed = old.is_some();
    let old = old.unwrap_or_default();
    let old_text = String::from_utf8(old.clone()).map_err(|e| PlanError::NotText {
        path: path.clone(),
        detail: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    let old_revision = revision(&old);
    let permit = |wanted: (usize, usize), why: &str| -> Result<(), PlanError> {
        if !existed || old.is_empty() {
            return Ok(());
        }
        ctx.coverage
            .hydrate(&path, &old_revision, || (ctx.stored)(&path));
        let gaps = ctx.coverage.unread(&path, &old_revision, wanted);
        if gaps.is_empty() {
            Ok(())
        } else {
            Err(PlanError::NeedsRead {
                path: path.clone(),
                ranges: gaps,
                reason: why.to_string(),
            })
        }
    };
    let (new, touched) = match &edit.op {
        Op::Replace { content } => {
            permit(
                (1, line_count(&old_text).max(1)),
                "replacing a whole file requires reading all of it first",
            )?;
            (content.clone(), vec![(1, line_count(content).max(1))])
        }
        Op::SearchReplace { text } => {
            let blocks = search_replace::parse_blocks(text).map_err(|error| PlanError::Format {
                path: path.clone(),
                error,
            })?;
            if !existed {
                return Err(io(
                    "file does not exist; create it with a whole-file write".into()
                ));
            }
            // Apply one block at a time so each block's original lines are known: a block's
            // position in the evolving content, shifted back by the line deltas of earlier
            // blocks above it, is where it sits in the revision that was read.
            let mut content = old_text.clone();
            let mut touched = Vec::new();
            let mut shifts: Vec<(usize, isize)> = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                let applied = search_replace::apply_blocks(&content, std::slice::from_ref(b))
                    .map_err(|error| PlanError::Match {
                        path: path.clone(),
                        error: renumber(error, i),
                    })?;
                let Some(m) = applied.matched.first() else {
                    continue;
                };
                let delta: isize = shifts
                    .iter()
                    .filter(|(at, _)| *at <= m.start_line)
                    .map(|(_, d)| *d)
                    .sum();
                let start = (m.start_line as isize - delta).max(1) as usize;
                let end = (m.end_line as isize - delta).max(start as isize) as usize;
                permit(
                    (start, end),
                    "edit only lines you have read at the current revision",
                )?;
                let d = line_count(&applied.content) as isize - line_count(&content) as isize;
                let new_end = (m.end_line as isize + d).max(m.start_line as isize) as usize;
                shifts.push((m.start_line, d));
                touched.push((m.start_line, new_end));
                content = applied.content;
            }
            (content, touched)
        }
        Op::LinePatch {
            patches,
            expected_revision,
        } => {
            if *expected_revision != old_revision {
                return Err(PlanError::NeedsRead {
                    path: path.clone(),
                    ranges: patches.iter().map(Patch::span).collect(),
                    reason: format!(
                        "the file changed since {expected_revision}; it is now {old_revision}"
                    ),
                });
            }
            // Shape first (order, overlap, bounds): a patch past the end of the file is a
            // malformed patch, not a request to read lines that do not exist.
            let new = line_patch::apply(&old_text, patches).map_err(|detail| PlanError::Patch {
                path: path.clone(),
                detail,
            })?;
            for p in patches {
                permit(p.span(), "patch only lines you have read at this revision")?;
            }
            // The lines the patches wrote, in the new content's numbering.
            let mut touched = Vec::new();
            let mut delta = 0isize;
            for p in patches {
                let n = line_count(&p.replacement);
                let start = (p.start_line as isize + delta) as usize;
                if n > 0 {
                    touched.push((start, start + n - 1));
                }
                delta += n as isize - p.delete_lines as isize;
            }
            (new, touched)
        }
    };
    let new_revision = revision(new.as_bytes());
    let diff = unified_diff(&path, &old_text, &new);
    Ok(Planned {
        path,
        at: Some(entry),
        existed,
        old,
        new,
        new_revision,
        touched,
        diff,
    })
}

/// Reach the target beneath its root (re-authorised at every attempt, see
/// `files::beneath`) and read its current bytes: `None` when it does not exist yet. A FIFO,
/// socket or device is refused before anything could block on it.
fn open_target(
    ctx: &EditContext,
    edit: &FileEdit,
    path: &Path,
) -> Result<(beneath::Entry, Option<Vec<u8>>), PlanError> {
    let io = |detail: String| PlanError::Io {
        path: path.to_path_buf(),
        detail,
    };
    let roots = Roots {
        workspace: ctx.workspace,
        allow: ctx.allow,
    };
    let check = |c: &Path| policy::may_write(ctx.workspace, ctx.allow, ctx.mode, c);
    let opened = beneath::resolve(&roots, &edit.path, true, check, |e| {
        Ok(e.open_regular()?.map(|f| (e.clone(), f)))
    });
    let (entry, file) = match opened {
        Ok(found) => found,
        Err(BeneathError::Denied(reason)) => {
            return Err(PlanError::Denied {
                path: path.to_path_buf(),
                reason,
            });
        }
        Err(BeneathError::NotRegular(beneath::FileKind::Directory)) => {
            return Err(io("is a directory".into()));
        }
        Err(BeneathError::NotRegular(kind)) => {
            return Err(PlanError::NotRegular {
                path: path.to_path_buf(),
                kind,
            });
        }
        Err(e) => return Err(io(e.to_string())),
    };
    let Some(file) = file else {
        return Ok((entry, None));
    };
    let len = file.metadata().map_err(|e| io(e.to_string()))?.len();
    if len > MAX_EDIT_FILE_BYTES {
        return Err(io(format!(
            "{len} bytes is over the {MAX_EDIT_FILE_BYTES}-byte edit limit"
        )));
    }
    let mut old = Vec::with_capacity(len as usize);
    file.take(MAX_EDIT_FILE_BYTES + 1)
        .read_to_end(&mut old)
        .map_err(|e| io(e.to_string()))?;
    if old.len() as u64 > MAX_EDIT_FILE_BYTES {
        return Err(io(format!(
            "grew past the {MAX_EDIT_FILE_BYTES}-byte edit limit while read"
        )));
    }
    Ok((entry, Some(old)))
}

/// Report a single-block match error with the block's index in the whole call.
fn renumber(e: MatchError, block_index: usize) -> MatchError {
    match e {
        MatchError::NotFound { closest, .. } => MatchError::NotFound {
            block_index,
            closest,
        },
        MatchError::Ambiguous { lines, .. } => MatchError::Ambiguous { block_index, lines },
    }
}

/// Commit planned files: every new content is first written to a synced temp file (a
/// failure there leaves every target untouched), then every target is checked to still
/// hold what it was planned from (`CommitError::Changed` otherwise, nothing written), then
/// each is renamed over its target in order, then each directory is synced once and swept
/// of temp files that earlier, crashed commits left there.
///
/// With `journal` (a state directory), a commit of several files writes an intent there
/// between staging and renaming (`edit::journal`), so a crash during the renames is
/// finished by the next process instead of leaving some files edited and others not.
pub fn commit(planned: &[Planned], journal: Option<&Path>) -> Result<(), CommitError> {
    let mut staged = Vec::with_capacity(planned.len());
    for p in planned {
        let one = match &p.at {
            Some(entry) => atomic::stage_at(entry, p.new.as_bytes()),
            None => atomic::stage(&p.path, p.new.as_bytes()),
        };
        match one {
            Ok(s) => staged.push(s),
            Err(e) => {
                staged.into_iter().for_each(atomic::Staged::discard);
                return Err(CommitError::Partial(PartialCommit {
                    committed: Vec::new(),
                    failed: p.path.clone(),
                    untouched: planned
                        .iter()
                        .filter(|q| q.path != p.path)
                        .map(|q| q.path.clone())
                        .collect(),
                    detail: e.to_string(),
                    permission_denied: e.kind() == std::io::ErrorKind::PermissionDenied,
                }));
            }
        }
    }
    if let Some(changed) = planned.iter().find_map(changed_since_planned) {
        staged.into_iter().for_each(atomic::Staged::discard);
        return Err(changed);
    }
    let intent = match journal.filter(|_| planned.len() > 1) {
        None => None,
        Some(dir) => match write_intent(dir, planned, &staged) {
            Ok(path) => Some(path),
            Err(e) => {
                staged.into_iter().for_each(atomic::Staged::discard);
                return Err(CommitError::Partial(PartialCommit {
                    committed: Vec::new(),
                    failed: planned[0].path.clone(),
                    untouched: planned.iter().skip(1).map(|q| q.path.clone()).collect(),
                    detail: format!("cannot record the commit intent: {e}"),
                    permission_denied: false,
                }));
            }
        },
    };
    let result = publish(planned, staged);
    // Finished or reported as partial: either way nothing is left for recovery to do.
    if let Some(path) = intent {
        journal::done(&path);
    }
    let mut dirs: Vec<&Path> = planned.iter().filter_map(|p| p.path.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        // Commits that died here left their temp files behind; those a pending intent
        // names are left for its recovery.
        journal::sweep_abandoned(d, journal);
    }
    result.map_err(CommitError::Partial)
}

/// The bytes of the regular file at `path` (canonical: a symlink there now is an error),
/// without ever blocking on a FIFO swapped in since planning (edit locks are held here).
fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `Some` when `p`'s target no longer holds the bytes it was planned from.
fn changed_since_planned(p: &Planned) -> Option<CommitError> {
    let now = match read_regular(&p.path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        // Unreadable or no longer a regular file: renaming over it would hide whatever
        // happened.
        Err(_) => Some(Vec::new()),
    };
    let same = match &now {
        Some(bytes) => p.existed && *bytes == p.old,
        None => !p.existed,
    };
    (!same).then(|| CommitError::Changed {
        path: p.path.clone(),
        lines: now
            .as_deref()
            .map_or(0, |b| String::from_utf8_lossy(b).lines().count()),
        now: now.as_deref().map(revision),
    })
}

fn write_intent(
    dir: &Path,
    planned: &[Planned],
    staged: &[atomic::Staged],
) -> std::io::Result<PathBuf> {
    let (pid, started) = journal::this_process();
    let entries = planned
        .iter()
        .zip(staged)
        .map(|(p, s)| journal::Entry {
            target: p.path.clone(),
            tmp: s.tmp().to_path_buf(),
            old_revision: p.existed.then(|| revision(&p.old)),
            new_revision: p.new_revision.clone(),
        })
        .collect();
    journal::write(
        dir,
        &journal::Intent {
            pid,
            started,
            entries,
        },
    )
}

/// Rename every staged file over its target in order, then sync each directory.
fn publish(planned: &[Planned], staged: Vec<atomic::Staged>) -> Result<(), PartialCommit> {
    let mut committed = Vec::new();
    let mut rest = staged.into_iter();
    while let Some(s) = rest.next() {
        let target = s.target.clone();
        if let Err(e) = s.publish() {
            let untouched: Vec<PathBuf> = rest
                .map(|s| {
                    let t = s.target.clone();
                    s.discard();
                    t
                })
                .collect();
            return Err(PartialCommit {
                committed,
                failed: target,
                untouched,
                detail: e.to_string(),
                permission_denied: e.kind() == std::io::ErrorKind::PermissionDenied,
            });
        }
        committed.push(target);
    }
    let mut dirs: Vec<&Planned> = planned.iter().collect();
    dirs.sort_by_key(|p| p.path.parent());
    dirs.dedup_by_key(|p| p.path.parent());
    for p in dirs {
        let Some(d) = p.path.parent() else { continue };
        let synced = match &p.at {
            Some(entry) => atomic::sync_dir_at(entry),
            None => atomic::sync_dir(d),
        };
        if let Err(e) = synced {
            log::warn!("syncing {} after an edit failed: {e}", d.display());
        }
    }
    Ok(())
}

/// A short unified diff: common head and tail trimmed, one hunk, bounded.
pub fn unified_diff(path: &Path, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // The same split as the permits carried over the edit (`Coverage::carry`).
    let split = crate::files::coverage::Split::of_lines(&a, &b);
    let (head, tail) = (split.head, split.tail);
    let (old_mid, new_mid) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let ctx_start = head.saturating_sub(2);
    let mut out = format!(
        "--- {p}\n+++ {p}\n@@ -{},{} +{},{} @@\n",
        ctx_start + 1,
        old_mid.len() + head - ctx_start,
        ctx_start + 1,
        new_mid.len() + head - ctx_start,
        p = path.display()
    );
    let mut lines: Vec<String> = a[ctx_start..head].iter().map(|l| format!(" {l}")).collect();
    lines.extend(old_mid.iter().map(|l| format!("-{l}")));
    lines.extend(new_mid.iter().map(|l| format!("+{l}")));
    let shown = lines.len().min(MAX_DIFF_LINES);
    for l in &lines[..shown] {
        out.push_str(l);
        out.push('\n');
    }
    if lines.len() > shown {
        out.push_str(&format!("… {} more diff lines\n", lines.len() - shown));
    }
    out
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
