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

/// The kernel's view of one shell, with what does not change between looks kept open:
/// its `/proc/<pid>/syscall` (re-read with `pread`, which makes the kernel describe the
/// task again) and its terminal's name. A look is then about six system calls, not
/// twenty. Both are keyed by what they describe and opened again when it changes (a
/// restarted shell, another PTY).
#[derive(Default)]
pub struct Looks {
    syscall: Option<(i32, std::fs::File)>,
    tty: Option<(RawFd, String)>,
}

/// Longest `/proc/<pid>/syscall` line: "nr" and eight hexadecimal numbers.
const SYSCALL_LINE: usize = 256;

impl Looks {
    /// Whether the shell `pid` on the PTY `master` is idle at its prompt, and everything
    /// it printed before going idle has been read from `master` (so the candidate is the
    /// newest marker there is).
    ///
    /// The facts come from separate reads, so the first ones are read again after the fd
    /// was resolved: a shell that finished `read < fifo` and restored its terminal on fd 0
    /// between two looks shows a different system call (or is running) the second time.
    pub fn probe(&mut self, pid: i32, master: RawFd) -> Idle {
        // SAFETY (tcgetpgrp): an ioctl on an fd we own; a pty master answers for its slave.
        // SAFETY: tcgetpgrp(3) on the session's PTY master; no memory is passed.
        let foreground = || unsafe { libc::tcgetpgrp(master) } == pid;
        if !foreground() {
            return Idle::No;
        }
        let Some(first) = self.syscall(pid) else {
            return Idle::Unknown;
        };
        let Some(fd) = reading_fd(&first) else {
            return Idle::No;
        };
        // The fd it reads must be the terminal (a FIFO or a file is the command's business).
        let on_tty = match self.tty(master) {
            Some(tty) => fd_links_to(pid, fd, tty),
            None => false,
        };
        let still = on_tty && self.syscall(pid).is_some_and(|again| again == first) && foreground();
        if still && !readable(master) {
            Idle::Yes
        } else {
            Idle::No
        }
    }

    /// What `/proc/<pid>/syscall` says now; `None` when it cannot be read. A kept file that
    /// fails is opened once more before giving up (its task may be another by now).
    fn syscall(&mut self, pid: i32) -> Option<String> {
        use std::os::unix::fs::FileExt;
        for _ in 0..2 {
            let file = match &self.syscall {
                Some((p, f)) if *p == pid => f,
                _ => {
                    let f = std::fs::File::open(format!("/proc/{pid}/syscall")).ok()?;
                    &self.syscall.insert((pid, f)).1
                }
            };
            let mut buf = [0u8; SYSCALL_LINE];
            match file.read_at(&mut buf, 0) {
                Ok(n) => return Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(_) => self.syscall = None,
            }
        }
        None
    }

    /// The slave's path (`/dev/pts/N`) of the PTY `master`.
    fn tty(&mut self, master: RawFd) -> Option<&str> {
        if self.tty.as_ref().is_none_or(|(m, _)| *m != master) {
            self.tty = Some((master, slave_name(master)?));
        }
        self.tty.as_ref().map(|(_, name)| name.as_str())
    }
}

