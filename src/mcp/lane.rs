//! Which worker lane a request runs on, so long waits can never hold up cheap and control
//! requests (`ping`, task lookups, cancellations, a `BashCommand` status check, Ctrl-C).
//! Pure: a function of the parsed request.

use crate::jsonrpc::Request;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Answered from memory, never waits on a shell: lifecycle, lists, task lookups.
    Control,
    /// Drives or observes a running command (`status_check`, input, keys, screen): waits
    /// are short and bounded, and an interrupt must not queue behind the command it stops.
    Interactive,
    /// Everything that may wait long: commands, edits with checks, `tasks/result`.
    Work,
}

/// Methods answered from memory. Anything else — `tasks/result` (may wait for a task),
/// `prompts/get` (runs `git ls-files`, asks a guardian for its snapshot), methods added
/// later — runs on the work lane unless listed here.
const CONTROL: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/read",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
];

pub fn classify(req: &Request) -> Lane {
    match req.method.as_str() {
        "tools/call" => tool_lane(&req.params),
        m if CONTROL.contains(&m) => Lane::Control,
        _ => Lane::Work,
    }
}

fn tool_lane(params: &serde_json::Map<String, Value>) -> Lane {
    if params.get("name").and_then(Value::as_str) != Some("BashCommand") {
        return Lane::Work;
    }
    let action = params.get("arguments").and_then(|a| a.get("action_json"));
    let parsed;
    let action = match action {
        Some(Value::String(text)) => {
            parsed = serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
            &parsed
        }
        Some(v) => v,
        None => return Lane::Work,
    };
    match action.as_object() {
        Some(a) if !a.contains_key("command") && !a.is_empty() => Lane::Interactive,
        _ => Lane::Work,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;
    use serde_json::json;

    fn req(method: &str, params: Value) -> Request {
        Request {
            id: Id::Num(1),
            method: method.into(),
            params: params.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn lanes() {
        assert_eq!(classify(&req("ping", json!({}))), Lane::Control);
        assert_eq!(classify(&req("tasks/get", json!({}))), Lane::Control);
        assert_eq!(classify(&req("tasks/result", json!({}))), Lane::Work);
        assert_eq!(classify(&req("some/new_method", json!({}))), Lane::Work);
        assert_eq!(classify(&req("prompts/get", json!({}))), Lane::Work);
        assert_eq!(classify(&req("resources/read", json!({}))), Lane::Control);
        let bash = |action: Value| {
            req(
                "tools/call",
                json!({"name": "BashCommand", "arguments": {"action_json": action}}),
            )
        };
        assert_eq!(classify(&bash(json!({"command": "make"}))), Lane::Work);
        assert_eq!(
            classify(&bash(json!({"send_specials": ["Ctrl-c"]}))),
            Lane::Interactive
        );
        assert_eq!(
            classify(&bash(json!("{\"status_check\": true}"))),
            Lane::Interactive
        );
        assert_eq!(classify(&bash(json!("not json"))), Lane::Work);
        let edit = req(
            "tools/call",
            json!({"name": "FileWriteOrEdit", "arguments": {}}),
        );
        assert_eq!(classify(&edit), Lane::Work);
    }
}
