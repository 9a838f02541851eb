//! Execution history: a durable, scoped record of every accepted command (seed 000).
//!
//! Processes and threads: the tool path (`admit`) hands each accepted command to the
//! `history-recorder` thread over a channel and returns at once (the hot path gains no
//! SQLite write). The recorder owns the one writing connection: it inserts records,
//! starts one `history-watch` thread per guardian with open records, and applies the
//! facts those threads bring back (`capture`). A `history-sweeper` thread asks it to
//! expire old records every minute. Reads go through a `Catalog` (the read side, one
//! scope: list, get, read pages, observe, wait), which uses its own connections and
//! `sync`s first, so it sees every command admitted before it. `Notify` wakes `wait`
//! calls whenever the recorder commits a change.

pub mod capture;
pub mod catalog;
pub mod cursor;
pub mod page;
mod reconcile;
mod recorder;
pub mod retention;
pub mod turn;
mod wait;

pub use catalog::{Catalog, CatalogError, Listing, Observation, Observed, READ_BUDGET, Record};
pub use page::{Page, PageReq, Source};
pub use wait::{Event, Outcome, WaitFor, Waited};

use crate::deadline::Deadline;
use crate::ipc::GuardianClient;
use crate::store::history::{NewRecord, Scope};
use crossbeam_channel::{Sender, bounded};
use parking_lot::{Condvar, Mutex};
use rusqlite::Connection;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Retention limits (seed 000 defaults).
#[derive(Clone, Debug)]
pub struct Limits {
    pub records_per_scope: usize,
    pub output_bytes: u64,
    pub screen_bytes: usize,
    pub scope_bytes: u64,
    pub ttl_ms: i64,
    /// Added to the clock for expiry decisions (`WINX_CLOCK_SKEW_SECS`, tests).
    pub clock_skew_ms: i64,
    /// The `configurable` recognizer's rules (`WINX_TURN_RECOGNIZER_CONFIG`).
    pub turn_rules: Option<Arc<crate::shell::turn::Rules>>,
    /// Recording on (`WINX_NO_HISTORY=1` turns it off).
    pub enabled: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            records_per_scope: 128,
            output_bytes: 1024 * 1024,
            screen_bytes: 64 * 1024,
            scope_bytes: 16 * 1024 * 1024,
            ttl_ms: 24 * 60 * 60 * 1000,
            clock_skew_ms: 0,
            turn_rules: None,
            enabled: true,
        }
    }
}

/// Why the catalog could not be used.
#[derive(Debug)]
pub struct HistoryError(pub String);

impl std::fmt::Display for HistoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Wakes waiters after each committed change.
#[derive(Default)]
pub struct Notify {
    changes: Mutex<u64>,
    cv: Condvar,
    /// Threads in `wait_past`: while any waits, the recorder applies what arrives at once
    /// instead of batching it (see `recorder::gather`).
    waiting: AtomicUsize,
    /// The recorder's ping: it ends a batch window (see `recorder::gather`).
    recorder: OnceLock<Sender<()>>,
}

impl Notify {
    pub(crate) fn attach(&self, ping: Sender<()>) {
        let _ = self.recorder.set(ping);
    }

    /// Tell the recorder that somebody waits now: it stops batching.
    pub(crate) fn ping_recorder(&self) {
        if let Some(ping) = self.recorder.get() {
            // Full means a ping is pending already: one is enough.
            let _ = ping.try_send(());
        }
    }

    /// Some thread of this process waits for a change.
    pub(crate) fn awaited(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    pub fn changed(&self) {
        *self.changes.lock() += 1;
        self.cv.notify_all();
    }

    /// The current change count, to wait for the next one with `wait_past`.
    pub fn count(&self) -> u64 {
        *self.changes.lock()
    }

    /// Block until the count passes `seen` or `deadline` ends; true when it passed.
    pub fn wait_past(&self, seen: u64, deadline: &Deadline) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.ping_recorder();
        let passed = self.wait_for_count(seen, deadline);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        passed
    }

