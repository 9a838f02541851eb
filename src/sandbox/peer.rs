//! Which clients a winxd or guardian serves (issue 36, item 1): never one confined more
//! than itself. A sandboxed shell that reaches the socket of a winxd or guardian outside
//! its sandbox (a pathname Unix socket: Landlock below ABI 9 does not restrict `connect`)
//! would otherwise get a shell, or a guardian, outside that sandbox.
//!
//! The kernel fact used is `no_new_privs` (`NoNewPrivs:` in `/proc/<pid>/status`): every
//! process in an unprivileged Landlock domain has it (the domain cannot be entered
//! without it, and it is inherited and never cleared), so a client with it talking to a
//! process without it may be sandboxed where the server is not. Landlock offers no way to
//! compare two domains from outside; see docs/architecture.md, "Landlock sandbox", for what
//! this check cannot tell apart.
//!
//! Invariant: the check reads only kernel facts about the peer (its credentials and
//! status), never anything the client says about itself.

use std::os::unix::net::UnixStream;

/// `NoNewPrivs:` of `/proc/<pid>/status` (`self` for this process); `Ok(None)` when the
/// file has no such line, the read's error when it cannot be read (the process is gone,
/// or this process is out of descriptors: EMFILE).
pub fn no_new_privs(pid: &str) -> std::io::Result<Option<bool>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_no_new_privs(&status))
}

fn parse_no_new_privs(status: &str) -> Option<bool> {
    let v = status
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:"))?
        .trim();
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// Why the client on `stream` must not be served, or `None`. `what` names this process
/// (`winxd`, `the session guardian`) in the reason.
pub fn refusal(stream: &UnixStream, what: &str) -> Option<String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    if matches!(no_new_privs("self"), Ok(Some(true))) {
        // This process is itself confined (sandboxed, or started with no_new_privs): a
        // client confined the same way gets nothing it does not have.
        return None;
    }
    let pid = match getsockopt(stream, PeerCredentials) {
        Ok(c) => c.pid(),
        Err(e) => return Some(format!("cannot identify the client ({e})")),
    };
    match no_new_privs(&pid.to_string()) {
        Ok(Some(false)) => None,
        Ok(Some(true)) => Some(format!(
            "the client (pid {pid}) runs with no_new_privs, as every Landlock-sandboxed \
             process does, and {what} does not: serving it would hand a sandboxed process a \
             shell outside its sandbox. Give the sandboxed server its own runtime directory \
             (leave WINX_SOCKET unset under WINX_SANDBOX)"
        )),
        Ok(None) => Some(format!(
            "the client's status (pid {pid}) has no NoNewPrivs line; refusing rather than \
             risk serving a sandboxed process"
        )),
        Err(e) => Some(format!(
            "cannot read the client's status (pid {pid}: {e}); refusing rather than risk \
             serving a sandboxed process{}",
            if e.raw_os_error() == Some(nix::libc::EMFILE) {
                ". Out of descriptors for a moment: retry when connections have closed"
            } else {
                ""
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_is_read() {
        assert_eq!(
            parse_no_new_privs("Name:\tx\nNoNewPrivs:\t1\nSeccomp:\t0\n"),
            Some(true)
        );
        assert_eq!(parse_no_new_privs("NoNewPrivs:\t0\n"), Some(false));
        assert_eq!(parse_no_new_privs("Name:\tx\n"), None);
        assert!(matches!(no_new_privs("self"), Ok(Some(_))));
    }

    #[test]
    fn a_client_like_this_process_is_served() {
        let (a, _b) = UnixStream::pair().unwrap();
        // The test process and its "client" are one process: same confinement.
        assert_eq!(refusal(&a, "winxd"), None);
    }
}
