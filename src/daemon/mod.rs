//! winxd, the control plane: one per user and runtime directory. It starts guardians,
//! finds them again after its own restart (their sockets outlive it), and answers the
//! adapters' `Ensure` requests.
//!
//! Threads: the main thread (the caller of `Daemon::run`) owns every decision and the
//! shutdown; `winxd-accept` (accept.rs) forwards clients to it; one `winxd-conn` per served
//! client (conn.rs), at most `MAX_CONNECTIONS`; `winxd-refuse` (refuse.rs) answers clients
//! beyond that with `Busy`; `ttl-sweeper` (sweeper.rs) applies the TTL tiers on the main
//! thread's tick. Each worker reports its end on the main thread's event channel.
//!
//! Invariant: winxd holds no session state that a guardian does not also hold; losing
//! winxd (SIGKILL, restart) never loses a shell. No thread but the main one ends the
//! process, and it does so by returning from `run`.

mod accept;
mod conn;
mod event;
pub mod lifecycle;
mod refuse;
pub mod spawn;
mod state;
mod sweeper;

pub use accept::Backoff;

use crate::deadline::Deadline;
use crate::fsutil::ensure_private_dir;
use crate::wire::daemon::Lifecycle;
use crossbeam_channel::{Receiver, Sender, bounded, never, select};
use event::Event;
use parking_lot::Mutex;
use state::State;
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Control connections served at once. Each holds a thread for one short request from an
/// adapter or operator on this machine; 64 is twice the default guardian quota's worth of
/// simultaneous clients, and it bounds winxd's threads when a client floods the socket.
/// Beyond it, clients get a typed `Busy` answer (or, when even the refusal queue is full,
/// a closed connection).
pub const MAX_CONNECTIONS: usize = 64;
/// Clients waiting for their `Busy` answer; beyond this they are closed at once.
const REFUSE_QUEUE: usize = 16;
/// After `Shutdown`, connections have this long to finish the request in flight (the
/// slowest is an `Ensure` waiting up to 20 s for a guardian to start). Idle ones end at
/// once: their reading side is closed. The successor does not wait for this: the socket
/// and lock are released before `Shutdown` is answered.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

/// What happened at startup, for the starter's readiness pipe.
pub enum Started {
    /// We hold the lock and serve; `run` runs the daemon until `Shutdown`.
    Serving(Daemon),
    /// Another winxd holds the lock.
    AlreadyRunning,
}

pub struct Daemon {
    listener: UnixListener,
    state: Arc<State>,
}

/// Take the lock and bind the socket. `guardian_env` are the sandbox variables every
/// guardian gets in place of the requester's (`config::sandbox::guardian_env`).
pub fn start(
    socket: &Path,
    lifecycle: Lifecycle,
    guardian_env: Vec<(String, String)>,
) -> Result<Started, String> {
    let dir = socket
        .parent()
        .ok_or("socket path has no directory")?
        .to_path_buf();
    ensure_private_dir(&dir).map_err(|e| e.to_string())?;
    ensure_private_dir(&dir.join("g")).map_err(|e| e.to_string())?;
    // The gate spans "take the lock, bind the socket": a loser reports `AlreadyRunning`
    // only after the winner listens, so its starter's connect finds the socket.
    let gate = gate(&dir).map_err(|e| format!("start gate: {e}"))?;
    let lock = private_file(&dir.join("winxd.lock")).map_err(|e| format!("open lock file: {e}"))?;
    // SAFETY: flock(2) on a descriptor `lock` owns; no memory is passed.
    if unsafe { nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB) } != 0 {
        return Ok(Started::AlreadyRunning);
    }
    // We hold the lock: any socket file left behind is stale.
    let _ = fs::remove_file(socket);
    let listener =
        UnixListener::bind(socket).map_err(|e| format!("bind {}: {e}", socket.display()))?;
    fs::set_permissions(socket, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    drop(gate);
    Ok(Started::Serving(Daemon {
        listener,
        state: Arc::new(State {
            runtime_dir: dir,
            socket: socket.to_path_buf(),
            lifecycle,
            guardian_env,
            lock: Mutex::new(Some(lock)),
            starting: Mutex::new(()),
        }),
    }))
}

