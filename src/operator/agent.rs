//! `agent …` verbs (issue 15): the catalog of Codex agents in winx sessions, admission
//! (`send`, `admit`), and the request stream (`request get|cancel|watch`). JSON on
//! stdout, one object per line where streaming; exit codes in README ("Agent requests").

use super::{OpError, sessions};
use crate::config::Config;
use crate::config::agentcli::{AgentCommand, SendArgs};
use crate::deadline::{Deadline, unix_ms};
use crate::ipc::GuardianClient;
use crate::requests::admit::{Admission, Located, Via, admit};
use crate::requests::app_server::host::HostArgs;
use crate::requests::follow::Watcher;
use crate::requests::view::{agent_json, display_name, event_json, request_json};
use crate::requests::{self, reconcile};
use crate::store::Store;
use crate::store::agent_requests::Terminal;
use crate::wire::codex::PasteMode;
use crate::wire::guardian::{Request, Response};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Events read per query while draining the stream.
const WATCH_BATCH: i64 = 512;

fn line(v: &Value) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}").and_then(|_| out.flush()).is_ok()
}

fn open_store(config: &Config) -> Result<Store, OpError> {
    Store::open(&config.state_dir).map_err(|e| OpError(e.to_string()))
}

pub fn main(cmd: AgentCommand, config: &Config) -> Result<ExitCode, OpError> {
    let ok = Ok(ExitCode::SUCCESS);
    match cmd {
        AgentCommand::Capabilities => {
            line(&requests::capabilities());
            ok
        }
        AgentCommand::Catalog => {
            let store = open_store(config)?;
            let all = catalog(config, &store)?;
            line(&Value::Array(all.iter().map(agent_json).collect()));
            ok
        }
        AgentCommand::Send(a) => send(config, a, false),
        AgentCommand::Admit(a) => send(config, a, true),
        AgentCommand::RequestGet { id } => get(config, &id),
        AgentCommand::RequestCancel { id } => cancel(config, &id),
        AgentCommand::RequestWatch { after, once } => watch(config, after, once),
        AgentCommand::AppServerStart { cwd, command } => app_server_start(config, cwd, command),
        AgentCommand::AppServerHost {
            principal,
            state_dir,
            runtime_dir,
            cwd,
            command,
        } => {
            let args = HostArgs {
                state_dir: state_dir.into(),
                runtime_dir: runtime_dir.into(),
                principal,
                cwd: cwd.into(),
                command,
            };
            requests::app_server::host::run(&args, std::io::stdout()).map_err(OpError)?;
            ok
        }
        AgentCommand::Observe {
            principal,
            request_id,
            state_dir,
        } => {
            // The admitter names its state directory (also so `ps` shows whose it is).
            let dir = state_dir.map_or(config.state_dir.clone(), std::path::PathBuf::from);
            let store = Store::open(&dir).map_err(|e| OpError(e.to_string()))?;
            requests::observer::run(&store, &dir, &principal, &request_id, std::io::stdin())
                .map_err(OpError)?;
            ok
        }
    }
}

/// Every Codex agent in the live sessions of winxd, then the principal's managed
/// app-server targets. A winxd that cannot be reached contributes none (an error only
/// when there are no managed targets either).
fn catalog(config: &Config, store: &Store) -> Result<Vec<Located>, OpError> {
    let managed = requests::managed::located(store, &config.principal);
    match in_sessions(config) {
        Ok(mut out) => {
            out.extend(managed);
            Ok(out)
        }
        Err(_) if !managed.is_empty() => Ok(managed),
        Err(e) => Err(e),
    }
}

/// Every Codex agent in the live sessions of winxd.
fn in_sessions(config: &Config) -> Result<Vec<Located>, OpError> {
    let mut out = Vec::new();
    for s in sessions(config)? {
        let socket = crate::ipc::guardian_socket(&config.runtime.runtime_dir, &s.key);
        let client = GuardianClient::new(&socket);
        // A guardian of an older build, or one that ended meanwhile, hosts no targets.
        if let Ok(Response::CodexTargets { targets }) =
            client.call(&Request::CodexTargets, Duration::ZERO)
        {
            for target in targets {
                out.push(Located {
                    target,
                    socket: socket.clone(),
                    thread_id: s.snapshot.labels.thread_id.clone(),
                    via: Via::Guardian,
                });
            }
        }
    }
    Ok(out)
}

