//! Tool definitions for `tools/list`: compact descriptions, input schemas (JSON Schema
//! 2020-12, the MCP default dialect), the shared output schema and annotations.
//!
//! Budget: the complete `full` catalog must stay under `CATALOG_BUDGET_BYTES` of JSON;
//! a test enforces it. Every byte here is paid by every agent on every session.

use super::envelope::output_schema;
use super::name::ToolName;
use serde_json::{Value, json};

/// Upper bound for the serialised `tools/list` answer of the `full` profile.
pub const CATALOG_BUDGET_BYTES: usize = 16 * 1024;

struct Annotations {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

fn tool(name: ToolName, description: &str, input: Value, a: Annotations) -> Value {
    json!({
        "name": name.as_str(),
        "description": description,
        "inputSchema": input,
        "outputSchema": output_schema(),
        "annotations": {
            "readOnlyHint": a.read_only,
            "destructiveHint": a.destructive,
            "idempotentHint": a.idempotent,
            "openWorldHint": a.open_world,
        },
    })
}

/// The `tools/list` entry of an implemented tool.
pub fn definition(name: ToolName) -> Value {
    match name {
        ToolName::Initialize => initialize(),
        ToolName::BashCommand => bash_command(),
        // Unimplemented tools are filtered out by `ToolPolicy::served`.
        other => json!({"name": other.as_str()}),
    }
}

fn initialize() -> Value {
    let input = json!({
        "type": "object",
        "properties": {
            "type": {"enum": ["first_call", "status", "user_asked_mode_change", "reset_shell", "user_asked_change_workspace"]},
            "workspace_root": {"type": "string", "description": "Absolute project path; for later types, the value Initialize returned"},
            "thread_id": {"type": "string", "description": "For later types: the value Initialize returned"},
            "mode": {"enum": ["wcgw", "architect", "code_writer"], "description": "Default wcgw (full access)"},
            "allowed_commands": {"type": "array", "items": {"type": "string"}, "description": "code_writer: command names, or [\"all\"]"},
            "allowed_globs": {"type": "array", "items": {"type": "string"}, "description": "code_writer: writable globs, or [\"all\"]"},
        },
        "required": ["type"],
        "additionalProperties": false,
    });
    tool(
        ToolName::Initialize,
        "Start or resume the session for a workspace. Call first with type=first_call; pass the returned thread_id and workspace_root unchanged on every later call. Other types need that pair.",
        input,
        Annotations {
            read_only: false,
            // reset_shell replaces the shell and ends whatever ran in it.
            destructive: true,
            idempotent: false,
            open_world: false,
        },
    )
}

/// An input schema for a session-bound tool: the pair is added and required.
fn bound(mut props: serde_json::Map<String, Value>, required: &[&str]) -> Value {
    props.insert("thread_id".into(), json!({"type": "string"}));
    props.insert("workspace_root".into(), json!({"type": "string"}));
    let mut req = vec!["thread_id", "workspace_root"];
    req.extend_from_slice(required);
    json!({"type": "object", "properties": props, "required": req, "additionalProperties": false})
}

fn bash_command() -> Value {
    let props = json!({
        "action_json": {
            "type": ["object", "string"],
            "description": "One of: {command, is_background?} | {status_check: true, bg_command_id?} | {send_text, submit?, bg_command_id?} | {send_specials: [Enter|Key-up|Key-down|Key-left|Key-right|Ctrl-c|Ctrl-d|Ctrl-z]} | {send_ascii: [int]} | {screen: true, lines?, diff?}"
        },
        "wait_for_seconds": {"type": "number", "minimum": 0},
        "wait_policy": {"enum": ["adaptive", "return_early", "until_complete"]},
    });
    tool(
        ToolName::BashCommand,
        "Run a command in the session's persistent shell, or observe/drive it. Returns output (tail kept, full text in a spill file), exit code and cwd. A running command returns status running: use status_check; a second foreground command is refused.",
        bound(
            props.as_object().cloned().unwrap_or_default(),
            &["action_json"],
        ),
        Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implemented_tool_has_a_full_definition() {
        for t in ToolName::ALL.into_iter().filter(|t| t.implemented()) {
            let d = definition(t);
            assert_eq!(d["name"], t.as_str());
            assert_eq!(d["inputSchema"]["type"], "object");
            assert_eq!(d["inputSchema"]["additionalProperties"], false);
            assert_eq!(d["outputSchema"]["type"], "object");
            assert!(d["description"].as_str().unwrap().len() < 400);
        }
    }
}
