//! The shells' own Landlock layer (issue 36, items 1 and 3). The server, winxd and
//! guardians need winx's state and runtime directories; the shells an agent drives must
//! not read or write them (another principal's output, the history database, the sockets
//! of other sessions). So every shell and background command gets one more layer, applied
//! in the child between `fork` and `execve` (`restrict_child`): the process's rules
//! without those directories, plus the session's own directory (its rc file), with
//! abstract Unix sockets scoped to the domain (ABI 6) and, where the kernel has it,
//! `connect` to pathname sockets outside the writable roots refused (ABI 9's
//! `RESOLVE_UNIX`).
//!
//! The rules are process-wide, like the Landlock domain they narrow: `confine` records
//! them once, at startup, when the process's own sandbox is in force.
//!
//! Invariant: when a sandbox is enforced, no shell starts without this layer (a layer that
//! cannot be built or applied fails the start).

use super::{Rules, SandboxError, failed, with_rules};
use landlock::{ABI, Access, AccessFs, Ruleset, RulesetAttr, Scope};
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::sync::OnceLock;

/// The newest ABI whose rights the shell layer asks for: ABI 9's `RESOLVE_UNIX`. The
/// crate drops what the running kernel does not know.
const SHELL_ABI: ABI = ABI::V9;

static SHELLS: OnceLock<Rules> = OnceLock::new();

/// Every shell this process starts from now on runs under `rules` as its own layer.
/// Called by `config::sandbox::enter` once the process's sandbox is enforced; a second
/// call changes nothing.
pub fn confine(rules: Rules) {
    let _ = SHELLS.set(rules);
}

/// Whether shells get a layer (a sandbox is enforced in this process).
pub fn confined() -> bool {
    SHELLS.get().is_some()
}

/// The layer for a shell of the session whose private directory is `session_dir` (it
/// holds the rc file the shell reads and removes): a Landlock ruleset descriptor for
/// `restrict_child`, or `None` when no sandbox is enforced. Built before `fork`.
pub fn layer(session_dir: &Path) -> Result<Option<OwnedFd>, SandboxError> {
    let Some(rules) = SHELLS.get() else {
        return Ok(None);
    };
    let mut rules = rules.clone();
    rules.writable.push(session_dir.to_path_buf());
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(SHELL_ABI))
        .map_err(|e| failed(&e))?
        .scope(Scope::AbstractUnixSocket)
        .map_err(|e| failed(&e))?
        .create()
        .map_err(|e| failed(&e))?;
    let ruleset = with_rules(ruleset, &rules, SHELL_ABI)?;
    Ok(Option::<OwnedFd>::from(ruleset))
}

/// Enter the layer `fd` (from `layer`). Only for the child between `fork` and `execve`:
/// two system calls, nothing allocated, nothing locked. Returns whether it succeeded
/// (errno is left set otherwise).
///
/// # Safety
/// `fd` must be a Landlock ruleset descriptor that stays open until the call returns.
pub unsafe fn restrict_child(fd: RawFd) -> bool {
    use nix::libc;
    // SAFETY: plain system calls on integers; async-signal-safe.
    unsafe {
        // Inherited from the process's own sandbox already; set again in case it is not.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return false;
        }
        libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) == 0
    }
}