    fn wait_for_count(&self, seen: u64, deadline: &Deadline) -> bool {
        let mut n = self.changes.lock();
        while *n <= seen {
            match deadline.remaining() {
                Some(left) if !left.is_zero() => {
                    self.cv.wait_for(&mut n, left);
                }
                // Expired (or a `never` deadline, which no caller passes): stop waiting.
                _ => return false,
            }
        }
        true
    }
}

/// A watcher's next step, decided by the recorder after applying its facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// No open records left for this guardian: wait to be woken (the next command), or
    /// retire after a while (`Msg::Retire`).
    Park,
    /// Retired: the recorder has forgotten this watcher.
    Stop,
    /// Wait for new activity.
    Watch,
    /// Journal bytes are ready beyond this pass's bound: ask again at once.
    Again,
    /// The batch could not be written (the database is locked, full or failing); it was
    /// rolled back and the same facts are asked for again.
    Failed,
}

pub(crate) enum Msg {
    Admit(Box<NewRecord>),
    Facts {
        facts: Box<crate::wire::guardian::Facts>,
        /// The guardian's socket (records added from the facts keep it).
        socket: String,
        watcher: bool,
        /// Answered once applied: what a watcher does next.
        done: Option<Sender<Next>>,
    },
    Gone {
        guardian: String,
        reason: String,
    },
    /// Make sure a guardian with open records is watched (a `wait` on them).
    Watch {
        guardian: String,
        socket: String,
    },
    Sync(Sender<Next>),
    Sweep,
    /// A watcher parked for its linger time asks to end: `Stop` unless it was woken.
    Retire {
        guardian: String,
        done: Sender<Next>,
    },
}

/// The opened history: the recorder's channel, reader connections, the cursor key (a
/// `Catalog` reads through it).
pub(crate) struct Open {
    tx: Sender<Msg>,
    db_path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    pub key: cursor::Key,
    pub notify: Arc<Notify>,
    pub limits: Limits,
    /// Sessions whose guardian this process has asked for commands no adapter recorded.
    reconciled: Mutex<HashSet<String>>,
}

/// Sessions remembered as reconciled; past this the set starts again (a repeat costs one
/// refresh).
const MAX_RECONCILED: usize = 4096;

/// The history service of one adapter process, opened on first use.
pub struct History {
    state_dir: PathBuf,
    redact: bool,
    limits: Limits,
    open: Mutex<Option<Arc<Open>>>,
}

impl History {
    pub fn new(state_dir: PathBuf, redact: bool, limits: Limits) -> History {
        History {
            state_dir,
            redact,
            limits,
            open: Mutex::new(None),
        }
    }

    /// The open history, opening (and recovering open records) on first use.
    pub(crate) fn open(&self) -> Result<Arc<Open>, HistoryError> {
        if !self.limits.enabled {
            return Err(HistoryError(
                "execution history is turned off on this server (WINX_NO_HISTORY=1)".into(),
            ));
        }
        let mut slot = self.open.lock();
        if let Some(o) = slot.as_ref() {
            return Ok(o.clone());
        }
        let o = Arc::new(self.start()?);
        *slot = Some(o.clone());
        Ok(o)
    }

    fn start(&self) -> Result<Open, HistoryError> {
        let err = |what: &str| {
            let what = what.to_string();
            move |e: String| HistoryError(format!("{what}: {e}"))
        };
        let store = crate::store::Store::open(&self.state_dir)
            .map_err(|e| HistoryError(format!("open state store: {e}")))?;
        let db_path = store.path().to_path_buf();
        drop(store);
        let key = cursor::Key::load_or_create(&self.state_dir)
            .map_err(|e| err("load history key")(e.to_string()))?;
        let notify = Arc::new(Notify::default());
        let writer = connect(&db_path).map_err(err("open history writer"))?;
        let tx = recorder::spawn(writer, self.redact, self.limits.clone(), notify.clone())
            .map_err(err("start history recorder"))?;
        Ok(Open {
            tx,
            db_path,
            readers: Mutex::new(Vec::new()),
            key,
            notify,
            limits: self.limits.clone(),
            reconciled: Mutex::new(HashSet::new()),
        })
    }

