//! The Landlock sandbox (`WINX_SANDBOX`): a filesystem boundary the kernel enforces on this
//! process and on everything it starts afterwards (winxd, guardians, shells, builds).
//!
//! `config` decides the plan (`Plan`: mode and rules); each binary that starts shells or
//! guardians applies it first thing, before any thread, writer or PTY exists
//! (`apply`). Landlock restricts the calling thread and the threads and processes it
//! creates later, so applying it on the main thread before anything else covers the whole
//! process tree. See docs/architecture.md, "Landlock sandbox".
//!
//! `shells` adds the stricter layer every shell gets (winx's own directories out of
//! reach); `peer` decides which clients a winxd or guardian serves (none confined more
//! than itself).

pub mod peer;
pub mod shells;

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus,
};
use std::path::{Path, PathBuf};

/// The newest Landlock ABI whose filesystem rights we request. ABI 5 (Linux 6.10) added
/// `IOCTL_DEV`, the last filesystem right before ABI 9's `RESOLVE_UNIX` (ABI 6 to 8 add
/// scopes and logging, not filesystem rights). An older kernel enforces what it knows.
pub const HANDLED_ABI: i32 = 5;
const TARGET: ABI = ABI::V5;

/// The kernel requirement, as every startup error and `doctor` names it.
pub const REQUIREMENT: &str = "Landlock needs Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK=y \
     and landlock enabled among the LSMs (the lsm= boot parameter)";

/// What the operator asked for (`WINX_SANDBOX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No sandbox (the default).
    #[default]
    Off,
    /// `1`: enforce; a kernel without Landlock is a startup error.
    Enforce,
    /// `best-effort`: enforce where the kernel has Landlock, run unsandboxed (and say so)
    /// where it has not.
    BestEffort,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Enforce => "enforce",
            Mode::BestEffort => "best_effort",
        }
    }
}

/// The paths a sandboxed process may reach. Every path is absolute and exists when the
/// plan is made (`config` checks the operator's; missing system paths are left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Everything beneath: read, execute, write, create, remove, rename, truncate.
    pub writable: Vec<PathBuf>,
    /// Read and execute beneath (files and directories).
    pub readable: Vec<PathBuf>,
    /// Device trees (`/dev`): read, write, truncate and device ioctls on existing nodes,
    /// nothing created or removed.
    pub devices: Vec<PathBuf>,
}

impl Rules {
    /// Whether `path` (absolute, symlinks resolved) lies beneath a writable root.
    pub fn writable_covers(&self, path: &Path) -> bool {
        self.writable.iter().any(|root| path.starts_with(root))
    }
}

/// A decided sandbox: the mode and, unless it is off, the rules and the startup
/// workspace they were made for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub mode: Mode,
    /// The startup workspace (`WINX_SANDBOX_WORKSPACE`, else the current directory).
    pub workspace: Option<PathBuf>,
    pub rules: Rules,
    /// The stricter layer every shell gets on top (`shells`): the rules without winx's
    /// own state and runtime directories, which only the server, winxd and guardians use.
    pub shells: Rules,
    /// Those directories (resolved), kept out of `shells`.
    pub private: Vec<PathBuf>,
}

/// What applying a plan did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// `WINX_SANDBOX` is off.
    Off,
    /// The rules are in force. `partial`: the kernel's ABI is older than `HANDLED_ABI`,
    /// so the rights it does not know (truncate, device ioctls, …) are not restricted.
    Enforced { kernel_abi: i32, partial: bool },
    /// Best effort on a kernel without Landlock: running unsandboxed.
    Unavailable { reason: String },
}

/// Whether `name` is one of the `WINX_SANDBOX*` variables, which configure the plan (a
/// winxd replaces a requester's with its own: `daemon::spawn`).
pub fn is_sandbox_var(name: &str) -> bool {
    name.starts_with("WINX_SANDBOX")
}

