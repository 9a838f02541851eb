//! The managed app-server targets of a principal as catalog entries: each host that
//! still runs is asked for its live state; a host that is gone has its row, socket and
//! secret removed.

use super::admit::{Located, Via};
use super::app_server;
use crate::store::Store;
use std::path::PathBuf;

/// Every managed target of `principal` whose host answers.
pub fn located(store: &Store, principal: &str) -> Vec<Located> {
    let Ok(rows) = store.app_targets(principal) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in rows {
        if crate::process::is_gone(t.host_pid, t.host_start) {
            app_server::forget_gone(store, &t);
            continue;
        }
        // A host that does not answer now lists nothing (it may be ending).
        if let Ok(st) = app_server::status(&t) {
            out.push(Located {
                target: app_server::target(&t, &st),
                socket: PathBuf::from(&t.socket),
                thread_id: t.thread_id.clone(),
                via: Via::AppServer {
                    session_id: t.session_id.clone(),
                },
            });
        }
    }
    out
}
