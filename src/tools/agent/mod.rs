//! The `Agent` tool (seed 000, issue 14): observe or prompt a native execution
//! (`backend: native`, the default) or an operator-configured Herdr target
//! (`backend: herdr`). Native observations are the `Execution` actions answered as
//! `Agent` (same catalog, sources, cursors and paging); `get` and `explain` add
//! conversation-recovery advice. Observation needs no `BashCommand`; `prompt` needs a
//! principal that permits `BashCommand` and a `wcgw` session.

pub mod advice;
pub mod herdr;
mod prompt;
mod requests;

use super::ToolContext;
use super::envelope::{Status, ToolOutput};
use super::error::ToolError;
use super::error_code::ErrorCode;
use super::execution;
use super::name::ToolName;
use serde_json::{Map, Value, json};

pub(crate) const TOOL: ToolName = ToolName::Agent;
pub(crate) const FIELDS: &[&str] = &["thread_id", "workspace_root", "backend", "action"];
const ACTIONS: &[&str] = &[
    "list", "get", "read", "explain", "wait", "prompt", "catalog", "admit", "request",
];
/// The return-final request actions (issue 15; native only).
const REQUEST_ACTIONS: &[&str] = &["catalog", "admit", "request"];
/// Prompt text bound (seed 000).
pub const MAX_PROMPT_BYTES: usize = 16 * 1024;
const MAX_PROMPT_ID: usize = 128;

fn bad(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.into(),
    }
}

/// An `Agent` failure with its own code (mapped in `tools/error.rs`).
pub(crate) fn fail(
    code: ErrorCode,
    status: Status,
    retryable: bool,
    message: String,
    data: Value,
) -> ToolError {
    ToolError::Agent {
        code,
        status,
        retryable,
        message,
        data,
    }
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    answer(ctx, map).map_err(|e| e.with_call(map))
}

fn answer(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let herdr = match map.get("backend") {
        None => false,
        Some(v) if v == "native" => false,
        Some(v) if v == "herdr" => true,
        Some(_) => return Err(bad("backend must be \"native\" or \"herdr\"")),
    };
    let map = &normalise(map, herdr)?;
    let (action, kind) = super::execution::action_of(map, ACTIONS)?;
    if REQUEST_ACTIONS.contains(&kind) {
        if herdr {
            return Err(bad(format!(
                "{kind} is for Codex agents in winx sessions (backend native)"
            )));
        }
        return requests::call(ctx, map, kind, action);
    }
    match herdr {
        true => herdr::actions::call(ctx, map, kind, action),
        false => native(ctx, map, kind, action),
    }
}

/// The call in its nested form, made once before anything reads it. The seed's flat form
/// (`action` a string, the action's fields beside it) becomes `action: {type, …}`, and the
/// target gets the name its action reads: `target` and `execution_id` are aliases on every
/// action (a native `wait` without `prompt_id` watches `execution_ids: [target]`).
fn normalise(map: &Map<String, Value>, herdr: bool) -> Result<Map<String, Value>, ToolError> {
    let (mut out, mut action): (Map<String, Value>, Map<String, Value>) = match map.get("action") {
        Some(Value::String(kind)) => {
            let (top, mut fields): (Map<String, Value>, Map<String, Value>) = map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .partition(|(k, _)| FIELDS.contains(&k.as_str()));
            if fields.contains_key("type") {
                return Err(bad(
                    "the flat form names the action in action (a string); drop type, or nest \
                     the fields as action: {type, ...}",
                ));
            }
            fields.insert("type".into(), Value::String(kind.clone()));
            (top, fields)
        }
        Some(Value::Object(a)) => (map.clone(), a.clone()),
        // Missing or of another type: `action_of` says what is expected.
        _ => return Ok(map.clone()),
    };
    let kind = action.get("type").and_then(Value::as_str).unwrap_or("");
    let canonical = match (herdr, kind) {
        (false, "get" | "read" | "explain") => "execution_id",
        (false, "wait") if !action.contains_key("prompt_id") => "execution_ids",
        _ => "target",
    };
    let named: Vec<Value> = ["target", "execution_id"]
        .iter()
        .filter_map(|k| action.remove(*k))
        .collect();
    let id = match named.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        [a, b] if a == b => Some(a.clone()),
        _ => {
            return Err(bad(
                "target and execution_id are aliases of one argument; give one of them",
            ));
        }
    };
    if let Some(id) = id {
        if canonical == "execution_ids" {
            if action.contains_key("execution_ids") {
                return Err(bad(
                    "give target (one id) or execution_ids (several), not both",
                ));
            }
            action.insert(canonical.into(), Value::Array(vec![id]));
        } else {
            action.insert(canonical.into(), id);
        }
    }
    out.insert("action".into(), Value::Object(action));
    Ok(out)
}