/// Why a sandbox could not be applied; the process must not go on.
#[derive(Debug)]
pub struct SandboxError(pub String);

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The running kernel's Landlock ABI version, or why it has none. Asking creates nothing
/// and restricts nothing (`landlock_create_ruleset` with the version flag).
pub fn kernel_abi() -> Result<i32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the version flag the call only
    // returns a number; no memory is read or written.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        return Ok(v as i32);
    }
    Err(match nix::errno::Errno::last() {
        nix::errno::Errno::EOPNOTSUPP => {
            "Landlock is built into this kernel but not enabled".into()
        }
        nix::errno::Errno::ENOSYS => "this kernel has no Landlock system calls".into(),
        e => format!("the Landlock version probe failed: {e}"),
    })
}

/// `uname -r`, for error messages.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The startup error for `WINX_SANDBOX=1` on a kernel without Landlock.
pub fn unavailable_error(reason: &str) -> SandboxError {
    SandboxError(format!(
        "WINX_SANDBOX=1 cannot be enforced: {reason} (kernel {}). {REQUIREMENT}. \
         Set WINX_SANDBOX=best-effort to run unsandboxed on such kernels.",
        kernel_release()
    ))
}

/// Apply `plan` to this process (and so to everything it starts from now on). Call it on
/// the main thread before any other thread exists: threads started earlier stay
/// unrestricted.
pub fn apply(plan: &Plan) -> Result<Applied, SandboxError> {
    if plan.mode == Mode::Off {
        return Ok(Applied::Off);
    }
    let kernel = match kernel_abi() {
        Ok(v) => v,
        Err(reason) if plan.mode == Mode::BestEffort => return Ok(Applied::Unavailable { reason }),
        Err(reason) => return Err(unavailable_error(&reason)),
    };
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(|e| failed(&e))?
        .create()
        .map_err(|e| failed(&e))?;
    let status = with_rules(ruleset, &plan.rules, TARGET)?
        .restrict_self()
        .map_err(|e| failed(&e))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Applied::Enforced {
            kernel_abi: kernel,
            partial: false,
        }),
        RulesetStatus::PartiallyEnforced => Ok(Applied::Enforced {
            kernel_abi: kernel,
            partial: true,
        }),
        RulesetStatus::NotEnforced if plan.mode == Mode::BestEffort => Ok(Applied::Unavailable {
            reason: "the kernel enforced none of the rules".into(),
        }),
        RulesetStatus::NotEnforced => {
            Err(unavailable_error("the kernel enforced none of the rules"))
        }
    }
}

fn failed(e: &dyn std::fmt::Display) -> SandboxError {
    SandboxError(format!("Landlock sandbox: {e}"))
}

/// `ruleset` with one rule per root of `rules`: writable roots get every right of `abi`,
/// readable ones read and execute, device trees read, write, truncate and device ioctls.
fn with_rules(
    mut ruleset: RulesetCreated,
    rules: &Rules,
    abi: ABI,
) -> Result<RulesetCreated, SandboxError> {
    let devices =
        AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let classes: [(&[PathBuf], BitFlags<AccessFs>); 3] = [
        (&rules.writable, AccessFs::from_all(abi)),
        (&rules.readable, AccessFs::from_read(abi)),
        (&rules.devices, devices),
    ];
    for (paths, access) in classes {
        for path in paths {
            let fd = PathFd::new(path)
                .map_err(|e| failed(&format!("cannot open {}: {e}", path.display())))?;
            // A rule on a file may only carry rights that apply to files.
            let access = match std::fs::metadata(path) {
                Ok(m) if !m.is_dir() => access & AccessFs::from_file(abi),
                _ => access,
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| failed(&format!("rule for {}: {e}", path.display())))?;
        }
    }
    Ok(ruleset)
}

/// Log what `apply` did, once, at startup.
pub fn log_applied(process: &str, applied: &Applied) {
    match applied {
        Applied::Off => {}
        Applied::Enforced {
            kernel_abi,
            partial,
        } => log::info!(
            "{process}: Landlock sandbox enforced (kernel ABI {kernel_abi}{})",
            if *partial {
                ", partially: rights newer than the kernel are not restricted"
            } else {
                ""
            }
        ),
        Applied::Unavailable { reason } => log::warn!(
            "{process}: WINX_SANDBOX=best-effort but {reason}: running WITHOUT the sandbox"
        ),
    }
}
