//! The SIGCHLD self-pipe: the signal handler writes one byte to every registered pipe so
//! poll loops wake up and reap their own children (never `waitpid(-1)`).

use nix::libc;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

/// Poll loops per process that can be woken (one per embedded session).
const SLOTS: usize = 256;
static WAKE_FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static INSTALL: Once = Once::new();

extern "C" fn on_sigchld(_: libc::c_int) {
    // Async-signal-safe: atomics and write(2) only; errno is preserved for the
    // interrupted code.
    unsafe {
        let saved = *libc::__errno_location();
        for slot in &WAKE_FDS {
            let fd = slot.load(Ordering::Relaxed);
            if fd >= 0 {
                libc::write(fd, b"c".as_ptr().cast(), 1);
            }
        }
        *libc::__errno_location() = saved;
    }
}

/// A registered wake pipe; unregisters on drop.
pub struct WakePipe {
    pub read: OwnedFd,
    write: OwnedFd,
    slot: Option<usize>,
}

impl WakePipe {
    pub fn new() -> std::io::Result<WakePipe> {
        INSTALL.call_once(|| unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigchld as *const () as usize;
            sa.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut());
        });
        let (r, w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(std::io::Error::from)?;
        let slot = WAKE_FDS.iter().position(|s| {
            s.compare_exchange(-1, w.as_raw_fd(), Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        if slot.is_none() {
            log::warn!("no SIGCHLD wake slot left; child exits are noticed on hang-up only");
        }
        Ok(WakePipe {
            read: r,
            write: w,
            slot,
        })
    }

    /// Wake the loop polling this pipe (from another thread of the process). A full pipe
    /// already wakes it, so a failed write loses nothing.
    pub fn poke(&self) {
        let byte = 1u8;
        // SAFETY: a one-byte write from a local onto our own non-blocking pipe.
        unsafe { libc::write(self.write.as_raw_fd(), (&byte as *const u8).cast(), 1) };
    }

    /// Empty the pipe after a wake-up.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        while unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {
        }
    }
}

impl Drop for WakePipe {
    fn drop(&mut self) {
        if let Some(s) = self.slot {
            WAKE_FDS[s].store(-1, Ordering::SeqCst);
        }
    }
}