    /// The `configurable` recognizer's rules, when configured.
    /// Added to the clock for expiry decisions (`WINX_CLOCK_SKEW_SECS`, tests); the
    /// managed temporary directory's pruning uses the same clock.
    pub fn clock_skew_ms(&self) -> i64 {
        self.limits.clock_skew_ms
    }

    pub fn turn_rules(&self) -> Option<Arc<crate::shell::turn::Rules>> {
        self.limits.turn_rules.clone()
    }

    /// Record a command a guardian just accepted (never blocks on the database).
    pub fn admit(&self, record: NewRecord) {
        if !self.limits.enabled {
            return;
        }
        match self.open() {
            Ok(o) => {
                let _ = o.tx.send(Msg::Admit(Box::new(record)));
            }
            Err(e) => log::warn!("execution history unavailable: {e}"),
        }
    }
}

impl Open {
    /// Wait until every message sent before this call has been applied.
    pub fn sync(&self, deadline: &Deadline) -> Result<(), HistoryError> {
        let (tx, rx) = bounded(1);
        self.send(Msg::Sync(tx))?;
        wait_reply(&rx, deadline)
    }

    /// Ask `client`'s guardian for its facts now and apply them (one refresh).
    pub fn refresh(&self, client: &GuardianClient, deadline: &Deadline) -> Result<(), String> {
        match client.facts(0, Duration::ZERO, 0) {
            Ok(facts) => {
                let (tx, rx) = bounded(1);
                let msg = Msg::Facts {
                    facts: Box::new(facts),
                    socket: client.socket.to_string_lossy().into_owned(),
                    watcher: false,
                    done: Some(tx),
                };
                self.send(msg).map_err(|e| e.0)?;
                wait_reply(&rx, deadline).map_err(|e| e.0)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// On this process's first look at session `key`: ask its guardian (`client`, if
    /// there is one and it answers) for its executions, so a command whose admitting
    /// adapter died before recording it is in the catalog (`reconcile`). Failures leave
    /// the catalog as it is.
    fn reconcile_session(
        &self,
        key: &str,
        client: impl FnOnce() -> Option<GuardianClient>,
        deadline: &Deadline,
    ) {
        {
            let mut seen = self.reconciled.lock();
            if seen.len() >= MAX_RECONCILED {
                seen.clear();
            }
            if !seen.insert(key.to_string()) {
                return;
            }
        }
        if let Some(client) = client()
            && let Err(e) = self.refresh(&client, deadline)
        {
            log::debug!("history reconcile of session {key}: {e}");
        }
    }

    /// Make sure the guardian of an open record is watched by this process, so changes
    /// another adapter's commands make wake this process's waits too.
    pub fn watch(&self, guardian: &str, socket: &str) {
        let _ = self.send(Msg::Watch {
            guardian: guardian.into(),
            socket: socket.into(),
        });
    }

    /// Send a message this thread then waits for (it ends an admission window).
    fn send(&self, msg: Msg) -> Result<(), HistoryError> {
        self.tx
            .send(msg)
            .map_err(|_| HistoryError("the history recorder stopped".into()))?;
        self.notify.ping_recorder();
        Ok(())
    }

    /// Run `f` on a reader connection inside one read transaction, so everything it reads
    /// comes from one snapshot (a record, its stamps and the scope position never straddle
    /// a recorder commit). The transaction always ends: a pooled connection never keeps one.
    pub fn read_snapshot<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, HistoryError> {
        self.read(|c| {
            c.execute_batch("BEGIN")?;
            let out = f(c);
            let end = c.execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
            let out = out?;
            end.map(|_| out)
        })
    }

    /// Run `f` on a reader connection (one is opened when none is free).
    pub fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, HistoryError> {
        let conn = match self.readers.lock().pop() {
            Some(c) => c,
            None => connect(&self.db_path).map_err(HistoryError)?,
        };
        let out = f(&conn).map_err(|e| HistoryError(format!("read history: {e}")));
        let mut readers = self.readers.lock();
        if readers.len() < MAX_IDLE_READERS {
            readers.push(conn);
        }
        out
    }
}

/// Reader connections kept open between calls.
const MAX_IDLE_READERS: usize = 4;

fn wait_reply(
    rx: &crossbeam_channel::Receiver<Next>,
    deadline: &Deadline,
) -> Result<(), HistoryError> {
    crossbeam_channel::select! {
        recv(rx) -> r => match r {
            Ok(Next::Failed) => Err(HistoryError(
                "the history database could not be written (locked, full or failing; see the \
                 server log); nothing was lost and recording is retried"
                    .into(),
            )),
            Ok(_) => Ok(()),
            Err(_) => Err(HistoryError("the history recorder stopped".into())),
        },
        recv(deadline.receiver()) -> _ => Err(HistoryError(
            "the history catalog could not be brought up to date within the budget".into(),
        )),
    }
}

/// Prepared statements kept per history connection.
const STATEMENT_CACHE: usize = 64;

/// A connection for history work: WAL with `synchronous=NORMAL` (a committed transaction
/// survives the process being killed; only a power loss can take the last ones).
pub(crate) fn connect(path: &Path) -> Result<Connection, String> {
    let c = Connection::open(path).map_err(|e| e.to_string())?;
    crate::store::stable_plans(&c).map_err(|e| e.to_string())?;
    // Shorter than a read's 5 s budget, so a locked database is reported within it.
    c.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    // A small page cache: history rows are written once and read in pages, and the
    // adapter's memory stays bounded whatever the output size.
    c.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-256;")
        .map_err(|e| e.to_string())?;
    // A batch runs about twenty distinct statements; with rusqlite's default cache of 16
    // they evicted each other and were compiled again on every use (4 % of the recorder).
    c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(c)
}

/// The scope a call works in.
pub fn scope(principal: &str, thread_id: &str, workspace_root: &str) -> Scope {
    Scope {
        principal: principal.into(),
        thread_id: thread_id.into(),
        workspace_root: workspace_root.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A wait whose deadline passes returns instead of spinning on zero-length waits.
    #[test]
    fn an_expired_wait_returns_and_a_change_wakes() {
        let n = Arc::new(Notify::default());
        let seen = n.count();
        assert!(!n.wait_past(seen, &Deadline::after("t", Duration::ZERO)));
        assert!(!n.wait_past(seen, &Deadline::after("t", Duration::from_millis(20))));
        let waker = n.clone();
        let t = std::thread::spawn(move || waker.changed());
        assert!(n.wait_past(seen, &Deadline::after("t", Duration::from_secs(10))));
        t.join().unwrap();
    }

    /// A thread that begins to wait pings the recorder (ending a batch window) and counts
    /// as awaited until it returns, so the recorder does not batch while it waits.
    #[test]
    fn a_wait_pings_the_recorder_and_is_awaited_while_it_lasts() {
        let n = Arc::new(Notify::default());
        let (ping, pinged) = bounded(1);
        n.attach(ping);
        assert!(!n.awaited());
        let seen = n.count();
        let waiter = n.clone();
        let t = std::thread::spawn(move || {
            waiter.wait_past(seen, &Deadline::after("t", Duration::from_secs(10)))
        });
        // The ping comes after the count went up: once it is here, the wait is awaited.
        pinged
            .recv_timeout(Duration::from_secs(10))
            .expect("a ping");
        assert!(n.awaited());
        n.changed();
        assert!(t.join().unwrap(), "woken by the change");
        assert!(!n.awaited());
    }
}
