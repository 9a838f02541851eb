//! Applying a guardian's facts to its open records, in one transaction: new journal bytes
//! become cleaned, redacted text chunks; a running command's screen is stored redacted
//! too; ends become `exited` or `unknown`.
//!
//! Invariant: the recorder keeps no state between passes. A record's `raw_end` says how
//! far its journal was converted (always at a line end, unless the command ended or a
//! line outgrew `MAX_LINE_CARRY`), so any recorder in any process resumes exactly where
//! the last committed pass stopped, and two recorders never store a byte twice.

use super::Limits;
use crate::shell::output::{clean, segment_end};
use crate::shell::secrets::{KnownSecrets, redact_all};
use crate::store::history::{self as table, Record};
use crate::wire::guardian::{ExecFact, Facts, ProcessStatus, ScreenFact, execution_number};
use rusqlite::Connection;

/// Raw journal bytes converted per record per pass; the next pass continues.
const MAX_PASS_BYTES: u64 = 256 * 1024;
/// Stored chunk size: the retained window overshoots its cap by less than one chunk.
const CHUNK_BYTES: usize = 64 * 1024;
/// An unfinished line longer than this is converted without waiting for its end.
const MAX_LINE_CARRY: usize = 64 * 1024;

/// What one pass did.
#[derive(Debug, Default)]
pub struct Applied {
    pub changed: bool,
    /// Records of this guardian still running or still capturing output.
    pub open: usize,
    /// Some record has journal bytes ready that this pass's bound left for the next one.
    pub more: bool,
}

/// Apply `facts` to every open record of their guardian. `redact` is `None` when
/// redaction is off.
pub fn apply(
    c: &Connection,
    facts: &Facts,
    redact: bool,
    limits: &Limits,
    now_ms: i64,
    seq: &mut Option<i64>,
) -> rusqlite::Result<Applied> {
    let mut known = KnownSecrets::new();
    known.learn_all(&facts.secrets.0);
    let records = table::open_records(c, Some(&facts.identity()))?;
    let mut applied = Applied::default();
    // Facts list every execution from the oldest still reported to the newest one; a
    // record numbered past the newest was admitted after these facts were taken (another
    // thread's fresher facts created it), so their silence about it means nothing.
    let newest = facts
        .executions
        .iter()
        .filter_map(|f| execution_number(&f.execution_id))
        .max()
        .unwrap_or(0);
    for mut r in records {
        let before = r.clone();
        let unseen = facts
            .executions
            .iter()
            .all(|f| f.execution_id != r.execution_id);
        if unseen && execution_number(&r.execution_id).is_some_and(|n| n > newest) {
            applied.open += 1;
            continue;
        }
        match facts
            .executions
            .iter()
            .find(|f| f.execution_id == r.execution_id)
        {
            Some(f) => {
                applied.more |= step(c, &mut r, f, redact.then_some(&known), limits, now_ms)?;
                match &facts.screen {
                    Some(s) if s.execution_id == r.execution_id && !f.finished => {
                        let s = redacted_screen(s, redact.then_some(&known));
                        super::turn::apply(c, &mut r, &s, limits.screen_bytes, now_ms)?;
                    }
                    _ if f.finished && r.turn_state.is_some() => {
                        r.turn_state = Some("idle".into());
                    }
                    _ => {}
                }
            }
            None => lost(
                &mut r,
                "the guardian no longer reports this execution",
                now_ms,
                limits,
            ),
        }
        if r != before {
            let s = table::batch_seq(c, seq)?;
            stamp(&before, &mut r, s, now_ms);
            table::update(c, &r)?;
            applied.changed = true;
        }
        if r.is_open() {
            applied.open += 1;
        }
    }
    Ok(applied)
}

/// Mark every open record of `guardian` unknown (it is gone or was replaced).
pub fn guardian_gone(
    c: &Connection,
    guardian: &str,
    reason: &str,
    limits: &Limits,
    now_ms: i64,
    seq: &mut Option<i64>,
) -> rusqlite::Result<bool> {
    let records = table::open_records(c, Some(guardian))?;
    if records.is_empty() {
        return Ok(false);
    }
    let s = table::batch_seq(c, seq)?;
    for mut r in records {
        let before = r.clone();
        lost(&mut r, reason, now_ms, limits);
        stamp(&before, &mut r, s, now_ms);
        table::update(c, &r)?;
    }
    Ok(true)
}

