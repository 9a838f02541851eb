//! Execution history tables (migration 6): one row per accepted command, its retained
//! output as text chunks, and one global change counter.
//!
//! Invariant: a record is found only through its full scope (principal, thread,
//! workspace); it is updated only through its runtime identity (guardian + execution id);
//! every change in a transaction stamps the record with the new value of `history_seq`,
//! so "changed after cursor N" is a plain comparison. Output offsets count bytes of the
//! cleaned, redacted text the recorder stored, from the execution's first byte.

pub use crate::wire::guardian::ProcessStatus;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row, params};

pub const MIGRATION: &str = "CREATE TABLE executions (
        id INTEGER PRIMARY KEY,
        principal TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        workspace_root TEXT NOT NULL,
        execution_id TEXT NOT NULL,
        guardian TEXT NOT NULL,
        session_key TEXT NOT NULL,
        socket TEXT NOT NULL,
        bg_command_id TEXT,
        command TEXT NOT NULL,
        cwd TEXT NOT NULL,
        process_status TEXT NOT NULL,
        exit_code INTEGER,
        unknown_reason TEXT,
        first_at_ms INTEGER NOT NULL,
        observed_at_ms INTEGER NOT NULL,
        finished_at_ms INTEGER,
        expires_at_ms INTEGER,
        activity_seq INTEGER NOT NULL DEFAULT 0,
        output_activity_seq INTEGER NOT NULL DEFAULT 0,
        output_pending INTEGER NOT NULL DEFAULT 1,
        raw_bytes INTEGER NOT NULL DEFAULT 0,
        raw_end INTEGER NOT NULL DEFAULT 0,
        text_end INTEGER NOT NULL DEFAULT 0,
        retained_start INTEGER NOT NULL DEFAULT 0,
        retained_bytes INTEGER NOT NULL DEFAULT 0,
        gap_bytes INTEGER NOT NULL DEFAULT 0,
        journal_path TEXT,
        turn_state TEXT,
        state_seq INTEGER NOT NULL DEFAULT 0,
        output_seq INTEGER NOT NULL DEFAULT 0,
        turn_seq INTEGER NOT NULL DEFAULT 0,
        changed_seq INTEGER NOT NULL DEFAULT 0,
        UNIQUE (guardian, execution_id)
    ) STRICT;
    CREATE INDEX executions_scope ON executions (principal, thread_id, workspace_root, id);
    CREATE INDEX executions_lookup
        ON executions (principal, thread_id, workspace_root, execution_id);
    CREATE INDEX executions_open ON executions (guardian)
        WHERE process_status = 'running' OR output_pending = 1;
    CREATE TABLE execution_output (
        exec INTEGER NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
        offset INTEGER NOT NULL,
        bytes BLOB NOT NULL,
        PRIMARY KEY (exec, offset)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE execution_screen (
        exec INTEGER PRIMARY KEY REFERENCES executions(id) ON DELETE CASCADE,
        snapshot INTEGER NOT NULL,
        text TEXT NOT NULL,
        captured_at_ms INTEGER NOT NULL,
        quiet_ms INTEGER NOT NULL,
        detection TEXT
    ) STRICT;
    CREATE TABLE history_seq (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL)
        STRICT;
    INSERT INTO history_seq VALUES (1, 0);";

/// Who may see a record: exactly the scope that admitted its command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    pub principal: String,
    pub thread_id: String,
    pub workspace_root: String,
}

/// A command just accepted by a guardian.
#[derive(Clone, Debug)]
pub struct NewRecord {
    pub scope: Scope,
    pub execution_id: String,
    pub guardian: String,
    pub session_key: String,
    /// The guardian's socket, for watching and refreshing the record later.
    pub socket: String,
    pub bg_command_id: Option<String>,
    pub command: String,
    pub cwd: String,
    pub journal_path: Option<String>,
    /// Where the execution's bytes start in `journal_path`.
    pub journal_offset: i64,
    pub now_ms: i64,
}