fn send(config: &Config, a: SendArgs, authoritative: bool) -> Result<ExitCode, OpError> {
    if let Some(raw) = &a.bad_final_timeout {
        return Ok(refused_timeout(&a, raw));
    }
    let store = open_store(config)?;
    // A daemon that cannot be reached lists no agents: the receipt says unavailable.
    let mut all = in_sessions(config).unwrap_or_default();
    all.extend(requests::managed::located(&store, &config.principal));
    let found = all.into_iter().find(|l| {
        l.target.agent_id == a.target || (!a.exact_agent_id && display_name(l) == a.target)
    });
    let incarnation = match (&a.incarnation, &found) {
        (Some(i), _) => i.clone(),
        (None, Some(l)) => l.target.incarnation.clone(),
        (None, None) => "unknown".into(),
    };
    let agent_id = found
        .as_ref()
        .map_or(a.target.clone(), |l| l.target.agent_id.clone());
    let admission = Admission {
        principal: config.principal.clone(),
        request_id: a
            .request_id
            .clone()
            .unwrap_or_else(requests::new_request_id),
        agent_id,
        incarnation,
        text: a.message.clone(),
        paste: if a.typed {
            PasteMode::Typed
        } else {
            PasteMode::Bracketed
        },
        return_final: a.return_final,
        final_timeout_ms: a.final_timeout_ms,
        // `send` keeps its interactive behaviour: a one-way prompt may steer a running
        // turn (seed 001). `admit` never steers.
        steer: !authoritative,
    };
    // Where the rollout ended before the write: a steered prompt's turn has no cursor.
    let before = found.as_ref().and_then(|l| {
        l.target
            .cursor
            .or_else(|| std::fs::metadata(&l.target.rollout).ok().map(|m| m.len()))
    });
    let exe = std::env::current_exe().map_err(|e| OpError(format!("own executable: {e}")))?;
    let receipt = admit(&store, &admission, found.as_ref(), &exe);
    let mut v = receipt.to_json();
    if !authoritative && receipt.prompt_written == Some(true) && !a.return_final {
        // `send` waits briefly for the observer to see the prompt arrive.
        if let Some(l) = found.as_ref() {
            // An app-server acknowledges by answering turn/start (the receipt says so).
            let ack = matches!(l.via, Via::AppServer { .. }) || acknowledged(l, before);
            v["acknowledged"] = json!(ack);
        }
    }
    line(&v);
    Ok(ExitCode::from(receipt.receipt_class.exit_code()))
}

/// A `--final-timeout-ms` that is no whole number (negative, a fraction, a word): an
/// `invalid` receipt on stdout, as admission answers every other refused input; nothing
/// is looked up, registered or written.
fn refused_timeout(a: &SendArgs, raw: &str) -> ExitCode {
    use crate::requests::receipt::{Class, Receipt};
    let max = requests::MAX_FINAL_TIMEOUT_MS;
    let r = Receipt {
        receipt_version: requests::CAPABILITIES_VERSION,
        receipt_class: Class::Invalid,
        prompt_written: Some(false),
        request_id: a.request_id.clone().unwrap_or_default(),
        agent_id: a.target.clone(),
        incarnation: a.incarnation.clone().unwrap_or_default(),
        return_mode: if a.return_final { "final" } else { "none" }.into(),
        reply_pending: false,
        paste_mode: if a.typed {
            PasteMode::Typed
        } else {
            PasteMode::Bracketed
        }
        .as_str()
        .into(),
        final_timeout_ms: 0,
        correlation: None,
        detail: format!(
            "--final-timeout-ms takes a whole number of milliseconds 0..={max} (0: no \
             deadline); got {raw:?}"
        ),
        replayed: false,
    };
    line(&r.to_json());
    ExitCode::from(Class::Invalid.exit_code())
}

/// How long `send` waits for the rollout to show the prompt's turn.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// Whether the agent's rollout showed a new turn or user message after `cursor` (where
/// it ended before the write), within `ACK_WAIT`.
fn acknowledged(l: &Located, cursor: Option<u64>) -> bool {
    let Some(cursor) = cursor else {
        return false;
    };
    let deadline = Deadline::after("send acknowledgement", ACK_WAIT);
    let path = std::path::Path::new(&l.target.rollout);
    let Ok(w) = Watcher::new() else { return false };
    let _ = w.file(path);
    let mut lines = crate::codex::turns::Lines::starting_at(cursor);
    let mut pos = cursor;
    loop {
        if let Ok(bytes) = std::fs::read(path)
            && bytes.len() as u64 > pos
        {
            let new = &bytes[pos as usize..];
            pos = bytes.len() as u64;
            if lines.feed(new).iter().any(|s| {
                matches!(
                    s.item,
                    crate::codex::rollout::Item::TurnStarted { .. }
                        | crate::codex::rollout::Item::UserMessage { .. }
                )
            }) {
                return true;
            }
        }
        if w.wait(&deadline) == requests::follow::Wake::TimedOut {
            return false;
        }
    }
}