/// Bump the counters of a changed record: what changed decides which seqs move.
fn stamp(before: &Record, r: &mut Record, seq: i64, now_ms: i64) {
    r.activity_seq = before.activity_seq + 1;
    r.changed_seq = seq;
    r.observed_at_ms = now_ms;
    if r.process_status != before.process_status || r.exit_code != before.exit_code {
        r.state_seq = seq;
    }
    if r.turn_state != before.turn_state {
        r.turn_seq = seq;
    }
    if r.text_end != before.text_end || r.gap_bytes != before.gap_bytes {
        r.output_seq = seq;
        r.output_activity_seq = r.activity_seq;
    }
}

/// The runtime cannot tell this record's outcome any more.
fn lost(r: &mut Record, reason: &str, now_ms: i64, limits: &Limits) {
    if r.process_status == ProcessStatus::Running {
        r.process_status = ProcessStatus::Unknown;
        r.unknown_reason = Some(reason.into());
        end(r, now_ms, limits);
    }
    if r.output_pending {
        // Bytes reported but never converted cannot be read any more: a gap, said so.
        r.gap_bytes += (r.raw_bytes - r.raw_end).max(0);
        r.raw_end = r.raw_bytes;
        r.output_pending = false;
    }
}

fn end(r: &mut Record, now_ms: i64, limits: &Limits) {
    r.finished_at_ms.get_or_insert(now_ms);
    r.expires_at_ms.get_or_insert(now_ms + limits.ttl_ms);
}

/// Returns whether the pass bound left converted-ready bytes for another pass.
fn step(
    c: &Connection,
    r: &mut Record,
    f: &ExecFact,
    known: Option<&KnownSecrets>,
    limits: &Limits,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    r.raw_bytes = r.raw_bytes.max(f.total_bytes as i64);
    if r.journal_path.is_none() {
        r.journal_path = f.journal_path.clone();
        r.journal_offset = f.journal_offset as i64;
    }
    let more = capture(c, r, f.finished, known, limits)?;
    if f.finished && r.process_status == ProcessStatus::Running {
        if f.shell_died {
            r.process_status = ProcessStatus::Unknown;
            r.unknown_reason =
                Some("the shell exited before the command's end was reported".into());
        } else {
            r.process_status = ProcessStatus::Exited;
            r.exit_code = f.exit_code.map(i64::from);
        }
        end(r, now_ms, limits);
    }
    r.output_pending = r.raw_end < r.raw_bytes;
    Ok(more)
}

/// Convert journal bytes `raw_end..raw_bytes` (bounded per pass) into stored text;
/// true when the bound stopped it short.
fn capture(
    c: &Connection,
    r: &mut Record,
    finished: bool,
    known: Option<&KnownSecrets>,
    limits: &Limits,
) -> rusqlite::Result<bool> {
    if r.raw_end >= r.raw_bytes {
        return Ok(false);
    }
    skip_beyond_retention(c, r, limits)?;
    let want = ((r.raw_bytes - r.raw_end) as u64).min(MAX_PASS_BYTES);
    let from = (r.journal_offset + r.raw_end) as u64;
    let raw = match read_journal(r.journal_path.as_deref(), from, want) {
        Some(raw) if !raw.is_empty() => raw,
        // The guardian holds a running command's unfinished line back from the journal
        // until an answer hands the range out or the command ends (decision 041).
        Some(_) if !finished => return Ok(false),
        _ => {
            // The journal is gone (retired or deleted) or cannot be read: a gap.
            r.gap_bytes += r.raw_bytes - r.raw_end;
            r.raw_end = r.raw_bytes;
            return Ok(false);
        }
    };
    let bounded = (raw.len() as u64) == MAX_PASS_BYTES;
    let complete = finished && r.raw_end + raw.len() as i64 >= r.raw_bytes;
    let cut = if complete {
        raw.len()
    } else {
        match segment_end(&raw, MAX_LINE_CARRY) {
            Some(end) => end,
            None => return Ok(false),
        }
    };
    let text = clean(&raw[..cut]);
    let text = match known {
        Some(k) => redact_all(&text, k).0.into_owned(),
        None => text,
    };
    r.raw_end += cut as i64;
    for chunk in text.as_bytes().chunks(CHUNK_BYTES) {
        table::append_chunk(c, r.rowid, r.text_end, chunk)?;
        r.text_end += chunk.len() as i64;
    }
    let keep_from = (r.text_end - limits.output_bytes as i64).max(r.retained_start);
    if keep_from > r.retained_start {
        r.retained_start = table::drop_chunks_before(c, r.rowid, keep_from)?;
    }
    r.retained_bytes = r.text_end - r.retained_start;
    Ok(bounded)
}

