//! Herdr failures as winx errors: each of Herdr's error codes, each odd exit and each
//! runner fault becomes one `ErrorCode` with a status, whether retrying can help, whether
//! input may have reached the agent (`input_sent`: `false`, `true` or `"unknown"`), and a
//! next action the caller can take with `Agent` itself.
//!
//! | Herdr says | winx code | why |
//! |---|---|---|
//! | `agent_blocked` (prompt) | `agent_target_not_ready` | an approval or question dialog is up; Herdr sent nothing |
//! | `agent_not_ready` | `agent_target_not_ready` | not a ready agent, still launching, or not the foreground program; nothing sent |
//! | `agent_not_idle` (read) | `agent_target_not_ready` | reading alternate-screen history needs an idle agent |
//! | `agent_not_found`, `agent_name_not_found`, `agent_not_running`, `agent_explain_unavailable`, `agent_target_ambiguous` | `agent_target_unavailable` | no single agent answers to the configured id now |
//! | `timeout` (not a wait) | `herdr_timeout` | Herdr's own time limit |
//! | `server_not_running`, `protocol_mismatch` | `herdr_unavailable` | the operator must start or update Herdr |
//! | `invalid_request`, `empty_agent_prompt` | `invalid_herdr_request` | Herdr rejected the request |
//! | anything else (`agent_prompt_failed`, `internal_error`, …) | `herdr_failed` | |
//!
//! A wait's `timeout` is not an error: `actions` answers it as `outcome: timed_out`.
//! Herdr's message is passed on except where it could name what the binding does not grant
//! (an ambiguous target's candidates, the server's socket path).

use super::answer::{Odd, Refused, Verb};
use super::run::RunError;
use crate::tools::envelope::{NextAction, Status};
use crate::tools::error::ToolError;
use crate::tools::error_code::ErrorCode;
use crate::tools::refusal::Refusal;
use serde_json::{Value, json};

/// Herdr's message is cut to this many characters.
const MAX_HERDR_MESSAGE: usize = 256;

/// What a failure is about: the caller's session pair (for next actions), the target
/// alias (`None` for `list`) and the command that ran.
pub struct Call<'a> {
    pub thread_id: &'a str,
    pub workspace_root: &'a str,
    pub alias: Option<&'a str>,
    pub verb: Verb,
    pub deadline_ms: u64,
}

/// One failure, before it becomes a `ToolError`.
struct Failure {
    code: ErrorCode,
    status: Status,
    retryable: bool,
    message: String,
    data: Value,
    next: Option<(String, Value)>,
}

impl Call<'_> {
    /// `input_sent` when a prompt run ended in a way that does not say: `"unknown"`.
    fn sent(&self) -> Value {
        match self.verb {
            Verb::Prompt => json!("unknown"),
            _ => json!(false),
        }
    }

    fn target(&self) -> &str {
        self.alias.unwrap_or("")
    }

    /// An `Agent` action on this call's target (or `list` without one).
    fn action(&self, kind: &str, extra: Value) -> Value {
        let mut a = json!({"type": kind});
        if let (Some(alias), true) = (self.alias, kind != "list") {
            a["target"] = json!(alias);
        }
        if let Value::Object(m) = extra {
            a.as_object_mut().expect("object").extend(m);
        }
        a
    }

    fn finish(&self, f: Failure) -> ToolError {
        let next = f.next.map(|(instruction, action)| NextAction {
            tool: "Agent".into(),
            instruction,
            arguments: json!({"thread_id": self.thread_id, "workspace_root": self.workspace_root,
                              "backend": "herdr", "action": action}),
        });
        let mut data = f.data;
        data["backend"] = json!("herdr");
        if let Some(alias) = self.alias {
            data["target"] = json!(alias);
        }
        ToolError::Temporary(Box::new(Refusal {
            code: f.code,
            status: f.status,
            retryable: f.retryable,
            message: f.message,
            data,
            next,
        }))
    }
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_HERDR_MESSAGE).collect()
}

