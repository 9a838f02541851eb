//! History admission marks (migration 7): per guardian, the highest execution number the
//! history has reconciled from that guardian's facts, and each record's screen bytes.
//!
//! Invariant: a fact about an execution numbered above its guardian's mark that carries
//! an admission is recorded (once: records are unique per guardian and execution id);
//! one at or below the mark never is, so a record retention removed is not brought back.

use rusqlite::{Connection, OptionalExtension, params};

pub const MIGRATION: &str = "ALTER TABLE executions ADD COLUMN screen_bytes INTEGER NOT NULL
        DEFAULT 0;
    UPDATE executions SET screen_bytes = coalesce(
        (SELECT length(CAST(text AS BLOB)) FROM execution_screen WHERE exec = executions.id), 0);
    CREATE TABLE history_marks (
        guardian TEXT PRIMARY KEY,
        reconciled INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;
    INSERT INTO history_marks (guardian, reconciled)
        SELECT guardian,
            max(CAST(substr(execution_id, instr(execution_id, '-') + 1) AS INTEGER))
        FROM executions GROUP BY guardian;";

/// The mark of `guardian` (0 when it has none).
pub fn get(c: &Connection, guardian: &str) -> rusqlite::Result<u64> {
    let mut st = c.prepare_cached("SELECT reconciled FROM history_marks WHERE guardian = ?1")?;
    let n: Option<i64> = st.query_row(params![guardian], |r| r.get(0)).optional()?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// Raise the mark of `guardian` to `n` (never lowers it).
pub fn raise(c: &Connection, guardian: &str, n: u64) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO history_marks (guardian, reconciled) VALUES (?1, ?2)
         ON CONFLICT (guardian) DO UPDATE SET reconciled = max(reconciled, excluded.reconciled)",
    )?;
    st.execute(params![guardian, n as i64])?;
    Ok(())
}
