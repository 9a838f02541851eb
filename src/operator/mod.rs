//! Operator commands (`list`, `attach`, `prune`, `kill`, `restart-daemon`, `doctor`): thin
//! clients of winxd and the guardians. `list` and `doctor` print JSON for `jq`. `report`
//! reads the usage log offline (no winxd, no writer); `agent` drives Codex agents and
//! return-final requests; `help` is each verb's `--help`.

mod agent;
mod doctor;
pub mod help;
pub mod report;

use crate::config::Config;
use crate::config::opcli::OpCommand;
use crate::runtime::{GuardianClient, daemon};
use crate::shell::secrets::{KnownSecrets, redact_all};
use crate::wire::daemon::{Request, Response, SessionInfo};
use crate::wire::guardian::{self, Wait};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// How long `attach --follow` waits for new output per request.
const FOLLOW_WAIT: Duration = Duration::from_secs(30);

/// An operator failure: printed as `error: …`, exit code 1.
struct OpError(String);

pub fn main(op: OpCommand, config: &Config) -> ExitCode {
    let result = match op {
        OpCommand::List { table } => list(config, table),
        OpCommand::Attach { thread_id, follow } => attach(config, &thread_id, follow),
        OpCommand::Prune { idle_seconds } => {
            removed(config, &Request::Prune { idle_seconds }, None)
        }
        OpCommand::Kill { thread_id, .. } => {
            let req = Request::Kill {
                thread_id: thread_id.clone(),
            };
            removed(config, &req, thread_id.as_deref())
        }
        OpCommand::RestartDaemon => restart(config),
        OpCommand::Doctor => doctor::run(config).map(|v| print_json(&v)),
        OpCommand::Agent(cmd) => {
            return match agent::main(cmd, config) {
                Ok(code) => code,
                Err(OpError(e)) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            };
        }
        OpCommand::Report(args) => {
            let configured = config.usage.as_ref().map(|u| u.path.as_path());
            let now = crate::deadline::unix_ms() + config.usage_clock_skew_ms;
            report::run(&args, configured, now)
                .map(|out| {
                    // A closed pipe (`| head`) is not an error of the report.
                    let _ = std::io::stdout().lock().write_all(out.as_bytes());
                })
                .map_err(OpError)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(OpError(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn ask(config: &Config, req: &Request) -> Result<Response, OpError> {
    let rt = &config.runtime;
    daemon::request(&rt.daemon_socket, &rt.base_env, req).map_err(|e| OpError(e.to_string()))
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn sessions(config: &Config) -> Result<Vec<SessionInfo>, OpError> {
    match ask(config, &Request::List)? {
        Response::Sessions { sessions } => Ok(sessions),
        other => Err(OpError(format!("unexpected winxd answer {other:?}"))),
    }
}

/// One session as operators see it.
pub fn session_json(s: &SessionInfo) -> Value {
    let snap = &s.snapshot;
    json!({
        "thread_id": snap.labels.thread_id,
        "principal": snap.labels.principal,
        "workspace_root": snap.labels.workspace,
        "guardian_pid": snap.guardian_pid,
        "shell_pid": snap.shell_pid,
        "shell_alive": snap.shell_alive,
        "cwd": snap.cwd,
        "running": snap.running.is_some(),
        "running_execution_id": snap.running,
        "background_command_ids": snap.background,
        "ever_ran_command": snap.ever_ran_command,
        "created_at_unix_ms": snap.created_at_ms,
        "last_activity_unix_ms": snap.last_activity_ms,
        "last_command_unix_ms": snap.last_command_ms,
        "build": snap.build,
        // A guardian of another build (started before an upgrade) keeps serving its shell;
        // it is replaced only when its session ends.
        "build_mismatch": snap.build != crate::build_info::identity(),
        "key": s.key,
    })
}

fn list(config: &Config, table: bool) -> Result<(), OpError> {
    let all = sessions(config)?;
    if !table {
        print_json(&Value::Array(all.iter().map(session_json).collect()));
        return Ok(());
    }
    println!(
        "{:<32} {:>8} {:>8} {:<8} {:<6} WORKSPACE",
        "THREAD_ID", "GUARDIAN", "SHELL", "RUNNING", "USED"
    );
    for s in &all {
        let snap = &s.snapshot;
        println!(
            "{:<32} {:>8} {:>8} {:<8} {:<6} {}",
            snap.labels.thread_id,
            snap.guardian_pid,
            snap.shell_pid,
            snap.running.is_some() || !snap.background.is_empty(),
            snap.ever_ran_command,
            snap.labels.workspace
        );
    }
    let ours = crate::build_info::identity();
    let older = all.iter().filter(|s| s.snapshot.build != ours).count();
    if older > 0 {
        eprintln!(
            "note: {older} guardians run another build than {ours} (see `list` JSON's \
             build_mismatch); they keep serving until their sessions end"
        );
    }
    Ok(())
}

fn removed(config: &Config, req: &Request, wanted: Option<&str>) -> Result<(), OpError> {
    let Response::Removed { thread_ids } = ask(config, req)? else {
        return Err(OpError("unexpected winxd answer".into()));
    };
    if let Some(t) = wanted
        && thread_ids.is_empty()
    {
        return Err(OpError(format!("no live session with thread_id {t:?}")));
    }
    print_json(&json!({"removed": thread_ids}));
    Ok(())
}

/// Print the session transcript with our own cursor (the agent's delivery cursor is
/// untouched); with `follow`, keep printing new output until interrupted.
fn attach(config: &Config, thread_id: &str, follow: bool) -> Result<(), OpError> {
    let all = sessions(config)?;
    let s = all
        .iter()
        .find(|s| s.snapshot.labels.thread_id == thread_id)
        .ok_or_else(|| OpError(format!("no live session with thread_id {thread_id:?}")))?;
    let client = GuardianClient::new(&crate::ipc::guardian_socket(
        &config.runtime.runtime_dir,
        &s.key,
    ));
    let mut offset = 0;
    let mut out = std::io::stdout().lock();
    // The raw tail after the last newline, held back until the rest of its line arrives
    // (or the reader catches up): a secret split across two answers is still recognised.
    let mut partial = String::new();
    loop {
        let wait = match follow && partial.is_empty() {
            true => FOLLOW_WAIT,
            false => Duration::ZERO,
        };
        let req = guardian::Request::Read {
            offset,
            wait: Wait {
                timeout_ms: wait.as_millis() as u64,
                settle_ms: None,
            },
        };
        match client.call(&req, wait) {
            Ok(guardian::Response::Output {
                text,
                next,
                skipped,
                secrets,
            }) => {
                if skipped > 0 {
                    let _ = writeln!(out, "[… {skipped} earlier bytes no longer in memory …]");
                }
                let caught_up = text.is_empty();
                partial.push_str(&text);
                let cut = match caught_up {
                    true => partial.len(),
                    false => partial.rfind('\n').map_or(0, |i| i + 1),
                };
                let shown = transcript_piece(config, &partial[..cut], &secrets);
                partial.drain(..cut);
                if out
                    .write_all(shown.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(());
                }
                offset = next;
                // Answers come in bounded chunks: without --follow, read until caught up.
                if !follow && caught_up {
                    return Ok(());
                }
            }
            Ok(other) => return Err(OpError(format!("unexpected guardian answer {other:?}"))),
            Err(e) if follow => {
                let _ = writeln!(out, "[session ended: {e}]");
                return Ok(());
            }
            Err(e) => return Err(OpError(e.to_string())),
        }
    }
}

/// Raw transcript text as an operator sees it: cleaned, and redacted (with the session's
/// known secrets) unless redaction is off.
fn transcript_piece(config: &Config, raw: &str, secrets: &guardian::SecretValues) -> String {
    let cleaned = crate::shell::output::clean(raw.as_bytes());
    if !config.redact {
        return cleaned;
    }
    let mut known = KnownSecrets::new();
    known.learn_all(&secrets.0);
    redact_all(&cleaned, &known).0.into_owned()
}

/// Replace winxd only: guardians keep running and the new daemon finds them by socket.
fn restart(config: &Config) -> Result<(), OpError> {
    let Response::Status { pid: old_pid, .. } = ask(config, &Request::Status)? else {
        return Err(OpError("unexpected winxd answer".into()));
    };
    let before = sessions(config)?.len();
    match ask(config, &Request::Shutdown)? {
        Response::Done => {}
        other => return Err(OpError(format!("unexpected winxd answer {other:?}"))),
    }
    // The next request starts a fresh winxd (the old one removed its socket and exits).
    let Response::Status {
        pid: new_pid,
        build,
        ..
    } = ask(config, &Request::Status)?
    else {
        return Err(OpError("unexpected winxd answer".into()));
    };
    let after = sessions(config)?.len();
    print_json(
        &json!({"old_pid": old_pid, "new_pid": new_pid, "build": build,
                       "sessions_before": before, "sessions_after": after}),
    );
    if after < before {
        return Err(OpError(format!(
            "{} sessions were not re-adopted",
            before - after
        )));
    }
    Ok(())
}
