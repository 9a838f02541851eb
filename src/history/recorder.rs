//! The `history-recorder` thread (the one writer), its `history-watch` threads (one per
//! guardian with open records, long-polling `Request::Watch`) and the `history-sweeper`.
//! A watcher whose guardian has no open record left parks (thread and connection kept)
//! and is woken by the next admission there; one parked for `LINGER` retires.
//!
//! Invariant: every message is applied in one `BEGIN IMMEDIATE` transaction; a failed
//! transaction is rolled back whole and logged, never half-applied. Watchers are started
//! and retired only by the recorder thread, in message order, so a command admitted
//! while its guardian's watcher is retiring always gets a watcher.

use super::{Limits, Msg, Next, Notify, capture, reconcile, retention};
use crate::deadline::{Deadline, Stopwatch, unix_ms};
use crate::ipc::GuardianClient;
use crate::ipc::client::FactsError;
use crate::store::history as table;
use crate::wire::guardian::execution_number;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, unbounded};
use rusqlite::Connection;
use std::collections::HashMap;
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
/// How long a batch of admissions waits for the facts that usually follow them.
const ADMIT_WINDOW: Duration = Duration::from_millis(20);
/// Work between two yields of the CPU inside a batch (see `Recorder::run`).
const YIELD_EVERY: Duration = Duration::from_micros(250);
/// Pause after a batch that could not be written, before the next attempt.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long a parked watcher waits for its guardian's next command before it retires.
const LINGER: Duration = Duration::from_secs(30);
/// How often expired records are removed even when nothing else happens.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The recorder's side of one watcher thread.
struct Watcher {
    wake: Sender<()>,
    /// Told `Park` and not woken since.
    parked: bool,
}

struct Recorder {
    conn: Connection,
    redact: bool,
    limits: Limits,
    notify: Arc<Notify>,
    /// Guardians (runtime identities) with a watcher thread, each with its wake-up.
    watchers: HashMap<String, Watcher>,
    /// Something in the current batch changed (waiters are woken after its commit).
    changed: bool,
    /// Something in the current batch could not be written.
    failed: bool,
    /// The change counter value of the current batch, once taken.
    seq: Option<i64>,
    /// Scopes the current batch admitted commands into (their caps are enforced once).
    admitted: Vec<table::Scope>,
    tx: Sender<Msg>,
}