fn native(
    ctx: &ToolContext,
    map: &Map<String, Value>,
    kind: &str,
    action: &Map<String, Value>,
) -> Result<ToolOutput, ToolError> {
    if kind == "prompt" {
        let p = parse_prompt(action)?;
        let (_, binding) = super::session_args(ctx, map, FIELDS)?;
        may_prompt(ctx, &binding)?;
        let x = execution::open(ctx, &binding, TOOL)?;
        return prompt::prompt(ctx, &x, &p);
    }
    if kind == "wait" && action.contains_key("prompt_id") {
        let p = parse_receipt_wait(action)?;
        let (_, binding) = super::session_args(ctx, map, FIELDS)?;
        let x = execution::open(ctx, &binding, TOOL)?;
        return prompt::wait(ctx, &x, &p);
    }
    let parsed = execution::parse(kind, action, ctx.wait_profile)?;
    let deadline = parsed.deadline();
    let (_, binding) = super::session_args(ctx, map, FIELDS)?;
    let x = execution::open_within(ctx, &binding, TOOL, &deadline)?;
    let mut out = execution::run(ctx, &x, parsed, &deadline)?;
    let data = &mut out.envelope.data;
    let command = match kind {
        "get" => data["command"].as_str().map(str::to_string),
        "explain" => data["execution"]["command"].as_str().map(str::to_string),
        _ => None,
    };
    if let Some(c) = command {
        let recovery = advice::render(&c);
        if let Some(r) = recovery["recommended_command"].as_str() {
            out.text.push_str(&format!(
                "recovery ({}, unverified): {r}\n",
                recovery["advice"].as_str().unwrap_or("")
            ));
        }
        out.envelope.data["recovery"] = recovery;
    }
    Ok(out)
}

/// A native prompt's checked arguments.
pub struct PromptArgs {
    pub target: String,
    pub prompt_id: String,
    /// `None` for a receipt wait, which sends nothing.
    pub text: Option<String>,
    pub recognizer: Option<String>,
    pub timeout_seconds: f64,
    /// A receipt wait ends once activity is observed (`until: "activity"`), rather than
    /// when the outcome leaves `waiting`.
    pub until_activity: bool,
}

fn prompt_id(v: Option<&Value>) -> Result<String, ToolError> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| bad("prompt_id is required (a string you choose, unique per prompt)"))?;
    let ok = (1..=MAX_PROMPT_ID).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if !ok {
        return Err(bad(format!(
            "prompt_id must be 1..={MAX_PROMPT_ID} characters of A-Z a-z 0-9 . _ : -"
        )));
    }
    Ok(s.to_string())
}

/// Prompt text: a non-empty string of at most 16 KiB without NUL bytes.
pub(crate) fn prompt_text(v: Option<&Value>) -> Result<String, ToolError> {
    let s = v
        .and_then(Value::as_str)
        .ok_or_else(|| bad("text is required (a string)"))?;
    if s.is_empty() || s.len() > MAX_PROMPT_BYTES {
        return Err(bad(format!(
            "text must be 1..={MAX_PROMPT_BYTES} bytes; it is {}",
            s.len()
        )));
    }
    if s.contains('\0') {
        return Err(bad("text must not contain NUL bytes"));
    }
    Ok(s.to_string())
}

