//! Readiness pipes: a started process (winxd, a guardian) writes one verdict ("ok",
//! "running" or "err: …") and closes the pipe; the starter waits for it with a deadline.

use crate::deadline::Deadline;
use crossbeam_channel::{bounded, select};
use std::io::Read;
use std::os::fd::OwnedFd;

/// The trimmed verdict written on `fd`, or a timeout naming `deadline`. An empty verdict
/// means the process exited (closing the pipe) before reporting.
pub fn wait_verdict(fd: OwnedFd, deadline: Deadline) -> Result<String, String> {
    let (tx, rx) = bounded(1);
    std::thread::Builder::new()
        .name("ready-pipe".into())
        .spawn(move || {
            let mut s = String::new();
            let _ = std::fs::File::from(fd).read_to_string(&mut s);
            let _ = tx.send(s);
        })
        .map_err(|e| e.to_string())?;
    select! {
        recv(rx) -> msg => Ok(msg.unwrap_or_default().trim().to_string()),
        recv(deadline.receiver()) -> _ => Err(format!("{} timed out", deadline.name())),
    }
}
