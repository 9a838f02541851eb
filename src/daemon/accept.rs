//! The `winxd-accept` thread: takes clients off the listening socket and hands them to the
//! main thread. An accept error (EMFILE when the descriptor table is full, ENOBUFS) is
//! logged and retried after a bounded exponential back-off, never in a busy loop.
//!
//! Invariant: this thread decides nothing about a client; it only forwards it.

use super::event::Event;
use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, TryRecvError, select};
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::Duration;

/// The first wait after an accept error: short, since a finishing connection frees a
/// descriptor within milliseconds.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest wait: while the table stays full we retry (and log) once a second, so
/// clients are served again within a second of descriptors coming back.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Bounded exponential back-off: 10 ms, 20 ms, … up to `MAX_BACKOFF`; reset by a success.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            next: FIRST_BACKOFF,
        }
    }
}

impl Backoff {
    /// The wait before the next retry; doubles each call up to `MAX_BACKOFF`.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 2).min(MAX_BACKOFF);
        wait
    }

    pub fn reset(&mut self) {
        self.next = FIRST_BACKOFF;
    }
}

/// Accept until `stop` is closed (the main thread drops its end and shuts the listener
/// down, which wakes a blocked `accept`) or the main thread's channel is gone.
pub fn run(listener: Arc<UnixListener>, events: Sender<Event>, stop: Receiver<()>) {
    let mut backoff = Backoff::default();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                backoff.reset();
                if events.send(Event::Accepted(stream)).is_err() {
                    break;
                }
            }
            Err(_) if stopped(&stop) => break,
            Err(e) => {
                let wait = backoff.next_wait();
                log::warn!("accept failed: {e}; retrying in {wait:?}");
                let retry = Deadline::after("accept back-off", wait);
                select! {
                    recv(stop) -> _ => break,
                    recv(retry.receiver()) -> _ => {}
                }
            }
        }
    }
    let _ = events.send(Event::Stopped("accept loop"));
}

fn stopped(stop: &Receiver<()>) -> bool {
    matches!(stop.try_recv(), Err(TryRecvError::Disconnected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..9).map(|_| b.next_wait().as_millis() as u64).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_wait(), FIRST_BACKOFF);
    }
}
