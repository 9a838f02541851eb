//! The `usage-writer` thread: the only code that writes the usage log. It serialises
//! each event it receives, appends it to the active file (rotating by the event's time),
//! and flushes whenever its queue runs empty, so a reader sees events within moments and
//! a burst still costs few writes.
//!
//! Invariant: nothing else writes, renames or prunes the log, and this thread never
//! blocks a request: senders only `try_send` (see `Sink::emit`).

use super::event::{Event, Record, USAGE_SCHEMA};
use super::file::LogFile;
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the writer receives.
pub enum Msg {
    /// An event and its time (Unix ms on the log's clock).
    Event(i64, Event),
    /// Write out everything received so far, then answer.
    Flush(Sender<()>),
}

impl Msg {
    /// The event, for tests that capture a sink's output.
    pub fn event(self) -> Option<Event> {
        match self {
            Msg::Event(_, e) => Some(e),
            Msg::Flush(_) => None,
        }
    }
}

/// Run until every sender is gone. `lost` counts events the file could not take.
pub fn run(rx: Receiver<Msg>, mut log: LogFile, lost: Arc<AtomicU64>) {
    let mut line = Vec::with_capacity(1024);
    loop {
        let msg = match rx.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Empty) => {
                log.flush();
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match msg {
            Msg::Event(ts_ms, event) => {
                line.clear();
                let record = Record {
                    usage_schema: USAGE_SCHEMA,
                    ts_ms,
                    event: &event,
                };
                if serde_json::to_writer(&mut line, &record).is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                line.push(b'\n');
                if !log.write_line(ts_ms, &line) {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
            }
            Msg::Flush(ack) => {
                log.flush();
                let _ = ack.send(());
            }
        }
    }
    log.flush();
}
