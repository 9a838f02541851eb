//! Process identity that survives pid reuse: (pid, start time in clock ticks since boot).

/// The pid of a process that has ended and been reaped (for tests of dead owners).
#[cfg(test)]
pub fn ended_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// This process's identity.
pub fn this_process() -> (u32, u64) {
    let pid = std::process::id();
    (pid, start_time(pid).unwrap_or(0))
}

/// Whether the process that had identity (`pid`, `started`) is still running (a zombie,
/// killed but not yet reaped by its parent, is not).
pub fn is_running(pid: u32, started: u64) -> bool {
    stat(pid).is_some_and(|(state, t)| t == started && state != 'Z' && state != 'X')
}

/// Whether the process that had identity (`pid`, `started`) is provably gone: its pid is
/// free, taken by another process (another start time), or a zombie. When `/proc` hides
/// the pid (another user's process under `hidepid`) it is gone only if `kill(pid, 0)`
/// says no such process: an unknown writer is presumed alive.
pub fn is_gone(pid: u32, started: u64) -> bool {
    match stat(pid) {
        Some((state, t)) => t != started || state == 'Z' || state == 'X',
        None => i32::try_from(pid).is_ok_and(|p| {
            p > 0
                && nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None)
                    == Err(nix::errno::Errno::ESRCH)
        }),
    }
}

pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, t)| t)
}

/// `/proc/<pid>/stat` fields 3 (state) and 22 (start time).
fn stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is parenthesised and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

/// The executable of this very process. winxd and guardians are modes of the one
/// `winx-code-agent` binary, started through this link: a child runs exactly the build of
/// its parent, even after an upgrade replaced the file on disk.
pub const SELF_EXE: &str = "/proc/self/exe";

/// The process roles the binary takes by the name it is started under (`argv[0]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `winx-code-agent`: the MCP adapter and operator commands (any other name).
    Adapter,
    /// `winxd`: the control plane.
    Winxd,
    /// `winx-guardian`: one session's shells.
    Guardian,
}

impl Role {
    /// The role named by `argv0`'s file name: `winxd` and `winx-guardian` (a link of that
    /// name, or the name a parent started us under); anything else is the adapter.
    pub fn of(argv0: &std::ffi::OsStr) -> Role {
        let name = std::path::Path::new(argv0).file_name().unwrap_or(argv0);
        match name.as_encoded_bytes() {
            b"winxd" => Role::Winxd,
            b"winx-guardian" => Role::Guardian,
            _ => Role::Adapter,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Adapter => "winx-code-agent",
            Role::Winxd => "winxd",
            Role::Guardian => "winx-guardian",
        }
    }

    /// A command that starts this binary, as it runs now, in `self`'s role.
    pub fn command(self) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(SELF_EXE);
        cmd.arg0(self.name());
        cmd
    }

    /// Name the process after its role (`ps -o comm`, `pgrep winxd`, `top`): an exec through
    /// [`SELF_EXE`] would otherwise be named `exe`. Call before starting any thread.
    pub fn name_process(self) {
        if let Ok(name) = std::ffi::CString::new(self.name()) {
            let _ = nix::sys::prctl::set_name(&name);
        }
    }
}

/// How much lower than the rest of the process a background thread runs (`nice`).
const BACKGROUND_NICE: i32 = 10;

/// Lower the calling thread's CPU priority (Linux keeps `nice` per thread): for threads
/// whose work may lag by milliseconds (the history recorder and its watchers, the usage
/// log writer), so that on a busy machine they yield the CPU to the threads an agent is
/// waiting on. They still get their share; nothing waits for them to be starved.
pub fn run_in_background() {
    // SAFETY: setpriority only changes this thread's scheduling weight; a refusal leaves
    // it as it was.
    let r = unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, BACKGROUND_NICE) };
    if r != 0 {
        log::debug!("setpriority: {}", std::io::Error::last_os_error());
    }
}

/// Make a write past the file-size limit (`RLIMIT_FSIZE`) fail with `EFBIG` instead of
/// killing the process with `SIGXFSZ`, so a full state or log file is an error the server
/// reports. A handler, not `SIG_IGN`: handlers reset on `exec`, so winxd, guardians and
/// the programs in shells keep the default.
pub fn survive_file_size_limit() {
    extern "C" fn noted(_: nix::libc::c_int) {}
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(noted),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    if let Err(e) =
        // SAFETY: SIG_IGN installs no handler, so no handler can run unsafe code.
        unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGXFSZ, &action) }
    {
        log::warn!("SIGXFSZ handler: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the calling thread is lowered; the others keep their priority.
    #[test]
    fn a_background_thread_alone_runs_lower() {
        // SAFETY: getpriority(2) passes no memory; it reads the calling thread's nice value.
        let nice = || unsafe { nix::libc::getpriority(nix::libc::PRIO_PROCESS, 0) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            run_in_background();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + BACKGROUND_NICE).min(19));
        assert_eq!(nice(), before, "the calling thread is unchanged");
    }

    #[test]
    fn roles_follow_the_name_started_under() {
        use std::ffi::OsStr;
        assert_eq!(Role::of(OsStr::new("winxd")), Role::Winxd);
        assert_eq!(
            Role::of(OsStr::new("/usr/local/bin/winx-guardian")),
            Role::Guardian
        );
        assert_eq!(Role::of(OsStr::new("winx-code-agent")), Role::Adapter);
        assert_eq!(Role::of(OsStr::new("./winxd-old")), Role::Adapter);
        assert_eq!(Role::of(OsStr::new("")), Role::Adapter);
        for role in [Role::Adapter, Role::Winxd, Role::Guardian] {
            assert_eq!(Role::of(OsStr::new(role.name())), role);
        }
    }

    #[test]
    fn identities() {
        let (pid, started) = this_process();
        assert!(started > 0);
        assert!(is_running(pid, started));
        assert!(
            !is_running(pid, started + 1),
            "a reused pid is another process"
        );
        assert!(!is_running(0x7fff_ffff, 1));
        assert!(!is_gone(pid, started) && is_gone(pid, started + 1));
        assert!(is_gone(0x7fff_ffff, 1));
        // A killed child is a zombie until reaped: not running.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let (cpid, cstart) = (child.id(), start_time(child.id()).unwrap());
        assert!(is_running(cpid, cstart));
        child.kill().unwrap();
        let end = crate::deadline::Deadline::after("zombie", std::time::Duration::from_secs(10));
        while stat(cpid).is_some_and(|(s, _)| s != 'Z') {
            assert!(!end.expired(), "the child never died");
            std::thread::yield_now();
        }
        assert!(!is_running(cpid, cstart));
        assert!(is_gone(cpid, cstart), "a zombie is gone");
        child.wait().unwrap();
        assert!(is_gone(cpid, cstart), "a reaped pid is gone");
    }
}