/// `timeout_seconds` (or its synonym `wait_seconds`) of a prompt: a number 0..=30.
fn inline_wait(action: &Map<String, Value>) -> Result<f64, ToolError> {
    // `null` is the default, as if the field were absent.
    let given = |k: &str| action.get(k).filter(|v| !v.is_null());
    let v = match (given("timeout_seconds"), given("wait_seconds")) {
        (Some(_), Some(_)) => {
            return Err(bad("give timeout_seconds or wait_seconds, not both"));
        }
        (Some(v), None) | (None, Some(v)) => v,
        (None, None) => return Ok(0.0),
    };
    v.as_f64()
        .filter(|s| s.is_finite() && (0.0..=30.0).contains(s))
        .ok_or_else(|| {
            bad("timeout_seconds must be a number 0..=30 (inline waits are capped at 30 s)")
        })
}

fn recognizer(action: &Map<String, Value>) -> Result<Option<String>, ToolError> {
    match action.get("recognizer") {
        None => Ok(None),
        Some(v) => {
            let name = v
                .as_str()
                .ok_or_else(|| bad("recognizer must be a string"))?;
            match crate::shell::turn::Choice::parse(name).map_err(bad)? {
                // Readiness is checked in the guardian, which has no operator rule file.
                crate::shell::turn::Choice::Configurable => Err(bad(
                    "native prompts check readiness with auto, generic, claude_code or codex; \
                     configurable rules are not available to the guardian",
                )),
                _ => Ok(Some(name.to_string())),
            }
        }
    }
}

pub fn parse_prompt(action: &Map<String, Value>) -> Result<PromptArgs, ToolError> {
    let allowed = [
        "target",
        "prompt_id",
        "text",
        "recognizer",
        "timeout_seconds",
        "wait_seconds",
    ];
    execution::only(action, &allowed)?;
    Ok(PromptArgs {
        target: execution::execution_id(action.get("target"), "target")?,
        prompt_id: prompt_id(action.get("prompt_id"))?,
        text: Some(prompt_text(action.get("text"))?),
        recognizer: recognizer(action)?,
        timeout_seconds: inline_wait(action)?,
        until_activity: false,
    })
}

fn parse_receipt_wait(action: &Map<String, Value>) -> Result<PromptArgs, ToolError> {
    let allowed = ["target", "prompt_id", "timeout_seconds", "until"];
    execution::only(action, &allowed)?;
    let until_activity = match action.get("until") {
        None => false,
        Some(v) if v == "outcome" => false,
        Some(v) if v == "activity" => true,
        Some(_) => return Err(bad("until must be \"outcome\" (default) or \"activity\"")),
    };
    Ok(PromptArgs {
        target: execution::execution_id(action.get("target"), "target")?,
        prompt_id: prompt_id(action.get("prompt_id"))?,
        text: None,
        recognizer: None,
        timeout_seconds: inline_wait(action)?,
        until_activity,
    })
}

/// May this call send input to an agent? The principal must permit `BashCommand` and
/// the session must be in `wcgw` mode: `architect` and `code_writer` sessions cannot
/// delegate unrestricted input (seed 000).
pub(crate) fn may_prompt(
    ctx: &ToolContext,
    binding: &crate::session::Binding,
) -> Result<(), ToolError> {
    let refuse = |why: String| {
        fail(
            ErrorCode::PolicyBlocked,
            Status::PolicyBlocked,
            false,
            format!("Agent prompt refused: {why}; nothing was sent"),
            json!({"input_sent": false}),
        )
    };
    if !ctx.policy.permits(ToolName::BashCommand) {
        return Err(refuse(
            "prompting needs BashCommand, which this principal's tool policy does not permit"
                .into(),
        ));
    }
    if !matches!(binding.mode, crate::session::Mode::Wcgw) {
        return Err(refuse(
            "prompting needs a wcgw session; architect and code_writer sessions cannot \
             delegate unrestricted input (ask the user to change the mode with Initialize)"
                .into(),
        ));
    }
    Ok(())
}