/// The screen as the history stores it: redacted like the output (a running command's
/// screen shows what it printed).
fn redacted_screen(s: &ScreenFact, known: Option<&KnownSecrets>) -> ScreenFact {
    let text = match known {
        Some(k) => redact_all(&s.text, k).0.into_owned(),
        None => s.text.clone(),
    };
    ScreenFact { text, ..s.clone() }
}

/// Output far beyond what retention keeps is never converted only to be pruned: the
/// recorder jumps to the last `2 × output_bytes` raw bytes. The skipped text counts as
/// pruned head (its text offsets are estimated by its raw size; nothing can read there).
fn skip_beyond_retention(c: &Connection, r: &mut Record, limits: &Limits) -> rusqlite::Result<()> {
    let keep = 2 * limits.output_bytes as i64;
    let skip = r.raw_bytes - r.raw_end - keep;
    if skip <= 0 {
        return Ok(());
    }
    r.raw_end += skip;
    r.text_end += skip;
    r.retained_start = table::drop_chunks_before(c, r.rowid, r.text_end)?.max(r.text_end);
    Ok(())
}

/// Up to `len` bytes of the journal at `path` from `from` (fewer at its end): `pread`s
/// until `len` arrived, so a command's bytes are usually one read (no seek, and no read
/// that only finds the end).
fn read_journal(path: Option<&str>, from: u64, len: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path?).ok()?;
    let mut buf = vec![0u8; len as usize];
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], from + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(got);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::history::{NewRecord, Scope};
    use crate::wire::guardian::SecretValues;

    /// A line longer than the carry bound, still running, is cut before a character,
    /// never inside one: the stored text has no replacement character.
    #[test]
    fn a_forced_cut_keeps_characters_whole() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("exec.log");
        let line = format!("x{}", "é".repeat(MAX_LINE_CARRY));
        std::fs::write(&journal, &line).unwrap();
        let path = Some(journal.to_string_lossy().into_owned());
        // The guardian has read half of the last character so far.
        let fact = one_fact(line.len() as u64 - 1, path.clone());
        let (c, r) = applied(dir.path(), path, fact);
        let text = table::read_text(&c, r.rowid, 0, 1 << 20).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            !text.is_empty() && !text.contains('\u{FFFD}'),
            "{}",
            text.len()
        );
        assert!(line.starts_with(&text));
    }

    /// Foreground executions share a journal segment: a record reads its own bytes from
    /// its offset and never its neighbours'. The path and offset come with the facts
    /// (the admission did not know them).
    #[test]
    fn a_record_reads_only_its_range_of_a_shared_journal() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("seg.log");
        std::fs::write(&journal, "before\nmine\nafter\n").unwrap();
        let fact = ExecFact {
            finished: true,
            exit_code: Some(0),
            journal_offset: 7,
            ..one_fact(5, Some(journal.to_string_lossy().into_owned()))
        };
        let (c, r) = applied(dir.path(), None, fact);
        assert_eq!(r.journal_offset, 7);
        let text = table::read_text(&c, r.rowid, 0, 1 << 20).unwrap();
        assert_eq!(String::from_utf8(text).unwrap(), "mine\n");
    }

    /// The guardian holds a running command's unfinished line back from its journal
    /// (decision 041): a journal shorter than the facts' count is waited for, not a gap.
    #[test]
    fn a_journal_behind_a_running_command_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("exec.log");
        std::fs::write(&journal, "line\n").unwrap();
        let path = Some(journal.to_string_lossy().into_owned());
        let (c, r) = applied(dir.path(), path.clone(), one_fact(12, path.clone()));
        assert_eq!((r.raw_end, r.gap_bytes, r.output_pending), (5, 0, true));
        // The held bytes are not there yet: still no gap.
        let facts = Facts {
            seq: 2,
            guardian_pid: 1,
            created_at_ms: 1,
            executions: vec![one_fact(12, path.clone())],
            screen: None,
            secrets: SecretValues::default(),
        };
        apply(&c, &facts, false, &Limits::default(), 0, &mut None).unwrap();
        let again = table::get(&c, &r.scope, "a-1").unwrap().unwrap();
        assert_eq!((again.raw_end, again.gap_bytes), (5, 0));
    }

    /// Execution "a-1" of scope p/t//w, not finished, read up to `total` bytes.
    fn one_fact(total: u64, journal_path: Option<String>) -> ExecFact {
        ExecFact {
            execution_id: "a-1".into(),
            bg_command_id: None,
            total_bytes: total,
            finished: false,
            exit_code: None,
            shell_died: false,
            journal_path,
            journal_offset: 0,
            journal_error: None,
            admission: None,
        }
    }

    /// A store under `dir` where "a-1" was admitted with `journal_path`, then `fact`
    /// applied: the connection and the record.
    fn applied(
        dir: &std::path::Path,
        journal_path: Option<String>,
        fact: ExecFact,
    ) -> (Connection, Record) {
        drop(crate::store::Store::open(dir).unwrap());
        let c = Connection::open(dir.join(crate::store::DB_FILE)).unwrap();
        let scope = Scope {
            principal: "p".into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        };
        let rec = NewRecord {
            scope: scope.clone(),
            execution_id: "a-1".into(),
            guardian: "1:1".into(),
            session_key: "k".into(),
            socket: "/s".into(),
            bg_command_id: None,
            command: "x".into(),
            cwd: "/w".into(),
            journal_path,
            journal_offset: 0,
            now_ms: 0,
        };
        table::insert(&c, &rec, table::next_seq(&c).unwrap()).unwrap();
        let facts = Facts {
            seq: 1,
            guardian_pid: 1,
            created_at_ms: 1,
            executions: vec![fact],
            screen: None,
            secrets: SecretValues::default(),
        };
        apply(&c, &facts, false, &Limits::default(), 0, &mut None).unwrap();
        let r = table::get(&c, &scope, "a-1").unwrap().unwrap();
        (c, r)
    }

    /// Facts taken before a record was admitted (a watcher's answer that crossed another
    /// thread's fresher facts, which created the record) say nothing about it: it stays
    /// running. Before: it was marked unknown, "the guardian no longer reports this
    /// execution" (seen as a flaky `tests/it/execution_faults.rs` stream test).
    #[test]
    fn older_facts_do_not_lose_a_newer_record() {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let c = Connection::open(dir.path().join(crate::store::DB_FILE)).unwrap();
        let scope = Scope {
            principal: "p".into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        };
        let new = |id: &str| NewRecord {
            scope: scope.clone(),
            execution_id: id.into(),
            guardian: "1:1".into(),
            session_key: "k".into(),
            socket: "/s".into(),
            bg_command_id: None,
            command: "x".into(),
            cwd: "/w".into(),
            journal_path: None,
            journal_offset: 0,
            now_ms: 0,
        };
        for id in ["a-1", "a-2", "a-3"] {
            table::insert(&c, &new(id), table::next_seq(&c).unwrap()).unwrap();
        }
        let fact = |id: &str| ExecFact {
            execution_id: id.into(),
            bg_command_id: None,
            total_bytes: 0,
            finished: false,
            exit_code: None,
            shell_died: false,
            journal_path: None,
            journal_offset: 0,
            journal_error: None,
            admission: None,
        };
        // Taken when a-2 was the newest: a-1 has left the guardian's report, a-3 is newer.
        let facts = Facts {
            seq: 1,
            guardian_pid: 1,
            created_at_ms: 1,
            executions: vec![fact("a-2")],
            screen: None,
            secrets: SecretValues::default(),
        };
        apply(&c, &facts, false, &Limits::default(), 0, &mut None).unwrap();
        let status = |id: &str| table::get(&c, &scope, id).unwrap().unwrap().process_status;
        assert_eq!(status("a-1"), ProcessStatus::Unknown);
        assert_eq!(status("a-2"), ProcessStatus::Running);
        assert_eq!(status("a-3"), ProcessStatus::Running);
    }
}
