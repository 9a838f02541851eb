//! The single writer thread: serialises outgoing messages, one per line, flushed each.

use crossbeam_channel::{Receiver, Sender, unbounded};
use std::io::Write;
use std::thread::{self, JoinHandle};

/// Spawn the writer. It exits when every `Sender` is dropped or the output fails.
pub fn spawn<W: Write + Send + 'static>(
    out: W,
) -> std::io::Result<(Sender<Vec<u8>>, JoinHandle<()>)> {
    let (tx, rx) = unbounded::<Vec<u8>>();
    let handle = thread::Builder::new()
        .name("stdout-writer".into())
        .spawn(move || run(out, rx))?;
    Ok((tx, handle))
}

fn run<W: Write>(mut out: W, rx: Receiver<Vec<u8>>) {
    for mut msg in rx {
        msg.push(b'\n');
        if let Err(e) = out.write_all(&msg).and_then(|_| out.flush()) {
            log::error!("output closed: {e}");
            return;
        }
    }
}