pub(super) fn spawn(
    conn: Connection,
    redact: bool,
    limits: Limits,
    notify: Arc<Notify>,
) -> Result<Sender<Msg>, String> {
    let (tx, rx) = unbounded();
    // Messages nobody waits for (admissions, watchers' facts) wake the recorder only when
    // it is idle: during a window it sleeps on this ping and the window's timer alone, so
    // a command loop costs one wake-up per window, not one per message.
    let (ping, pinged) = bounded(1);
    notify.attach(ping);
    let recorder = Recorder {
        conn,
        redact,
        limits,
        notify,
        watchers: HashMap::new(),
        changed: false,
        failed: false,
        admitted: Vec::new(),
        seq: None,
        tx: tx.clone(),
    };
    std::thread::Builder::new()
        .name("history-recorder".into())
        .spawn(move || {
            crate::process::run_in_background();
            recorder.run(rx, pinged)
        })
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
    fn run(mut self, rx: Receiver<Msg>, pinged: Receiver<()>) {
        self.recover();
        while let Ok(first) = rx.recv() {
            let batch = gather(&rx, &pinged, first, self.notify.awaited());
            let began = exec(&self.conn, "BEGIN IMMEDIATE");
            self.seq = None;
            let mut replies = Vec::new();
            let mut slice = Stopwatch::start();
            for msg in batch {
                match began {
                    Ok(()) => self.handle(msg, &mut replies),
                    Err(_) => self.defer(msg, &mut replies),
                }
                // A batch is up to a few milliseconds of CPU; every `YIELD_EVERY` of it, a
                // thread an agent waits on that woke meanwhile runs first (the scheduler
                // would otherwise let this one finish its slice).
                if slice.elapsed() >= YIELD_EVERY {
                    std::thread::yield_now();
                    slice = Stopwatch::start();
                }
            }
            // The caps once per scope a batch admitted into, not once per command.
            for scope in std::mem::take(&mut self.admitted) {
                let limits = self.limits.clone();
                self.write("retention", |c, _| {
                    Ok(retention::enforce(c, &scope, &limits)? > 0)
                });
            }
            match began.and_then(|_| exec(&self.conn, "COMMIT")) {
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
            if failed {
                // A full or failing database: what was requeued is retried after a pause,
                // not in a busy loop.
                let _ = crossbeam_channel::after(RETRY_PAUSE).recv();
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
            Msg::Retire { guardian, done } => {
                // Answered at once, whatever the batch's fate: it writes nothing.
                let _ = done.send(self.retire(&guardian));
            }
        }
    }

    fn handle(&mut self, msg: Msg, replies: &mut Vec<(Sender<Next>, Next)>) {
        let now = unix_ms() + self.limits.clock_skew_ms;
        match msg {
            Msg::Admit(rec) => {
                let redact = self.redact;
                let mut rec = *rec;
                rec.command = reconcile::stored_command(redact, &rec.command);
                let ok = self.write("admit", |c, seq| {
                    table::insert(c, &rec, table::batch_seq(c, seq)?)?;
                    Ok(true)
                });
                match ok {
                    Some(_) => {
                        if !self.admitted.contains(&rec.scope) {
                            self.admitted.push(rec.scope.clone());
                        }
                        self.ensure_watcher(&rec.guardian, &rec.socket);
                    }
                    // Not written: queued again, never dropped.
                    None => {
                        let _ = self.tx.send(Msg::Admit(Box::new(rec)));
                    }
                }
            }
            Msg::Facts {
                facts,
                socket,
                watcher,
                done,
            } => {
                let (redact, limits) = (self.redact, self.limits.clone());
                let applied = self.write("record facts", |c, seq| {
                    // Commands no adapter recorded first, so their output is captured now.
                    let added = reconcile::apply(c, &facts, &socket, redact, &limits, seq)?;
                    let mut applied = capture::apply(c, &facts, redact, &limits, now, seq)?;
                    applied.changed |= added;
                    Ok(applied)
                });
                let next = match applied {
                    Some(a) if a.more => Next::Again,
                    Some(a) if a.open == 0 && watcher => Next::Park,
                    _ => Next::Watch,
                };
                if next == Next::Park
                    && let Some(w) = self.watchers.get_mut(&facts.identity())
                {
                    w.parked = true;
                }
                if let Some(done) = done {
                    replies.push((done, next));
                }
            }
            Msg::Gone { guardian, reason } => {
                let limits = self.limits.clone();
                self.write("mark unknown", |c, seq| {
                    capture::guardian_gone(c, &guardian, &reason, &limits, now, seq)
                });
                self.watchers.remove(&guardian);
            }
            Msg::Retire { guardian, done } => {
                // Answered at once, whatever the batch's fate: it writes nothing.
                let _ = done.send(self.retire(&guardian));
            }
            Msg::Watch { guardian, socket } => self.ensure_watcher(&guardian, &socket),
            Msg::Sync(done) => {
                // Catalog reads prune lazily: expired records never reach a reader.
                self.write("expire", |c, _| Ok(retention::expire(c, now)? > 0));
                replies.push((done, Next::Watch));
            }
            Msg::Sweep => {
                self.write("expire", |c, _| Ok(retention::expire(c, now)? > 0));
            }
        }
    }

    /// Run `f` in a savepoint of the batch's transaction; `f` returns its value and whether
    /// it changed anything. `None` (logged) when it failed and was rolled back alone.
    fn write<T: Changed>(
        &mut self,
        what: &str,
        f: impl FnOnce(&Connection, &mut Option<i64>) -> rusqlite::Result<T>,
    ) -> Option<T> {
        // The batch's change counter, taken inside this step: undone with it on failure.
        let seq_before = self.seq;
        let run = |c: &Connection, seq: &mut Option<i64>| -> rusqlite::Result<T> {
            exec(c, "SAVEPOINT step")?;
            let out = f(c, seq)?;
            exec(c, "RELEASE step")?;
            Ok(out)
        };
        match run(&self.conn, &mut self.seq) {
            Ok(out) => {
                self.changed |= out.changed();
                Some(out)
            }
            Err(e) => {
                self.seq = seq_before;
                let _ = self.conn.execute_batch("ROLLBACK TO step; RELEASE step");
                log::warn!("history {what} failed: {e}");
                self.failed = true;
                None
            }
        }
    }

    /// Make sure `guardian` has a watcher that watches: wake a parked one, start one if
    /// there is none (or its thread is gone).
    fn ensure_watcher(&mut self, guardian: &str, socket: &str) {
        if let Some(w) = self.watchers.get_mut(guardian) {
            if !w.parked {
                return;
            }
            w.parked = false;
            match w.wake.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) => return,
                Err(TrySendError::Disconnected(())) => {}
            }
        }
        let (wake, woken) = bounded(1);
        let (guardian, socket, tx) = (guardian.to_string(), PathBuf::from(socket), self.tx.clone());
        let name = "history-watch".to_string();
        let watched = guardian.clone();
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            crate::process::run_in_background();
            watch(&socket, &watched, &tx, &woken)
        });
        match spawned {
            Ok(_) => {
                let parked = false;
                self.watchers.insert(guardian, Watcher { wake, parked });
            }
            Err(e) => log::warn!("history watcher: {e}"),
        }
    }

    /// A parked watcher asks to end: it may, unless an admission woke it meanwhile.
    fn retire(&mut self, guardian: &str) -> Next {
        match self.watchers.get(guardian) {
            Some(w) if !w.parked => Next::Watch,
            _ => {
                self.watchers.remove(guardian);
                Next::Stop
            }
        }
    }
}

