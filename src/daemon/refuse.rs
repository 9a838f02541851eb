//! The `winxd-refuse` thread: answers clients beyond `MAX_CONNECTIONS` with a typed
//! `Busy` error instead of giving each a thread. One thread, one client at a time, each
//! bounded by `REFUSE_TIMEOUT`; the queue in front of it is bounded too (beyond it the
//! main thread simply closes the connection).

use super::event::Event;
use super::state::same_user;
use crate::wire::daemon::{PROTOCOL, Response};
use crate::wire::{Hello, read_frame, write_frame};
use crossbeam_channel::{Receiver, Sender};
use serde::de::IgnoredAny;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How long a refused client may take per step (hello, request, reading the answer). Our
/// clients send hello and request at once; a silent one delays later refusals by this much.
const REFUSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Refuse every queued client; returns when the main thread closes the queue.
pub fn run(clients: Receiver<UnixStream>, limit: usize, events: Sender<Event>) {
    for mut s in clients {
        refuse(&mut s, limit);
    }
    let _ = events.send(Event::Stopped("refuser"));
}

fn refuse(s: &mut UnixStream, limit: usize) {
    if !same_user(s)
        || s.set_read_timeout(Some(REFUSE_TIMEOUT)).is_err()
        || s.set_write_timeout(Some(REFUSE_TIMEOUT)).is_err()
    {
        return;
    }
    let hello: std::io::Result<Hello> = read_frame(s);
    if hello.is_err() || write_frame(s, &Hello::new(PROTOCOL, "winxd")).is_err() {
        return;
    }
    let request: std::io::Result<IgnoredAny> = read_frame(s);
    if request.is_ok() {
        let _ = write_frame(s, &Response::Busy { limit });
    }
}