/// Herdr's error envelope as a winx error.
pub fn refused(c: &Call, r: &Refused) -> ToolError {
    let t = c.target();
    let verb = c.verb.word();
    let private = matches!(
        r.code.as_str(),
        "agent_target_ambiguous" | "server_not_running" | "protocol_mismatch"
    );
    let said = match private {
        true => String::new(),
        false => format!(" (Herdr: {})", cut(&r.message)),
    };
    let mut data = json!({"input_sent": false, "herdr_code": r.code});
    if !private {
        data["herdr_message"] = json!(cut(&r.message));
    }
    let (code, status, retryable, message, next) = match r.code.as_str() {
        "agent_blocked" => (
            ErrorCode::AgentTargetNotReady,
            Status::Failed,
            false,
            format!(
                "Herdr refused to {verb}: {t} is blocked on an approval or question dialog; nothing was sent{said}"
            ),
            (
                "Look at the dialog; it needs an answer from a person (winx sends no keys). Prompt again once the agent is idle.",
                c.action("read", json!({"source": "visible"})),
            ),
        ),
        "agent_not_ready" => (
            ErrorCode::AgentTargetNotReady,
            Status::Failed,
            true,
            format!(
                "Herdr refused to {verb}: {t} is not ready for input (still starting, or no longer the pane's foreground agent); nothing was sent{said}"
            ),
            (
                "Check the target's state before trying again.",
                c.action("get", json!({})),
            ),
        ),
        "agent_not_idle" => (
            ErrorCode::AgentTargetNotReady,
            Status::Failed,
            true,
            format!("Herdr cannot {verb} {t}'s history while it is busy{said}"),
            (
                "Read the visible screen instead, or wait until the agent is idle and read again.",
                c.action("read", json!({"source": "visible"})),
            ),
        ),
        "agent_not_found"
        | "agent_name_not_found"
        | "agent_not_running"
        | "agent_explain_unavailable"
        | "agent_target_ambiguous" => (
            ErrorCode::AgentTargetUnavailable,
            Status::Failed,
            false,
            format!(
                "no single Herdr agent answers to {t} now ({}); nothing was sent{said}",
                r.code
            ),
            (
                "See which configured targets have an agent now.",
                c.action("list", json!({})),
            ),
        ),
        "timeout" => (
            ErrorCode::HerdrTimeout,
            Status::Failed,
            true,
            format!("Herdr timed out on {verb}{said}"),
            ("Try the same call again.", c.action(verb, json!({}))),
        ),
        "server_not_running" | "protocol_mismatch" => {
            data["operator_action_required"] = json!(true);
            (
                ErrorCode::HerdrUnavailable,
                Status::Failed,
                r.code == "server_not_running",
                format!(
                    "the Herdr server is not usable ({}): ask the operator to start it, or to restart it after an upgrade; nothing was sent",
                    r.code
                ),
                (
                    "Once the operator has started Herdr, list the targets again.",
                    c.action("list", json!({})),
                ),
            )
        }
        "invalid_request" | "empty_agent_prompt" => (
            ErrorCode::InvalidHerdrRequest,
            Status::InvalidInput,
            false,
            format!("Herdr rejected the {verb} request{said}"),
            (
                "Check the target; if this repeats, tell the operator that winx and Herdr disagree about the request.",
                c.action("get", json!({})),
            ),
        ),
        _ => {
            data["input_sent"] = c.sent();
            (
                ErrorCode::HerdrFailed,
                Status::Failed,
                false,
                format!("Herdr failed to {verb} ({}){said}", r.code),
                inspect(c),
            )
        }
    };
    c.finish(Failure {
        code,
        status,
        retryable,
        message,
        data,
        next: Some((next.0.to_string(), next.1)),
    })
}

/// What to do after a failure that may or may not have delivered a prompt.
fn inspect(c: &Call) -> (&'static str, Value) {
    match (c.verb, c.alias) {
        (Verb::Prompt, _) => (
            "Read the target to see whether the prompt arrived; never resend it blindly.",
            c.action("read", json!({})),
        ),
        (_, Some(_)) => ("Check the target's state.", c.action("get", json!({}))),
        (_, None) => ("List the targets again.", c.action("list", json!({}))),
    }
}

