//! Herdr actions: arguments checked first, then the session, the prompt authority, the
//! configuration, the caller's binding and the target alias; then one run of the
//! executable, whose answer (`answer`) is checked against the configured target.
//!
//! Invariant: the only command lines run are Herdr's agent commands (Herdr 0.8.2's CLI
//! reference) — `agent list`, `agent get <id>`, `agent read <id> --source <s> --lines <n>`,
//! `agent explain <id> --json`, `agent prompt <id> <text>` and
//! `agent wait <id> [--until <state>]… --timeout <ms>` — never a pane command, which would
//! skip Herdr's own refusals (`agent_blocked`, `agent_not_ready`) and could type a prompt
//! into an approval dialog.

use super::answer::{self, Agent, Ended, Refused, Verb};
use super::config::{self, Config};
use super::errors::{self, Call};
use super::run::{self, Invocation};
use crate::deadline::Deadline;
use crate::tools::ToolContext;
use crate::tools::agent::{FIELDS, TOOL, fail, may_prompt, prompt_text};
use crate::tools::envelope::{Envelope, Status, ToolOutput};
use crate::tools::error::ToolError;
use crate::tools::error_code::ErrorCode;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

pub const DEFAULT_LINES: u64 = 100;
pub const MAX_LINES: u64 = 1000;
pub const UNTIL: &[&str] = answer::STATUSES;
/// `agent read --source`: Herdr's read sources; `recent` is Herdr's default and ours.
pub const SOURCES: &[&str] = &["recent", "recent-unwrapped", "visible", "detection"];
/// What `agent wait` settles on without `--until` (Herdr's documented default).
const DEFAULT_UNTIL: &[&str] = &["idle", "done", "blocked"];
const MAX_LIST_BYTES: usize = 64 * 1024;

/// A checked Herdr request; aliases are resolved later, against the caller's binding.
pub enum Req {
    List,
    Get(String),
    Read(String, &'static str, u64),
    Explain(String),
    Prompt(String, String),
    /// Target, states (empty: Herdr's default), timeout in ms.
    Wait(String, Vec<&'static str>, u64),
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

fn one_of(v: &Value, set: &[&'static str]) -> Option<&'static str> {
    set.iter().copied().find(|u| v.as_str() == Some(u))
}

/// `until`: one state, or a list of distinct states (any of them ends the wait).
fn until(v: Option<&Value>) -> Result<Vec<&'static str>, ToolError> {
    let bad = || {
        request(format!(
            "until must be one of {} (or a list of them)",
            UNTIL.join(", ")
        ))
    };
    let items: Vec<&Value> = match v {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= UNTIL.len() => a.iter().collect(),
        Some(v @ Value::String(_)) => vec![v],
        Some(_) => return Err(bad()),
    };
    let mut states = Vec::new();
    for v in items {
        let s = one_of(v, UNTIL).ok_or_else(bad)?;
        if !states.contains(&s) {
            states.push(s);
        }
    }
    Ok(states)
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
            only(action, &["target", "lines", "source"])?;
            let lines = match action.get("lines") {
                None => DEFAULT_LINES,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=MAX_LINES).contains(n))
                    .ok_or_else(|| request(format!("lines must be an integer 1..={MAX_LINES}")))?,
            };
            let source = match action.get("source") {
                None => SOURCES[0],
                Some(v) => one_of(v, SOURCES).ok_or_else(|| {
                    request(format!("source must be one of {}", SOURCES.join(", ")))
                })?,
            };
            Req::Read(alias(action)?, source, lines)
        }
        "prompt" => {
            only(action, &["target", "text"])?;
            let text = prompt_text(action.get("text"))?;
            Req::Prompt(alias(action)?, text)
        }
        _ => {
            only(action, &["target", "until", "timeout_seconds"])?;
            let states = until(action.get("until"))?;
            let secs = match action.get("timeout_seconds") {
                None => 10.0,
                Some(v) => v
                    .as_f64()
                    .filter(|s| s.is_finite() && (0.0..=30.0).contains(s))
                    .ok_or_else(|| request("timeout_seconds must be a number 0..=30"))?,
            };
            Req::Wait(alias(action)?, states, (secs * 1000.0) as u64)
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
    let workspace = binding.workspace_str();
    let h = Herdr {
        cfg: &cfg,
        remove_env: &ctx.herdr.inherited,
        trace: ctx.trace,
        thread_id: &binding.thread_id,
        workspace_root: &workspace,
    };
    match req {
        Req::List => list(&h, targets),
        Req::Get(a) => get(&h, &a, &resolve(&a)?),
        Req::Explain(a) => explain(&h, &a, &resolve(&a)?),
        Req::Read(a, source, lines) => read(&h, &a, &resolve(&a)?, source, lines),
        Req::Prompt(a, text) => prompt(&h, &a, &resolve(&a)?, &text),
        Req::Wait(a, states, ms) => wait(&h, &a, &resolve(&a)?, &states, ms),
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
    thread_id: &'a str,
    workspace_root: &'a str,
}

impl Herdr<'_> {
    fn call<'a>(&'a self, verb: Verb, alias: Option<&'a str>) -> Call<'a> {
        Call {
            thread_id: self.thread_id,
            workspace_root: self.workspace_root,
            alias,
            verb,
            deadline_ms: self.cfg.deadline_ms,
        }
    }

    /// One run of `herdr agent <verb> <rest…>` within `deadline_ms`: its stdout on exit 0,
    /// Herdr's error envelope on exit 1; anything else is already a winx error.
    fn run(&self, c: &Call, rest: &[&str]) -> Result<Result<Vec<u8>, Refused>, ToolError> {
        let inv = Invocation {
            executable: &self.cfg.executable,
            socket_path: &self.cfg.socket_path,
            remove_env: self.remove_env,
        };
        let mut args = vec!["agent".to_string(), c.verb.word().to_string()];
        args.extend(rest.iter().map(|s| s.to_string()));
        let _herdr = self.trace.phase(crate::usage::Phase::Herdr);
        let deadline = Deadline::after("herdr", Duration::from_millis(self.cfg.deadline_ms));
        let finished = run::run(&inv, &args, &deadline).map_err(|e| errors::runner(c, e))?;
        match answer::ended(finished) {
            Ended::Ok(out) => Ok(Ok(out)),
            Ended::Refused(r) => Ok(Err(r)),
            Ended::Odd(o) => Err(errors::odd(c, &o)),
        }
    }

    /// A run whose every refusal is an error.
    fn ok(&self, c: &Call, rest: &[&str]) -> Result<Vec<u8>, ToolError> {
        self.run(c, rest)?.map_err(|r| errors::refused(c, &r))
    }
}

/// The answer's agent, if it is the configured one.
fn this(c: &Call, id: &str, a: Result<Agent, String>) -> Result<Agent, ToolError> {
    let a = a.map_err(|e| errors::invalid(c, &e))?;
    match a.is(id) {
        true => Ok(a),
        false => Err(errors::invalid(c, "the answer is about another agent")),
    }
}

fn done(message: String, text: String, data: Value) -> ToolOutput {
    ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(TOOL, format!("{TOOL} herdr {message}"), data),
    }
}

fn list(h: &Herdr, targets: &BTreeMap<String, String>) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::List, None);
    let agents = answer::list(&h.ok(&c, &[])?).map_err(|e| errors::invalid(&c, &e))?;
    let mut entries = Vec::new();
    let mut text = String::new();
    let mut bytes = 0;
    for (alias, id) in targets.iter().take(config::MAX_TARGETS) {
        // Only configured targets are reported; other agents are never shown.
        let entry = match agents.iter().find(|a| a.is(id)) {
            Some(a) => json!({"target": alias, "present": true,
                              "agent_status": a.status, "agent": a.kind()}),
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

fn get(h: &Herdr, alias: &str, id: &str) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::Get, Some(alias));
    let a = this(&c, id, answer::one(Verb::Get, &h.ok(&c, &[id])?))?;
    let text = format!("{alias}: {} ({})\n", a.status, a.kind());
    let data = json!({"backend": "herdr", "target": alias, "agent_status": a.status,
                      "agent": a.kind(), "herdr": a.raw});
    Ok(done(format!("get: {alias}"), text, data))
}

