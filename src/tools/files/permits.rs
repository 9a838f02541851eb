//! Read permits in the state store (`store::permits`): written once per `ReadFiles` call,
//! looked up only when the session's in-memory coverage misses (after an adapter restart
//! or an eviction).
//!
//! Invariant: a store failure never fails a read or grants an edit; it only costs a
//! `needs_read` later (logged).

use crate::deadline::unix_ms;
use crate::files::coverage::Coverage;
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
