//! What a request costs, one rule for both transports: stdio picks its worker lane from
//! it, so long waits can never hold up cheap and control requests (`ping`, task lookups,
//! cancellations, a `BashCommand` status check, Ctrl-C), and HTTP answers the requests
//! built from fixed data on the connection's own thread (`adapter::http::routes::inline`).
//! A `BashCommand`'s cost comes from the tool's own parse of its `action_json`
//! (`tools::bash::action::parse_action`), so the lane and the tool never disagree on what
//! an action is. Pure: a function of the parsed request.

use crate::jsonrpc::Request;
use crate::tools::bash::action::{Action, parse_action};
use serde_json::{Map, Value};

/// What answering a request costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Built from fixed data (the handshake, the catalogs, the built-in README) without a
    /// lock held elsewhere, a store, a shell or a wait: handing it to another thread costs
    /// more than answering it (two thread wake-ups per request were half the HTTP server's
    /// CPU under `ping` load).
    Fixed,
    /// Task lookups and cancellations: answered from memory or the state store, never
    /// waiting on a shell.
    Lookup,
    /// Drives or observes a running command (`status_check`, input, keys, screen, turns):
    /// waits are short and bounded, and an interrupt must not queue behind the command it
    /// stops.
    Interactive,
    /// Everything that may wait long: commands, edits with checks, `tasks/result`,
    /// `prompts/get` (runs `git ls-files`, asks a guardian for its snapshot), methods added
    /// later, and a malformed `BashCommand` (the tool refuses it at once anyway).
    Work,
}

/// Which stdio worker pool a request runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// `Cost::Fixed` and `Cost::Lookup`: answered from memory, never waits on a shell.
    Control,
    /// `Cost::Interactive`.
    Interactive,
    /// `Cost::Work`.
    Work,
}

/// The cost of `method` whatever its parameters: every method but `tools/call`, whose
/// arguments decide (`cost`), is listed here once.
pub fn method_cost(method: &str) -> Cost {
    match method {
        "ping" | "initialize" | "server/discover" | "tools/list" | "prompts/list"
        | "resources/list" | "resources/read" => Cost::Fixed,
        "tasks/get" | "tasks/list" | "tasks/cancel" | "tasks/update" => Cost::Lookup,
        _ => Cost::Work,
    }
}

/// The cost of one request.
pub fn cost(req: &Request) -> Cost {
    match req.method.as_str() {
        "tools/call" => tool_cost(&req.params),
        m => method_cost(m),
    }
}

/// The stdio lane of one request.
pub fn classify(req: &Request) -> Lane {
    match cost(req) {
        Cost::Fixed | Cost::Lookup => Lane::Control,
        Cost::Interactive => Lane::Interactive,
        Cost::Work => Lane::Work,
    }
}

/// A `BashCommand` whose action the tool accepts and that is not a command is
/// interactive; every other tool call is work.
fn tool_cost(params: &Map<String, Value>) -> Cost {
    if params.get("name").and_then(Value::as_str) != Some("BashCommand") {
        return Cost::Work;
    }
    let action = params.get("arguments").and_then(|a| a.get("action_json"));
    match parse_action(action) {
        Ok(Action::Command { .. }) | Err(_) => Cost::Work,
        Ok(_) => Cost::Interactive,
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

    fn bash(action: Value) -> Request {
        req(
            "tools/call",
            json!({"name": "BashCommand", "arguments": {"action_json": action}}),
        )
    }

    #[test]
    fn lanes() {
        assert_eq!(classify(&req("ping", json!({}))), Lane::Control);
        assert_eq!(classify(&req("tasks/get", json!({}))), Lane::Control);
        assert_eq!(classify(&req("tasks/result", json!({}))), Lane::Work);
        assert_eq!(classify(&req("some/new_method", json!({}))), Lane::Work);
        assert_eq!(classify(&req("prompts/get", json!({}))), Lane::Work);
        assert_eq!(classify(&req("resources/read", json!({}))), Lane::Control);
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
        // `tools/call` is never answered inline, whatever it calls.
        assert_eq!(method_cost("tools/call"), Cost::Work);
        assert_eq!(method_cost("tasks/cancel"), Cost::Lookup);
        assert_eq!(method_cost("tools/list"), Cost::Fixed);
    }

    /// The lane and the tool read an `action_json` alike: a request is interactive exactly
    /// when the tool accepts its action and the action is not a command. Each row names
    /// the tool's verdict (the action, or refused) so a change to either side shows here.
    #[test]
    fn the_lane_agrees_with_the_tools_parse() {
        let table: &[(Value, Option<&str>)] = &[
            (json!({"command": "make"}), Some("command")),
            (
                json!({"command": "sleep 9", "is_background": true}),
                Some("command"),
            ),
            (json!("{\"command\": \"ls\"}"), Some("command")),
            (json!({"status_check": true}), Some("status_check")),
            (
                json!({"status_check": true, "bg_command_id": "b1"}),
                Some("status_check"),
            ),
            (json!("{\"status_check\": true}"), Some("status_check")),
            (json!({"send_text": "y", "submit": true}), Some("input")),
            (json!({"send_specials": ["Ctrl-c"]}), Some("input")),
            (json!({"send_ascii": [3]}), Some("input")),
            (json!({"screen": true, "lines": 10}), Some("screen")),
            (json!({"inspect": true}), Some("inspect")),
            (json!({"wait_for_turn": true}), Some("wait_for_turn")),
            // Refused by the tool: work (answered at once with the refusal).
            (json!({"status_check": true, "extra": 1}), None),
            (json!({"command": "ls", "status_check": true}), None),
            (json!({"send_specials": []}), None),
            (json!({"send_specials": ["Ctrl-q"]}), None),
            (json!({"send_ascii": [0]}), None),
            (json!({"screen": true, "lines": 0}), None),
            (json!({"inspect": true, "recognizer": "nonesuch"}), None),
            (json!({"command": "   "}), None),
            (json!({"bogus": 1}), None),
            (json!({}), None),
            (json!("not json"), None),
            (json!("[1, 2]"), None),
            (json!("ls -la"), None),
            (json!(42), None),
            (json!([{"status_check": true}]), None),
            (Value::Null, None),
        ];
        for (action, verdict) in table {
            let parsed = parse_action(Some(action));
            assert_eq!(
                parsed.as_ref().ok().map(Action::name),
                *verdict,
                "the tool's parse of {action}"
            );
            let interactive = matches!(parsed, Ok(ref a) if a.name() != "command");
            let want = if interactive {
                Lane::Interactive
            } else {
                Lane::Work
            };
            assert_eq!(classify(&bash(action.clone())), want, "lane of {action}");
        }
        let missing = req(
            "tools/call",
            json!({"name": "BashCommand", "arguments": {}}),
        );
        assert!(parse_action(None).is_err());
        assert_eq!(classify(&missing), Lane::Work);
    }
}
