//! SIGTERM and SIGINT as channel messages. The handler only writes the signal number to a
//! self-pipe (async-signal-safe); the `http-signals` thread turns each byte into a message
//! for the accept loop, which decides what a signal means.

use crossbeam_channel::{Receiver, unbounded};
use nix::libc;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The pipe's write end, read by the handler. Set once and never closed: a signal may
/// arrive at any moment until the process exits.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    // write(2) and atomics only; errno is preserved for the interrupted code.
    unsafe {
        let saved = *libc::__errno_location();
        let fd = PIPE_WRITE.load(Ordering::Relaxed);
        if fd >= 0 {
            let b = sig as u8;
            libc::write(fd, (&b as *const u8).cast(), 1);
        }
        *libc::__errno_location() = saved;
    }
}

/// Install the handlers (once per process) and start the reader thread.
pub fn install() -> std::io::Result<Receiver<i32>> {
    use nix::fcntl::OFlag;
    if PIPE_WRITE.load(Ordering::SeqCst) >= 0 {
        return Err(std::io::Error::other(
            "signal handlers are already installed",
        ));
    }
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    // A full pipe must never block the handler: the byte is dropped, the first one counts.
    nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(std::io::Error::from)?;
    PIPE_WRITE.store(write.into_raw_fd(), Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    let (tx, rx) = unbounded();
    std::thread::Builder::new()
        .name("http-signals".into())
        .spawn(move || run(read, tx))?;
    Ok(rx)
}

fn run(read: OwnedFd, tx: crossbeam_channel::Sender<i32>) {
    let mut b = [0u8; 1];
    loop {
        let n = unsafe { libc::read(read.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        match n {
            1 => {
                if tx.send(i32::from(b[0])).is_err() {
                    return;
                }
            }
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}
