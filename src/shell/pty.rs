//! Spawning a program on a fresh PTY, with a CLOEXEC status pipe so that a failed exec is
//! reported to the caller instead of leaving a silently dead session.
//!
//! Invariant: between `fork` and `execve` the child only makes async-signal-safe libc calls
//! on memory prepared before the fork (no allocation, no locks, no Rust I/O).

use nix::libc;
use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// How long a write waits for a terminal that takes no input before it fails, by default.
pub const DEFAULT_WRITE_TIMEOUT_MS: u64 = 5_000;

/// This process's write timeout (`WINX_PTY_WRITE_TIMEOUT_MS`, applied once at start by
/// `config::apply_pty_write_timeout`).
static WRITE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_WRITE_TIMEOUT_MS);

/// Set how long `write_all` waits for a terminal that takes no input.
pub fn set_write_timeout_ms(ms: u64) {
    WRITE_TIMEOUT_MS.store(ms, Ordering::Relaxed);
}

/// Terminal size given to every PTY: wide enough that tools do not wrap build output.
pub const DEFAULT_ROWS: u16 = 40;
pub const DEFAULT_COLS: u16 = 200;

/// What to run.
pub struct SpawnSpec {
    pub program: String,
    pub args: Vec<String>,
    /// The complete environment, `KEY=value`.
    pub env: Vec<String>,
    pub cwd: String,
    pub rows: u16,
    pub cols: u16,
    /// A Landlock ruleset the child enters before exec (`sandbox::shells::layer`).
    pub landlock: Option<RawFd>,
}

/// A running child on a PTY. The master is non-blocking and close-on-exec.
pub struct Spawned {
    pub pid: i32,
    pub master: OwnedFd,
}

#[derive(Debug)]
pub enum SpawnError {
    /// An argument contains a NUL byte.
    Nul(&'static str),
    /// A system call in the parent failed.
    Sys(&'static str, nix::Error),
    /// The child reported why it could not exec (chdir or execve errno).
    Exec { step: &'static str, errno: i32 },
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Nul(what) => write!(f, "{what} contains a NUL byte"),
            SpawnError::Sys(what, e) => write!(f, "{what} failed: {e}"),
            SpawnError::Exec { step, errno } => write!(
                f,
                "{step} failed in the child: {}",
                nix::errno::Errno::from_raw(*errno).desc()
            ),
        }
    }
}

fn cstr(s: &str, what: &'static str) -> Result<CString, SpawnError> {
    CString::new(s).map_err(|_| SpawnError::Nul(what))
}

/// Mark `fd` close-on-exec (so it never leaks into a spawned program).
pub fn set_cloexec(fd: RawFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
    }
}

pub fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Read what a non-blocking master holds now, at most `max` bytes, handing each chunk to
/// `f`; true when the other side is closed and drained (EOF or EIO: nothing more can come).
pub fn drain(fd: RawFd, max: usize, mut f: impl FnMut(&[u8])) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    let mut taken = 0;
    while taken < max {
        // SAFETY: reading into a buffer we own, at most its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            f(&buf[..n as usize]);
            taken += n as usize;
            continue;
        }
        let err = nix::Error::last();
        if n < 0 && err == nix::Error::EINTR {
            continue;
        }
        return n == 0 || err != nix::Error::EAGAIN;
    }
    false
}

/// Status-pipe codes written by the child before `_exit`.
const STEP_CHDIR: u8 = 1;
const STEP_EXEC: u8 = 2;
const STEP_LANDLOCK: u8 = 3;

pub fn spawn(spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
    // Everything the child touches is prepared here, before fork.
    let program = cstr(&spec.program, "program")?;
    let mut argv_c = vec![program.clone()];
    for a in &spec.args {
        argv_c.push(cstr(a, "argument")?);
    }
    let envp_c: Vec<CString> = spec
        .env
        .iter()
        .map(|e| cstr(e, "environment"))
        .collect::<Result<_, _>>()?;
    let cwd = cstr(&spec.cwd, "cwd")?;
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = envp_c.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());

    let size = nix::pty::Winsize {
        ws_row: spec.rows,
        ws_col: spec.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&size, None).map_err(|e| SpawnError::Sys("openpty", e))?;
    set_cloexec(pty.master.as_raw_fd());
    set_cloexec(pty.slave.as_raw_fd());
    let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SpawnError::Sys("pipe2", e))?;
    let slave_fd = pty.slave.as_raw_fd();
    let status_fd = status_w.as_raw_fd();
    let landlock = spec.landlock;

    // SAFETY: the child branch below only calls async-signal-safe functions.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SpawnError::Sys("fork", nix::Error::last()));
    }
    if pid == 0 {
        // Child. New session so the PTY becomes the controlling terminal; default signal
        // dispositions and an empty mask, because the server may ignore or block some.
        // SAFETY: between fork and exec only async-signal-safe calls on descriptors and
        // C strings prepared before the fork (nothing allocates or takes a lock).
        unsafe {
            libc::setsid();
            libc::ioctl(slave_fd, libc::TIOCSCTTY as _, 0);
            libc::dup2(slave_fd, 0);
            libc::dup2(slave_fd, 1);
            libc::dup2(slave_fd, 2);
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if libc::chdir(cwd.as_ptr()) != 0 {
                child_fail(status_fd, STEP_CHDIR);
            }
            if let Some(fd) = landlock
                && !crate::sandbox::shells::restrict_child(fd)
            {
                child_fail(status_fd, STEP_LANDLOCK);
            }
            libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            child_fail(status_fd, STEP_EXEC);
        }
    }
    // Parent.
    drop(status_w);
    drop(pty.slave);
    let mut buf = [0u8; 5];
    let n = read_full(status_r.as_raw_fd(), &mut buf);
    if n == 5 {
        let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
        let step = match buf[0] {
            STEP_CHDIR => "chdir",
            STEP_LANDLOCK => "landlock",
            _ => "execve",
        };
        // Reap the child that already exited.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        return Err(SpawnError::Exec { step, errno });
    }
    set_nonblocking(pty.master.as_raw_fd());
    Ok(Spawned {
        pid,
        master: pty.master,
    })
}

