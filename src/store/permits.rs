//! Persisted read permits: the line ranges of one file revision a session has read, so a
//! restarted adapter (or one whose session state was evicted) still honours them.
//!
//! Invariant: one row per (principal, thread_id, canonical path) — storing a newer
//! revision replaces the older one, whose ranges count for nothing anyway; rows older than
//! `PERMIT_TTL_MS` are never returned and are deleted on every write.

use super::{Store, StoreError};
use rusqlite::{OptionalExtension, params};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How long a stored permit is honoured. A host restart between calls takes seconds; a
/// day covers one working session, bounds the table by a day's reads, and after it the
/// agent simply reads again (safe, never permissive).
pub const PERMIT_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// One file's permit: the revision read and its merged, 1-based inclusive line ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredPermit {
    pub revision: String,
    pub ranges: Vec<(usize, usize)>,
}

fn encode(ranges: &[(usize, usize)]) -> String {
    let parts: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    parts.join(",")
}

/// `None` for anything malformed: a permit we cannot read grants nothing.
fn decode(s: &str) -> Option<Vec<(usize, usize)>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|r| {
            let (a, b) = r.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

impl Store {
    /// The permit of `path` for the session, if written at or after `now_ms - PERMIT_TTL_MS`.
    pub fn permit_get(
        &self,
        principal: &str,
        thread_id: &str,
        path: &Path,
        now_ms: i64,
    ) -> Result<Option<StoredPermit>, StoreError> {
        let row: Option<(String, String)> = self.with(
            |c| {
                c.query_row(
                    "SELECT revision, ranges FROM read_permits
                     WHERE principal = ?1 AND thread_id = ?2 AND path = ?3
                       AND updated_at_ms >= ?4",
                    params![
                        principal,
                        thread_id,
                        path.as_os_str().as_bytes(),
                        now_ms - PERMIT_TTL_MS
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
            },
            "read read permit",
        )?;
        Ok(row.and_then(|(revision, ranges)| {
            decode(&ranges).map(|ranges| StoredPermit { revision, ranges })
        }))
    }

    /// Store the permits of one call's files in one transaction (each replacing the
    /// session's row for its path) and delete expired rows.
    pub fn permits_put(
        &self,
        principal: &str,
        thread_id: &str,
        permits: &[(&Path, StoredPermit)],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        if permits.is_empty() {
            return Ok(());
        }
        self.with(
            |c| {
                let tx = c.unchecked_transaction()?;
                {
                    let mut put = tx.prepare_cached(
                        "INSERT OR REPLACE INTO read_permits
                         (principal, thread_id, path, revision, ranges, updated_at_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?;
                    for (path, p) in permits {
                        put.execute(params![
                            principal,
                            thread_id,
                            path.as_os_str().as_bytes(),
                            p.revision,
                            encode(&p.ranges),
                            now_ms
                        ])?;
                    }
                }
                tx.execute(
                    "DELETE FROM read_permits WHERE updated_at_ms < ?1",
                    params![now_ms - PERMIT_TTL_MS],
                )?;
                tx.commit()
            },
            "write read permits",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permit(revision: &str, ranges: &[(usize, usize)]) -> StoredPermit {
        StoredPermit {
            revision: revision.into(),
            ranges: ranges.to_vec(),
        }
    }

    #[test]
    fn put_get_replace_and_expiry() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        let (a, b) = (Path::new("/w/a.rs"), Path::new("/w/b.rs"));
        s.permits_put(
            "p",
            "t",
            &[
                (a, permit("r1", &[(1, 9), (20, 30)])),
                (b, permit("r1", &[])),
            ],
            1_000,
        )
        .unwrap();
        assert_eq!(
            s.permit_get("p", "t", a, 2_000).unwrap(),
            Some(permit("r1", &[(1, 9), (20, 30)]))
        );
        assert_eq!(
            s.permit_get("p", "t", b, 2_000).unwrap(),
            Some(permit("r1", &[]))
        );
        // Other sessions and principals see nothing.
        assert_eq!(s.permit_get("p", "u", a, 2_000).unwrap(), None);
        assert_eq!(s.permit_get("q", "t", a, 2_000).unwrap(), None);
        // A newer revision replaces the row: one row per session and path.
        s.permits_put("p", "t", &[(a, permit("r2", &[(3, 4)]))], 3_000)
            .unwrap();
        assert_eq!(
            s.permit_get("p", "t", a, 3_000).unwrap(),
            Some(permit("r2", &[(3, 4)]))
        );
        let rows: i64 = s
            .with(
                |c| c.query_row("SELECT count(*) FROM read_permits", [], |r| r.get(0)),
                "q",
            )
            .unwrap();
        assert_eq!(rows, 2);
        // Past the TTL a row is never returned, and the next write deletes it.
        let later = 3_000 + PERMIT_TTL_MS + 1;
        assert_eq!(s.permit_get("p", "t", a, later).unwrap(), None);
        s.permits_put("p", "t", &[(b, permit("r3", &[(1, 1)]))], later)
            .unwrap();
        let rows: i64 = s
            .with(
                |c| c.query_row("SELECT count(*) FROM read_permits", [], |r| r.get(0)),
                "q",
            )
            .unwrap();
        assert_eq!(rows, 1, "expired rows deleted on write");
    }

    #[test]
    fn ranges_round_trip_and_garbage_grants_nothing() {
        let r = vec![(1, 2), (10, 400)];
        assert_eq!(decode(&encode(&r)), Some(r));
        assert_eq!(decode(""), Some(vec![]));
        assert_eq!(decode("1-x"), None);
        assert_eq!(decode("7"), None);
    }
}
