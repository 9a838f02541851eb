//! Managed Codex app-server targets (migration 10): one row per running host process
//! (`agent app-server host`), so `agent catalog` can find its admission socket.
//!
//! Invariant: only the host writes its own row (on start, and it deletes it on exit); a
//! reader that finds the host gone (`host_pid:host_start`) deletes the row. The live
//! state (idle/busy, the event sequence) is never stored here: the host answers it.

use super::{Store, StoreError};
use rusqlite::{Row, params};

pub const MIGRATION: &str = "CREATE TABLE app_server_targets (
        agent_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        incarnation TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        socket TEXT NOT NULL,
        host_pid INTEGER NOT NULL,
        host_start INTEGER NOT NULL,
        cwd TEXT NOT NULL,
        command TEXT NOT NULL,
        events_log TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) STRICT;";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppServerTarget {
    pub agent_id: String,
    pub principal: String,
    pub incarnation: String,
    /// The app-server's thread id and session id (`thread/start`).
    pub thread_id: String,
    pub session_id: String,
    /// The host's admission socket.
    pub socket: String,
    pub host_pid: u32,
    pub host_start: u64,
    pub cwd: String,
    /// The app-server command line (display only).
    pub command: String,
    /// The host's numbered event log.
    pub events_log: String,
    pub created_at_ms: i64,
}

const COLUMNS: &str = "agent_id, principal, incarnation, thread_id, session_id, socket,
    host_pid, host_start, cwd, command, events_log, created_at_ms";

fn from_row(r: &Row) -> rusqlite::Result<AppServerTarget> {
    Ok(AppServerTarget {
        agent_id: r.get(0)?,
        principal: r.get(1)?,
        incarnation: r.get(2)?,
        thread_id: r.get(3)?,
        session_id: r.get(4)?,
        socket: r.get(5)?,
        host_pid: r.get::<_, i64>(6)? as u32,
        host_start: r.get::<_, i64>(7)? as u64,
        cwd: r.get(8)?,
        command: r.get(9)?,
        events_log: r.get(10)?,
        created_at_ms: r.get(11)?,
    })
}

impl Store {
    pub fn app_target_put(&self, t: &AppServerTarget) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    &format!(
                        "INSERT OR REPLACE INTO app_server_targets ({COLUMNS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                    ),
                    params![
                        t.agent_id,
                        t.principal,
                        t.incarnation,
                        t.thread_id,
                        t.session_id,
                        t.socket,
                        t.host_pid as i64,
                        t.host_start as i64,
                        t.cwd,
                        t.command,
                        t.events_log,
                        t.created_at_ms,
                    ],
                )
                .map(drop)
            },
            "record app-server target",
        )
    }

    /// The targets of `principal`, oldest first.
    pub fn app_targets(&self, principal: &str) -> Result<Vec<AppServerTarget>, StoreError> {
        self.with(
            |c| {
                let mut s = c.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM app_server_targets WHERE principal = ?1
                     ORDER BY created_at_ms, agent_id"
                ))?;
                s.query_map(params![principal], from_row)?.collect()
            },
            "read app-server targets",
        )
    }

    /// Every principal's targets (a starting host forgets those whose host is gone).
    pub fn app_targets_all(&self) -> Result<Vec<AppServerTarget>, StoreError> {
        self.with(
            |c| {
                let mut s = c.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM app_server_targets ORDER BY created_at_ms, agent_id"
                ))?;
                s.query_map([], from_row)?.collect()
            },
            "read app-server targets",
        )
    }

    /// Forget a target whose host ended (only that host's row: a new one is kept).
    pub fn app_target_delete(
        &self,
        agent_id: &str,
        host_pid: u32,
        host_start: u64,
    ) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "DELETE FROM app_server_targets WHERE agent_id = ?1 AND host_pid = ?2
                     AND host_start = ?3",
                    params![agent_id, host_pid as i64, host_start as i64],
                )
                .map(drop)
            },
            "forget app-server target",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_list_delete() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        let t = AppServerTarget {
            agent_id: "a".into(),
            principal: "local".into(),
            host_pid: 7,
            host_start: 9,
            ..Default::default()
        };
        s.app_target_put(&t).unwrap();
        assert_eq!(s.app_targets("local").unwrap(), vec![t.clone()]);
        assert!(s.app_targets("other").unwrap().is_empty());
        s.app_target_delete("a", 7, 10).unwrap();
        assert_eq!(
            s.app_targets("local").unwrap().len(),
            1,
            "another host's row"
        );
        s.app_target_delete("a", 7, 9).unwrap();
        assert!(s.app_targets("local").unwrap().is_empty());
    }
}