/// Report `step` and errno on the status pipe, then exit without running destructors.
unsafe fn child_fail(fd: RawFd, step: u8) -> ! {
    // SAFETY: errno, write(2) and _exit(2) are async-signal-safe; `msg` is a local array.
    unsafe {
        let e = *libc::__errno_location();
        let b = e.to_ne_bytes();
        let msg = [step, b[0], b[1], b[2], b[3]];
        libc::write(fd, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

/// Read until `buf` is full or EOF (the pipe closes when exec succeeds).
fn read_full(fd: RawFd, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads at most the remaining length of `buf` into it.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || nix::Error::last() != nix::Error::EINTR {
            break;
        }
    }
    got
}

/// Write all of `data` to a (non-blocking) PTY master, waiting for room with `poll`.
pub fn write_all(fd: RawFd, data: &[u8]) -> std::io::Result<()> {
    write_counted(fd, data).1
}

/// `write_all`, also saying how many bytes the terminal took before an error (0: none of
/// `data` reached it; more: part of it did).
pub fn write_counted(fd: RawFd, data: &[u8]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    let r = write_from(fd, data, &mut done);
    (done, r)
}

fn write_from(fd: RawFd, all: &[u8], done: &mut usize) -> std::io::Result<()> {
    while *done < all.len() {
        let data = &all[*done..];
        // SAFETY: writes from `data`, which is valid for `data.len()` bytes.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n >= 0 {
            *done += n as usize;
            continue;
        }
        match nix::Error::last() {
            nix::Error::EINTR => continue,
            nix::Error::EAGAIN => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // A PTY whose reader is stuck would block us forever; give up after the
                // write timeout.
                let ms = WRITE_TIMEOUT_MS.load(Ordering::Relaxed);
                let wait = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
                // SAFETY: one `pollfd` that lives on this stack frame for the call.
                let r = unsafe { libc::poll(&mut p, 1, wait) };
                if r == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the terminal accepted no input for {ms} ms"),
                    ));
                }
            }
            e => return Err(e.into()),
        }
    }
    Ok(())
}

/// A `poll` entry asking whether `fd` is readable.
pub fn poll_in(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Send `sig` to the process group led by `pid` (the shell or a background job).
pub fn signal_group(pid: i32, sig: i32) {
    if let Ok(sig) = nix::sys::signal::Signal::try_from(sig) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Non-blocking reap of one specific child. `Some(code)` once it has exited; signals are
/// reported as 128 + signal number, as a shell would.
pub fn try_reap(pid: i32) -> Option<i32> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    match waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(code),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Take ownership of a raw fd (for fds created by libc calls).
pub fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: callers pass a descriptor a libc call just created and nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &str, args: &[&str], cwd: &str) -> SpawnSpec {
        SpawnSpec {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec!["PATH=/usr/bin:/bin".into()],
            cwd: cwd.into(),
            rows: DEFAULT_ROWS,
            cols: DEFAULT_COLS,
            landlock: None,
        }
    }

    #[test]
    fn exec_failure_is_reported_not_silent() {
        let err = spawn(&spec("/no/such/program", &[], "/")).err().unwrap();
        assert!(
            matches!(err, SpawnError::Exec { step: "execve", errno } if errno == libc::ENOENT),
            "{err}"
        );
        let err = spawn(&spec("/bin/sh", &[], "/no/such/dir")).err().unwrap();
        assert!(
            matches!(err, SpawnError::Exec { step: "chdir", .. }),
            "{err}"
        );
    }

    #[test]
    fn child_runs_on_its_own_terminal() {
        let s = spawn(&spec(
            "/bin/sh",
            &["-c", "test -t 0 && test -t 1 && exit 7"],
            "/",
        ))
        .unwrap();
        // Wait for exit: the master reports HUP/EIO once the child is gone.
        let mut p = poll_in(s.master.as_raw_fd());
        let mut buf = [0u8; 256];
        loop {
            // SAFETY: one `pollfd` on this frame; a read into `buf` of at most its length.
            unsafe { libc::poll(&mut p, 1, 5_000) };
            // SAFETY: as above.
            let n = unsafe { libc::read(p.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 && nix::Error::last() != nix::Error::EAGAIN {
                break;
            }
        }
        let mut status = 0;
        // SAFETY: waitpid(2) writes one int that lives on this frame.
        unsafe { libc::waitpid(s.pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }
}
