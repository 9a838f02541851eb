//! Read coverage: which line ranges of which revision each session has read. A read is the
//! permit for an edit of those lines; a changed file (new revision) voids the permit.
//!
//! Invariant: coverage is only ever granted by a successful read or by the session's own
//! committed edit; it lives in adapter memory, so a restarted adapter asks for reads again
//! (safe, never permissive).

use super::ranges::merge;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Files tracked per session; the oldest entry is forgotten beyond this.
const MAX_FILES_PER_SESSION: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    revision: String,
    /// Merged, sorted, 1-based inclusive line ranges.
    ranges: Vec<(usize, usize)>,
    seq: u64,
}

#[derive(Default)]
pub struct Coverage {
    inner: Mutex<HashMap<String, HashMap<PathBuf, Entry>>>,
    seq: Mutex<u64>,
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
    fn next_seq(&self) -> u64 {
        let mut s = self.seq.lock();
        *s += 1;
        *s
    }

    /// Record that `session` read `range` of `path` at `revision`. A new revision replaces
    /// what was known of the old one.
    pub fn grant(&self, session: &str, path: &Path, revision: &str, range: (usize, usize)) {
        let seq = self.next_seq();
        let mut all = self.inner.lock();
        let files = all.entry(session.to_string()).or_default();
        let e = files.entry(path.to_path_buf()).or_insert_with(|| Entry {
            revision: revision.to_string(),
            ranges: Vec::new(),
            seq,
        });
        if e.revision != revision {
            e.revision = revision.to_string();
            e.ranges.clear();
        }
        let mut r = std::mem::take(&mut e.ranges);
        if range.0 <= range.1 {
            r.push(range);
        }
        e.ranges = merge(&r);
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

    /// Ranges of `wanted` that `session` has not read at `revision` (empty: permitted).
    pub fn unread(
        &self,
        session: &str,
        path: &Path,
        revision: &str,
        wanted: (usize, usize),
    ) -> Vec<(usize, usize)> {
        let all = self.inner.lock();
        match all.get(session).and_then(|f| f.get(path)) {
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
    fn a_new_revision_voids_old_reads() {
        let c = Coverage::default();
        let p = Path::new("/w/a.rs");
        c.grant("s", p, "sha256:1", (1, 10));
        assert!(c.unread("s", p, "sha256:1", (2, 5)).is_empty());
        assert_eq!(c.unread("s", p, "sha256:2", (2, 5)), vec![(2, 5)]);
        assert_eq!(c.unread("other", p, "sha256:1", (2, 5)), vec![(2, 5)]);
        c.grant("s", p, "sha256:2", (4, 4));
        assert_eq!(c.unread("s", p, "sha256:2", (1, 10)), vec![(1, 3), (5, 10)]);
    }
}
