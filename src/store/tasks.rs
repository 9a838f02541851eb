//! Persisted MCP Tasks: one row per task, written when it is created, followed, cancelled
//! or finished, so another adapter process can answer for it.

use super::{Store, StoreError};
use rusqlite::{OptionalExtension, params};

/// A stored task. `outcome` is JSON (`{"result": …}` or `{"error": …}`); `follow` is JSON
/// naming the shell execution a task follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub principal: String,
    pub task_id: String,
    pub tool: String,
    pub legacy: bool,
    pub created_at_ms: i64,
    pub ttl_ms: i64,
    pub status: String,
    pub status_message: Option<String>,
    pub updated_at_ms: i64,
    pub outcome: Option<String>,
    pub follow: Option<String>,
    /// The process running the task, `pid:start`.
    pub owner: Option<String>,
}

/// Most task IDs listed per principal (the in-memory cap).
const MAX_LISTED: i64 = 1024;

impl Store {
    /// Insert or update a task row, dropping rows whose TTL has run out. A stored cancel
    /// is never turned back into `working` (another process may have written it).
    pub fn task_put(&self, row: &TaskRow, now_ms: i64) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "INSERT INTO tasks (principal, task_id, tool, legacy, created_at_ms,
                     ttl_ms, status, status_message, updated_at_ms, outcome, follow, owner)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT (principal, task_id) DO UPDATE SET
                       tool = excluded.tool, legacy = excluded.legacy,
                       created_at_ms = excluded.created_at_ms, ttl_ms = excluded.ttl_ms,
                       status = CASE WHEN tasks.status = 'cancelled' AND excluded.status = 'working'
                                THEN 'cancelled' ELSE excluded.status END,
                       status_message = CASE WHEN tasks.status = 'cancelled'
                                        AND excluded.status = 'working'
                                        THEN tasks.status_message ELSE excluded.status_message END,
                       updated_at_ms = excluded.updated_at_ms, outcome = excluded.outcome,
                       follow = excluded.follow, owner = excluded.owner",
                    params![
                        row.principal,
                        row.task_id,
                        row.tool,
                        row.legacy,
                        row.created_at_ms,
                        row.ttl_ms,
                        row.status,
                        row.status_message,
                        row.updated_at_ms,
                        row.outcome,
                        row.follow,
                        row.owner
                    ],
                )?;
                c.execute(
                    "DELETE FROM tasks WHERE created_at_ms + ttl_ms < ?1",
                    params![now_ms],
                )
            },
            "store task",
        )
        .map(|_| ())
    }

    pub fn task_get(&self, principal: &str, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        self.with(
            |c| {
                c.query_row(
                    "SELECT principal, task_id, tool, legacy, created_at_ms, ttl_ms, status,
                     status_message, updated_at_ms, outcome, follow, owner
                     FROM tasks WHERE principal = ?1 AND task_id = ?2",
                    params![principal, task_id],
                    |r| {
                        Ok(TaskRow {
                            principal: r.get(0)?,
                            task_id: r.get(1)?,
                            tool: r.get(2)?,
                            legacy: r.get(3)?,
                            created_at_ms: r.get(4)?,
                            ttl_ms: r.get(5)?,
                            status: r.get(6)?,
                            status_message: r.get(7)?,
                            updated_at_ms: r.get(8)?,
                            outcome: r.get(9)?,
                            follow: r.get(10)?,
                            owner: r.get(11)?,
                        })
                    },
                )
                .optional()
            },
            "read task",
        )
    }

    /// Mark a working task cancelled, only if it is still working (another process may be
    /// finishing it right now: its outcome must not be overwritten). True when it was.
    pub fn task_cancel(
        &self,
        principal: &str,
        task_id: &str,
        message: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.with(
            |c| {
                c.execute(
                    "UPDATE tasks SET status = 'cancelled', status_message = ?3, updated_at_ms = ?4
                     WHERE principal = ?1 AND task_id = ?2 AND status = 'working'",
                    params![principal, task_id, message, now_ms],
                )
            },
            "cancel task",
        )
        .map(|n| n == 1)
    }

    /// The principal's task IDs, newest first.
    pub fn task_ids(&self, principal: &str) -> Result<Vec<String>, StoreError> {
        self.with(
            |c| {
                let mut st = c.prepare(
                    "SELECT task_id FROM tasks WHERE principal = ?1
                     ORDER BY created_at_ms DESC LIMIT ?2",
                )?;
                let rows = st.query_map(params![principal, MAX_LISTED], |r| r.get(0))?;
                rows.collect::<Result<Vec<String>, _>>()
            },
            "list tasks",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(principal: &str, id: &str, created: i64) -> TaskRow {
        TaskRow {
            principal: principal.into(),
            task_id: id.into(),
            tool: "BashCommand".into(),
            legacy: false,
            created_at_ms: created,
            ttl_ms: 1000,
            status: "working".into(),
            status_message: None,
            updated_at_ms: created,
            outcome: None,
            follow: Some("{}".into()),
            owner: Some("1:2".into()),
        }
    }

    #[test]
    fn rows_round_trip_are_scoped_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        s.task_put(&row("a", "t1", 100), 100).unwrap();
        s.task_put(&row("a", "t2", 200), 200).unwrap();
        s.task_put(&row("b", "t3", 200), 200).unwrap();
        assert_eq!(s.task_get("a", "t1").unwrap(), Some(row("a", "t1", 100)));
        assert_eq!(s.task_get("b", "t1").unwrap(), None);
        assert_eq!(s.task_ids("a").unwrap(), ["t2", "t1"]);
        let mut done = row("a", "t2", 200);
        done.status = "completed".into();
        done.outcome = Some("{\"result\":{}}".into());
        // Writing at 1150 expires t1 (created 100, TTL 1000) but not t2.
        s.task_put(&done, 1150).unwrap();
        assert_eq!(s.task_get("a", "t1").unwrap(), None);
        assert_eq!(s.task_get("a", "t2").unwrap(), Some(done.clone()));
        // A cancel reaches only a task that is still working.
        assert!(!s.task_cancel("a", "t2", "cancelled", 1200).unwrap());
        assert_eq!(s.task_get("a", "t2").unwrap(), Some(done));
        s.task_put(&row("b", "t4", 1200), 1200).unwrap();
        assert!(
            !s.task_cancel("a", "t4", "cancelled", 1201).unwrap(),
            "another principal's"
        );
        assert!(s.task_cancel("b", "t4", "cancelled", 1201).unwrap());
        assert_eq!(s.task_get("b", "t4").unwrap().unwrap().status, "cancelled");
        // A stored cancel is not undone by a later write of the working state.
        let mut w = row("b", "t5", 1200);
        s.task_put(&w, 1200).unwrap();
        assert!(s.task_cancel("b", "t5", "cancelled", 1201).unwrap());
        w.follow = Some("{\"x\":1}".into());
        s.task_put(&w, 1202).unwrap();
        let back = s.task_get("b", "t5").unwrap().unwrap();
        assert_eq!(
            (back.status.as_str(), back.follow),
            ("cancelled", w.follow.clone())
        );
    }
}