/// Start a managed app-server target: a detached host (its own process group) that
/// prints the target once its app-server answered the handshake; print that line.
fn app_server_start(
    config: &Config,
    cwd: Option<String>,
    command: Vec<String>,
) -> Result<ExitCode, OpError> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| OpError(format!("own executable: {e}")))?;
    let cwd = match cwd {
        Some(c) => std::path::PathBuf::from(c),
        None => std::env::current_dir().map_err(|e| OpError(format!("cwd: {e}")))?,
    };
    let cwd = cwd
        .canonicalize()
        .map_err(|e| OpError(format!("--cwd {}: {e}", cwd.display())))?;
    let command = match command.is_empty() {
        true => vec!["codex".to_string(), "app-server".to_string()],
        false => command,
    };
    let mut child = std::process::Command::new(exe)
        .args([
            "agent",
            "app-server",
            "host",
            "--principal",
            &config.principal,
        ])
        .arg("--state-dir")
        .arg(&config.state_dir)
        .arg("--runtime-dir")
        .arg(&config.runtime.runtime_dir)
        .arg("--cwd")
        .arg(&cwd)
        .arg("--command")
        .args(&command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| OpError(format!("start the app-server host: {e}")))?;
    let mut first = String::new();
    if let Some(out) = child.stdout.take() {
        // The host answers within its handshake bound (or exits, closing the pipe).
        let _ = std::io::BufReader::new(out).read_line(&mut first);
    }
    let v: Value = serde_json::from_str(first.trim())
        .unwrap_or_else(|_| json!({"error": "the app-server host ended before it was ready"}));
    line(&v);
    // The host runs on; a CLI exits and leaves it to init.
    let _ = std::thread::Builder::new()
        .name("host-reaper".into())
        .spawn(move || child.wait());
    Ok(match v.get("error") {
        Some(_) => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    })
}

fn get(config: &Config, id: &str) -> Result<ExitCode, OpError> {
    let store = open_store(config)?;
    let p = &config.principal;
    reconcile::one(&store, p, id).map_err(|e| OpError(e.to_string()))?;
    match store
        .request_get(p, id)
        .map_err(|e| OpError(e.to_string()))?
    {
        Some(r) => {
            line(&request_json(&store, &r));
            Ok(ExitCode::SUCCESS)
        }
        None => {
            line(&json!({"request_id": id, "error": "not_found",
                         "detail": "no request with this id for this principal"}));
            Ok(ExitCode::from(3))
        }
    }
}

fn cancel(config: &Config, id: &str) -> Result<ExitCode, OpError> {
    let store = open_store(config)?;
    let p = &config.principal;
    reconcile::one(&store, p, id).map_err(|e| OpError(e.to_string()))?;
    let t = Terminal {
        state: "cancelled",
        final_message: None,
        reason: Some("cancelled by the caller; the agent's turn itself is not interrupted"),
        turn_id: None,
        at_ms: unix_ms(),
    };
    let seq = store
        .request_finish(p, id, &t)
        .map_err(|e| OpError(e.to_string()))?;
    match store
        .request_get(p, id)
        .map_err(|e| OpError(e.to_string()))?
    {
        Some(r) => {
            let mut v = request_json(&store, &r);
            v["cancelled"] = json!(seq.is_some());
            line(&v);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            line(&json!({"request_id": id, "error": "not_found", "cancelled": false}));
            Ok(ExitCode::from(3))
        }
    }
}

/// Print every terminal event after `after`, in order; stay attached unless `once`.
fn watch(config: &Config, mut after: i64, once: bool) -> Result<ExitCode, OpError> {
    let store = open_store(config)?;
    let w = Watcher::new().map_err(|e| OpError(format!("inotify: {e}")))?;
    w.dir(&config.state_dir)
        .map_err(|e| OpError(format!("watch state directory: {e}")))?;
    let forever = Deadline::never("watch");
    loop {
        reconcile::all(&store).map_err(|e| OpError(e.to_string()))?;
        loop {
            let batch = store
                .request_events_after(&config.principal, after, WATCH_BATCH)
                .map_err(|e| OpError(e.to_string()))?;
            for e in &batch {
                if !line(&event_json(e)) {
                    // The reader went away (`| head`): not an error of the stream.
                    return Ok(ExitCode::SUCCESS);
                }
                after = e.seq;
            }
            if (batch.len() as i64) < WATCH_BATCH {
                break;
            }
        }
        if once {
            return Ok(ExitCode::SUCCESS);
        }
        w.wait(&forever);
    }
}