fn explain(h: &Herdr, alias: &str, id: &str) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::Explain, Some(alias));
    let (e, state) =
        answer::explain(&h.ok(&c, &[id, "--json"])?).map_err(|e| errors::invalid(&c, &e))?;
    let text = format!("{alias}: {state}\n");
    let data = json!({"backend": "herdr", "target": alias, "agent_status": state, "herdr": e});
    Ok(done(format!("explain: {alias}"), text, data))
}

fn read(
    h: &Herdr,
    alias: &str,
    id: &str,
    source: &str,
    lines: u64,
) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::Read, Some(alias));
    let n = lines.to_string();
    let out = h.ok(&c, &[id, "--source", source, "--lines", &n])?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let data = json!({"backend": "herdr", "target": alias, "source": source,
                      "lines_requested": lines, "bytes": text.len(), "text": text});
    Ok(done(format!("read: {alias}"), text, data))
}

fn prompt(h: &Herdr, alias: &str, id: &str, text: &str) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::Prompt, Some(alias));
    // The text is one argument after the target; Herdr reads it verbatim, also when it
    // starts with `-`.
    let a = this(&c, id, answer::one(Verb::Prompt, &h.ok(&c, &[id, text])?))?;
    let data = json!({"backend": "herdr", "target": alias, "input_sent": true,
                      "submission": "acknowledged", "task_completion": "not_observed",
                      "agent_status": a.status});
    let msg = format!(
        "Herdr acknowledged the prompt to {alias} ({}); use get, read or wait to follow its work\n",
        a.status
    );
    Ok(done(format!("prompt: {alias}"), msg, data))
}

fn wait(
    h: &Herdr,
    alias: &str,
    id: &str,
    states: &[&str],
    ms: u64,
) -> Result<ToolOutput, ToolError> {
    let c = h.call(Verb::Wait, Some(alias));
    // The operation deadline caps the wait; Herdr's own timeout ends a little earlier so
    // that its answer, not the kill, normally ends the call.
    let cap = h
        .cfg
        .deadline_ms
        .saturating_sub(h.cfg.deadline_ms / 10)
        .max(1);
    let waited = ms.min(cap).max(1);
    let waited_s = waited.to_string();
    let mut rest = vec![id];
    for s in states {
        rest.extend(["--until", s]);
    }
    rest.extend(["--timeout", &waited_s]);
    let until = match states.is_empty() {
        true => DEFAULT_UNTIL,
        false => states,
    };
    let (outcome, status) = match h.run(&c, &rest)? {
        Ok(out) => (
            "reached",
            this(&c, id, answer::one(Verb::Wait, &out))?.status,
        ),
        Err(r) if r.code == "timeout" => ("timed_out", "unknown"),
        Err(r) => return Err(errors::refused(&c, &r)),
    };
    let text = match outcome {
        "reached" => format!("{alias} is {status}\n"),
        _ => format!(
            "{alias} did not reach {} within {waited} ms\n",
            until.join("|")
        ),
    };
    let mut data = json!({"backend": "herdr", "target": alias, "until": until,
                          "outcome": outcome, "timeout_ms": waited});
    if outcome == "reached" {
        data["agent_status"] = json!(status);
    }
    Ok(done(format!("wait: {alias} {outcome}"), text, data))
}
