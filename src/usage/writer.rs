//! The `usage-writer` thread: the only code that writes the usage log. It serialises the
//! events waiting in its queue, appends them to the active file (rotating by each event's
//! time) and flushes, then waits for the next tick or a flush request.
//!
//! Why ticks: the writer never waits on the event queue itself, so an emitter's
//! `try_send` never has a sleeping thread to wake (a futex call per event, measurable on a
//! 0.2 ms call). The tick is `TICK_MIN` while events flow and backs off to `TICK_MAX`
//! when idle; a flush request (shutdown, tests) is answered at once.
//!
//! Invariant: nothing else writes, renames or prunes the log, and this thread never
//! blocks a request: senders only `try_send` (see `Sink::emit`).

use super::event::{Event, Record, USAGE_SCHEMA};
use super::file::LogFile;
use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, select};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How soon events reach the file while they flow: well under a human's "moment", and
/// at 20,000 events/s a tick collects ~100 events into one write.
const TICK_MIN: Duration = Duration::from_millis(5);
/// The longest idle wait: an idle server wakes this thread a few times a second at most.
const TICK_MAX: Duration = Duration::from_millis(250);

/// An event and its time (Unix ms on the log's clock).
pub struct Stamped(pub i64, pub Event);

/// Run until every sender of `ctl` is gone (the last `Sink` dropped). `lost` counts events
/// the file could not take. A message on `ctl` asks for a flush, answered when done.
pub fn run(
    events: Receiver<Stamped>,
    ctl: Receiver<Sender<()>>,
    mut log: LogFile,
    lost: Arc<AtomicU64>,
) {
    let mut line = Vec::with_capacity(1024);
    let mut tick = TICK_MIN;
    loop {
        let timer = Deadline::after("usage tick", tick).receiver();
        let ack = select! {
            recv(ctl) -> msg => match msg {
                Ok(ack) => Some(ack),
                Err(_) => break,
            },
            recv(timer) -> _ => None,
        };
        let n = drain(&events, &mut log, &mut line, &lost);
        log.flush();
        if let Some(ack) = ack {
            let _ = ack.send(());
        }
        tick = match n {
            0 => (tick * 2).min(TICK_MAX),
            _ => TICK_MIN,
        };
    }
    drain(&events, &mut log, &mut line, &lost);
    log.flush();
}

/// Write every event waiting now; how many there were.
fn drain(
    events: &Receiver<Stamped>,
    log: &mut LogFile,
    line: &mut Vec<u8>,
    lost: &AtomicU64,
) -> usize {
    let mut n = 0;
    while let Ok(Stamped(ts_ms, event)) = events.try_recv() {
        n += 1;
        line.clear();
        let record = Record {
            usage_schema: USAGE_SCHEMA,
            ts_ms,
            event: &event,
        };
        if serde_json::to_writer(&mut *line, &record).is_err() {
            lost.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        line.push(b'\n');
        if !log.write_line(ts_ms, line) {
            lost.fetch_add(1, Ordering::Relaxed);
        }
    }
    n
}
