//! The state store: one SQLite database (WAL, `synchronous=FULL`) in the state directory.
//!
//! Invariant: the directory is 0700 and the database files are 0600 before any row is
//! written; schema changes happen only through the numbered `MIGRATIONS`.

pub mod agent_receipts;
pub mod agent_requests;
pub mod app_server_targets;
pub mod history;
pub mod history_marks;
pub mod history_scope;
pub mod permits;
pub mod receipts;
pub mod sessions;
pub mod tasks;

use parking_lot::Mutex;
use rusqlite::Connection;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Held while a process configures and migrates the database.
const OPEN_LOCK_FILE: &str = "winx.db.open-lock";
pub const DB_FILE: &str = "winx.db";

/// Numbered migrations; index + 1 is the `user_version` after applying it.
const MIGRATIONS: &[&str] = &[
    // 1: session bindings (thread_id + workspace_root per principal).
    "CREATE TABLE sessions (
        principal TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        workspace_root TEXT NOT NULL,
        mode TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (principal, thread_id)
    ) STRICT;",
    // 2: mutation receipts of committed edits (replayed for identical retries).
    "CREATE TABLE mutation_receipts (
        key TEXT PRIMARY KEY,
        targets TEXT NOT NULL,
        text TEXT NOT NULL,
        data TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) STRICT;",
    // 3: MCP Tasks, so a handle outlives the adapter that created it.
    "CREATE TABLE tasks (
        principal TEXT NOT NULL,
        task_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        legacy INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        ttl_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        updated_at_ms INTEGER NOT NULL,
        outcome TEXT,
        follow TEXT,
        PRIMARY KEY (principal, task_id)
    ) STRICT;",
    // 4: which process runs a task (`pid:start`), so only a dead owner's task is taken over.
    "ALTER TABLE tasks ADD COLUMN owner TEXT;",
    // 5: read permits per session and canonical path (bytes), so they outlive the adapter.
    "CREATE TABLE read_permits (
        principal TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        path BLOB NOT NULL,
        revision TEXT NOT NULL,
        ranges TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (principal, thread_id, path)
    ) STRICT;
    CREATE INDEX read_permits_age ON read_permits (updated_at_ms);",
    // 6: execution history (`history`): records, retained output, screens, change counter.
    history::MIGRATION,
    // 7: history admission marks (reconciling commands no adapter recorded) and screen
    // bytes on each record (one aggregate for the scope caps).
    history_marks::MIGRATION,
    // 8: native prompt receipts (see `agent_receipts`).
    agent_receipts::MIGRATION,
    // 9: durable return-final agent requests and their terminal-event stream.
    agent_requests::MIGRATION,
    // 10: managed Codex app-server targets (their hosts' admission sockets).
    app_server_targets::MIGRATION,
    // 11: where an execution's bytes start in its journal (foreground executions share
    // segment files, `guardian::journals`).
    "ALTER TABLE executions ADD COLUMN journal_offset INTEGER NOT NULL DEFAULT 0;",
    // 12: per-scope change counters, the only position a `catalog_cursor` holds.
    history_scope::MIGRATION,
];

/// Keep query plans fixed once prepared. The bundled SQLite is built with STAT4, which
/// otherwise re-prepares a cached statement whenever a value bound to an indexed
/// comparison changes: profiled at ~40 % of an `Execution observe` of 32 items.
pub fn stable_plans(c: &Connection) -> rusqlite::Result<()> {
    c.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

/// A store failure, with what was being done.
#[derive(Debug)]
pub struct StoreError {
    pub context: String,
    pub detail: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.detail)
    }
}

impl std::error::Error for StoreError {}

pub(crate) fn ctx<E: fmt::Display>(context: &str) -> impl FnOnce(E) -> StoreError + '_ {
    move |e| StoreError {
        context: context.to_string(),
        detail: e.to_string(),
    }
}

