//! `winx-guardian`: one logical session's shell and PTYs. Started by winxd; see
//! docs/architecture.md.

use lexopt::prelude::*;

use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use winx::guardian::{self, Dialect, ShellSpec};
use winx::ipc::ready::{self, Verdict};

const USAGE: &str = "usage: winx-guardian --socket PATH --session-dir DIR --workspace DIR --shell PATH \
[--dialect bash|zsh] [--ready-fd N] [--temp-dir DIR] | --version";

pub fn main(args: std::env::ArgsOs) -> ExitCode {
    winx::process::Role::Guardian.name_process();
    winx::alloc::single_arena();
    winx::config::apply_build_identity(&winx::config::lookup(&winx::config::process_env()));
    winx::config::apply_pty_write_timeout(&winx::config::lookup(&winx::config::process_env()));
    let mut socket = None;
    let mut session_dir = None;
    let mut workspace = None;
    let mut shell = None;
    let mut dialect = Dialect::Bash;
    let mut ready_fd: Option<i32> = None;
    let mut temp_dir = None;
    let mut labels = winx::wire::guardian::Labels::default();
    let mut parser = lexopt::Parser::from_args(args);
    loop {
        let arg = match parser.next() {
            Ok(Some(a)) => a,
            Ok(None) => break,
            Err(e) => return usage(e),
        };
        match arg {
            Short('V') | Long("version") => {
                println!("winx-guardian {}", winx::build_info::identity());
                return ExitCode::SUCCESS;
            }
            Long("socket") => socket = value(&mut parser).ok().map(PathBuf::from),
            Long("session-dir") => session_dir = value(&mut parser).ok().map(PathBuf::from),
            Long("workspace") => workspace = value(&mut parser).ok(),
            Long("shell") => shell = value(&mut parser).ok(),
            Long("thread-id") => labels.thread_id = value(&mut parser).unwrap_or_default(),
            Long("principal") => labels.principal = value(&mut parser).unwrap_or_default(),
            Long("temp-dir") => temp_dir = value(&mut parser).ok(),
            Long("dialect") => {
                dialect = match value(&mut parser).as_deref() {
                    Ok("bash") => Dialect::Bash,
                    Ok("zsh") => Dialect::Zsh,
                    _ => return usage("--dialect is bash or zsh"),
                }
            }
            Long("ready-fd") => match value(&mut parser).map(|v| v.parse::<i32>()) {
                Ok(Ok(n)) => ready_fd = Some(n),
                _ => return usage("--ready-fd takes a file descriptor number"),
            },
            other => return usage(other.unexpected()),
        }
    }
    let (Some(socket), Some(session_dir), Some(workspace), Some(program)) =
        (socket, session_dir, workspace, shell)
    else {
        return usage("--socket, --session-dir, --workspace and --shell are required");
    };
    winx::adapter::init_logging(log::LevelFilter::Warn);
    labels.workspace = workspace.clone();
    let env = winx::config::process_env();
    // winxd's sandbox (it replaces the requester's WINX_SANDBOX* variables with its own),
    // applied again here as a layer on the domain winxd runs in, before the first shell.
    // Every shell then gets its own, stricter layer (`sandbox::shells`): without winx's
    // state and runtime directories.
    let sandbox = winx::config::winxd::own_sandbox(
        &winx::config::lookup(&env),
        &socket,
        Some(session_dir.as_path()),
    )
    .map_err(|e| e.to_string())
    .and_then(|(plan, dirs)| {
        let dirs: Vec<&std::path::Path> = dirs.iter().map(|d| d.as_path()).collect();
        winx::config::sandbox::enter(&plan, &dirs)
    });
    let spec = ShellSpec {
        labels,
        program,
        dialect,
        env,
        workspace,
        session_dir,
        temp_dir,
    };
    // The readiness pipe must not leak into the shells and guardians we start: a child
    // holding it open would keep the starter from ever seeing EOF.
    if let Some(fd) = ready_fd {
        winx::shell::pty::set_cloexec(fd);
    }
    // SAFETY: winxd passes the readiness pipe on this fd and nothing else owns it.
    let ready_file = ready_fd.map(|fd| unsafe { std::fs::File::from_raw_fd(fd) });
    let ready = Box::new(move |r: Result<(), String>| {
        if let Some(f) = ready_file {
            let verdict = match r {
                Ok(()) => Verdict::Ready,
                Err(reason) => Verdict::Failed { reason },
            };
            ready::report(f, &verdict);
        }
    });
    match sandbox {
        Ok(applied) => winx::sandbox::log_applied("winx-guardian", &applied),
        Err(reason) => {
            eprintln!("winx-guardian: {reason}");
            (ready as winx::guardian::event_loop::OnReady)(Err(reason));
            return ExitCode::from(2);
        }
    }
    match guardian::run_process(spec, &socket, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("winx-guardian: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}\nhint: {USAGE}");
    ExitCode::from(2)
}

fn value(p: &mut lexopt::Parser) -> Result<String, lexopt::Error> {
    p.value().map(|v| v.to_string_lossy().into_owned())
}
