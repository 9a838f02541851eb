//! Retention: records expire 24 h after their terminal outcome was first recorded; a
//! scope keeps at most `records_per_scope` records and `scope_bytes` of output and screen
//! text, making room by removing its oldest terminal records first.
//!
//! Invariant: a running record is never removed, whatever the caps say (a scope of only
//! running records may exceed them until they end).

use super::Limits;
use crate::store::history::{self as table, ProcessStatus, Scope};
use rusqlite::Connection;

/// Remove expired records everywhere; returns how many went.
pub fn expire(c: &Connection, now_ms: i64) -> rusqlite::Result<usize> {
    let ids = table::expired(c, now_ms)?;
    table::delete(c, &ids)?;
    Ok(ids.len())
}

/// Bring `scope` within its caps; returns how many records went.
pub fn enforce(c: &Connection, scope: &Scope, limits: &Limits) -> rusqlite::Result<usize> {
    let (count, bytes) = table::scope_totals(c, scope)?;
    if count <= limits.records_per_scope && bytes <= limits.scope_bytes as i64 {
        return Ok(0);
    }
    if bytes <= limits.scope_bytes as i64 {
        // Only the record cap: the oldest terminal records, found without a scope scan.
        let doomed = table::oldest_terminal(c, scope, count - limits.records_per_scope)?;
        table::delete(c, &doomed)?;
        return Ok(doomed.len());
    }
    let usage = table::scope_usage(c, scope)?;
    let mut count = usage.len();
    let mut bytes: i64 = usage.iter().map(|(_, _, b)| b).sum();
    let mut doomed = Vec::new();
    for (id, status, size) in &usage {
        if count <= limits.records_per_scope && bytes <= limits.scope_bytes as i64 {
            break;
        }
        if *status == ProcessStatus::Running {
            continue;
        }
        doomed.push(*id);
        count -= 1;
        bytes -= size;
    }
    table::delete(c, &doomed)?;
    Ok(doomed.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::history::NewRecord;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let c = Connection::open(dir.path().join(crate::store::DB_FILE)).unwrap();
        c.execute_batch("PRAGMA foreign_keys=ON;").unwrap();
        (dir, c)
    }

    fn scope() -> Scope {
        Scope {
            principal: "p".into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        }
    }

    fn add(c: &Connection, n: usize, now_ms: i64) -> i64 {
        let rec = NewRecord {
            scope: scope(),
            execution_id: format!("e-{n}"),
            guardian: "1:1".into(),
            session_key: "k".into(),
            socket: "/s".into(),
            bg_command_id: None,
            command: "true".into(),
            cwd: "/w".into(),
            journal_path: None,
            journal_offset: 0,
            now_ms,
        };
        let seq = table::next_seq(c).unwrap();
        assert!(table::insert(c, &rec, seq).unwrap());
        table::get(c, &scope(), &rec.execution_id)
            .unwrap()
            .unwrap()
            .rowid
    }

    fn finish(c: &Connection, n: usize, at_ms: i64, limits: &Limits) {
        let mut r = table::get(c, &scope(), &format!("e-{n}")).unwrap().unwrap();
        r.process_status = ProcessStatus::Exited;
        r.exit_code = Some(0);
        r.finished_at_ms = Some(at_ms);
        r.expires_at_ms = Some(at_ms + limits.ttl_ms);
        table::update(c, &r).unwrap();
    }

    #[test]
    fn terminal_records_expire_after_the_ttl_on_an_injected_clock() {
        let (_d, c) = db();
        let limits = Limits::default();
        let day = 24 * 60 * 60 * 1000;
        add(&c, 1, 0);
        add(&c, 2, 0);
        finish(&c, 1, 1_000, &limits);
        assert_eq!(expire(&c, 1_000 + day - 1).unwrap(), 0);
        assert_eq!(expire(&c, 1_000 + day).unwrap(), 1);
        // The running record never expires, however old.
        assert_eq!(expire(&c, 100 * day).unwrap(), 0);
        assert!(table::get(&c, &scope(), "e-2").unwrap().is_some());
    }

    #[test]
    fn caps_remove_the_oldest_terminal_records_never_a_running_one() {
        let (_d, c) = db();
        let limits = Limits {
            records_per_scope: 3,
            scope_bytes: 10,
            ..Limits::default()
        };
        for n in 0..6 {
            let id = add(&c, n, n as i64);
            if n != 0 {
                finish(&c, n, 10, &limits);
            }
            if n == 5 {
                table::append_chunk(&c, id, 0, b"0123456789ab").unwrap();
                let mut r = table::get(&c, &scope(), "e-5").unwrap().unwrap();
                (r.text_end, r.retained_bytes) = (12, 12);
                table::update(&c, &r).unwrap();
            }
        }
        enforce(&c, &scope(), &limits).unwrap();
        let left: Vec<String> = table::list(&c, &scope(), 128)
            .unwrap()
            .into_iter()
            .map(|r| r.execution_id)
            .collect();
        // e-0 is running: kept though it is the oldest. e-5 alone exceeds the byte cap,
        // so every other terminal record goes to make room, then e-5 itself.
        assert_eq!(left, ["e-0"]);
    }
}
