//! Per-scope change counters for catalog cursors (migration 12, issue 36 item 14).
//!
//! Invariant: every execution change that moves its `state_seq`, `output_seq` or
//! `turn_seq` also advances its scope's own counter (`history_scope_seq`, one row per
//! principal, thread and workspace) and stamps the matching `scope_*_seq` column with the
//! new value, in the same statement (SQLite triggers, so no writer can forget it). A
//! `catalog_cursor` holds only this per-scope value: it moves when the caller's own
//! executions change, never when another scope's do, so it counts nothing of anyone else.
//! The counters are never deleted (retention removes executions, not positions), so a
//! scope's value only grows. Records older than the migration are renumbered within their
//! scope (each distinct stamp becomes its rank there), so a counter never starts from a
//! value of the global counter.

use super::history::Scope;
use rusqlite::{Connection, OptionalExtension, params};

pub const MIGRATION: &str = "CREATE TABLE history_scope_seq (
        principal TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        workspace_root TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (principal, thread_id, workspace_root)
    ) STRICT, WITHOUT ROWID;
    ALTER TABLE executions ADD COLUMN scope_state_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE executions ADD COLUMN scope_output_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE executions ADD COLUMN scope_turn_seq INTEGER NOT NULL DEFAULT 0;
    -- Rows recorded before this migration are renumbered within their scope: each
    -- distinct global stamp of a scope becomes its rank there (1, 2, …), so order and
    -- equality hold and the scope's counter is its own count of changes, never a value
    -- of the global counter (a cursor is not encrypted: it would show the install's
    -- activity).
    CREATE TEMP TABLE scope_rank AS
        SELECT principal, thread_id, workspace_root, v, ROW_NUMBER() OVER (
            PARTITION BY principal, thread_id, workspace_root ORDER BY v) AS r
        FROM (SELECT principal, thread_id, workspace_root, state_seq AS v FROM executions
              WHERE state_seq > 0
            UNION SELECT principal, thread_id, workspace_root, output_seq FROM executions
              WHERE output_seq > 0
            UNION SELECT principal, thread_id, workspace_root, turn_seq FROM executions
              WHERE turn_seq > 0);
    CREATE INDEX temp.scope_rank_key ON scope_rank (principal, thread_id, workspace_root, v);
    UPDATE executions SET
        scope_state_seq = coalesce((SELECT r FROM scope_rank k WHERE
            k.principal = executions.principal AND k.thread_id = executions.thread_id
            AND k.workspace_root = executions.workspace_root AND k.v = executions.state_seq), 0),
        scope_output_seq = coalesce((SELECT r FROM scope_rank k WHERE
            k.principal = executions.principal AND k.thread_id = executions.thread_id
            AND k.workspace_root = executions.workspace_root AND k.v = executions.output_seq), 0),
        scope_turn_seq = coalesce((SELECT r FROM scope_rank k WHERE
            k.principal = executions.principal AND k.thread_id = executions.thread_id
            AND k.workspace_root = executions.workspace_root AND k.v = executions.turn_seq), 0);
    INSERT INTO history_scope_seq
        SELECT principal, thread_id, workspace_root, max(r) FROM scope_rank
        GROUP BY principal, thread_id, workspace_root;
    DROP TABLE temp.scope_rank;
    CREATE TRIGGER executions_scope_insert AFTER INSERT ON executions BEGIN
        INSERT OR IGNORE INTO history_scope_seq
            VALUES (NEW.principal, NEW.thread_id, NEW.workspace_root, 0);
        UPDATE history_scope_seq SET seq = seq + 1 WHERE principal = NEW.principal
            AND thread_id = NEW.thread_id AND workspace_root = NEW.workspace_root;
        UPDATE executions SET
            scope_state_seq = CASE WHEN NEW.state_seq > 0 THEN s.seq ELSE 0 END,
            scope_output_seq = CASE WHEN NEW.output_seq > 0 THEN s.seq ELSE 0 END,
            scope_turn_seq = CASE WHEN NEW.turn_seq > 0 THEN s.seq ELSE 0 END
        FROM (SELECT seq FROM history_scope_seq WHERE principal = NEW.principal
              AND thread_id = NEW.thread_id AND workspace_root = NEW.workspace_root) AS s
        WHERE id = NEW.id;
    END;
    CREATE TRIGGER executions_scope_update
        AFTER UPDATE OF state_seq, output_seq, turn_seq ON executions
        WHEN NEW.state_seq != OLD.state_seq OR NEW.output_seq != OLD.output_seq
            OR NEW.turn_seq != OLD.turn_seq
    BEGIN
        INSERT OR IGNORE INTO history_scope_seq
            VALUES (NEW.principal, NEW.thread_id, NEW.workspace_root, 0);
        UPDATE history_scope_seq SET seq = seq + 1 WHERE principal = NEW.principal
            AND thread_id = NEW.thread_id AND workspace_root = NEW.workspace_root;
        UPDATE executions SET
            scope_state_seq = CASE WHEN NEW.state_seq != OLD.state_seq
                THEN s.seq ELSE OLD.scope_state_seq END,
            scope_output_seq = CASE WHEN NEW.output_seq != OLD.output_seq
                THEN s.seq ELSE OLD.scope_output_seq END,
            scope_turn_seq = CASE WHEN NEW.turn_seq != OLD.turn_seq
                THEN s.seq ELSE OLD.scope_turn_seq END
        FROM (SELECT seq FROM history_scope_seq WHERE principal = NEW.principal
              AND thread_id = NEW.thread_id AND workspace_root = NEW.workspace_root) AS s
        WHERE id = NEW.id;
    END;";