/// A status is stored as its name (`ProcessStatus::as_str`): the schema's partial index
/// and retention's queries compare the column with `'running'`.
impl ToSql for ProcessStatus {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for ProcessStatus {
    fn column_result(v: ValueRef<'_>) -> FromSqlResult<ProcessStatus> {
        let s = v.as_str()?;
        ProcessStatus::parse(s)
            .ok_or_else(|| FromSqlError::Other(format!("unknown process_status {s:?}").into()))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub rowid: i64,
    pub scope: Scope,
    pub execution_id: String,
    pub guardian: String,
    pub session_key: String,
    pub socket: String,
    pub bg_command_id: Option<String>,
    pub command: String,
    pub cwd: String,
    /// `Running`, `Exited` or `Unknown` (stored as its name).
    pub process_status: ProcessStatus,
    pub exit_code: Option<i64>,
    pub unknown_reason: Option<String>,
    pub first_at_ms: i64,
    pub observed_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    pub expires_at_ms: Option<i64>,
    pub activity_seq: i64,
    pub output_activity_seq: i64,
    pub output_pending: bool,
    /// Raw journal bytes the guardian reported, and how many of them were converted.
    pub raw_bytes: i64,
    pub raw_end: i64,
    /// Text bytes stored so far (offset of the next chunk) and the retained window.
    pub text_end: i64,
    pub retained_start: i64,
    pub retained_bytes: i64,
    /// Raw bytes never captured (journal gone before the recorder read them).
    pub gap_bytes: i64,
    pub journal_path: Option<String>,
    /// Where the execution's bytes start in `journal_path` (migration 11).
    pub journal_offset: i64,
    pub turn_state: Option<String>,
    pub state_seq: i64,
    pub output_seq: i64,
    pub turn_seq: i64,
    pub changed_seq: i64,
}

impl Record {
    /// Still running or still capturing output: its guardian may know more than this row.
    pub fn is_open(&self) -> bool {
        self.process_status == ProcessStatus::Running || self.output_pending
    }
}

const COLUMNS: &str = "id, principal, thread_id, workspace_root, execution_id, guardian,
    session_key, socket, bg_command_id, command, cwd, process_status, exit_code, unknown_reason,
    first_at_ms, observed_at_ms, finished_at_ms, expires_at_ms, activity_seq,
    output_activity_seq, output_pending, raw_bytes, raw_end, text_end, retained_start,
    retained_bytes, gap_bytes, journal_path, turn_state, state_seq, output_seq, turn_seq,
    changed_seq, journal_offset";

fn record(r: &Row) -> rusqlite::Result<Record> {
    Ok(Record {
        rowid: r.get(0)?,
        scope: Scope {
            principal: r.get(1)?,
            thread_id: r.get(2)?,
            workspace_root: r.get(3)?,
        },
        execution_id: r.get(4)?,
        guardian: r.get(5)?,
        session_key: r.get(6)?,
        socket: r.get(7)?,
        bg_command_id: r.get(8)?,
        command: r.get(9)?,
        cwd: r.get(10)?,
        process_status: r.get(11)?,
        exit_code: r.get(12)?,
        unknown_reason: r.get(13)?,
        first_at_ms: r.get(14)?,
        observed_at_ms: r.get(15)?,
        finished_at_ms: r.get(16)?,
        expires_at_ms: r.get(17)?,
        activity_seq: r.get(18)?,
        output_activity_seq: r.get(19)?,
        output_pending: r.get(20)?,
        raw_bytes: r.get(21)?,
        raw_end: r.get(22)?,
        text_end: r.get(23)?,
        retained_start: r.get(24)?,
        retained_bytes: r.get(25)?,
        gap_bytes: r.get(26)?,
        journal_path: r.get(27)?,
        turn_state: r.get(28)?,
        state_seq: r.get(29)?,
        output_seq: r.get(30)?,
        turn_seq: r.get(31)?,
        changed_seq: r.get(32)?,
        journal_offset: r.get(33)?,
    })
}

/// The current value of the change counter.
pub fn seq(c: &Connection) -> rusqlite::Result<i64> {
    let mut st = c.prepare_cached("SELECT seq FROM history_seq")?;
    st.query_row([], |r| r.get(0))
}

/// Advance the change counter (once per writing transaction) and return the new value.
pub fn next_seq(c: &Connection) -> rusqlite::Result<i64> {
    let mut st = c.prepare_cached("UPDATE history_seq SET seq = seq + 1 RETURNING seq")?;
    st.query_row([], |r| r.get(0))
}

/// The change counter value of the current transaction: advanced on first use, then
/// shared by every change the transaction makes (`slot` is the transaction's).
pub fn batch_seq(c: &Connection, slot: &mut Option<i64>) -> rusqlite::Result<i64> {
    match *slot {
        Some(s) => Ok(s),
        None => Ok(*slot.insert(next_seq(c)?)),
    }
}

/// Insert an accepted command; an identity already recorded is left as it is. Returns
/// whether a row was inserted.
pub fn insert(c: &Connection, n: &NewRecord, seq: i64) -> rusqlite::Result<bool> {
    let s = &n.scope;
    let mut st = c.prepare_cached(
        "INSERT OR IGNORE INTO executions (principal, thread_id, workspace_root, execution_id,
            guardian, session_key, socket, bg_command_id, command, cwd, process_status,
            first_at_ms, observed_at_ms, journal_path, activity_seq, state_seq, output_seq,
            changed_seq, journal_offset)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?13, ?7, ?8, ?9, 'running', ?10, ?10, ?11, 1, ?12, ?12,
            ?12, ?14)",
    )?;
    let changed = st.execute(params![
        s.principal,
        s.thread_id,
        s.workspace_root,
        n.execution_id,
        n.guardian,
        n.session_key,
        n.bg_command_id,
        n.command,
        n.cwd,
        n.now_ms,
        n.journal_path,
        seq,
        n.socket,
        n.journal_offset
    ])?;
    Ok(changed == 1)
}

