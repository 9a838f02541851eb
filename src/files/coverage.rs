//! Read coverage: which line ranges of which revision one session has read. A read is the
//! permit for an edit of those lines; a changed file (new revision) voids the permit.
//! Each session has its own `Coverage` (held by the tools' session-state registry).
//!
//! Invariant: coverage is only ever granted by a successful read or by the session's own
//! committed change of the file (an edit or an undo: `carry`, which keeps what was read
//! outside the change and adds what the session wrote or was shown). It lives in adapter memory; reads are also written to the state store
//! (`store::permits`, by the tools), and a miss here — no permit for the current revision,
//! as after an adapter restart or an eviction — loads the stored one through `hydrate`,
//! which adopts it only when its revision is exactly the one wanted.

use super::ranges::merge;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How long a saved permit goes without being written again by reads that add nothing.
pub const RESAVE_MS: i64 = 60 * 60 * 1000;
/// Files tracked per session; the oldest entry is forgotten beyond this.
const MAX_FILES_PER_SESSION: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    revision: String,
    /// Merged, sorted, 1-based inclusive line ranges.
    ranges: Vec<(usize, usize)>,
    seq: u64,
    /// When the state store was last known to hold exactly this revision and these
    /// ranges (`mark_saved`, unix ms): a read that adds nothing writes nothing until
    /// `RESAVE_MS` later (the stored row expires after a day unless written again).
    saved_at_ms: Option<i64>,
}

/// One session's permits, behind its own lock.
#[derive(Default)]
pub struct Coverage {
    inner: Mutex<Files>,
}

#[derive(Default)]
struct Files {
    entries: HashMap<PathBuf, Entry>,
    /// Grant counter: the entry with the smallest `seq` is the oldest.
    seq: u64,
}

/// How `new` differs from `old`, as the edits' diffs show it: the first `head` lines and
/// the last `tail` lines are unchanged (the tail moved by the change in length); the
/// lines between are the change. `head` and `tail` never overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub head: usize,
    pub tail: usize,
    /// Lines of `old` and of `new`.
    pub old_len: usize,
    pub new_len: usize,
}

impl Split {
    pub fn of(old: &str, new: &str) -> Split {
        let a: Vec<&str> = old.lines().collect();
        let b: Vec<&str> = new.lines().collect();
        Split::of_lines(&a, &b)
    }

    /// `Split::of` the two contents' lines.
    pub fn of_lines(a: &[&str], b: &[&str]) -> Split {
        let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let tail = a[head..]
            .iter()
            .rev()
            .zip(b[head..].iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        Split {
            head,
            tail,
            old_len: a.len(),
            new_len: b.len(),
        }
    }
}

/// The part of the line range `r` inside `within`, if any.
pub fn clip(r: (usize, usize), within: (usize, usize)) -> Option<(usize, usize)> {
    let (a, b) = (r.0.max(within.0), r.1.min(within.1));
    (a <= b).then_some((a, b))
}

/// The parts of `wanted` not inside `covered`.
pub fn missing(covered: &[(usize, usize)], wanted: (usize, usize)) -> Vec<(usize, usize)> {
    let mut gaps = Vec::new();
    let mut cur = wanted.0;
    for &(a, b) in covered {
        if b < cur {
            continue;
        }
        if a > wanted.1 {
            break;
        }
        if a > cur {
            gaps.push((cur, (a - 1).min(wanted.1)));
        }
        cur = cur.max(b.saturating_add(1));
        if cur > wanted.1 {
            break;
        }
    }
    if cur <= wanted.1 {
        gaps.push((cur, wanted.1));
    }
    gaps
}

impl Coverage {
    /// Record that the session read `range` of `path` at `revision`. A new revision
    /// replaces what was known of the old one.
    pub fn grant(&self, path: &Path, revision: &str, range: (usize, usize)) {
        Self::grant_locked(&mut self.inner.lock(), path, revision, &[range]);
    }

    /// The session changed `path` itself (an edit it committed, or an undo) from
    /// `old_revision` to `new_revision`, the contents differing as `split` says. Its permit
    /// at the new revision is what it held at the old one outside the change (the
    /// unchanged first and last lines, moved with the change), plus `known`: lines of the
    /// new content it knows otherwise (wrote, or was shown), in the new numbering. What it
    /// held of another revision carries nothing; lines it never read stay unread.
    pub fn carry(
        &self,
        path: &Path,
        (old_revision, new_revision): (&str, &str),
        split: Split,
        known: &[(usize, usize)],
    ) {
        let Split {
            head,
            tail,
            old_len,
            new_len,
        } = split;
        let mut guard = self.inner.lock();
        let held = match guard.entries.get(path) {
            Some(e) if e.revision == old_revision => e.ranges.clone(),
            _ => Vec::new(),
        };
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for &r in &held {
            ranges.extend(clip(r, (1, head)));
            // Old tail lines keep their distance from the end.
            if let Some((a, b)) = clip(r, (old_len - tail + 1, old_len)) {
                ranges.push((a + new_len - old_len, b + new_len - old_len));
            }
        }
        ranges.extend(known.iter().filter_map(|&r| clip(r, (1, new_len.max(1)))));
        // At a new revision this starts from nothing: what was held is carried above.
        Self::grant_locked(&mut guard, path, new_revision, &ranges);
    }