fn private_file(path: &Path) -> std::io::Result<fs::File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// `winxd.start` in `dir`, locked exclusively (waiting for its holder): held by a starter
/// from taking `winxd.lock` until its socket listens, and by a stopping winxd from
/// unlinking its socket until it dropped the lock. Either holds it for microseconds.
pub(crate) fn gate(dir: &Path) -> std::io::Result<fs::File> {
    let f = private_file(&dir.join("winxd.start"))?;
    loop {
        // SAFETY: flock(2) on a descriptor `f` owns; no memory is passed.
        if unsafe { nix::libc::flock(f.as_raw_fd(), nix::libc::LOCK_EX) } == 0 {
            return Ok(f);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The main thread's view of the workers it started.
struct Workers {
    events_tx: Sender<Event>,
    /// Closed at shutdown: tells the accept loop to stop.
    stop_accept: Option<Sender<()>>,
    sweep: Option<Sender<()>>,
    refuse: Option<Sender<UnixStream>>,
    /// Served connections, by id; the handle lets shutdown close their reading side.
    conns: HashMap<u64, Arc<UnixStream>>,
    next_id: u64,
    /// Long-lived workers (accept loop, sweeper, refuser) still running.
    running: usize,
}

fn spawn_named(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
}

impl Daemon {
    /// Serve until a client's `Shutdown`, then stop every thread and return. The main
    /// thread selects over the workers' events and the sweep tick; nothing else ends winxd.
    pub fn run(self) -> Result<(), String> {
        let listener = Arc::new(self.listener);
        // Bounded: when the main thread falls behind, the accept loop waits on it.
        let (events_tx, events) = bounded(MAX_CONNECTIONS);
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let (sweep_tx, sweep_rx) = bounded::<()>(1);
        let (refuse_tx, refuse_rx) = bounded::<UnixStream>(REFUSE_QUEUE);
        let (l, tx) = (listener.clone(), events_tx.clone());
        spawn_named("winxd-accept", move || accept::run(l, tx, stop_rx))?;
        let (st, tx) = (self.state.clone(), events_tx.clone());
        spawn_named("ttl-sweeper", move || sweeper::run(st, sweep_rx, tx))?;
        let tx = events_tx.clone();
        spawn_named("winxd-refuse", move || {
            refuse::run(refuse_rx, MAX_CONNECTIONS, tx)
        })?;
        let mut w = Workers {
            events_tx,
            stop_accept: Some(stop_tx),
            sweep: Some(sweep_tx),
            refuse: Some(refuse_tx),
            conns: HashMap::new(),
            next_id: 0,
            running: 3,
        };
        let sweep_every = Duration::from_secs(self.state.lifecycle.sweep_secs.max(1));
        let mut tick = Deadline::after("ttl sweep", sweep_every).receiver();
        let mut grace: Option<Deadline> = None;
        loop {
            if grace.is_some() && w.conns.is_empty() && w.running == 0 {
                log::info!("winxd stopped: every thread ended");
                return Ok(());
            }
            let grace_over: Receiver<_> = grace.map_or_else(never, |g| g.receiver());
            select! {
                recv(events) -> ev => {
                    // The main thread holds a sender, so the channel never disconnects.
                    let Ok(ev) = ev else { continue };
                    if on_event(&mut w, &self.state, ev, grace.is_some()) {
                        grace = Some(Deadline::after("shutdown grace", SHUTDOWN_GRACE));
                        stop(&mut w, &listener);
                        tick = never();
                    }
                }
                recv(tick) -> _ => {
                    // A sweep still running makes this tick a no-op.
                    if let Some(s) = &w.sweep {
                        let _ = s.try_send(());
                    }
                    tick = Deadline::after("ttl sweep", sweep_every).receiver();
                }
                recv(grace_over) -> _ => {
                    log::warn!(
                        "winxd stopped: {} connections and {} workers still busy after the \
                         {SHUTDOWN_GRACE:?} shutdown grace",
                        w.conns.len(),
                        w.running
                    );
                    return Ok(());
                }
            }
        }
    }
}

/// Handle one event; `true` when it asks the daemon to stop.
fn on_event(w: &mut Workers, state: &Arc<State>, ev: Event, stopping: bool) -> bool {
    match ev {
        Event::Accepted(stream) if stopping => drop(stream),
        Event::Accepted(stream) => accepted(w, state, stream),
        Event::ConnectionEnded(id) => {
            w.conns.remove(&id);
        }
        Event::ShutdownRequested => return !stopping,
        Event::Stopped(name) => {
            w.running -= 1;
            if !stopping {
                log::error!("winxd's {name} thread ended unexpectedly");
            }
        }
    }
    false
}

/// Serve a new client on its own thread, or refuse it when `MAX_CONNECTIONS` are served.
fn accepted(w: &mut Workers, state: &Arc<State>, stream: UnixStream) {
    if w.conns.len() >= MAX_CONNECTIONS {
        let queued = w.refuse.as_ref().map(|r| r.try_send(stream).is_ok());
        if queued != Some(true) {
            log::warn!(
                "{MAX_CONNECTIONS} control connections busy and the refusal queue full; closing one"
            );
        }
        return;
    }
    let id = w.next_id;
    w.next_id += 1;
    let stream = Arc::new(stream);
    let (s, st, tx) = (stream.clone(), state.clone(), w.events_tx.clone());
    match spawn_named("winxd-conn", move || conn::run(id, s, st, tx)) {
        Ok(()) => {
            w.conns.insert(id, stream);
        }
        // The closure, and with it the connection, is dropped: the client sees it closed.
        Err(e) => log::error!("{e}; closing the connection"),
    }
}

/// Stop accepting, stop the sweeper and refuser, and close every connection's reading side
/// (a request in flight is still answered).
fn stop(w: &mut Workers, listener: &UnixListener) {
    w.stop_accept = None;
    // Wakes the accept loop's blocked `accept` (it fails with EINVAL and sees `stop` closed).
    let _ = nix::sys::socket::shutdown(listener.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    w.sweep = None;
    w.refuse = None;
    for c in w.conns.values() {
        let _ = c.shutdown(std::net::Shutdown::Read);
    }
}
