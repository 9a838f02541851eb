//! The `history-recorder` thread (the one writer), its `history-watch` threads (one per
//! guardian with open records, long-polling `Request::Watch`) and the `history-sweeper`.
//!
//! Invariant: every message is applied in one `BEGIN IMMEDIATE` transaction; a failed
//! transaction is rolled back whole and logged, never half-applied. Watchers are started
//! and retired only by the recorder thread, in message order, so a command admitted
//! while its guardian's watcher is retiring always gets a watcher.

use super::{Limits, Msg, Next, Notify, capture, retention};
use crate::deadline::unix_ms;
use crate::ipc::GuardianClient;
use crate::ipc::client::FactsError;
use crate::store::history as table;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use rusqlite::Connection;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long one `Watch` waits for activity before answering anyway.
const WATCH_WAIT: Duration = Duration::from_secs(10);
/// Pause after each applied answer, so a flood is recorded in batches, not per read; short
/// enough that a `wait` wakes within a few milliseconds of the next event.
const BATCH: Duration = Duration::from_millis(2);
/// Messages applied in one transaction at most.
const MAX_BATCH: usize = 64;
/// How often expired records are removed even when nothing else happens.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

struct Recorder {
    conn: Connection,
    redact: bool,
    limits: Limits,
    notify: Arc<Notify>,
    /// Guardians (runtime identities) with a watcher thread.
    watching: HashSet<String>,
    /// Something in the current batch changed (waiters are woken after its commit).
    changed: bool,
    /// Something in the current batch could not be written.
    failed: bool,
    tx: Sender<Msg>,
}

