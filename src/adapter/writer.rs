//! The one output of a stdio connection: each message is written whole, as one line,
//! and flushed, by whichever thread produced it.
//!
//! Invariant: messages never interleave (one mutex around the stream); a worker writes its
//! own answer, so an answer costs no thread hand-off. A client that stops reading blocks
//! the writers, which is the backpressure we want: memory stays bounded.

use parking_lot::Mutex;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone)]
pub struct Output(Arc<Inner>);

struct Inner {
    stream: Mutex<Box<dyn Write + Send>>,
    closed: AtomicBool,
}

impl Output {
    pub fn new<W: Write + Send + 'static>(out: W) -> Output {
        Output(Arc::new(Inner {
            stream: Mutex::new(Box::new(out)),
            closed: AtomicBool::new(false),
        }))
    }

    /// Write `msg` and a newline, then flush. After a failed write the output is closed
    /// and later messages are dropped (the client has gone).
    pub fn send(&self, mut msg: Vec<u8>) {
        if self.0.closed.load(Ordering::Acquire) {
            return;
        }
        msg.push(b'\n');
        let mut out = self.0.stream.lock();
        if let Err(e) = out.write_all(&msg).and_then(|_| out.flush())
            && !self.0.closed.swap(true, Ordering::AcqRel)
        {
            log::error!("output closed: {e}");
        }
    }
}
