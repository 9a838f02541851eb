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

/// Store the session's current permits of `paths` (one transaction for the call).
pub fn save(ctx: &ToolContext, thread_id: &str, coverage: &Coverage, paths: &[PathBuf]) {
    let permits: Vec<(&Path, StoredPermit)> = paths
        .iter()
        .filter_map(|p| {
            coverage
                .permit(p)
                .map(|(revision, ranges)| (p.as_path(), StoredPermit { revision, ranges }))
        })
        .collect();
    let saved = ctx
        .sessions
        .store()
        .map_err(|e| format!("{e:?}"))
        .and_then(|s| {
            s.permits_put(ctx.principal, thread_id, &permits, unix_ms())
                .map_err(|e| e.to_string())
        });
    if let Err(e) = saved {
        log::warn!("storing read permits: {e}");
    }
}
