//! `winxd`: the control plane. Started by the adapter when absent; see docs/architecture.md.

use lexopt::prelude::*;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use winx::daemon::{self, Started};
use winx::runtime::daemon::sibling;
use winx::wire::daemon::Lifecycle;

const USAGE: &str = "usage: winxd [--socket PATH] [--ready-fd N] | --version";

fn main() -> ExitCode {
    winx::alloc::single_arena();
    let mut socket: Option<PathBuf> = None;
    let mut ready_fd: Option<i32> = None;
    let mut parser = lexopt::Parser::from_env();
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
    winx::adapter::init_logging(log::LevelFilter::Warn);
    let socket = socket.unwrap_or_else(|| {
        let env = |k: &str| std::env::var(k).ok();
        let dir = winx::config::runtime_dir(&env);
        env("WINX_SOCKET")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("winxd.sock"))
    });
    // The readiness pipe must not leak into the shells and guardians we start: a child
    // holding it open would keep the starter from ever seeing EOF.
    if let Some(fd) = ready_fd {
        winx::shell::pty::set_cloexec(fd);
    }
    // SAFETY: the starter passes a pipe's write end on this fd and nothing else owns it.
    let mut ready = ready_fd.map(|fd| unsafe { std::fs::File::from_raw_fd(fd) });
    let mut report = |msg: &str| {
        if let Some(mut f) = ready.take() {
            let _ = f.write_all(msg.as_bytes());
        }
    };
    let lifecycle = match lifecycle_from_env() {
        Ok(l) => l,
        Err(e) => {
            report(&format!("err: {e}"));
            return usage(e);
        }
    };
    match daemon::start(&socket, sibling("winx-guardian"), lifecycle) {
        Ok(Started::AlreadyRunning) => {
            report("running");
            ExitCode::SUCCESS
        }
        Ok(Started::Serving(d)) => {
            report("ok");
            d.serve();
            ExitCode::FAILURE
        }
        Err(e) => {
            report(&format!("err: {e}"));
            eprintln!("winxd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}\nhint: {USAGE}");
    ExitCode::from(2)
}

/// Lifecycle settings, read once at start (changing them needs `restart-daemon`).
fn lifecycle_from_env() -> Result<Lifecycle, String> {
    let num = |k: &str, default: u64| -> Result<u64, String> {
        match std::env::var(k) {
            Err(_) => Ok(default),
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("{k} must be a whole number, got {v:?}")),
        }
    };
    Ok(Lifecycle {
        unused_ttl_secs: num("WINX_UNUSED_SESSION_IDLE_TTL_SECS", 1_800)?,
        used_ttl_secs: num("WINX_SESSION_IDLE_TTL_SECS", 86_400)?,
        max_guardians: num("WINX_MAX_GUARDIANS", 32)?.max(1) as usize,
        sweep_secs: num("WINX_TTL_SWEEP_SECS", 60)?.max(1),
        clock_skew_secs: num("WINX_CLOCK_SKEW_SECS", 0)? as i64,
    })
}