/// A batch: `first` and whatever else is queued (up to `MAX_BATCH`). A batch that starts
/// with an admission or a watcher's facts first sleeps up to `ADMIT_WINDOW`, so a command
/// loop commits once per window, not once or twice per command. Nobody is kept waiting by
/// it: a message somebody waits for (a sync, a refresh, a watch: `Open::send`) and a
/// thread beginning `Notify::wait_past` ping the recorder (`Notify::ping_recorder`),
/// which ends the window (one pinged before it began skips it), and while `awaited` (a
/// thread of this process waits for a change) there is no window at all.
fn gather(rx: &Receiver<Msg>, pinged: &Receiver<()>, first: Msg, awaited: bool) -> Vec<Msg> {
    let batchable = matches!(first, Msg::Admit(_) | Msg::Facts { watcher: true, .. });
    if batchable && !awaited && pinged.try_recv().is_err() {
        // A ping or the window's end, whichever comes first.
        let _ = pinged.recv_timeout(ADMIT_WINDOW);
    }
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        let Ok(m) = rx.try_recv() else { break };
        batch.push(m);
    }
    batch
}

/// Run a statement without parameters from the connection's statement cache (the
/// transaction statements run several times per batch; parsing them is measurable).
fn exec(c: &Connection, sql: &str) -> rusqlite::Result<()> {
    c.prepare_cached(sql)?.execute([]).map(|_| ())
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
fn watch(socket: &std::path::Path, guardian: &str, tx: &Sender<Msg>, woken: &Receiver<()>) {
    let client = GuardianClient::new(socket);
    let mut after = 0;
    // Executions whose admission the recorder has seen: later facts leave it out.
    let mut known = 0;
    let mut wait = WATCH_WAIT;
    let mut failures = 0;
    let gone = |reason: String| {
        let guardian = guardian.to_string();
        let _ = tx.send(Msg::Gone { guardian, reason });
    };
    loop {
        match client.facts(after, wait, known) {
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
                let newest = facts.executions.iter();
                let newest = newest
                    .filter_map(|e| execution_number(&e.execution_id))
                    .max();
                let (done, keep) = bounded(1);
                let msg = Msg::Facts {
                    facts: Box::new(facts),
                    socket: socket.to_string_lossy().into_owned(),
                    watcher: true,
                    done: Some(done),
                };
                if tx.send(msg).is_err() {
                    return;
                }
                let next = keep.recv();
                if matches!(next, Ok(Next::Watch | Next::Again)) {
                    known = known.max(newest.unwrap_or(0));
                }
                wait = match next {
                    Ok(Next::Watch) => WATCH_WAIT,
                    Ok(Next::Again) => Duration::ZERO,
                    // Not written: ask for the same facts again after the pause.
                    Ok(Next::Failed) => {
                        after = 0;
                        WATCH_WAIT
                    }
                    Ok(Next::Park) => match park(guardian, tx, woken) {
                        Some(()) => WATCH_WAIT,
                        None => return,
                    },
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

/// Wait, connection kept, until the recorder wakes this watcher (`Some`) or `LINGER`
/// passes and the recorder agrees it may end (`None`).
fn park(guardian: &str, tx: &Sender<Msg>, woken: &Receiver<()>) -> Option<()> {
    loop {
        let lingered = Deadline::after("history watcher linger", LINGER);
        crossbeam_channel::select! {
            recv(woken) -> w => return w.ok(),
            recv(lingered.receiver()) -> _ => {}
        }
        let (done, answer) = bounded(1);
        let guardian = guardian.to_string();
        tx.send(Msg::Retire { guardian, done }).ok()?;
        match answer.recv() {
            Ok(Next::Stop) | Err(_) => return None,
            // Woken meanwhile: the wake-up is in the channel.
            Ok(_) => {}
        }
    }
}
