//! Recording commands from their guardian's facts: a command whose admitting adapter died
//! between the guardian's answer and the recorder's commit (admission is asynchronous, so
//! the hot path never waits for SQLite) is recorded by the next recorder that sees its
//! guardian's facts, under the scope the command was admitted in.
//!
//! Invariant: see `store::history_marks` (each execution recorded at most once; a record
//! retention removed never comes back).

use super::{Limits, retention};
use crate::store::history::{self as table, NewRecord, Scope};
use crate::store::history_marks as marks;
use crate::wire::guardian::{Facts, execution_number};
use rusqlite::Connection;

/// Record every admitted execution of `facts` above its guardian's mark, then raise the
/// mark to the newest execution reported. Returns whether a record was added.
pub fn apply(
    c: &Connection,
    facts: &Facts,
    socket: &str,
    redact: bool,
    limits: &Limits,
    seq: &mut Option<i64>,
) -> rusqlite::Result<bool> {
    let guardian = facts.identity();
    let mark = marks::get(c, &guardian)?;
    let mut newest = mark;
    let mut added: Vec<Scope> = Vec::new();
    for f in &facts.executions {
        let Some(n) = execution_number(&f.execution_id) else {
            continue;
        };
        newest = newest.max(n);
        let Some(a) = f.admission.as_ref().filter(|_| n > mark) else {
            continue;
        };
        let scope = Scope {
            principal: a.scope.principal.clone(),
            thread_id: a.scope.thread_id.clone(),
            workspace_root: a.scope.workspace_root.clone(),
        };
        let record = NewRecord {
            session_key: crate::runtime::session_key(&scope.principal, &scope.thread_id),
            scope,
            execution_id: f.execution_id.clone(),
            guardian: guardian.clone(),
            socket: socket.to_string(),
            bg_command_id: f.bg_command_id.clone(),
            command: stored_command(redact, &a.command),
            cwd: a.cwd.clone(),
            journal_path: f.journal_path.clone(),
            journal_offset: f.journal_offset as i64,
            now_ms: a.started_ms,
        };
        let s = table::batch_seq(c, seq)?;
        if table::insert(c, &record, s)? && !added.contains(&record.scope) {
            added.push(record.scope);
        }
    }
    for scope in &added {
        retention::enforce(c, scope, limits)?;
    }
    if newest > mark {
        marks::raise(c, &guardian, newest)?;
    }
    Ok(!added.is_empty())
}

/// A command as the history stores it (redacted unless redaction is off).
pub fn stored_command(redact: bool, command: &str) -> String {
    if redact {
        let (text, _) = crate::shell::redact::Redactor::global().redact(command);
        text.into_owned()
    } else {
        command.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::guardian::{Admission, ExecFact, ExecScope, SecretValues};

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let c = Connection::open(dir.path().join(crate::store::DB_FILE)).unwrap();
        c.execute_batch("PRAGMA foreign_keys=ON;").unwrap();
        (dir, c)
    }

    fn fact(n: u64, admitted: bool) -> ExecFact {
        ExecFact {
            execution_id: format!("ab-{n}"),
            bg_command_id: None,
            total_bytes: 0,
            finished: true,
            exit_code: Some(0),
            shell_died: false,
            journal_path: None,
            journal_offset: 0,
            journal_error: None,
            admission: admitted.then(|| Admission {
                scope: ExecScope {
                    principal: "p".into(),
                    thread_id: "t".into(),
                    workspace_root: "/w".into(),
                },
                command: format!("export API_TOKEN=sk-live-0123456789abcdef; echo {n}"),
                cwd: "/w".into(),
                started_ms: 1_000 + n as i64,
            }),
        }
    }

    fn facts(executions: Vec<ExecFact>) -> Facts {
        Facts {
            seq: 1,
            guardian_pid: 7,
            created_at_ms: 9,
            executions,
            screen: None,
            secrets: SecretValues::default(),
        }
    }

    fn ids(c: &Connection) -> Vec<String> {
        let scope = Scope {
            principal: "p".into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        };
        let mut v: Vec<String> = table::list(c, &scope, 128)
            .unwrap()
            .into_iter()
            .map(|r| r.execution_id)
            .collect();
        v.sort();
        v
    }

    /// An execution no adapter recorded is added once, redacted, under its admission's
    /// scope; one at or below the mark (recorded before, or removed by retention) is not.
    #[test]
    fn unrecorded_executions_are_added_once_and_removed_ones_stay_removed() {
        let (_d, c) = db();
        let limits = Limits::default();
        let f = facts(vec![fact(1, true), fact(2, true)]);
        assert!(apply(&c, &f, "/s", true, &limits, &mut None).unwrap());
        assert_eq!(ids(&c), ["ab-1", "ab-2"]);
        let scope = Scope {
            principal: "p".into(),
            thread_id: "t".into(),
            workspace_root: "/w".into(),
        };
        let r = table::get(&c, &scope, "ab-2").unwrap().unwrap();
        assert!(!r.command.contains("sk-live"), "{}", r.command);
        assert_eq!((r.first_at_ms, r.socket.as_str()), (1_002, "/s"));
        // The same facts again: nothing new.
        assert!(!apply(&c, &f, "/s", true, &limits, &mut None).unwrap());
        // Retention removes ab-1; facts still listing it do not bring it back, while a
        // newer execution is added.
        table::delete(
            &c,
            &[table::get(&c, &scope, "ab-1").unwrap().unwrap().rowid],
        )
        .unwrap();
        let f = facts(vec![fact(1, true), fact(2, true), fact(3, true)]);
        assert!(apply(&c, &f, "/s", true, &limits, &mut None).unwrap());
        assert_eq!(ids(&c), ["ab-2", "ab-3"]);
        // An execution without an admission (the caller knew it) only moves the mark.
        let f = facts(vec![fact(4, false)]);
        assert!(!apply(&c, &f, "/s", true, &limits, &mut None).unwrap());
        assert_eq!(marks::get(&c, "7:9").unwrap(), 4);
    }

    /// A record the adapter admitted itself is not duplicated by the facts about it.
    #[test]
    fn an_admitted_record_is_not_duplicated() {
        let (_d, c) = db();
        let mut rec_fact = fact(5, true);
        rec_fact.finished = false;
        let a = rec_fact.admission.clone().unwrap();
        let record = NewRecord {
            scope: Scope {
                principal: a.scope.principal,
                thread_id: a.scope.thread_id,
                workspace_root: a.scope.workspace_root,
            },
            execution_id: "ab-5".into(),
            guardian: "7:9".into(),
            session_key: "k".into(),
            socket: "/s".into(),
            bg_command_id: None,
            command: "echo 5".into(),
            cwd: "/w".into(),
            journal_path: None,
            journal_offset: 0,
            now_ms: 5,
        };
        table::insert(&c, &record, table::next_seq(&c).unwrap()).unwrap();
        let f = facts(vec![rec_fact]);
        assert!(!apply(&c, &f, "/s", true, &Limits::default(), &mut None).unwrap());
        assert_eq!(ids(&c), ["ab-5"]);
    }
}
