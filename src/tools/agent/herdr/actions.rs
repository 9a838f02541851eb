//! Herdr actions: arguments checked first, then the session, the prompt authority, the
//! configuration, the caller's binding and the target alias; then one run of the
//! executable, whose answer is checked against the configured target.
//!
//! The command lines (docs/architecture.md, "Herdr CLI shape"):
//! `pane list`, `agent get <id>`, `pane read <id> --source recent --lines <n>`,
//! `agent explain <id> --json`, `pane run <id> -- <text>`,
//! `wait agent-status <id> --status <state> --timeout <ms>`.

use super::config::{self, Config};
use super::run::{self, Invocation, RunError};
use crate::deadline::Deadline;
use crate::tools::ToolContext;
use crate::tools::agent::{FIELDS, TOOL, fail, may_prompt, prompt_text};
use crate::tools::envelope::{Envelope, Status, ToolOutput};
use crate::tools::error::ToolError;
use crate::tools::error_code::ErrorCode;
use serde_json::{Map, Value, json};
use std::time::Duration;

pub const DEFAULT_LINES: u64 = 100;
pub const MAX_LINES: u64 = 1000;
pub const UNTIL: &[&str] = &["idle", "working", "blocked", "done", "unknown"];
const MAX_LIST_BYTES: usize = 64 * 1024;
const MAX_FIELD_CHARS: usize = 128;

