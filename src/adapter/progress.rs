//! `notifications/progress` for long requests on stdio: a request whose `_meta` carries a
//! `progressToken` is watched from when a worker starts it until just before its answer is
//! written; the `progress-ticker` thread tells the client about every watched request once
//! per interval, so a client timeout on silent requests never fires while work goes on.
//!
//! Invariant: no progress notification for a request is written after its answer (the
//! ticker writes while holding the watch list; a worker leaves the list before answering).

use super::writer::Output;
use crate::jsonrpc::Id;
use crossbeam_channel::{Sender, bounded, select, tick};
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A watched request: its client's token and how many notifications it has had.
struct Watched {
    token: Value,
    sent: u64,
}

/// The ticker's stop channel and thread, taken once by `stop`.
type Ticker = Option<(Sender<()>, JoinHandle<()>)>;

#[derive(Clone)]
pub struct Progress {
    watched: Arc<Mutex<HashMap<Id, Watched>>>,
    /// Dropping the last sender stops the ticker.
    stop: Arc<Mutex<Ticker>>,
}

impl Progress {
    /// Start the ticker, writing to `out` every `every`.
    pub fn start(out: Output, every: Duration) -> std::io::Result<Progress> {
        let watched: Arc<Mutex<HashMap<Id, Watched>>> = Arc::default();
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let list = watched.clone();
        let handle = std::thread::Builder::new()
            .name("progress-ticker".into())
            .spawn(move || {
                let ticks = tick(every);
                loop {
                    select! {
                        recv(ticks) -> _ => notify_all(&list, &out),
                        recv(stop_rx) -> _ => return,
                    }
                }
            })?;
        Ok(Progress {
            watched,
            stop: Arc::new(Mutex::new(Some((stop_tx, handle)))),
        })
    }

    pub fn watch(&self, id: Id, token: Value) {
        self.watched.lock().insert(id, Watched { token, sent: 0 });
    }

    /// Stop watching `id`; once this returns, no notification for it is being written.
    pub fn forget(&self, id: &Id) {
        self.watched.lock().remove(id);
    }

    /// Stop the ticker and wait for it.
    pub fn stop(&self) {
        if let Some((tx, handle)) = self.stop.lock().take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

fn notify_all(list: &Mutex<HashMap<Id, Watched>>, out: &Output) {
    let mut list = list.lock();
    for w in list.values_mut() {
        w.sent += 1;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": w.token, "progress": w.sent,
                       "message": "still running"}});
        out.send(note.to_string().into_bytes());
    }
}
