//! Persisted session bindings: which `thread_id` belongs to which workspace and mode.

use super::{Store, StoreError};
use rusqlite::{OptionalExtension, params};

/// One row of the `sessions` table. `mode` is the JSON form of `session::Mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    pub principal: String,
    pub thread_id: String,
    pub workspace_root: String,
    pub mode: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Store {
    pub fn session_get(
        &self,
        principal: &str,
        thread_id: &str,
    ) -> Result<Option<SessionRow>, StoreError> {
        self.with(
            |c| {
                c.query_row(
                    "SELECT principal, thread_id, workspace_root, mode, created_at_ms, updated_at_ms
                     FROM sessions WHERE principal = ?1 AND thread_id = ?2",
                    params![principal, thread_id],
                    |r| {
                        Ok(SessionRow {
                            principal: r.get(0)?,
                            thread_id: r.get(1)?,
                            workspace_root: r.get(2)?,
                            mode: r.get(3)?,
                            created_at_ms: r.get(4)?,
                            updated_at_ms: r.get(5)?,
                        })
                    },
                )
                .optional()
            },
            "read session binding",
        )
    }

    /// Insert or update a binding; `created_at_ms` of an existing row is kept.
    pub fn session_put(&self, row: &SessionRow) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "INSERT INTO sessions (principal, thread_id, workspace_root, mode, created_at_ms, updated_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (principal, thread_id) DO UPDATE SET
                        workspace_root = excluded.workspace_root,
                        mode = excluded.mode,
                        updated_at_ms = excluded.updated_at_ms",
                    params![
                        row.principal,
                        row.thread_id,
                        row.workspace_root,
                        row.mode,
                        row.created_at_ms,
                        row.updated_at_ms
                    ],
                )
                .map(|_| ())
            },
            "write session binding",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(thread: &str, ws: &str, at: i64) -> SessionRow {
        SessionRow {
            principal: "local".into(),
            thread_id: thread.into(),
            workspace_root: ws.into(),
            mode: r#"{"name":"wcgw"}"#.into(),
            created_at_ms: at,
            updated_at_ms: at,
        }
    }

    #[test]
    fn put_get_and_update_keeps_creation_time() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        assert_eq!(s.session_get("local", "t1").unwrap(), None);
        s.session_put(&row("t1", "/a", 10)).unwrap();
        let mut updated = row("t1", "/a", 20);
        updated.mode = r#"{"name":"architect"}"#.into();
        s.session_put(&updated).unwrap();
        let got = s.session_get("local", "t1").unwrap().unwrap();
        assert_eq!(got.created_at_ms, 10);
        assert_eq!(got.updated_at_ms, 20);
        assert!(got.mode.contains("architect"));
        // Principals are separate namespaces.
        assert_eq!(s.session_get("other", "t1").unwrap(), None);
    }

    #[test]
    fn survives_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        Store::open(tmp.path())
            .unwrap()
            .session_put(&row("t2", "/b", 5))
            .unwrap();
        let s = Store::open(tmp.path()).unwrap();
        assert_eq!(
            s.session_get("local", "t2")
                .unwrap()
                .unwrap()
                .workspace_root,
            "/b"
        );
    }
}
