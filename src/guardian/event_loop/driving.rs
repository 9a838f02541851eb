//! Driving the loop. Its thread takes turns: the first half under the loop's lock, the
//! `poll` with the lock released, the second half under the lock again. Between two
//! halves, a caller on another thread of an embedded guardian's process may act itself
//! (`InProcessLoop`): it writes a command (or input) to a PTY under the lock and waits
//! for the answer on a channel. The loop's thread, asleep in `poll` on that PTY, wakes
//! to the output as it does for any other and sends the answer. The socket's two hops
//! (caller → loop, loop → caller, each a wake-up, a frame written and parsed) become one
//! channel send.
//!
//! Invariants:
//! - a caller never opens or closes a polled descriptor: the poll set of a turn stays
//!   valid while its `poll` runs (a client the caller's answers drop is looked up by
//!   number, not by descriptor, so its stale entry finds nothing);
//! - a caller that leaves work only the loop's thread can finish (a socket answer that
//!   did not fit the socket's buffer) pokes the loop's wake pipe;
//! - a caller enforces its own wait: the loop's thread may sleep in a `poll` whose
//!   timeout predates the caller's deadline.

use super::EventLoop;
use crate::deadline::Deadline;
use crate::ipc::ClientError;
use crate::ipc::client::{ANSWER_SLACK, InProcess};
use crate::wire::guardian::{Request, Response};
use crossbeam_channel::{Receiver, bounded, select};
use nix::libc;
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::Duration;

/// The loop as its thread and its in-process callers share it; `None` once it ended.
pub type Shared = Arc<Mutex<Option<EventLoop>>>;

impl EventLoop {
    /// Run on this thread until `Shutdown` or a failed first start.
    pub fn run(self) {
        drive(&Mutex::new(Some(self)));
    }

    /// This loop, ready to be driven (`drive`) by one thread and called into by others.
    pub fn shared(self) -> Shared {
        Arc::new(Mutex::new(Some(self)))
    }

    /// Answer the waiters that are due, from a caller's thread, and leave to the loop's
    /// thread what only it can finish: a socket answer the caller could not write whole
    /// waits for `POLLOUT`, which the sleeping turn is not polling for.
    fn answer_as_caller(&mut self) {
        self.answer_waiters();
        if self.clients.values().any(|c| c.wants_write()) {
            self.wake.poke();
        }
    }
}

/// Take turns until the loop stops, then end the session and drop the loop (its
/// sockets, PTYs and journals close; in-process callers still waiting learn it).
pub fn drive(shared: &Mutex<Option<EventLoop>>) {
    let mut guard = shared.lock();
    while let Some(lp) = guard.as_mut().filter(|lp| !lp.stop) {
        let mut turn = lp.begin_turn();
        // A fair unlock: a caller parked on the lock gets it now, before this thread's
        // `poll` returns and takes it back. Under a flood the turns follow one another
        // with only a `poll` between them, and a plain unlock let a caller wait for up
        // to a second (debug build).
        let (n, err) = MutexGuard::unlocked_fair(&mut guard, || {
            let fds = &mut turn.set.fds;
            // SAFETY: polls `fds.len()` entries of a vector we own.
            let n =
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, turn.timeout) };
            (n, nix::Error::last())
        });
        let Some(lp) = guard.as_mut() else {
            return;
        };
        if n < 0 && err != nix::Error::EINTR {
            log::error!("poll failed: {err}");
            break;
        }
        lp.end_turn(turn, n);
    }
    if let Some(lp) = guard.as_mut() {
        lp.finish();
    }
    let ended = guard.take();
    drop(guard);
    drop(ended);
}

/// An embedded guardian's loop, reached from this process's threads without its
/// socket for the requests on a command's path: a foreground `Run`, `Status`, `Input` and
/// `Snapshot`. They only write to a PTY the loop already polls, register a waiter or
/// read the session. Everything else (background starts, resets, shutdown, watches,
/// reads, Codex requests) goes over the socket as before.
pub struct InProcessLoop(pub Shared);

impl InProcessLoop {
    /// Register a caller and act on `req` under the lock, as the loop would on reading
    /// it; `None` when the loop ended or is shutting down (the socket says so then).
    fn start(&self, req: &Request) -> Option<Receiver<Response>> {
        let (tx, rx) = bounded(1);
        let mut guard = self.0.lock();
        let lp = guard
            .as_mut()
            .filter(|lp| !lp.stop && lp.terminating.is_none())?;
        lp.next_client += 1;
        let id = lp.next_client;
        lp.in_process.insert(id, tx);
        lp.take_request(id, req.clone());
        // As the loop's turn would after a request: a wait of 0 is answered now, and
        // watchers see the new command.
        lp.answer_as_caller();
        Some(rx)
    }

    /// The wait is over: answer its waiter here (the loop's thread may be asleep with an
    /// older timeout), then take the answer.
    fn overdue(&self, rx: &Receiver<Response>) -> Result<Response, ClientError> {
        if let Some(lp) = self.0.lock().as_mut() {
            lp.answer_as_caller();
        }
        let slack = Deadline::after("in-process answer", ANSWER_SLACK);
        select! {
            recv(rx) -> r => r.map_err(|_| ended()),
            recv(slack.receiver()) -> _ => Err(ClientError::Gone(format!(
                "no answer from the embedded guardian within {ANSWER_SLACK:?} of its wait"
            ))),
        }
    }
}

fn ended() -> ClientError {
    ClientError::Gone("the embedded guardian ended".into())
}

impl InProcess for InProcessLoop {
    fn call(&self, req: &Request) -> Option<Result<Response, ClientError>> {
        let wait_ms = match req {
            Request::Run {
                background: false,
                wait,
                ..
            }
            | Request::Status { wait, .. }
            | Request::Input { wait, .. } => wait.timeout_ms,
            Request::Snapshot => 0,
            _ => return None,
        };
        // Built after the waiter's own deadline: when this one passes, so has that one.
        let rx = self.start(req)?;
        if let Ok(answer) = rx.try_recv() {
            return Some(Ok(answer));
        }
        let deadline = Deadline::after("command wait", Duration::from_millis(wait_ms));
        select! {
            recv(rx) -> r => Some(r.map_err(|_| ended())),
            recv(deadline.receiver()) -> _ => Some(self.overdue(&rx)),
        }
    }
}