/// The record of `execution_id` in `scope` (the newest, should ids ever repeat).
pub fn get(c: &Connection, scope: &Scope, execution_id: &str) -> rusqlite::Result<Option<Record>> {
    // Cached: `observe` looks up to 32 records per call.
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM executions WHERE principal = ?1 AND thread_id = ?2
         AND workspace_root = ?3 AND execution_id = ?4 ORDER BY id DESC LIMIT 1"
    ))?;
    let (p, t, w) = s(scope);
    st.query_row(params![p, t, w, execution_id], record)
        .optional()
}

fn s(scope: &Scope) -> (&str, &str, &str) {
    (&scope.principal, &scope.thread_id, &scope.workspace_root)
}

/// The newest `limit` records of `scope`, newest first.
pub fn list(c: &Connection, scope: &Scope, limit: usize) -> rusqlite::Result<Vec<Record>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM executions WHERE principal = ?1 AND thread_id = ?2
         AND workspace_root = ?3 ORDER BY id DESC LIMIT ?4"
    ))?;
    let (p, t, w) = s(scope);
    let rows = st.query_map(params![p, t, w, limit as i64], record)?;
    rows.collect()
}

/// Records still running or still capturing output, of `guardian` or (`None`, for
/// recovery) of every guardian.
pub fn open_records(c: &Connection, guardian: Option<&str>) -> rusqlite::Result<Vec<Record>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM executions
         WHERE (process_status = 'running' OR output_pending = 1)
         AND (?1 IS NULL OR guardian = ?1) ORDER BY id"
    ))?;
    let rows = st.query_map(params![guardian], record)?;
    rows.collect()
}

/// Write back the mutable fields of `r` (the caller changed them and stamped the seqs).
pub fn update(c: &Connection, r: &Record) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "UPDATE executions SET cwd = ?2, process_status = ?3, exit_code = ?4,
            unknown_reason = ?5, observed_at_ms = ?6, finished_at_ms = ?7, expires_at_ms = ?8,
            activity_seq = ?9, output_activity_seq = ?10, output_pending = ?11,
            raw_bytes = ?12, raw_end = ?13, text_end = ?14, retained_start = ?15,
            retained_bytes = ?16, gap_bytes = ?17, journal_path = ?18, turn_state = ?19,
            state_seq = ?20, output_seq = ?21, turn_seq = ?22, changed_seq = ?23,
            journal_offset = ?24
         WHERE id = ?1",
    )?;
    st.execute(params![
        r.rowid,
        r.cwd,
        r.process_status,
        r.exit_code,
        r.unknown_reason,
        r.observed_at_ms,
        r.finished_at_ms,
        r.expires_at_ms,
        r.activity_seq,
        r.output_activity_seq,
        r.output_pending,
        r.raw_bytes,
        r.raw_end,
        r.text_end,
        r.retained_start,
        r.retained_bytes,
        r.gap_bytes,
        r.journal_path,
        r.turn_state,
        r.state_seq,
        r.output_seq,
        r.turn_seq,
        r.changed_seq,
        r.journal_offset
    ])?;
    Ok(())
}