/// The open database. Writes are serialised by the mutex; SQLite calls are short.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl Store {
    /// Open (creating if needed) the database under `state_dir`, apply migrations.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        crate::fsutil::ensure_private_dir(state_dir).map_err(ctx("create state directory"))?;
        let path = state_dir.join(DB_FILE);
        // Create the file 0600 ourselves so SQLite never creates it with the umask's mode;
        // SQLite gives the -wal and -shm files the main file's permissions.
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(ctx("create database file"))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
            .map_err(ctx("restrict database file"))?;
        // Switching a new file to WAL and migrating it is not safe to race (SQLite answers
        // "database is locked" at once, without its busy handler): adapters starting
        // together take turns here. The lock file sits beside the database, 0600.
        let opening = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(state_dir.join(OPEN_LOCK_FILE))
            .map_err(ctx("create open lock"))?;
        let _opening = nix::fcntl::Flock::lock(opening, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| ctx::<nix::Error>("take open lock")(e))?;
        let conn = Connection::open(&path).map_err(ctx("open database"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(ctx("set busy timeout"))?;
        stable_plans(&conn).map_err(ctx("fix query plans"))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
        )
        .map_err(ctx("configure database"))?;
        migrate(&conn)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
        context: &str,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock();
        f(&conn).map_err(ctx(context))
    }

    /// The applied schema version.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.with(
            |c| c.query_row("PRAGMA user_version", [], |r| r.get(0)),
            "read schema version",
        )
    }
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(ctx("read schema version"))?;
    let known = MIGRATIONS.len() as i64;
    if current > known {
        return Err(StoreError {
            context: "check schema version".into(),
            detail: format!(
                "database schema {current} is newer than this build understands ({known}); \
                 upgrade winx or use another WINX_STATE_DIR"
            ),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = i as i64 + 1;
        // Another process may be migrating the same file: the version is read again
        // under the write lock, and a step someone else applied meanwhile is skipped.
        let step = || -> Result<(), rusqlite::Error> {
            conn.execute_batch("BEGIN IMMEDIATE;")?;
            let now: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now < version {
                conn.execute_batch(&format!("{sql} PRAGMA user_version = {version};"))?;
            }
            conn.execute_batch("COMMIT;")
        };
        step().map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK;");
            ctx::<rusqlite::Error>("apply migration")(e)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two adapters starting on a fresh state directory at once both open it: the loser
    /// of the race finds the schema migrated, never "table already exists".
    #[test]
    fn concurrent_first_opens_migrate_once() {
        for _ in 0..20 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("state");
            let gate = std::sync::Arc::new(std::sync::Barrier::new(3));
            let opens: Vec<_> = (0..3)
                .map(|_| {
                    let (dir, gate) = (dir.clone(), gate.clone());
                    std::thread::spawn(move || {
                        gate.wait();
                        Store::open(&dir).map(|_| ()).map_err(|e| e.to_string())
                    })
                })
                .collect();
            for o in opens {
                o.join().unwrap().unwrap();
            }
        }
    }

    #[test]
    fn creates_private_files_and_migrates_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(store.path()), 0o600);
        let mode_journal: String = store
            .with(
                |c| c.query_row("PRAGMA journal_mode", [], |r| r.get(0)),
                "q",
            )
            .unwrap();
        assert_eq!(mode_journal, "wal");
        let sync: i64 = store
            .with(|c| c.query_row("PRAGMA synchronous", [], |r| r.get(0)), "q")
            .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
        drop(store);
        // Reopening is idempotent.
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    }

    #[test]
    fn tightens_a_loose_existing_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("loose");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Store::open(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn refuses_a_newer_schema() {
        let tmp = tempfile::tempdir().unwrap();
        drop(Store::open(tmp.path()).unwrap());
        let conn = Connection::open(tmp.path().join(DB_FILE)).unwrap();
        conn.execute_batch("PRAGMA user_version = 999;").unwrap();
        drop(conn);
        let err = Store::open(tmp.path()).err().unwrap();
        assert!(err.detail.contains("newer"), "{err}");
    }
}
