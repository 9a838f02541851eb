//! `doctor`: a redacted JSON report of the runtime. It names files and settings, never the
//! value of a token, and never the path of a token file.

use super::OpError;
use crate::build_info;
use crate::config::Config;
use crate::runtime::RuntimeKind;
use crate::runtime::daemon;
use crate::wire::daemon::{PROTOCOL, Request, Response};
use crate::wire::{Hello, read_frame, write_frame};
use serde_json::{Value, json};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long a socket candidate may take to say hello.
const PROBE: Duration = Duration::from_secs(2);

/// The build of whatever winxd answers on `socket`, if one does.
fn probe(socket: &Path) -> Option<String> {
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(PROBE)).ok()?;
    write_frame(&mut s, &Hello::new(PROTOCOL, "operator")).ok()?;
    let h: Hello = read_frame(&mut s).ok()?;
    Some(h.build)
}

/// The report. It observes only: it never starts winxd (a stopped winxd is reported as
/// such, with the guardians it would find unknown until something starts it).
pub fn run(config: &Config) -> Result<Value, OpError> {
    let d = &config.diagnostics;
    let candidates: Vec<Value> = d
        .socket_candidates
        .iter()
        .map(|p| {
            let build = probe(p);
            json!({"path": p, "exists": p.exists(), "answering_build": build})
        })
        .collect();
    let answering = candidates
        .iter()
        .filter(|c| !c["answering_build"].is_null())
        .count();
    let ours = build_info::identity();
    let socket = &config.runtime.daemon_socket;
    let running = match daemon::request_running(socket, &Request::Status) {
        Ok(Response::Status {
            build,
            pid,
            lifecycle,
            socket,
        }) => Some((
            json!({"running": true, "build": build, "pid": pid, "socket": socket,
                   "mixed_build": build != ours}),
            json!(lifecycle),
        )),
        Ok(other) => return Err(OpError(format!("unexpected winxd answer {other:?}"))),
        Err(e) => {
            log::info!("doctor: winxd is not answering ({e})");
            None
        }
    };
    let (daemon, lifecycle, guardians) = match running {
        Some((daemon, lifecycle)) => {
            let live = match daemon::request_running(socket, &Request::List) {
                Ok(Response::Sessions { sessions }) => sessions,
                Ok(other) => return Err(OpError(format!("unexpected winxd answer {other:?}"))),
                Err(e) => return Err(OpError(e.to_string())),
            };
            let mut builds: Vec<&str> = live.iter().map(|s| s.snapshot.build.as_str()).collect();
            builds.sort_unstable();
            builds.dedup();
            let guardians = json!({"count": live.len(), "builds": builds,
                "mixed_builds": builds.len() > 1 || builds.iter().any(|b| *b != ours)});
            (daemon, lifecycle, guardians)
        }
        None => (
            json!({"running": false, "socket": socket,
                   "note": "winxd is not running; the next session or operator command starts it"}),
            Value::Null,
            Value::Null,
        ),
    };
    Ok(json!({
        "build": {"identity": ours, "version": build_info::VERSION, "git_rev": build_info::GIT_REV,
                  "git_dirty": build_info::GIT_DIRTY},
        "runtime": match config.runtime.kind { RuntimeKind::Daemon => "daemon", RuntimeKind::Embedded => "embedded" },
        "control_socket": config.runtime.daemon_socket,
        "socket_candidates": candidates,
        "split_control_sockets": answering > 1,
        "daemon": daemon,
        "lifecycle": lifecycle,
        "guardians": guardians,
        "shell": config.runtime.shell.0,
        "file_tools_containment": d.file_containment,
        "sandbox": sandbox(config),
        "principal_isolation": principal_isolation(config),
        "redaction": config.redact,
        "http_credentials_configured": d.http_credentials_configured,
        "usage_log_configured": config.usage.is_some(),
        "usage_log": usage_log(config),
        "state_dir": config.state_dir,
        // Multi-file commits a crash cut short; the next edit or first_call finishes them.
        "interrupted_commits": interrupted_commits(&config.state_dir),
    }))
}

/// The usage log's settings and whether its writer could write it (judged without
/// creating or changing anything).
fn usage_log(config: &Config) -> Value {
    let Some(u) = &config.usage else {
        return json!({"configured": false});
    };
    let (writable, state) = match crate::usage::file::probe(&u.path) {
        Ok(s) => (true, s.to_string()),
        Err(e) => (false, e),
    };
    json!({
        "configured": true,
        "path": u.path,
        "rotation": u.rotation.as_str(),
        "keep_days": u.keep_days,
        "writable": writable,
        "state": state,
        "rotated_files": crate::usage::file::rotated_siblings(&u.path).len(),
    })
}

/// The Landlock sandbox a server started with this environment runs under: the mode
/// asked for, the state it gets on this kernel (`off`, `enforced`, `best_effort_unavailable`,
/// or `unavailable`: `WINX_SANDBOX=1` on a kernel without Landlock, which the server
/// refuses to start with), the kernel's ABI and the rules. `doctor` itself is never
/// sandboxed.
fn sandbox(config: &Config) -> Value {
    use crate::sandbox::{HANDLED_ABI, Mode, REQUIREMENT, kernel_abi};
    let plan = &config.sandbox;
    let kernel = kernel_abi();
    let (state, reason) = match (plan.mode, &kernel) {
        (Mode::Off, _) => ("off", None),
        (_, Ok(_)) => ("enforced", None),
        (Mode::BestEffort, Err(r)) => ("best_effort_unavailable", Some(r.as_str())),
        (Mode::Enforce, Err(r)) => ("unavailable", Some(r.as_str())),
    };
    let abi = kernel.as_ref().ok().copied();
    json!({
        "mode": plan.mode.as_str(),
        "state": state,
        "kernel_abi": abi,
        "handled_abi": HANDLED_ABI,
        "partial": state == "enforced" && abi.is_some_and(|v| v < HANDLED_ABI),
        "reason": reason,
        "requirement": reason.map(|_| REQUIREMENT),
        "workspace": plan.workspace,
        "writable": plan.rules.writable,
        "readable": plan.rules.readable,
        "devices": plan.rules.devices,
        // Every shell's own, stricter layer: without winx's state and runtime directories
        // (`exposed`: those a root shells may use still holds, such as a state directory
        // under /tmp).
        "shells": (plan.mode != Mode::Off).then(|| json!({
            "writable": plan.shells.writable,
            "readable": plan.shells.readable,
            "private": plan.private,
            "exposed": crate::config::sandbox::exposed(plan),
        })),
    })
}

/// What separates principals (issue 36, item 3), stated plainly: every shell runs as the
/// server's uid, so the operating system does not keep one principal's shell from
/// another's files or processes; winx keeps their sessions, history, tasks and requests
/// apart, and a sandbox keeps shells out of winx's own directories.
fn principal_isolation(config: &Config) -> Value {
    json!({
        "shared_uid": nix::unistd::getuid().as_raw(),
        "os_isolated": false,
        "note": "every principal with BashCommand runs shells as this one uid: the OS does \
                 not isolate principals from each other (one can read or signal what another \
                 starts, and whatever else this uid can reach); run one server per OS user for \
                 principals that must not reach each other",
        "shells_kept_from_winx_state": config.sandbox.mode != crate::sandbox::Mode::Off,
    })
}

/// Commit intents waiting in the state directory (`edit::journal`).
fn interrupted_commits(state_dir: &Path) -> usize {
    std::fs::read_dir(state_dir.join("commits"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .unwrap_or(0)
}
