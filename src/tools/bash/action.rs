//! Parsing `BashCommand` arguments into a typed action and wait.
//!
//! Invariant: `action_json` is an object (or a JSON string encoding one); anything else is
//! refused and never executed as shell text.

use crate::shell::keys;
use crate::tools::args::{Args, MAX_LIST_ITEMS, MAX_STRING_ARG_BYTES, type_name};
use crate::tools::error::ToolError;
use serde_json::{Map, Value};
use std::borrow::Cow;

pub const FIELDS: &[&str] = &[
    "thread_id",
    "workspace_root",
    "action_json",
    "wait_for_seconds",
    "wait_policy",
];
pub const POLICIES: &[&str] = &["adaptive", "return_early", "until_complete"];

/// Default waits, in seconds, when `wait_for_seconds` is absent. A foreground command waits
/// long enough for ordinary builds to finish inline; input actions only until the program
/// has answered.
const DEFAULT_COMMAND_WAIT: f64 = 20.0;
const DEFAULT_STATUS_WAIT: f64 = 10.0;
const DEFAULT_INPUT_WAIT: f64 = 3.0;
const DEFAULT_TURN_WAIT: f64 = 30.0;
/// Upper bound of any inline wait: below the 60 s request timeout of common clients (both
/// TypeScript SDKs) with margin, so the agent gets "still running; use status_check"
/// rather than a client-side timeout; and far below the HTTP request timeout (120 s).
pub const MAX_WAIT_SECONDS: f64 = 50.0;
/// `return_early` never waits longer than this (seed 003).
pub const RETURN_EARLY_CAP_SECONDS: f64 = 5.0;
/// After input, answer once output has been quiet this long (interactive programs).
pub const INPUT_SETTLE_MS: u64 = 300;

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Command {
        command: String,
        background: bool,
    },
    StatusCheck {
        bg: Option<String>,
    },
    Input {
        bytes: Vec<u8>,
        bg: Option<String>,
        text_as_command: Option<String>,
    },
    Screen {
        lines: Option<usize>,
        diff: bool,
    },
    /// Turn recognition of the program in the foreground: `inspect` reports it now,
    /// `wait_for_turn` waits until it awaits input or approval (or ends).
    Turn {
        wait: bool,
        recognizer: String,
    },
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Command { .. } => "command",
            Action::StatusCheck { .. } => "status_check",
            Action::Input { .. } => "input",
            Action::Screen { .. } => "screen",
            Action::Turn { wait: true, .. } => "wait_for_turn",
            Action::Turn { wait: false, .. } => "inspect",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaitPlan {
    pub timeout_ms: u64,
    pub settle_ms: Option<u64>,
}

fn bad(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.into(),
    }
}

const SHAPES: &str = "{\"command\": str, \"is_background\"?: bool} | {\"status_check\": true, \"bg_command_id\"?: str} | \
{\"send_text\": str, \"submit\"?: bool} | {\"send_specials\": [key]} | {\"send_ascii\": [int]} | \
{\"screen\": true, \"lines\"?: int, \"diff\"?: bool} | {\"wait_for_turn\": true, \"recognizer\"?: str} | \
{\"inspect\": true, \"recognizer\"?: str}";