/// A run that ended neither in success nor in Herdr's error envelope.
pub fn odd(c: &Call, o: &Odd) -> ToolError {
    let verb = c.verb.word();
    let (message, data) = match o {
        Odd::Usage { stderr } => (
            format!(
                "Herdr did not accept `herdr agent {verb}` (exit 2: {stderr}); winx drives Herdr 0.8's agent commands: ask the operator to check the installed Herdr; nothing was sent"
            ),
            json!({"input_sent": false, "exit_code": 2, "operator_action_required": true}),
        ),
        Odd::Unexplained { stderr } => (
            format!("Herdr exited with code 1 without an error answer: {stderr}"),
            json!({"input_sent": c.sent(), "exit_code": 1}),
        ),
        Odd::Exit { code, stderr } => (
            format!(
                "Herdr exited unsuccessfully (code {}): {stderr}",
                code.map(|c| c.to_string())
                    .unwrap_or_else(|| "none: a signal".into())
            ),
            json!({"input_sent": c.sent(), "exit_code": code}),
        ),
    };
    let (i, a) = inspect(c);
    c.finish(Failure {
        code: ErrorCode::HerdrFailed,
        status: Status::Failed,
        retryable: false,
        message,
        data,
        next: Some((i.into(), a)),
    })
}

/// A success whose answer does not have the documented shape.
pub fn invalid(c: &Call, detail: &str) -> ToolError {
    let sent = match c.verb {
        // Herdr exited 0: it says it sent the prompt, but its answer cannot be checked.
        Verb::Prompt => json!("unknown"),
        _ => json!(false),
    };
    let (i, a) = inspect(c);
    c.finish(Failure {
        code: ErrorCode::InvalidHerdrResponse,
        status: Status::Failed,
        retryable: false,
        message: format!(
            "Herdr answered `agent {}` with something this adapter cannot use: {detail}",
            c.verb.word()
        ),
        data: json!({"input_sent": sent}),
        next: Some((i.into(), a)),
    })
}

/// A run the runner had to stop, or could not start.
pub fn runner(c: &Call, e: RunError) -> ToolError {
    let ms = c.deadline_ms;
    let f = match e {
        RunError::Spawn(e) => Failure {
            code: ErrorCode::HerdrUnavailable,
            status: Status::Failed,
            retryable: true,
            message: format!("the Herdr executable could not be started: {e}"),
            data: json!({"input_sent": false, "operator_action_required": true}),
            next: Some((
                "Once the operator has fixed the Herdr installation, list the targets again."
                    .into(),
                c.action("list", json!({})),
            )),
        },
        RunError::Timeout if c.verb == Verb::Prompt => Failure {
            code: ErrorCode::HerdrDeliveryUncertain,
            status: Status::Failed,
            retryable: false,
            message: format!(
                "the Herdr prompt did not finish within {ms} ms and was stopped; the text may \
                 or may not have been delivered. It is never resent: inspect the target \
                 before deciding what to do"
            ),
            data: json!({"input_sent": "unknown", "delivery": "uncertain", "deadline_ms": ms}),
            next: Some(inspect(c)).map(|(i, a)| (i.to_string(), a)),
        },
        RunError::Timeout => Failure {
            code: ErrorCode::HerdrTimeout,
            status: Status::Failed,
            retryable: true,
            message: format!("Herdr did not answer within {ms} ms; its process group was stopped"),
            data: json!({"input_sent": false, "deadline_ms": ms}),
            next: Some((
                "Try the same call again.".into(),
                c.action(c.verb.word(), json!({})),
            )),
        },
        RunError::OutputLimit { stream, limit } => Failure {
            code: ErrorCode::HerdrOutputLimit,
            status: Status::Failed,
            retryable: false,
            message: format!("Herdr wrote more than {limit} bytes to {stream}; it was stopped"),
            data: json!({"input_sent": c.sent(), "stream": stream, "limit_bytes": limit}),
            next: Some(match c.verb {
                Verb::Read => ("Read fewer lines.", c.action("read", json!({"lines": 20}))),
                _ => inspect(c),
            })
            .map(|(i, a)| (i.to_string(), a)),
        },
    };
    c.finish(f)
}