    fn grant_locked(all: &mut Files, path: &Path, revision: &str, ranges: &[(usize, usize)]) {
        all.seq += 1;
        let seq = all.seq;
        let files = &mut all.entries;
        let e = files.entry(path.to_path_buf()).or_insert_with(|| Entry {
            revision: revision.to_string(),
            ranges: Vec::new(),
            seq,
            saved_at_ms: None,
        });
        if e.revision != revision {
            e.revision = revision.to_string();
            e.ranges.clear();
            e.saved_at_ms = None;
        }
        let mut r = e.ranges.clone();
        r.extend(ranges.iter().filter(|r| r.0 <= r.1));
        let merged = merge(&r);
        if merged != e.ranges {
            e.ranges = merged;
            e.saved_at_ms = None;
        }
        e.seq = seq;
        if files.len() > MAX_FILES_PER_SESSION
            && let Some(oldest) = files
                .iter()
                .min_by_key(|(_, e)| e.seq)
                .map(|(p, _)| p.clone())
        {
            files.remove(&oldest);
        }
    }

    /// The `limit` files this session read or edited most recently, newest first.
    pub fn recent(&self, limit: usize) -> Vec<PathBuf> {
        let all = self.inner.lock();
        let mut files: Vec<(&PathBuf, u64)> = all.entries.iter().map(|(p, e)| (p, e.seq)).collect();
        files.sort_unstable_by_key(|&(_, seq)| std::cmp::Reverse(seq));
        files
            .into_iter()
            .take(limit)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Does the session hold a permit for `path` at exactly `revision`?
    pub fn holds(&self, path: &Path, revision: &str) -> bool {
        matches!(self.inner.lock().entries.get(path), Some(e) if e.revision == revision)
    }

    /// The session's permit of `path`: its revision and merged ranges.
    pub fn permit(&self, path: &Path) -> Option<(String, Vec<(usize, usize)>)> {
        let all = self.inner.lock();
        all.entries
            .get(path)
            .map(|e| (e.revision.clone(), e.ranges.clone()))
    }

    /// On a miss (nothing held for `revision`), ask `load` for a permit kept elsewhere
    /// (revision, ranges) and adopt its ranges only if its revision is exactly `revision`:
    /// a permit of another revision counts for nothing. `load` runs without the lock.
    pub fn hydrate(
        &self,
        path: &Path,
        revision: &str,
        load: impl FnOnce() -> Option<(String, Vec<(usize, usize)>)>,
    ) {
        if self.holds(path, revision) {
            return;
        }
        if let Some((stored, ranges)) = load()
            && stored == revision
        {
            // Left unsaved: the next read writes it back, refreshing its age.
            for r in ranges {
                self.grant(path, revision, r);
            }
        }
    }

    /// The permit of `path` unless the state store holds it, saved less than
    /// `RESAVE_MS` before `now_ms`.
    pub fn unsaved(&self, path: &Path, now_ms: i64) -> Option<(String, Vec<(usize, usize)>)> {
        let all = self.inner.lock();
        all.entries
            .get(path)
            .filter(|e| {
                e.saved_at_ms
                    .is_none_or(|t| now_ms.saturating_sub(t) >= RESAVE_MS)
            })
            .map(|e| (e.revision.clone(), e.ranges.clone()))
    }

    /// The store holds `revision` with `ranges` for `path` as of `at_ms`: if that is
    /// still what is held here, reads that add nothing need not write it again soon.
    pub fn mark_saved(&self, path: &Path, revision: &str, ranges: &[(usize, usize)], at_ms: i64) {
        if let Some(e) = self.inner.lock().entries.get_mut(path)
            && e.revision == revision
            && e.ranges == ranges
        {
            e.saved_at_ms = Some(at_ms);
        }
    }

    /// Ranges of `wanted` the session has not read at `revision` (empty: permitted).
    pub fn unread(
        &self,
        path: &Path,
        revision: &str,
        wanted: (usize, usize),
    ) -> Vec<(usize, usize)> {
        let all = self.inner.lock();
        match all.entries.get(path) {
            Some(e) if e.revision == revision => missing(&e.ranges, wanted),
            _ => vec![wanted],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps() {
        assert_eq!(missing(&[(1, 9), (20, 30)], (5, 25)), vec![(10, 19)]);
        assert_eq!(missing(&[(1, 9)], (1, 9)), vec![]);
        assert_eq!(missing(&[], (3, 4)), vec![(3, 4)]);
        assert_eq!(missing(&[(2, 3)], (1, 5)), vec![(1, 1), (4, 5)]);
    }

    #[test]
    fn only_a_read_that_adds_coverage_is_unsaved() {
        let c = Coverage::default();
        let p = Path::new("/w/a.rs");
        let now = 1_000_000;
        c.grant(p, "r1", (1, 10));
        let (rev, ranges) = c.unsaved(p, now).unwrap();
        c.mark_saved(p, &rev, &ranges, now);
        assert!(c.unsaved(p, now).is_none());
        c.grant(p, "r1", (2, 5));
        assert!(c.unsaved(p, now + 1).is_none(), "nothing new was read");
        assert!(
            c.unsaved(p, now + RESAVE_MS).is_some(),
            "refreshed after a while"
        );
        c.grant(p, "r1", (11, 12));
        assert_eq!(c.unsaved(p, now), Some(("r1".into(), vec![(1, 12)])));
        c.mark_saved(p, "r1", &[(1, 12)], now);
        c.grant(p, "r2", (1, 1));
        assert!(c.unsaved(p, now).is_some(), "a new revision is unsaved");
        // A stale acknowledgement does not mark a newer permit saved.
        c.mark_saved(p, "r1", &[(1, 12)], now);
        assert!(c.unsaved(p, now).is_some());
        // A permit hydrated from the store is refreshed by the next read, not before.
        let q = Path::new("/w/b.rs");
        c.hydrate(q, "s", || Some(("s".into(), vec![(1, 3), (5, 9)])));
        assert_eq!(c.permit(q), Some(("s".into(), vec![(1, 3), (5, 9)])));
        assert!(c.unsaved(q, now).is_some());
    }

    #[test]
    fn a_new_revision_voids_old_reads() {
        let c = Coverage::default();
        let p = Path::new("/w/a.rs");
        c.grant(p, "sha256:1", (1, 10));
        assert!(c.unread(p, "sha256:1", (2, 5)).is_empty());
        assert_eq!(c.unread(p, "sha256:2", (2, 5)), vec![(2, 5)]);
        assert_eq!(
            c.unread(Path::new("/w/b.rs"), "sha256:1", (2, 5)),
            vec![(2, 5)]
        );
        c.grant(p, "sha256:2", (4, 4));
        assert_eq!(c.unread(p, "sha256:2", (1, 10)), vec![(1, 3), (5, 10)]);
    }

    #[test]
    fn carry_keeps_what_was_read_outside_the_change() {
        let c = Coverage::default();
        let p = Path::new("/w/a.rs");
        let old = "1\n2\n3\n4\n5\n6\n";
        let new = "1\n2\nthree\nmore\n4\n5\n6\n";
        let split = |old, new| Split::of(old, new);
        assert_eq!((split(old, new).head, split(old, new).tail), (2, 3));
        c.grant(p, "r1", (1, 1));
        c.grant(p, "r1", (4, 5));
        // The change is new line 3-4; old 4-5 are new 5-6. Line 2 and old 6 were unread.
        c.carry(p, ("r1", "r2"), split(old, new), &[(3, 4)]);
        assert_eq!(c.permit(p), Some(("r2".into(), vec![(1, 1), (3, 6)])));
        // Held at another revision: nothing carries, only what is known.
        c.carry(p, ("r9", "r3"), split(new, old), &[(3, 3)]);
        assert_eq!(c.permit(p), Some(("r3".into(), vec![(3, 3)])));
        // Known lines beyond the new content are dropped.
        c.carry(p, ("r3", "r4"), split(old, "x\n"), &[(1, 9)]);
        assert_eq!(c.permit(p), Some(("r4".into(), vec![(1, 1)])));
        // Deleting the last lines keeps the rest.
        c.grant(p, "r5", (1, 6));
        c.carry(p, ("r5", "r6"), split(old, "1\n2\n"), &[]);
        assert_eq!(c.permit(p), Some(("r6".into(), vec![(1, 2)])));
    }

    #[test]
    fn hydrate_adopts_only_the_wanted_revision_and_only_on_a_miss() {
        let c = Coverage::default();
        let p = Path::new("/w/a.rs");
        c.hydrate(p, "r2", || Some(("r1".into(), vec![(1, 10)])));
        assert_eq!(c.unread(p, "r2", (1, 1)), vec![(1, 1)], "older revision");
        c.hydrate(p, "r1", || Some(("r1".into(), vec![(1, 3), (8, 10)])));
        assert_eq!(c.unread(p, "r1", (1, 10)), vec![(4, 7)]);
        c.hydrate(p, "r1", || panic!("held: no lookup"));
        assert_eq!(c.permit(p), Some(("r1".into(), vec![(1, 3), (8, 10)])));
    }
}