/// Parse `action_json`: the one rule for what an action is, read by the tool and by the
/// stdio lane choice (`mcp::lane`). An object is read in place, not copied.
pub fn parse_action(v: Option<&Value>) -> Result<Action, ToolError> {
    let obj: Cow<Map<String, Value>> = match v {
        Some(Value::Object(o)) => Cow::Borrowed(o),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Cow::Owned(o),
            _ => {
                return Err(bad(format!(
                    "action_json is a string that is not a JSON object; it is never run as a command. Expected one of {SHAPES}"
                )));
            }
        },
        Some(other) => {
            return Err(bad(format!(
                "action_json must be an object, got {}",
                type_name(other)
            )));
        }
        None => {
            return Err(bad(format!(
                "missing action_json; expected one of {SHAPES}"
            )));
        }
    };
    let kinds: Vec<&str> = [
        "command",
        "status_check",
        "send_text",
        "send_specials",
        "send_ascii",
        "screen",
        "wait_for_turn",
        "inspect",
    ]
    .into_iter()
    .filter(|k| obj.contains_key(*k))
    .collect();
    let [kind] = kinds[..] else {
        return Err(bad(format!(
            "action_json needs exactly one action; expected one of {SHAPES}"
        )));
    };
    let allowed: &[&str] = match kind {
        "command" => &["command", "is_background"],
        "status_check" => &["status_check", "bg_command_id"],
        "send_text" => &["send_text", "submit", "bg_command_id"],
        "send_specials" => &["send_specials", "bg_command_id"],
        "send_ascii" => &["send_ascii", "bg_command_id"],
        "wait_for_turn" => &["wait_for_turn", "recognizer"],
        "inspect" => &["inspect", "recognizer"],
        _ => &["screen", "lines", "diff"],
    };
    let a = Args::strict(&obj, allowed)?;
    let bg = a.opt_str("bg_command_id")?.map(str::to_string);
    let flag = |k: &str| match obj.get(k) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(o) => Err(bad(format!("{k} must be a boolean, got {}", type_name(o)))),
    };
    Ok(match kind {
        "wait_for_turn" | "inspect" => {
            let recognizer = a.opt_str("recognizer")?.unwrap_or("auto");
            crate::shell::turn::Choice::parse(recognizer).map_err(bad)?;
            Action::Turn {
                wait: kind == "wait_for_turn",
                recognizer: recognizer.to_string(),
            }
        }
        "command" => {
            let command = a.req_str("command")?;
            if command.contains('\0') {
                return Err(bad("command contains a NUL byte"));
            }
            if command.trim().is_empty() {
                return Err(bad("command is empty"));
            }
            Action::Command {
                command: command.to_string(),
                background: flag("is_background")?,
            }
        }
        "status_check" => Action::StatusCheck { bg },
        "send_text" => {
            let text = a.req_str("send_text")?;
            if text.contains('\0') {
                return Err(bad("send_text contains a NUL byte"));
            }
            let mut bytes = text.as_bytes().to_vec();
            if flag("submit")? {
                bytes.push(b'\n');
            }
            Action::Input {
                bytes,
                bg,
                text_as_command: Some(text.to_string()),
            }
        }
        "send_specials" => {
            let names = a.opt_str_list("send_specials")?.unwrap_or_default();
            if names.is_empty() {
                return Err(bad("send_specials needs at least one key"));
            }
            let mut bytes = Vec::new();
            for n in &names {
                let b = keys::bytes(n).ok_or_else(|| {
                    bad(format!(
                        "unknown special key {n:?}; expected one of {}",
                        keys::NAMES.join(", ")
                    ))
                })?;
                bytes.extend_from_slice(b);
            }
            Action::Input {
                bytes,
                bg,
                text_as_command: None,
            }
        }
        "send_ascii" => {
            let Some(Value::Array(codes)) = obj.get("send_ascii") else {
                return Err(bad("send_ascii must be a list of integers 1..=127"));
            };
            if codes.is_empty() || codes.len() > MAX_LIST_ITEMS {
                return Err(bad(format!("send_ascii needs 1..={MAX_LIST_ITEMS} codes")));
            }
            let bytes = codes
                .iter()
                .map(|c| match c.as_u64() {
                    Some(n @ 1..=127) => Ok(n as u8),
                    _ => Err(bad(format!(
                        "send_ascii codes must be integers 1..=127, got {c}"
                    ))),
                })
                .collect::<Result<Vec<u8>, _>>()?;
            Action::Input {
                bytes,
                bg,
                text_as_command: None,
            }
        }
        _ => {
            let lines = match obj.get("lines") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| bad("lines must be an integer 1..=1000"))?
                        as usize,
                ),
            };
            Action::Screen {
                lines,
                diff: flag("diff")?,
            }
        }
    })
}