/// A checked Herdr request; aliases are resolved later, against the caller's binding.
pub enum Req {
    List,
    Get(String),
    Read(String, u64),
    Explain(String),
    Prompt(String, String),
    Wait(String, &'static str, u64),
}

fn request(detail: impl Into<String>) -> ToolError {
    let detail = detail.into();
    fail(
        ErrorCode::InvalidHerdrRequest,
        Status::InvalidInput,
        false,
        format!("invalid Herdr request: {detail}"),
        json!({"input_sent": false}),
    )
}

fn only(action: &Map<String, Value>, allowed: &[&str]) -> Result<(), ToolError> {
    match action
        .keys()
        .find(|k| k.as_str() != "type" && !allowed.contains(&k.as_str()))
    {
        Some(k) if k == "prompt_id" => Err(request(
            "Herdr has no prompt-ID deduplication, so prompt_id is refused; omit it and \
             inspect the target with get or wait before prompting again",
        )),
        Some(k) => Err(request(format!(
            "unexpected field action.{k}; this Herdr action takes {}",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

fn alias(action: &Map<String, Value>) -> Result<String, ToolError> {
    action
        .get("target")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 128)
        .map(str::to_string)
        .ok_or_else(|| request("target is required: a configured target alias"))
}

pub fn parse(kind: &str, action: &Map<String, Value>) -> Result<Req, ToolError> {
    Ok(match kind {
        "list" => {
            only(action, &[])?;
            Req::List
        }
        "get" | "explain" => {
            only(action, &["target"])?;
            match kind {
                "get" => Req::Get(alias(action)?),
                _ => Req::Explain(alias(action)?),
            }
        }
        "read" => {
            only(action, &["target", "lines"])?;
            let lines = match action.get("lines") {
                None => DEFAULT_LINES,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=MAX_LINES).contains(n))
                    .ok_or_else(|| request(format!("lines must be an integer 1..={MAX_LINES}")))?,
            };
            Req::Read(alias(action)?, lines)
        }
        "prompt" => {
            only(action, &["target", "text"])?;
            let text = prompt_text(action.get("text"))?;
            Req::Prompt(alias(action)?, text)
        }
        _ => {
            only(action, &["target", "until", "timeout_seconds"])?;
            let until = match action.get("until") {
                None => "idle",
                Some(v) => UNTIL
                    .iter()
                    .copied()
                    .find(|u| v.as_str() == Some(u))
                    .ok_or_else(|| request(format!("until must be one of {}", UNTIL.join(", "))))?,
            };
            let secs = match action.get("timeout_seconds") {
                None => 10.0,
                Some(v) => v
                    .as_f64()
                    .filter(|s| s.is_finite() && (0.0..=30.0).contains(s))
                    .ok_or_else(|| request("timeout_seconds must be a number 0..=30"))?,
            };
            Req::Wait(alias(action)?, until, (secs * 1000.0) as u64)
        }
    })
}

fn operator(code: ErrorCode, message: String) -> ToolError {
    fail(
        code,
        Status::Failed,
        false,
        message,
        json!({"operator_action_required": true, "input_sent": false}),
    )
}

pub fn call(
    ctx: &ToolContext,
    map: &Map<String, Value>,
    kind: &str,
    action: &Map<String, Value>,
) -> Result<ToolOutput, ToolError> {
    let req = parse(kind, action)?;
    let (_, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    if matches!(req, Req::Prompt(..)) {
        may_prompt(ctx, &binding)?;
    }
    let Some(path) = &ctx.herdr.config else {
        return Err(operator(
            ErrorCode::HerdrDisabled,
            "the Herdr backend is disabled: the operator has not set WINX_HERDR_CONFIG; \
             ask the operator to configure it rather than retrying"
                .into(),
        ));
    };
    let cfg = config::load(path).map_err(|e| {
        operator(
            ErrorCode::HerdrConfiguration,
            format!("the Herdr configuration (WINX_HERDR_CONFIG) is not usable: {e}"),
        )
    })?;
    let key = ctx.herdr.principal_key(ctx.principal);
    let targets = cfg.targets(&key, &binding.workspace_root).ok_or_else(|| {
        scope_denied("no Herdr targets are configured for this principal and workspace")
    })?;
    let resolve = |alias: &str| {
        targets.get(alias).cloned().ok_or_else(|| {
            scope_denied(&format!(
                "target {alias:?} is not configured for this principal and workspace; \
                 list the configured ones with {{\"type\": \"list\"}}"
            ))
        })
    };
    let h = Herdr {
        cfg: &cfg,
        remove_env: &ctx.herdr.inherited,
        trace: ctx.trace,
    };
    match req {
        Req::List => list(&h, targets),
        Req::Get(a) => identified(&h, "get", &a, &resolve(&a)?, &["agent", "get"], &[]),
        Req::Explain(a) => identified(
            &h,
            "explain",
            &a,
            &resolve(&a)?,
            &["agent", "explain"],
            &["--json"],
        ),
        Req::Read(a, lines) => read(&h, &a, &resolve(&a)?, lines),
        Req::Prompt(a, text) => prompt(&h, &a, &resolve(&a)?, &text),
        Req::Wait(a, until, ms) => wait(&h, &a, &resolve(&a)?, until, ms),
    }
}

fn scope_denied(message: &str) -> ToolError {
    fail(
        ErrorCode::HerdrScopeDenied,
        Status::PolicyBlocked,
        false,
        message.to_string(),
        json!({"input_sent": false}),
    )
}

struct Herdr<'a> {
    cfg: &'a Config,
    remove_env: &'a [String],
    trace: &'a crate::usage::CallTrace,
}

impl Herdr<'_> {
    /// One run within `deadline_ms` (or `budget`, whichever is shorter). `prompt`: a run
    /// that may have delivered input, so its failures say the delivery is uncertain.
    fn run(&self, args: &[&str], prompt: bool) -> Result<Vec<u8>, ToolError> {
        let inv = Invocation {
            executable: &self.cfg.executable,
            socket_path: &self.cfg.socket_path,
            remove_env: self.remove_env,
        };
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let _herdr = self.trace.phase(crate::usage::Phase::Herdr);
        let budget = Duration::from_millis(self.cfg.deadline_ms);
        let deadline = Deadline::after("herdr", budget);
        let sent = if prompt {
            json!("unknown")
        } else {
            json!(false)
        };
        run::run(&inv, &args, &deadline).map_err(|e| match e {
            RunError::Spawn(e) => fail(
                ErrorCode::HerdrUnavailable,
                Status::Failed,
                true,
                format!("the Herdr executable could not be started: {e}"),
                json!({"input_sent": false}),
            ),
            RunError::Timeout if prompt => fail(
                ErrorCode::HerdrDeliveryUncertain,
                Status::Failed,
                false,
                format!(
                    "the Herdr prompt did not finish within {} ms and was stopped; the text \
                     may or may not have been delivered. It is never resent: inspect the \
                     target with get or read before deciding what to do",
                    self.cfg.deadline_ms
                ),
                json!({"input_sent": "unknown", "delivery": "uncertain",
                       "deadline_ms": self.cfg.deadline_ms}),
            ),
            RunError::Timeout => fail(
                ErrorCode::HerdrTimeout,
                Status::Failed,
                true,
                format!(
                    "Herdr did not answer within {} ms; its process group was stopped",
                    self.cfg.deadline_ms
                ),
                json!({"input_sent": false, "deadline_ms": self.cfg.deadline_ms}),
            ),
            RunError::OutputLimit { stream, limit } => fail(
                ErrorCode::HerdrOutputLimit,
                Status::Failed,
                false,
                format!("Herdr wrote more than {limit} bytes to {stream}; it was stopped"),
                json!({"input_sent": sent, "stream": stream, "limit_bytes": limit}),
            ),
            RunError::Failed { code, stderr } => fail(
                ErrorCode::HerdrFailed,
                Status::Failed,
                false,
                format!(
                    "Herdr exited unsuccessfully (code {}): {stderr}",
                    code.map(|c| c.to_string())
                        .unwrap_or_else(|| "none: a signal".into())
                ),
                json!({"input_sent": sent, "exit_code": code}),
            ),
        })
    }
}

fn invalid(detail: &str) -> ToolError {
    fail(
        ErrorCode::InvalidHerdrResponse,
        Status::Failed,
        false,
        format!("Herdr answered something this adapter cannot use: {detail}"),
        json!({"input_sent": false}),
    )
}

/// The `result` object of a JSON answer (or the answer itself when it has none).
fn result(stdout: &[u8]) -> Result<Map<String, Value>, ToolError> {
    let v: Value =
        serde_json::from_slice(stdout).map_err(|e| invalid(&format!("not JSON: {e}")))?;
    let r = match v.get("result") {
        Some(r) => r.clone(),
        None => v,
    };
    match r {
        Value::Object(m) => Ok(m),
        _ => Err(invalid("the result is not a JSON object")),
    }
}

fn id_of(m: &Map<String, Value>) -> Option<&str> {
    m.get("pane_id")
        .or_else(|| m.get("id"))
        .and_then(Value::as_str)
}

/// A short string field of a Herdr object, else `unknown`.
fn field<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key)
        .and_then(Value::as_str)
        .filter(|s| s.len() <= MAX_FIELD_CHARS)
        .unwrap_or("unknown")
}