/// Where one execution last changed, in its scope's own order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    pub state: i64,
    pub output: i64,
    pub turn: i64,
}

/// The scope's counter now (0 before its first execution).
pub fn seq(c: &Connection, scope: &Scope) -> rusqlite::Result<i64> {
    let mut st = c.prepare_cached(
        "SELECT seq FROM history_scope_seq WHERE principal = ?1 AND thread_id = ?2
         AND workspace_root = ?3",
    )?;
    let got = st
        .query_row(
            params![scope.principal, scope.thread_id, scope.workspace_root],
            |r| r.get(0),
        )
        .optional()?;
    Ok(got.unwrap_or(0))
}

/// The per-scope stamps of `execution_id` in `scope` (the newest record of that id).
pub fn stamps(c: &Connection, scope: &Scope, execution_id: &str) -> rusqlite::Result<Stamps> {
    let mut st = c.prepare_cached(
        "SELECT scope_state_seq, scope_output_seq, scope_turn_seq FROM executions
         WHERE principal = ?1 AND thread_id = ?2 AND workspace_root = ?3
         AND execution_id = ?4 ORDER BY id DESC LIMIT 1",
    )?;
    let got = st
        .query_row(
            params![
                scope.principal,
                scope.thread_id,
                scope.workspace_root,
                execution_id
            ],
            |r| {
                Ok(Stamps {
                    state: r.get(0)?,
                    output: r.get(1)?,
                    turn: r.get(2)?,
                })
            },
        )
        .optional()?;
    Ok(got.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::history::{self as table, NewRecord};

    fn db() -> (tempfile::TempDir, crate::store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        (dir, store)
    }

    fn scope(p: &str) -> Scope {
        Scope {
            principal: p.into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        }
    }

    fn new(p: &str, id: &str) -> NewRecord {
        NewRecord {
            scope: scope(p),
            execution_id: id.into(),
            guardian: format!("g-{p}"),
            session_key: "k".into(),
            socket: "/s".into(),
            bg_command_id: None,
            command: "true".into(),
            cwd: "/w".into(),
            journal_path: None,
            journal_offset: 0,
            now_ms: 1,
        }
    }

    #[test]
    fn a_scope_counts_only_its_own_changes() {
        let (_d, store) = db();
        store
            .with(
                |c| {
                    let (a, b) = (scope("alice"), scope("bob"));
                    assert_eq!(seq(c, &a)?, 0);
                    table::insert(c, &new("alice", "1"), table::next_seq(c)?)?;
                    assert_eq!(seq(c, &a)?, 1);
                    let st = stamps(c, &a, "1")?;
                    assert_eq!((st.state, st.output, st.turn), (1, 1, 0));
                    // Bob's activity moves the global counter, never Alice's.
                    for i in 0..5 {
                        let n = table::next_seq(c)?;
                        table::insert(c, &new("bob", &i.to_string()), n)?;
                        let mut r = table::get(c, &b, &i.to_string())?.unwrap();
                        r.output_seq = table::next_seq(c)?;
                        table::update(c, &r)?;
                    }
                    assert_eq!(seq(c, &a)?, 1);
                    assert_eq!(seq(c, &b)?, 10);
                    // Alice's own change: only the moved stamp takes the next value.
                    let mut r = table::get(c, &a, "1")?.unwrap();
                    r.process_status = table::ProcessStatus::Exited;
                    r.state_seq = table::next_seq(c)?;
                    table::update(c, &r)?;
                    let st = stamps(c, &a, "1")?;
                    assert_eq!((st.state, st.output, st.turn), (2, 1, 0));
                    assert_eq!(seq(c, &a)?, 2);
                    // An update that moves no stamp moves no counter.
                    let mut r = table::get(c, &a, "1")?.unwrap();
                    r.observed_at_ms = 99;
                    table::update(c, &r)?;
                    assert_eq!(seq(c, &a)?, 2);
                    Ok(())
                },
                "test",
            )
            .unwrap();
    }

    /// Records from before migration 12 are renumbered within their scope: a scope's
    /// counter is its own count of changes, whatever the install did (issue 36 item 14).
    #[test]
    fn migrated_counters_count_only_their_own_scope() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("old.db")).unwrap();
        let migrations = crate::store::MIGRATIONS;
        assert_eq!(migrations[11], MIGRATION);
        for sql in &migrations[..11] {
            c.execute_batch(sql).unwrap();
        }
        let (small, big) = (scope("small"), scope("big"));
        let busy = |c: &Connection, from: usize, to: usize| {
            for i in from..to {
                let id = i.to_string();
                table::insert(c, &new("big", &id), table::next_seq(c).unwrap()).unwrap();
                let mut r = table::get(c, &big, &id).unwrap().unwrap();
                r.output_seq = table::next_seq(c).unwrap();
                table::update(c, &r).unwrap();
            }
        };
        // Small's three changes fall among big's 600: 1 + 100*2, 1 + 250*2 + 1, ….
        busy(&c, 0, 100);
        table::insert(&c, &new("small", "a"), table::next_seq(&c).unwrap()).unwrap();
        busy(&c, 100, 250);
        table::insert(&c, &new("small", "b"), table::next_seq(&c).unwrap()).unwrap();
        busy(&c, 250, 300);
        let mut a = table::get(&c, &small, "a").unwrap().unwrap();
        a.state_seq = table::next_seq(&c).unwrap();
        table::update(&c, &a).unwrap();
        assert_eq!(table::seq(&c).unwrap(), 603);

        c.execute_batch(MIGRATION).unwrap();
        assert_eq!(seq(&c, &small).unwrap(), 3);
        assert_eq!(seq(&c, &big).unwrap(), 600);
        // The global order within the scope holds, equal stamps stay equal.
        let st = |s: &Scope, id: &str| {
            let st = stamps(&c, s, id).unwrap();
            (st.state, st.output, st.turn)
        };
        assert_eq!(st(&small, "a"), (3, 1, 0));
        assert_eq!(st(&small, "b"), (2, 2, 0));
        assert_eq!(st(&big, "0"), (1, 2, 0));
        assert_eq!(st(&big, "299"), (599, 600, 0));
        // The next change continues the scope's own count.
        let mut b = table::get(&c, &small, "b").unwrap().unwrap();
        b.output_seq = table::next_seq(&c).unwrap();
        table::update(&c, &b).unwrap();
        assert_eq!(st(&small, "b"), (2, 4, 0));
        assert_eq!(seq(&c, &small).unwrap(), 4);
        assert_eq!(seq(&c, &big).unwrap(), 600);
        let temp: i64 = c
            .query_row("SELECT count(*) FROM temp.sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(temp, 0, "the ranking table is dropped");
    }
}