/// Resolve `wait_for_seconds` and `wait_policy` for an action; `None` when the policy is
/// `until_complete` and the action is not a foreground command.
pub fn plan_wait(action: &Action, policy: &str, seconds: Option<f64>) -> Option<WaitPlan> {
    let foreground = matches!(
        action,
        Action::Command {
            background: false,
            ..
        }
    );
    if policy == "until_complete" && !foreground {
        return None;
    }
    let default = match action {
        Action::Command { .. } => DEFAULT_COMMAND_WAIT,
        Action::StatusCheck { .. } => DEFAULT_STATUS_WAIT,
        Action::Input { .. } => DEFAULT_INPUT_WAIT,
        Action::Screen { .. } | Action::Turn { wait: false, .. } => 0.0,
        Action::Turn { wait: true, .. } => DEFAULT_TURN_WAIT,
    };
    let secs = match policy {
        "until_complete" => MAX_WAIT_SECONDS,
        "return_early" => seconds.unwrap_or(default).min(RETURN_EARLY_CAP_SECONDS),
        _ => seconds.unwrap_or(default).min(MAX_WAIT_SECONDS),
    };
    // A background start answers at once unless the caller asked to wait.
    let secs = match action {
        Action::Command {
            background: true, ..
        } if seconds.is_none() => 0.0,
        _ => secs,
    };
    Some(WaitPlan {
        timeout_ms: (secs.max(0.0) * 1000.0) as u64,
        settle_ms: matches!(action, Action::Input { .. }).then_some(INPUT_SETTLE_MS),
    })
}

/// Read `wait_for_seconds`: a finite, non-negative number.
pub fn wait_seconds(map: &Map<String, Value>) -> Result<Option<f64>, ToolError> {
    match map.get("wait_for_seconds") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(s)),
            _ => Err(bad("wait_for_seconds must be a non-negative number")),
        },
    }
}

/// Bound the size of text-carrying input, for a clear error before anything is written.
pub fn check_sizes(action: &Action) -> Result<(), ToolError> {
    match action {
        Action::Input { bytes, .. } if bytes.len() > MAX_STRING_ARG_BYTES => Err(bad(format!(
            "input is longer than {MAX_STRING_ARG_BYTES} bytes"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        assert_eq!(
            parse_action(Some(&json!({"command": "ls"}))).unwrap(),
            Action::Command {
                command: "ls".into(),
                background: false
            }
        );
        assert_eq!(
            parse_action(Some(&json!(
                "{\"command\": \"ls\", \"is_background\": true}"
            )))
            .unwrap(),
            Action::Command {
                command: "ls".into(),
                background: true
            }
        );
        assert!(
            matches!(parse_action(Some(&json!({"send_specials": ["Ctrl-d"]}))).unwrap(),
            Action::Input { bytes, .. } if bytes == b"\x04")
        );
        assert!(
            parse_action(Some(&json!("ls -la"))).is_err(),
            "text is never run"
        );
        assert!(parse_action(Some(&json!({"command": "ls", "status_check": true}))).is_err());
        assert!(parse_action(Some(&json!({"command": "a\u{0}b"}))).is_err());
        assert!(parse_action(Some(&json!({"send_ascii": [0]}))).is_err());
        assert!(parse_action(Some(&json!({"send_specials": ["Ctrl-q"]}))).is_err());
        assert!(parse_action(Some(&json!({"command": "ls", "extra": 1}))).is_err());
        assert!(parse_action(None).is_err());
    }

    #[test]
    fn waits_follow_policy() {
        let fg = Action::Command {
            command: "x".into(),
            background: false,
        };
        let st = Action::StatusCheck { bg: None };
        assert_eq!(plan_wait(&fg, "adaptive", None).unwrap().timeout_ms, 20_000);
        assert_eq!(
            plan_wait(&fg, "return_early", Some(30.0))
                .unwrap()
                .timeout_ms,
            5_000
        );
        assert_eq!(
            plan_wait(&fg, "until_complete", Some(1.0))
                .unwrap()
                .timeout_ms,
            50_000
        );
        assert_eq!(
            plan_wait(&fg, "adaptive", Some(500.0)).unwrap().timeout_ms,
            50_000
        );
        assert!(plan_wait(&st, "until_complete", None).is_none());
    }
}