/// Store one chunk of text at `offset` (the record's `text_end`).
pub fn append_chunk(c: &Connection, rowid: i64, offset: i64, bytes: &[u8]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR REPLACE INTO execution_output (exec, offset, bytes) VALUES (?1, ?2, ?3)",
    )?;
    st.execute(params![rowid, offset, bytes])?;
    Ok(())
}

/// Drop the text before `keep_from`: whole chunks that end at or before it, and the head
/// of the chunk it falls in (to the next UTF-8 character start, so no page begins inside
/// a character). Returns the first retained offset, so retention holds its byte cap
/// exactly (at most 3 bytes under it), never a whole chunk over.
pub fn drop_chunks_before(c: &Connection, rowid: i64, keep_from: i64) -> rusqlite::Result<i64> {
    c.execute(
        "DELETE FROM execution_output WHERE exec = ?1 AND offset + length(bytes) <= ?2",
        params![rowid, keep_from],
    )?;
    let first: Option<(i64, Vec<u8>)> = c
        .query_row(
            "SELECT offset, bytes FROM execution_output WHERE exec = ?1
             ORDER BY offset LIMIT 1",
            params![rowid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((offset, bytes)) = first else {
        return Ok(keep_from);
    };
    if offset >= keep_from {
        return Ok(offset);
    }
    let mut cut = (keep_from - offset) as usize;
    while bytes.get(cut).is_some_and(|b| b & 0xc0 == 0x80) {
        cut += 1;
    }
    let new_offset = offset + cut as i64;
    c.execute(
        "UPDATE execution_output SET offset = ?3, bytes = ?4 WHERE exec = ?1 AND offset = ?2",
        params![rowid, offset, new_offset, &bytes[cut..]],
    )?;
    Ok(new_offset)
}

/// The retained text bytes from `from` (inclusive), at most `max` of them.
pub fn read_text(c: &Connection, rowid: i64, from: i64, max: usize) -> rusqlite::Result<Vec<u8>> {
    let mut st = c.prepare_cached(
        "SELECT offset, bytes FROM execution_output WHERE exec = ?1
         AND offset + length(bytes) > ?2 AND offset < ?3 ORDER BY offset",
    )?;
    let end = from + max as i64;
    let mut out = Vec::with_capacity(max.min(64 * 1024));
    let rows = st.query_map(params![rowid, from, end], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
    })?;
    for row in rows {
        let (offset, bytes) = row?;
        let skip = (from - offset).max(0) as usize;
        let take = ((end - offset.max(from)) as usize).min(bytes.len().saturating_sub(skip));
        out.extend_from_slice(&bytes[skip.min(bytes.len())..skip.min(bytes.len()) + take]);
    }
    Ok(out)
}

/// A record's newest screen and the detection made from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    /// Grows whenever the text changes; page cursors carry it.
    pub snapshot: i64,
    pub text: String,
    pub captured_at_ms: i64,
    /// Quiet time (no output or input) when it was captured.
    pub quiet_ms: i64,
    /// The `auto` detection, as JSON.
    pub detection: Option<String>,
}

/// Replace the screen snapshot of a record.
pub fn put_screen(c: &Connection, rowid: i64, s: &Screen) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR REPLACE INTO execution_screen
            (exec, snapshot, text, captured_at_ms, quiet_ms, detection)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    st.execute(params![
        rowid,
        s.snapshot,
        s.text,
        s.captured_at_ms,
        s.quiet_ms,
        s.detection
    ])?;
    // Kept on the record, so the scope caps are one aggregate over `executions`.
    let mut st = c.prepare_cached("UPDATE executions SET screen_bytes = ?2 WHERE id = ?1")?;
    st.execute(params![rowid, s.text.len() as i64])?;
    Ok(())
}

