//! `winxd`: the control plane. Started by the adapter when absent; see docs/architecture.md.

use lexopt::prelude::*;

use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use winx::config::winxd::WinxdConfig;
use winx::daemon::{self, Started};
use winx::ipc::ready::{self, Verdict};

const USAGE: &str = "usage: winxd [--socket PATH] [--ready-fd N] | --version";

pub fn main(args: std::env::ArgsOs) -> ExitCode {
    winx::process::Role::Winxd.name_process();
    winx::alloc::single_arena();
    winx::config::apply_build_identity(&winx::config::lookup(&winx::config::process_env()));
    let mut socket: Option<PathBuf> = None;
    let mut ready_fd: Option<i32> = None;
    let mut parser = lexopt::Parser::from_args(args);
    loop {
        let arg = match parser.next() {
            Ok(Some(a)) => a,
            Ok(None) => break,
            Err(e) => return usage(e),
        };
        match arg {
            Short('V') | Long("version") => {
                println!("winxd {}", winx::build_info::identity());
                return ExitCode::SUCCESS;
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Long("socket") => match parser.value() {
                Ok(v) => socket = Some(PathBuf::from(v)),
                Err(e) => return usage(e),
            },
            Long("ready-fd") => match parser.value().map(|v| v.parse::<i32>()) {
                Ok(Ok(n)) => ready_fd = Some(n),
                _ => return usage("--ready-fd takes a file descriptor number"),
            },
            other => return usage(other.unexpected()),
        }
    }
    // The readiness pipe must not leak into the shells and guardians we start: a child
    // holding it open would keep the starter from ever seeing EOF.
    if let Some(fd) = ready_fd {
        winx::shell::pty::set_cloexec(fd);
    }
    // SAFETY: the starter passes a pipe's write end on this fd and nothing else owns it.
    let mut ready = ready_fd.map(|fd| unsafe { std::fs::File::from_raw_fd(fd) });
    let mut report = |verdict: Verdict| {
        if let Some(f) = ready.take() {
            ready::report(f, &verdict);
        }
    };
    let vars = winx::config::process_env();
    let config = match WinxdConfig::build(socket, &winx::config::lookup(&vars)) {
        Ok(c) => c,
        Err(e) => {
            report(Verdict::Failed {
                reason: e.to_string(),
            });
            return usage(e);
        }
    };
    winx::adapter::init_logging_as(config.log_level, config.log_json);
    // Before any thread: every guardian winxd starts inherits the sandbox.
    let own_dirs: Vec<&std::path::Path> = config.own_dirs.iter().map(|d| d.as_path()).collect();
    match winx::config::sandbox::enter(&config.sandbox, &own_dirs) {
        Ok(applied) => winx::sandbox::log_applied("winxd", &applied),
        Err(reason) => {
            eprintln!("winxd: {reason}");
            report(Verdict::Failed { reason });
            return ExitCode::from(2);
        }
    }
    match daemon::start(&config.socket, config.lifecycle, config.guardian_env) {
        Ok(Started::AlreadyRunning) => {
            report(Verdict::AlreadyRunning);
            ExitCode::SUCCESS
        }
        Ok(Started::Serving(d)) => {
            report(Verdict::Ready);
            match d.run() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    log::error!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            report(Verdict::Failed {
                reason: e.to_string(),
            });
            eprintln!("winxd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}\nhint: {USAGE}");
    ExitCode::from(2)
}
