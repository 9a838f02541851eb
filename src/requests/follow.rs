//! Event-driven waiting for the request observer and `request watch`: inotify on the
//! rollout file and on the state directory (the store touches `agent-requests.signal`
//! there once each terminal event is readable), and a pidfd for the target process — no polling loop. A housekeeping wake-up bounds
//! each wait so a missed event (a pidfd-less kernel, a file replaced under a watch) costs
//! at most that long.

use crate::deadline::Deadline;
use nix::libc;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// The longest a wait sleeps without any event.
pub const HOUSEKEEPING: Duration = Duration::from_secs(1);

#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// A watched file or directory changed (or housekeeping): look again.
    Look,
    /// The watched process exited.
    ProcessExited,
    /// The deadline passed.
    TimedOut,
}

pub struct Watcher {
    inotify: Inotify,
    pidfd: Option<OwnedFd>,
}

impl Watcher {
    pub fn new() -> std::io::Result<Watcher> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
        Ok(Watcher {
            inotify,
            pidfd: None,
        })
    }

    /// Wake on appends to, and replacement of, `path`.
    pub fn file(&self, path: &Path) -> std::io::Result<()> {
        let flags = AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_ATTRIB;
        self.inotify
            .add_watch(path, flags)
            .map(drop)
            .map_err(Into::into)
    }

    /// Wake on writes to files in `dir` (the state store's database, WAL and signal file).
    pub fn dir(&self, dir: &Path) -> std::io::Result<()> {
        let flags =
            AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO;
        self.inotify
            .add_watch(dir, flags)
            .map(drop)
            .map_err(Into::into)
    }

    /// Wake when `pid` exits (Linux 5.3+; without pidfds the caller checks the process at
    /// each housekeeping wake-up).
    pub fn process(&mut self, pid: u32) -> bool {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return false;
        }
        // SAFETY: the kernel just returned this fd to us; nothing else owns it.
        self.pidfd = Some(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        true
    }

    /// Block until something changes, the process exits, or `deadline` passes.
    pub fn wait(&self, deadline: &Deadline) -> Wake {
        let left = deadline.remaining().unwrap_or(HOUSEKEEPING);
        if left.is_zero() {
            return Wake::TimedOut;
        }
        let timeout = left.min(HOUSEKEEPING).as_millis().max(1) as i32;
        let mut fds = vec![libc::pollfd {
            fd: self.inotify.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(p) = &self.pidfd {
            fds.push(libc::pollfd {
                fd: p.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n > 0 && fds.get(1).is_some_and(|p| p.revents != 0) {
            return Wake::ProcessExited;
        }
        if n > 0 {
            // Drain: which file changed does not matter, the caller looks at all.
            while matches!(self.inotify.read_events(), Ok(ref v) if !v.is_empty()) {}
        }
        if n == 0 && deadline.expired() {
            return Wake::TimedOut;
        }
        Wake::Look
    }
}