pub(super) fn spawn(
    conn: Connection,
    redact: bool,
    limits: Limits,
    notify: Arc<Notify>,
) -> Result<Sender<Msg>, String> {
    let (tx, rx) = unbounded();
    let recorder = Recorder {
        conn,
        redact,
        limits,
        notify,
        watching: HashSet::new(),
        changed: false,
        failed: false,
        tx: tx.clone(),
    };
    std::thread::Builder::new()
        .name("history-recorder".into())
        .spawn(move || recorder.run(rx))
        .map_err(|e| e.to_string())?;
    let sweeper = tx.clone();
    std::thread::Builder::new()
        .name("history-sweeper".into())
        .spawn(move || {
            while crossbeam_channel::after(SWEEP_EVERY).recv().is_ok() {
                if sweeper.send(Msg::Sweep).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(tx)
}

impl Recorder {
    /// Messages are applied in batches: whatever is queued (up to `MAX_BATCH`) goes into
    /// one transaction, each message in its own savepoint; replies and the waiters' wake-up
    /// follow the commit, so nobody is told of a change a reader cannot see yet.
    fn run(mut self, rx: Receiver<Msg>) {
        self.recover();
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let began = self.conn.execute_batch("BEGIN IMMEDIATE");
            let mut replies = Vec::new();
            for msg in batch {
                match began {
                    Ok(()) => self.handle(msg, &mut replies),
                    Err(_) => self.defer(msg, &mut replies),
                }
            }
            match began.and_then(|_| self.conn.execute_batch("COMMIT")) {
                Ok(()) => {}
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    log::warn!("history batch not written: {e}");
                    self.failed = true;
                }
            }
            if std::mem::take(&mut self.changed) {
                self.notify.changed();
            }
            let failed = std::mem::take(&mut self.failed);
            for (to, next) in replies {
                let _ = to.send(if failed { Next::Failed } else { next });
            }
        }
    }

    /// Records left open by an earlier adapter: watch their guardians again (a guardian
    /// that is gone or was replaced turns them `unknown`; none is ever re-run).
    fn recover(&mut self) {
        let open = match table::open_records(&self.conn, None) {
            Ok(open) => open,
            Err(e) => return log::warn!("history recovery: {e}"),
        };
        for r in open {
            self.ensure_watcher(&r.guardian, &r.socket);
        }
    }

    /// The database cannot be written now: nothing is applied and nothing is lost. An
    /// accepted command or a guardian's end is queued again; facts and syncs are answered
    /// `Failed` (the watcher asks again, a reader gets `history_unavailable`).
    fn defer(&mut self, msg: Msg, replies: &mut Vec<(Sender<Next>, Next)>) {
        self.failed = true;
        match msg {
            Msg::Admit(_) | Msg::Gone { .. } => {
                let _ = self.tx.send(msg);
            }
            Msg::Facts { done, .. } => replies.extend(done.map(|d| (d, Next::Failed))),
            Msg::Sync(done) => replies.push((done, Next::Failed)),
            Msg::Watch { guardian, socket } => self.ensure_watcher(&guardian, &socket),
            Msg::Sweep => {}
        }
    }

    fn handle(&mut self, msg: Msg, replies: &mut Vec<(Sender<Next>, Next)>) {
        let now = unix_ms() + self.limits.clock_skew_ms;
        match msg {
            Msg::Admit(rec) => {
                let (redact, limits) = (self.redact, self.limits.clone());
                let mut rec = *rec;
                if redact {
                    let (text, _) = crate::shell::redact::Redactor::global().redact(&rec.command);
                    rec.command = text.into_owned();
                }
                let ok = self.write("admit", |c| {
                    let seq = table::next_seq(c)?;
                    table::insert(c, &rec, seq)?;
                    retention::enforce(c, &rec.scope, &limits)?;
                    Ok(true)
                });
                match ok {
                    Some(_) => self.ensure_watcher(&rec.guardian, &rec.socket),
                    // Not written: queued again, never dropped.
                    None => {
                        let _ = self.tx.send(Msg::Admit(Box::new(rec)));
                    }
                }
            }
            Msg::Facts {
                facts,
                watcher,
                done,
            } => {
                let (redact, limits) = (self.redact, self.limits.clone());
                let applied = self.write("record facts", |c| {
                    capture::apply(c, &facts, redact, &limits, now)
                });
                let next = match applied {
                    Some(a) if a.more => Next::Again,
                    Some(a) if a.open == 0 && watcher => Next::Stop,
                    _ => Next::Watch,
                };
                if next == Next::Stop {
                    self.watching.remove(&facts.identity());
                }
                if let Some(done) = done {
                    replies.push((done, next));
                }
            }
            Msg::Gone { guardian, reason } => {
                let limits = self.limits.clone();
                self.write("mark unknown", |c| {
                    capture::guardian_gone(c, &guardian, &reason, &limits, now)
                });
                self.watching.remove(&guardian);
            }
            Msg::Watch { guardian, socket } => self.ensure_watcher(&guardian, &socket),
            Msg::Sync(done) => {
                // Catalog reads prune lazily: expired records never reach a reader.
                self.write("expire", |c| Ok(retention::expire(c, now)? > 0));
                replies.push((done, Next::Watch));
            }
            Msg::Sweep => {
                self.write("expire", |c| Ok(retention::expire(c, now)? > 0));
            }
        }
    }

    /// Run `f` in a savepoint of the batch's transaction; `f` returns its value and whether
    /// it changed anything. `None` (logged) when it failed and was rolled back alone.
    fn write<T: Changed>(
        &mut self,
        what: &str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<T> {
        let run = |c: &Connection| -> rusqlite::Result<T> {
            c.execute_batch("SAVEPOINT step")?;
            let out = f(c)?;
            c.execute_batch("RELEASE step")?;
            Ok(out)
        };
        match run(&self.conn) {
            Ok(out) => {
                self.changed |= out.changed();
                Some(out)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK TO step; RELEASE step");
                log::warn!("history {what} failed: {e}");
                self.failed = true;
                None
            }
        }
    }

    fn ensure_watcher(&mut self, guardian: &str, socket: &str) {
        if !self.watching.insert(guardian.to_string()) {
            return;
        }
        let (guardian, socket, tx) = (guardian.to_string(), PathBuf::from(socket), self.tx.clone());
        let name = "history-watch".to_string();
        let spawned = std::thread::Builder::new()
            .name(name)
            .spawn(move || watch(&socket, &guardian, &tx));
        if let Err(e) = spawned {
            log::warn!("history watcher: {e}");
        }
    }
}

/// What a transaction reports to decide whether waiters are woken.
trait Changed {
    fn changed(&self) -> bool;
}

impl Changed for bool {
    fn changed(&self) -> bool {
        *self
    }
}

/// A facts pass always wakes waiters: another process's recorder may have stored the
/// same facts first, and only a re-read of the catalog can tell.
impl Changed for capture::Applied {
    fn changed(&self) -> bool {
        true
    }
}

/// Long-poll one guardian and hand each answer to the recorder, until it says stop or
/// the guardian is gone.
fn watch(socket: &std::path::Path, guardian: &str, tx: &Sender<Msg>) {
    let client = GuardianClient::new(socket);
    let mut after = 0;
    let mut wait = WATCH_WAIT;
    let mut failures = 0;
    let gone = |reason: String| {
        let guardian = guardian.to_string();
        let _ = tx.send(Msg::Gone { guardian, reason });
    };
    loop {
        match client.facts(after, wait) {
            Ok(facts) => {
                failures = 0;
                if facts.identity() != guardian {
                    return gone(
                        "the session's guardian was replaced before the command's end \
                                 was observed"
                            .into(),
                    );
                }
                after = facts.seq;
                let (done, keep) = bounded(1);
                let msg = Msg::Facts {
                    facts: Box::new(facts),
                    watcher: true,
                    done: Some(done),
                };
                if tx.send(msg).is_err() {
                    return;
                }
                wait = match keep.recv() {
                    Ok(Next::Watch) => WATCH_WAIT,
                    Ok(Next::Again) => Duration::ZERO,
                    // Not written: ask for the same facts again after the pause.
                    Ok(Next::Failed) => {
                        after = 0;
                        WATCH_WAIT
                    }
                    Ok(Next::Stop) | Err(_) => return,
                };
                if wait.is_zero() {
                    // The guardian answers a zero wait at once, whatever `after` is.
                    continue;
                }
            }
            Err(e @ FactsError::Unsupported(_)) => return gone(e.to_string()),
            Err(FactsError::Client(e)) => {
                failures += 1;
                if failures >= 2 {
                    return gone(format!("the session's guardian is gone: {e}"));
                }
            }
        }
        let _ = crossbeam_channel::after(BATCH).recv();
    }
}
