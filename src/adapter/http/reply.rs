//! Writing replies off the accept loop, with care for request bodies nobody read.
//!
//! A tiny_http `Request` dropped with its body unread first reads the rest of that body
//! (to find the next request on the connection), allocating a buffer of the remaining
//! declared length. Hence three rules:
//! - the accept loop never writes or drops a request itself (a pipelined request's
//!   answer also waits for the one before it); it hands it here;
//! - a rejected request whose body is still on the wire is answered on its own short-lived
//!   `http-drain` thread, so a client dribbling that body ties up only its own thread;
//! - a request declaring more than `DRAIN_SAFE_BYTES` is answered and then abandoned
//!   (its connection is leaked, counted and logged), because dropping it would try to
//!   allocate the declared size and abort the process.

use super::routes::Reply;
use crate::adapter::pool::Pool;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bodies up to this size are read by tiny_http before the request is handed over.
const PREREAD_BYTES: usize = 1024;
/// The largest unread declared body we let tiny_http drain on drop: its drain allocates
/// this much (lazily mapped), which the host must be able to reserve.
pub const DRAIN_SAFE_BYTES: usize = 1 << 30;
/// Draining threads at once; beyond this, drains wait their turn on the reply pool.
const MAX_DRAINERS: usize = 256;
const REPLY_WORKERS: usize = 4;
const REPLY_QUEUE: usize = 1024;

#[derive(Clone)]
pub struct Replier(Arc<Inner>);

struct Inner {
    pool: Pool,
    drainers: Arc<AtomicUsize>,
    abandoned: AtomicUsize,
}

/// Write `reply` in this thread. A client that went away is not an error worth more than
/// a debug line.
pub fn write(rq: tiny_http::Request, reply: Reply) {
    let what = format!("{} {}", rq.method(), rq.url());
    if let Err(e) = rq.respond(reply) {
        log::debug!("reply to {what} not delivered: {e}");
    }
}

/// Whether dropping `rq` would make tiny_http read an unread body.
fn body_pending(rq: &tiny_http::Request) -> bool {
    let expects_continue = super::routes::header(rq, "Expect").is_some();
    rq.body_length()
        .is_some_and(|n| n > PREREAD_BYTES || (expects_continue && n > 0))
}

impl Replier {
    pub fn new() -> std::io::Result<Replier> {
        Ok(Replier(Arc::new(Inner {
            pool: Pool::new("http-reply", REPLY_WORKERS, REPLY_QUEUE)?,
            drainers: Arc::new(AtomicUsize::new(0)),
            abandoned: AtomicUsize::new(0),
        })))
    }

    /// Answer a request whose body was never read (or read only in part).
    pub fn send(&self, rq: tiny_http::Request, reply: Reply) {
        if rq.body_length().is_some_and(|n| n > DRAIN_SAFE_BYTES) {
            return self.abandon(rq, reply);
        }
        if body_pending(&rq) {
            let drainers = self.0.drainers.clone();
            if drainers.fetch_add(1, Ordering::SeqCst) < MAX_DRAINERS {
                let done = drainers.clone();
                let spawned =
                    std::thread::Builder::new()
                        .name("http-drain".into())
                        .spawn(move || {
                            write(rq, reply);
                            done.fetch_sub(1, Ordering::SeqCst);
                        });
                if let Err(e) = spawned {
                    // The request went down with the closure (drained on this thread).
                    drainers.fetch_sub(1, Ordering::SeqCst);
                    log::warn!("cannot start a drain thread: {e}");
                }
                return;
            }
            drainers.fetch_sub(1, Ordering::SeqCst);
        }
        if let Err(job) = self.0.pool.submit(Box::new(move || write(rq, reply))) {
            // The pool is gone only at exit; answer here rather than drop silently.
            job();
        }
    }

    /// Answer, then leak the connection instead of letting tiny_http drain the body.
    fn abandon(&self, rq: tiny_http::Request, reply: Reply) {
        let n = self.0.abandoned.fetch_add(1, Ordering::SeqCst) + 1;
        log::warn!(
            "{} {} declared a {} byte body; answered and abandoned its connection ({n} so far)",
            rq.method(),
            rq.url(),
            rq.body_length().unwrap_or(0)
        );
        std::mem::forget(rq.upgrade("close", reply));
    }
}
