//! A `winxd-conn` thread: one client's hello and requests, answered in order. The main
//! thread keeps a handle on the stream so that, at shutdown, it can close the reading
//! side: the thread then finishes its request in flight and sees end-of-stream. A client
//! confined more than winxd (`sandbox::peer`) gets one error answer and nothing else.

use super::event::Event;
use super::state::{State, handle, same_user};
use crate::wire::daemon::{PROTOCOL, Request, Response};
use crate::wire::error::RuntimeError;
use crate::wire::{Hello, read_frame, write_frame};
use crossbeam_channel::Sender;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

/// How long a client may take to send a frame; a stuck client costs only its own thread.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve connection `id` until its client leaves; then tell the main thread.
pub fn run(id: u64, stream: Arc<UnixStream>, state: Arc<State>, events: Sender<Event>) {
    if serve(&stream, &state) {
        log::info!("winxd shutting down on request; guardians keep running");
        let _ = events.send(Event::ShutdownRequested);
    }
    let _ = events.send(Event::ConnectionEnded(id));
}

/// Answer requests; `true` when the last one answered was `Shutdown`.
fn serve(stream: &UnixStream, state: &State) -> bool {
    let mut s = stream;
    if !same_user(s) {
        log::warn!("refusing a client of another user");
        return false;
    }
    let confined = crate::sandbox::peer::refusal(s, "winxd");
    let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
    let hello: std::io::Result<Hello> = read_frame(&mut s);
    let Ok(hello) = hello else { return false };
    if write_frame(&mut s, &Hello::new(PROTOCOL, "winxd")).is_err() || hello.protocol != PROTOCOL {
        return false;
    }
    if let Some(why) = confined {
        // Answered, not just closed, so the client's agent reads why.
        log::warn!("refusing a client: {why}");
        let refused = Response::Error {
            error: RuntimeError::start_failed("winxd sandbox check", why),
        };
        let _ = read_frame::<_, serde::de::IgnoredAny>(&mut s);
        let _ = write_frame(&mut s, &refused);
        return false;
    }
    loop {
        let req: std::io::Result<Request> = read_frame(&mut s);
        let Ok(req) = req else { return false };
        let resp = handle(state, &req);
        if write_frame(&mut s, &resp).is_err() {
            return req == Request::Shutdown;
        }
        if req == Request::Shutdown {
            return true;
        }
    }
}