/// Unread bytes wait on `master` (a newer marker may be among them).
fn readable(master: RawFd) -> bool {
    let mut p = crate::shell::pty::poll_in(master);
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

/// Whether `/proc/<pid>/fd/<fd>` is a link to `target`. On the stack: `fs::read_link`
/// allocates its buffer and then shrinks it, and that `realloc` takes the malloc arena's
/// lock, which the embedded guardian shares with the adapter (issue 18).
fn fd_links_to(pid: i32, fd: i64, target: &str) -> bool {
    use std::io::Write;
    let mut path = [0u8; 64];
    let mut w = &mut path[..];
    // Room for "/proc/<i32>/fd/<i64>" and the NUL; a write that does not fit is refused.
    if write!(w, "/proc/{pid}/fd/{fd}\0").is_err() {
        return false;
    }
    let mut link = [0u8; 256];
    // SAFETY: `path` is NUL-terminated (written above); `link` is a buffer of its length.
    let n = unsafe { libc::readlink(path.as_ptr().cast(), link.as_mut_ptr().cast(), link.len()) };
    // A link as long as the buffer may have been cut: never equal then.
    n >= 0 && (n as usize) < link.len() && &link[..n as usize] == target.as_bytes()
}

/// The slave's path (`/dev/pts/N`) of a PTY master.
fn slave_name(master: RawFd) -> Option<String> {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: ptsname_r writes at most buf.len() bytes, NUL-terminated, on success.
    let r = unsafe { libc::ptsname_r(master, buf.as_mut_ptr(), buf.len()) };
    if r != 0 {
        return None;
    }
    // SAFETY: `buf` is NUL-terminated (see above) and outlives `s`.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
}

/// The newest unconfirmed marker and when to look again.
#[derive(Default)]
pub struct Pending {
    looks: Looks,
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
        self.marker = None;
        self.next_check = None;
        self.backoff = Duration::ZERO;
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
            match self.looks.probe(pid, master) {
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
    fn an_fd_link_is_compared_whole() {
        use std::os::fd::AsRawFd;
        let pty = nix::pty::openpty(None, None).unwrap();
        let me = std::process::id() as i32;
        let fd = pty.slave.as_raw_fd() as i64;
        let name = slave_name(pty.master.as_raw_fd()).unwrap();
        assert!(fd_links_to(me, fd, &name));
        // A prefix, a longer name, another fd and a pid that cannot exist all differ.
        assert!(!fd_links_to(me, fd, &name[..name.len() - 1]));
        assert!(!fd_links_to(me, fd, &format!("{name}0")));
        assert!(!fd_links_to(me, pty.master.as_raw_fd() as i64, &name));
        assert!(!fd_links_to(i32::MAX, fd, &name));
    }

    #[test]
    fn a_process_that_is_not_a_shell_at_a_prompt_is_not_idle() {
        // Our own pid on a fresh PTY: not its foreground group, so never idle.
        let pty = nix::pty::openpty(None, None).unwrap();
        use std::os::fd::AsRawFd;
        let me = std::process::id() as i32;
        assert_eq!(Looks::default().probe(me, pty.master.as_raw_fd()), Idle::No);
    }

    /// The kept `/proc/<pid>/syscall` is described afresh on every look, and a look at
    /// another process opens that one's.
    #[test]
    fn a_kept_syscall_file_sees_the_task_change() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let spawn = || {
            Command::new("sh")
                .args(["-c", "read x; exec sleep 30"])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (mut a, mut b) = (spawn(), spawn());
        let mut looks = Looks::default();
        let until = |looks: &mut Looks, pid: u32, want: &dyn Fn(&str) -> bool| {
            let d = Deadline::after("test", Duration::from_secs(10));
            loop {
                let now = looks.syscall(pid as i32).expect("readable");
                if want(&now) {
                    return now;
                }
                assert!(!d.expired(), "pid {pid} stayed at {now:?}");
                std::thread::yield_now();
            }
        };
        let reading = |l: &str| reading_fd(l) == Some(0);
        until(&mut looks, a.id(), &reading);
        let kept = looks.syscall.as_ref().map(|(p, _)| *p);
        a.stdin.take().unwrap().write_all(b"go\n").unwrap();
        until(&mut looks, a.id(), &|l: &str| {
            !reading(l) && l != "running\n"
        });
        assert_eq!(looks.syscall.as_ref().map(|(p, _)| *p), kept, "same file");
        until(&mut looks, b.id(), &reading);
        assert_eq!(looks.syscall.as_ref().map(|(p, _)| *p), Some(b.id() as i32));
        for c in [&mut a, &mut b] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert_eq!(
            looks.syscall(b.id() as i32),
            None,
            "a reaped task is unreadable"
        );
    }
}
