//! When a prompt marker counts: only once the shell is idle at its prompt.
//!
//! The marker's nonce is a secret from the command's *output* but not from the command:
//! it runs inside the shell, so it can print the prompt (`${PS1@P}`, the zsh hook) or hand
//! the text to a child. What it cannot fake is the kernel's view of the shell: the
//! terminal's foreground process group is the shell's own (no job is in the foreground)
//! and the shell is blocked reading the terminal. A marker is therefore only a candidate;
//! it completes the command when, after it was read, the shell is seen idle (`probe`).
//! A shell busy running the rest of the command line (a builtin, `wait` for a child,
//! reading a FIFO) never looks idle. Idle is judged only once the master holds no unread
//! bytes: a shell seen idle has printed its real marker already, and it must be the one
//! applied, not an older forged one.
//!
//! Invariant: a candidate that is not confirmed at once is re-checked on a short backoff
//! (`Pending::due`), and a newer marker replaces an older candidate, so the real marker
//! that follows a forged one carries the real exit code and directory.

use crate::deadline::Deadline;
use crate::shell::marker::Marker;
use nix::libc;
use std::os::fd::RawFd;
use std::time::Duration;

/// Re-checks of an unconfirmed marker: the first comes quickly (a real prompt is printed
/// just before the shell's `read`), later ones slow down to this cap (a forged marker may
/// wait for minutes behind a long command; a check costs one ioctl and one small read).
const RECHECK_FIRST: Duration = Duration::from_millis(1);
const RECHECK_MAX: Duration = Duration::from_millis(50);
/// Immediate re-checks (yielding the CPU in between) before falling back to the timer: the
/// shell usually reaches its `read` within microseconds of printing the prompt.
const SPIN_CHECKS: usize = 20;

/// What the kernel says about the shell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Foreground group is the shell's and it waits in `read` on the terminal.
    Yes,
    No,
    /// `/proc/<pid>/syscall` cannot be read here (hardened or foreign kernel): only the
    /// foreground group was checked.
    Unknown,
}

/// Whether the shell `pid` on the PTY `master` is idle at its prompt, and everything it
/// printed before going idle has been read from `master` (so the candidate is the
/// newest marker there is).
///
/// The facts come from separate reads, so the first ones are read again after the fd
/// was resolved: a shell that finished `read < fifo` and restored its terminal on fd 0
/// between two looks shows a different system call (or is running) the second time.
pub fn probe(pid: i32, master: RawFd) -> Idle {
    let foreground = || unsafe { libc::tcgetpgrp(master) } == pid;
    let syscall = || std::fs::read_to_string(format!("/proc/{pid}/syscall"));
    // SAFETY (tcgetpgrp): an ioctl on an fd we own; a pty master answers for its slave.
    if !foreground() {
        return Idle::No;
    }
    let Ok(first) = syscall() else {
        return Idle::Unknown;
    };
    let Some(fd) = reading_fd(&first) else {
        return Idle::No;
    };
    // The fd it reads must be the terminal (a FIFO or a file is the command's business).
    let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"));
    let on_tty = match (target, slave_name(master)) {
        (Ok(t), Some(tty)) => t.as_os_str() == tty.as_str(),
        _ => false,
    };
    let still = on_tty && syscall().is_ok_and(|again| again == first) && foreground();
    if still && !readable(master) {
        Idle::Yes
    } else {
        Idle::No
    }
}

/// Unread bytes wait on `master` (a newer marker may be among them).
fn readable(master: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd: master,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one fd we own, without waiting.
    unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
}

/// The fd of a blocking `read` from a `/proc/<pid>/syscall` line ("nr arg0 …"), `None`
/// for any other state ("running", another system call).
fn reading_fd(line: &str) -> Option<i64> {
    let mut it = line.split_whitespace();
    let nr: i64 = it.next()?.parse().ok()?;
    if nr != libc::SYS_read {
        return None;
    }
    let fd = it.next()?.strip_prefix("0x")?;
    i64::from_str_radix(fd, 16).ok()
}

/// The slave's path (`/dev/pts/N`) of a PTY master.
fn slave_name(master: RawFd) -> Option<String> {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: ptsname_r writes at most buf.len() bytes, NUL-terminated, on success.
    let r = unsafe { libc::ptsname_r(master, buf.as_mut_ptr(), buf.len()) };
    if r != 0 {
        return None;
    }
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
}

/// The newest unconfirmed marker and when to look again.
#[derive(Default)]
pub struct Pending {
    marker: Option<Marker>,
    next_check: Option<Deadline>,
    backoff: Duration,
    warned: bool,
}

impl Pending {
    /// A marker was read: it becomes the candidate (replacing an older one).
    pub fn offer(&mut self, m: Marker) {
        self.marker = Some(m);
        self.backoff = RECHECK_FIRST;
        self.next_check = None;
    }

    pub fn clear(&mut self) {
        *self = Pending {
            warned: self.warned,
            ..Pending::default()
        };
    }

    /// When the loop must call `confirm` again (for its poll timeout).
    pub fn due(&self) -> Option<&Deadline> {
        self.next_check.as_ref()
    }

    /// The candidate, if the shell is idle now; otherwise schedules the next look.
    /// `spin` allows a few immediate re-checks (used right after the marker was read).
    pub fn confirm(&mut self, pid: i32, master: RawFd, spin: bool) -> Option<Marker> {
        self.marker.as_ref()?;
        let tries = if spin { SPIN_CHECKS } else { 1 };
        for i in 0..tries {
            match probe(pid, master) {
                Idle::Yes => return self.take(),
                Idle::Unknown => {
                    if !self.warned {
                        self.warned = true;
                        log::warn!(
                            "/proc/{pid}/syscall is unreadable: prompt markers are checked \
                             against the terminal's foreground group only"
                        );
                    }
                    return self.take();
                }
                Idle::No if i + 1 < tries => std::thread::yield_now(),
                Idle::No => {}
            }
        }
        self.next_check = Some(Deadline::after("marker recheck", self.backoff));
        self.backoff = (self.backoff * 2).min(RECHECK_MAX);
        None
    }

    fn take(&mut self) -> Option<Marker> {
        let m = self.marker.take();
        self.clear();
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_blocking_read_names_an_fd() {
        let read = format!(
            "{} 0x0 0x55d0 0x400 0x0 0x7 0x0 0x7ffd 0x7f2a",
            libc::SYS_read
        );
        assert_eq!(reading_fd(&read), Some(0));
        let zsh = format!(
            "{} 0xa 0x55d0 0x400 0x0 0x7 0x0 0x7ffd 0x7f2a",
            libc::SYS_read
        );
        assert_eq!(reading_fd(&zsh), Some(10));
        assert_eq!(reading_fd("running"), None);
        let wait = format!("{} 0xffffffffffffffff 0x7ffd 0x0", libc::SYS_wait4);
        assert_eq!(reading_fd(&wait), None);
        assert_eq!(reading_fd(""), None);
    }

    #[test]
    fn a_process_that_is_not_a_shell_at_a_prompt_is_not_idle() {
        // Our own pid on a fresh PTY: not its foreground group, so never idle.
        let pty = nix::pty::openpty(None, None).unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(
            probe(std::process::id() as i32, pty.master.as_raw_fd()),
            Idle::No
        );
    }
}
