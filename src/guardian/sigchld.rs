//! The SIGCHLD wake pipe: on every SIGCHLD a byte lands in each registered pipe so poll
//! loops wake up and reap their own children (never `waitpid(-1)`).
//!
//! `signal-hook`'s registry owns the handler and the write end it writes to: unregistering
//! waits until no handler still uses that action before the descriptor is closed, so a
//! session that ends while SIGCHLDs arrive never lets a handler write into a reused
//! descriptor (another session's PTY, the SQLite file). The loop's own `poke` writes to a
//! duplicate of the write end that only this process's threads use.

use signal_hook::SigId;
use signal_hook::consts::SIGCHLD;
use std::os::fd::{AsFd, OwnedFd};

/// A registered wake pipe; unregisters on drop.
pub struct WakePipe {
    pub read: OwnedFd,
    /// A duplicate of the registered write end, for `poke`.
    poke: OwnedFd,
    id: SigId,
}

impl WakePipe {
    pub fn new() -> std::io::Result<WakePipe> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .map_err(std::io::Error::from)?;
        let poke = write.try_clone()?;
        // The registry takes `write` and closes it only once no handler can be using it.
        let id = signal_hook::low_level::pipe::register(SIGCHLD, write)?;
        Ok(WakePipe { read, poke, id })
    }

    /// Wake the loop polling this pipe (from another thread of the process). A full pipe
    /// already wakes it, so a failed write loses nothing.
    pub fn poke(&self) {
        let _ = nix::unistd::write(self.poke.as_fd(), &[1u8]);
    }

    /// Empty the pipe after a wake-up.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        while nix::unistd::read(self.read.as_fd(), &mut buf).is_ok_and(|n| n > 0) {}
    }
}

impl Drop for WakePipe {
    fn drop(&mut self) {
        signal_hook::low_level::unregister(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sessions end while SIGCHLDs arrive: after each pipe is dropped, its descriptor
    /// numbers are taken at once by a fresh pipe that nobody registered; a handler that
    /// still wrote to an old number would put a byte there. A stress test: the window it
    /// guards is a few instructions wide, so the old hand-written pipe seldom lost here.
    #[test]
    fn a_dropped_pipe_never_receives_a_late_wake_up_in_its_reused_descriptor() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let storm = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        };
        let mut stray = 0;
        for _ in 0..2_000 {
            drop(WakePipe::new().unwrap());
            // The lowest free numbers first: this unregistered pipe takes the freed ones.
            let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
            for _ in 0..50 {
                std::thread::yield_now();
            }
            let mut buf = [0u8; 64];
            if nix::unistd::read(r.as_fd(), &mut buf).is_ok_and(|n| n > 0) {
                stray += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        storm.join().unwrap();
        assert_eq!(stray, 0, "a late SIGCHLD wrote into a reused descriptor");
    }

    #[test]
    fn sigchld_and_poke_wake_the_pipe() {
        let pipe = WakePipe::new().unwrap();
        pipe.poke();
        let mut buf = [0u8; 8];
        assert_eq!(nix::unistd::read(pipe.read.as_fd(), &mut buf).unwrap(), 1);
        std::process::Command::new("true").status().unwrap();
        let mut fds = [nix::poll::PollFd::new(
            pipe.read.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(5_000u16)).unwrap();
        assert_eq!(ready, 1, "SIGCHLD woke the pipe");
        pipe.drain();
    }
}
