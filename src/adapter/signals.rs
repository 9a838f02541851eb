//! Termination signals as channel messages, for both transports. `signal-hook` owns the
//! handlers and their self-pipe (its registry waits for a running handler before a
//! descriptor is released, so no write can land in a reused descriptor); the `signals`
//! thread turns each delivery into a message, and the transport decides what it means.
//!
//! Invariant: installed once per process, before the transport serves its first request;
//! after that the listed signals never take their default action (termination), so a
//! transport that receives one must end the process itself.

use crossbeam_channel::{Receiver, unbounded};
use signal_hook::iterator::Signals;

/// The signals an adapter treats as "stop": SIGTERM (a host or service manager), SIGINT
/// (Ctrl-C in a terminal) and SIGHUP (its terminal went away).
pub const STOP: [i32; 3] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGHUP,
];

/// Start delivering `signals` as messages; the thread ends when the receiver is dropped
/// and the next signal arrives.
pub fn watch(signals: &[i32]) -> std::io::Result<Receiver<i32>> {
    let mut source = Signals::new(signals)?;
    let (tx, rx) = unbounded();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in source.forever() {
                if tx.send(sig).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}

/// Run `stop` on the `signals` thread when the first of `STOP` arrives (stdio: a host ends
/// the server with SIGTERM right after closing stdin, before EOF is seen).
pub fn on_stop(stop: impl FnOnce(i32) + Send + 'static) -> std::io::Result<()> {
    let rx = watch(&STOP)?;
    std::thread::Builder::new()
        .name("stop".into())
        .spawn(move || {
            if let Ok(sig) = rx.recv() {
                stop(sig);
            }
        })?;
    Ok(())
}