fn done(message: String, text: String, data: Value) -> ToolOutput {
    ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(TOOL, format!("{TOOL} herdr {message}"), data),
    }
}

fn list(
    h: &Herdr,
    targets: &std::collections::BTreeMap<String, String>,
) -> Result<ToolOutput, ToolError> {
    let out = h.run(&["pane", "list"], false)?;
    let r = result(&out)?;
    let panes = r
        .get("panes")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("pane list has no panes array"))?;
    let mut entries = Vec::new();
    let mut text = String::new();
    let mut bytes = 0;
    for (alias, id) in targets.iter().take(config::MAX_TARGETS) {
        let pane = panes
            .iter()
            .filter_map(Value::as_object)
            .find(|p| id_of(p) == Some(id.as_str()));
        let entry = match pane {
            Some(p) => json!({"target": alias, "present": true,
                              "agent_status": field(p, "agent_status"), "agent": field(p, "agent")}),
            None => json!({"target": alias, "present": false, "agent_status": "unknown",
                           "agent": "unknown"}),
        };
        bytes += entry.to_string().len();
        if bytes > MAX_LIST_BYTES {
            break;
        }
        text.push_str(&format!(
            "{alias} {}\n",
            entry["agent_status"].as_str().unwrap_or("")
        ));
        entries.push(entry);
    }
    let n = entries.len();
    Ok(done(
        format!("list: {n}"),
        text,
        json!({"backend": "herdr", "targets": entries}),
    ))
}

/// `get` / `explain`: a JSON object about exactly the configured target.
fn identified(
    h: &Herdr,
    action: &str,
    alias: &str,
    id: &str,
    verb: &[&str],
    extra: &[&str],
) -> Result<ToolOutput, ToolError> {
    let mut args = verb.to_vec();
    args.push(id);
    args.extend_from_slice(extra);
    let r = result(&h.run(&args, false)?)?;
    if id_of(&r) != Some(id) {
        return Err(invalid("the answer is about another target"));
    }
    let text = format!("{alias}: {}\n", field(&r, "agent_status"));
    let data = json!({"backend": "herdr", "target": alias, "agent_status": field(&r, "agent_status"),
                      "herdr": r});
    Ok(done(format!("{action}: {alias}"), text, data))
}

fn read(h: &Herdr, alias: &str, id: &str, lines: u64) -> Result<ToolOutput, ToolError> {
    let n = lines.to_string();
    let out = h.run(
        &["pane", "read", id, "--source", "recent", "--lines", &n],
        false,
    )?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let data = json!({"backend": "herdr", "target": alias, "lines_requested": lines,
                      "bytes": text.len(), "text": text});
    Ok(done(format!("read: {alias}"), text, data))
}

fn prompt(h: &Herdr, alias: &str, id: &str, text: &str) -> Result<ToolOutput, ToolError> {
    h.run(&["pane", "run", id, "--", text], true)?;
    let data = json!({"backend": "herdr", "target": alias, "input_sent": true,
                      "submission": "acknowledged", "task_completion": "not_observed"});
    let msg = format!(
        "Herdr acknowledged the prompt to {alias}; use get, read or wait to follow its work\n"
    );
    Ok(done(format!("prompt: {alias}"), msg, data))
}

fn wait(h: &Herdr, alias: &str, id: &str, until: &str, ms: u64) -> Result<ToolOutput, ToolError> {
    // The operation deadline caps the wait; Herdr's own timeout ends a little earlier so
    // that its answer, not the kill, normally ends the call.
    let cap = h
        .cfg
        .deadline_ms
        .saturating_sub(h.cfg.deadline_ms / 10)
        .max(1);
    let waited = ms.min(cap).max(1).to_string();
    let args = [
        "wait",
        "agent-status",
        id,
        "--status",
        until,
        "--timeout",
        &waited,
    ];
    h.run(&args, false)?;
    let text = format!("{alias} reached {until}\n");
    let data = json!({"backend": "herdr", "target": alias, "until": until, "outcome": "reached",
                      "timeout_ms": waited.parse::<u64>().unwrap_or(0)});
    Ok(done(format!("wait: {alias} {until}"), text, data))
}