pub fn screen(c: &Connection, rowid: i64) -> rusqlite::Result<Option<Screen>> {
    let mut st = c.prepare_cached(
        "SELECT snapshot, text, captured_at_ms, quiet_ms, detection
         FROM execution_screen WHERE exec = ?1",
    )?;
    st.query_row(params![rowid], |r| {
        Ok(Screen {
            snapshot: r.get(0)?,
            text: r.get(1)?,
            captured_at_ms: r.get(2)?,
            quiet_ms: r.get(3)?,
            detection: r.get(4)?,
        })
    })
    .optional()
}

/// Delete records (with their output) by row id.
pub fn delete(c: &Connection, rowids: &[i64]) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached("DELETE FROM executions WHERE id = ?1")?;
    for id in rowids {
        st.execute(params![id])?;
    }
    Ok(())
}

/// How many records `scope` holds and their retained output plus screen bytes: one
/// aggregate over the scope index, so admission can skip the caps when under them.
pub fn scope_totals(c: &Connection, scope: &Scope) -> rusqlite::Result<(usize, i64)> {
    let mut st = c.prepare_cached(
        "SELECT count(*), coalesce(sum(retained_bytes + screen_bytes), 0)
         FROM executions WHERE principal = ?1 AND thread_id = ?2 AND workspace_root = ?3",
    )?;
    let (p, t, w) = s(scope);
    st.query_row(params![p, t, w], |r| {
        Ok((r.get::<_, i64>(0)? as usize, r.get(1)?))
    })
}

/// Every record of `scope` with its retained bytes, oldest first (for the byte cap).
pub fn scope_usage(
    c: &Connection,
    scope: &Scope,
) -> rusqlite::Result<Vec<(i64, ProcessStatus, i64)>> {
    let mut st = c.prepare_cached(
        "SELECT id, process_status, retained_bytes + screen_bytes
         FROM executions WHERE principal = ?1 AND thread_id = ?2 AND workspace_root = ?3
         ORDER BY id",
    )?;
    let (p, t, w) = s(scope);
    let rows = st.query_map(params![p, t, w], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// The `n` oldest terminal records of `scope` (for the record cap): a walk of the scope
/// index that stops after `n`.
pub fn oldest_terminal(c: &Connection, scope: &Scope, n: usize) -> rusqlite::Result<Vec<i64>> {
    let mut st = c.prepare_cached(
        "SELECT id FROM executions WHERE principal = ?1 AND thread_id = ?2
         AND workspace_root = ?3 AND process_status != 'running' ORDER BY id LIMIT ?4",
    )?;
    let (p, t, w) = s(scope);
    let rows = st.query_map(params![p, t, w, n as i64], |r| r.get(0))?;
    rows.collect()
}

/// Ids of terminal records whose retention deadline passed.
pub fn expired(c: &Connection, now_ms: i64) -> rusqlite::Result<Vec<i64>> {
    let mut st = c.prepare_cached(
        "SELECT id FROM executions WHERE process_status != 'running'
         AND expires_at_ms IS NOT NULL AND expires_at_ms <= ?1",
    )?;
    let rows = st.query_map(params![now_ms], |r| r.get(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status is stored under its wire name and read back as the same variant; a name
    /// no status has is an error, never a guess.
    #[test]
    fn a_status_is_stored_by_its_wire_name_and_read_back() {
        let c = Connection::open_in_memory().unwrap();
        for s in [
            ProcessStatus::Idle,
            ProcessStatus::Running,
            ProcessStatus::Exited,
            ProcessStatus::ShellExited,
            ProcessStatus::Unknown,
        ] {
            let back: ProcessStatus = c.query_row("SELECT ?1", [s], |r| r.get(0)).unwrap();
            assert_eq!(back, s);
            let name: String = c.query_row("SELECT ?1", [s], |r| r.get(0)).unwrap();
            assert_eq!(serde_json::to_value(s).unwrap(), name.as_str());
            assert_eq!(s.to_string(), name);
        }
        let bad = c.query_row("SELECT 'done'", [], |r| r.get::<_, ProcessStatus>(0));
        assert!(bad.is_err());
    }
}
