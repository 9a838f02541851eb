//! Read permits in the state store (`store::permits`): written once per `ReadFiles` call,
//! looked up only when the session's in-memory coverage misses (after an adapter restart
//! or an eviction); and the one rule for the permit after the session's own change of a
//! file (`after_change`, every edit tool and `UndoEdit`).
//!
//! Invariant: a store failure never fails a read or grants an edit; it only costs a
//! `needs_read` later (logged).

use crate::deadline::unix_ms;
use crate::edit::engine::{MAX_DIFF_LINES, revision};
use crate::files::coverage::{Coverage, Split, clip};
use crate::store::permits::StoredPermit;
use crate::tools::ToolContext;
use std::path::{Path, PathBuf};

/// The stored permit of `path` for the session, as (revision, ranges).
pub fn load(
    ctx: &ToolContext,
    thread_id: &str,
    path: &Path,
) -> Option<(String, Vec<(usize, usize)>)> {
    let found = ctx
        .sessions
        .store()
        .map_err(|e| format!("{e:?}"))
        .and_then(|s| {
            s.permit_get(ctx.principal, thread_id, path, unix_ms())
                .map_err(|e| e.to_string())
        });
    match found {
        Ok(p) => p.map(|p| (p.revision, p.ranges)),
        Err(e) => {
            log::warn!("read permit lookup for {}: {e}", path.display());
            None
        }
    }
}

/// Store the session's permits of `paths` that the store does not hold yet (one
/// transaction for the call; none when every read only re-read what was stored).
pub fn save(ctx: &ToolContext, thread_id: &str, coverage: &Coverage, paths: &[PathBuf]) {
    let now = unix_ms();
    let permits: Vec<(&Path, StoredPermit)> = paths
        .iter()
        .filter_map(|p| {
            coverage
                .unsaved(p, now)
                .map(|(revision, ranges)| (p.as_path(), StoredPermit { revision, ranges }))
        })
        .collect();
    if permits.is_empty() {
        return;
    }
    let saved = ctx
        .sessions
        .store()
        .map_err(|e| format!("{e:?}"))
        .and_then(|s| {
            s.permits_put(ctx.principal, thread_id, &permits, now)
                .map_err(|e| e.to_string())
        });
    match saved {
        Ok(()) => {
            for (path, p) in &permits {
                coverage.mark_saved(path, &p.revision, &p.ranges, now);
            }
        }
        Err(e) => log::warn!("storing read permits: {e}"),
    }
}

/// How the session changed a file itself.
pub enum Change<'a> {
    /// A committed edit: `written` are the lines its operations produced (the engine's
    /// `touched`, new numbering); its answer showed the diff.
    Edit { written: &'a [(usize, usize)] },
    /// An undo: it restored its own checkpoint's bytes, the lines its edit had replaced
    /// (that edit's answer showed them as removed). No diff is shown.
    Undo,
}

/// The one rule for the session's permit after it changed `path` from `old` to `new`
/// (every edit tool and `UndoEdit`; decision 046): at the new revision it holds what it
/// held at the old revision outside the change (moved with it), the lines of the change
/// it wrote (an undo: all of them), and the lines the edit's diff showed (its context
/// lines and the `+` lines within `MAX_DIFF_LINES`). Lines it never read or saw stay
/// unread; a file changed by someone else is a revision it holds nothing of. Memory only:
/// edits write no permit rows (decision 021). `new_revision` is `new`'s, as the commit
/// computed it.
pub fn after_change(
    coverage: &Coverage,
    path: &Path,
    old: &[u8],
    (new_revision, new): (&str, &[u8]),
    change: Change,
) {
    let (old_text, new_text) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let split = Split::of(&old_text, &new_text);
    let Split {
        head,
        tail,
        old_len,
        new_len,
    } = split;
    // The change, in each content's numbering (possibly empty).
    let (old_mid, new_mid) = (old_len - head - tail, new_len - head - tail);
    let change_range = (head + 1, head + new_mid);
    let mut known: Vec<(usize, usize)> = Vec::new();
    match change {
        Change::Undo => known.push(change_range),
        Change::Edit { written } => {
            known.extend(written.iter().filter_map(|&r| clip(r, change_range)));
            // The diff's layout (`engine::unified_diff`): up to two context lines, the
            // removed lines, then the added ones, cut after `MAX_DIFF_LINES`.
            let context = head - head.saturating_sub(2);
            let shown_context = context.min(MAX_DIFF_LINES);
            known.push((head - context + 1, head - context + shown_context));
            let room = MAX_DIFF_LINES.saturating_sub(context + old_mid);
            known.push((head + 1, head + new_mid.min(room)));
        }
    }
    coverage.carry(path, (&revision(old), new_revision), split, &known);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: impl IntoIterator<Item = String>) -> String {
        lines.into_iter().map(|l| l + "\n").collect()
    }

    #[test]
    fn after_change_adds_written_and_shown_lines() {
        let p = Path::new("/w/a.txt");
        let old = text((1..=100).map(|i| format!("{i}")));
        // Lines 10 and 90 change: the diff's one hunk spans 10-90 (context 8-9, 81
        // removed lines, then `+` lines until the 60-line cut: none are shown).
        let new = old
            .replacen("10\n", "ten\n", 1)
            .replacen("90\n", "ninety\n", 1);
        let c = Coverage::default();
        c.grant(p, &revision(old.as_bytes()), (1, 5));
        c.grant(p, &revision(old.as_bytes()), (95, 100));
        let written = [(10, 10), (90, 90)];
        after_change(
            &c,
            p,
            old.as_bytes(),
            (&revision(new.as_bytes()), new.as_bytes()),
            Change::Edit { written: &written },
        );
        let (rev, ranges) = c.permit(p).unwrap();
        assert_eq!(rev, revision(new.as_bytes()));
        assert_eq!(ranges, vec![(1, 5), (8, 10), (90, 90), (95, 100)]);
        // A short change is shown whole, with two lines of context.
        let newer = new.replacen("50\n", "fifty\n", 1);
        after_change(
            &c,
            p,
            new.as_bytes(),
            (&revision(newer.as_bytes()), newer.as_bytes()),
            Change::Edit { written: &[] },
        );
        let (_, ranges) = c.permit(p).unwrap();
        assert_eq!(ranges, vec![(1, 5), (8, 10), (48, 50), (90, 90), (95, 100)]);
        // An undo holds the lines it restored (and carries the context lines around them).
        after_change(
            &c,
            p,
            newer.as_bytes(),
            (&revision(new.as_bytes()), new.as_bytes()),
            Change::Undo,
        );
        let (rev, ranges) = c.permit(p).unwrap();
        assert_eq!(rev, revision(new.as_bytes()));
        assert_eq!(ranges, vec![(1, 5), (8, 10), (48, 50), (90, 90), (95, 100)]);
    }
}
