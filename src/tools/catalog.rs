//! Tool definitions for `tools/list`: compact descriptions, input schemas (JSON Schema
//! 2020-12, the MCP default dialect), the shared output schema and annotations.
//!
//! Budget: the complete `full` catalog must stay under `CATALOG_BUDGET_BYTES` of JSON;
//! a test enforces it. Every byte here is paid by every agent on every session.

use super::envelope::output_schema;
use super::name::ToolName;
use serde_json::{Value, json};

/// Upper bound for the serialised `tools/list` answer of the `full` profile.
pub const CATALOG_BUDGET_BYTES: usize = 18 * 1024;

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
    let mut def = schema(name);
    if task_capable(name) {
        def["execution"] = json!({"taskSupport": "optional"});
    }
    def
}

/// Tools that may run as an MCP Task: the ones that can wait on a shell command.
pub fn task_capable(name: ToolName) -> bool {
    matches!(
        name,
        ToolName::BashCommand
            | ToolName::FileWriteOrEdit
            | ToolName::MultiFileEdit
            | ToolName::ApplyPatch
            | ToolName::EditFiles
            | ToolName::VerifyEdit
    )
}

fn schema(name: ToolName) -> Value {
    match name {
        ToolName::Initialize => initialize(),
        ToolName::BashCommand => bash_command(),
        ToolName::ReadFiles => read_files(),
        ToolName::ReadImage => read_image(),
        ToolName::FileWriteOrEdit => file_write_or_edit(),
        ToolName::MultiFileEdit => multi_file_edit(),
        ToolName::ApplyPatch => apply_patch(),
        ToolName::EditFiles => edit_files(),
        ToolName::UndoEdit => undo_edit(),
        ToolName::VerifyEdit => verify_edit(),
        ToolName::ContextSave => context_save(),
        ToolName::Execution => execution(),
        ToolName::CodeMap => code_map(),
        ToolName::Agent => agent(),
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
            "task_id_to_resume": {"type": "string", "description": "Resume a task saved with ContextSave"},
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
            // It binds a session and creates winx's own scratch directory; it deletes and
            // overwrites nothing of the user's (reset_shell ends only the processes of
            // the session's own shell, which the agent started).
            destructive: false,
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
            "anyOf": [{"type": "object"}, {"type": "string"}],
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

fn read_files() -> Value {
    let props = json!({
        "file_paths": {"type": "array", "items": {"type": "string"}, "minItems": 1,
            "description": "Absolute or workspace-relative paths; optional :A-B, :A-, :-B or :A line ranges"},
    });
    tool(
        ToolName::ReadFiles,
        "Read files with line numbers. Returns each file's sha256 revision and the ranges shown; a read is the permit to edit those lines. Batch related files in one call.",
        bound(
            props.as_object().cloned().unwrap_or_default(),
            &["file_paths"],
        ),
        Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    )
}

fn read_image() -> Value {
    let props = json!({
        "file_path": {"type": "string"},
        "force": {"type": "boolean", "description": "Send the bytes even if this session already received this image"},
    });
    tool(
        ToolName::ReadImage,
        "View a JPEG, PNG, GIF or WebP file as image content. Large images are resized to at most 2560 px and 2 MiB; an unchanged repeat returns a short reference.",
        bound(
            props.as_object().cloned().unwrap_or_default(),
            &["file_path"],
        ),
        Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    )
}

/// Optional post-edit check shared by the edit tools.
fn verify_props(props: &mut serde_json::Map<String, Value>) {
    props.insert(
        "verify_command".into(),
        json!({"type": "string", "description": "Command run after a successful commit"}),
    );
    props.insert(
        "verify_wait_for_seconds".into(),
        json!({"type": "number", "minimum": 0, "maximum": 50}),
    );
}

fn file_write_or_edit() -> Value {
    let mut props = json!({
        "file_path": {"type": "string"},
        "percentage_to_change": {"type": "number", "minimum": 0, "maximum": 100},
        "text_or_search_replace_blocks": {"type": "string",
            "description": "Whole new content, or blocks: <<<<<<< SEARCH / old lines / ======= / new lines / >>>>>>> REPLACE"},
    })
    .as_object()
    .cloned()
    .unwrap_or_default();
    verify_props(&mut props);
    tool(
        ToolName::FileWriteOrEdit,
        "Create or edit one file. Use SEARCH/REPLACE blocks for edits (read the lines first); whole content for new files or rewrites. Atomic; never half-written.",
        bound(props, &["file_path", "text_or_search_replace_blocks"]),
        Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        },
    )
}

fn edit_tool(
    name: ToolName,
    description: &str,
    mut props: serde_json::Map<String, Value>,
    required: &[&str],
) -> Value {
    verify_props(&mut props);
    tool(
        name,
        description,
        bound(props, required),
        Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        },
    )
}

fn patches_schema() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "start_line": {"type": "integer", "minimum": 1}, "delete_lines": {"type": "integer", "minimum": 0},
        "replacement": {"type": "string"}}, "required": ["start_line", "delete_lines"]}})
}

fn multi_file_edit() -> Value {
    let props = json!({"edits": {"type": "array", "items": {"type": "object", "properties": {
        "file_path": {"type": "string"}, "text_or_search_replace_blocks": {"type": "string"}},
        "required": ["file_path", "text_or_search_replace_blocks"]}}});
    edit_tool(
        ToolName::MultiFileEdit,
        "Edit several files all-or-nothing: every file is planned first; if any fails (unread lines, SEARCH conflict) nothing is written.",
        props.as_object().cloned().unwrap_or_default(),
        &["edits"],
    )
}

fn apply_patch() -> Value {
    let props = json!({"file_path": {"type": "string"}, "expected_revision": {"type": "string", "description": "sha256 revision from ReadFiles"},
        "patches": patches_schema()});
    edit_tool(
        ToolName::ApplyPatch,
        "Replace line ranges of one file against the revision you read (compare-and-swap). Patches are ordered and non-overlapping.",
        props.as_object().cloned().unwrap_or_default(),
        &["file_path", "expected_revision", "patches"],
    )
}

fn edit_files() -> Value {
    let props = json!({"files": {"type": "array", "items": {"type": "object", "properties": {
            "file_path": {"type": "string"}, "mode": {"enum": ["replace", "search_replace", "line_patch"]},
            "content": {"type": "string"}, "search_replace": {"type": "string"}, "patches": patches_schema(),
            "expected_revision": {"type": "string"}}, "required": ["file_path"]}},
        "operation": {"enum": ["apply", "undo"]},
        "release_temporary": {"type": "object", "description": "Alone: delete helpers of $WINX_TEMP_DIR {generation, files:[{path, revision}]}"}});
    edit_tool(
        ToolName::EditFiles,
        "Unified edit entry point: per file replace, search_replace blocks or line_patch (with expected_revision); all-or-nothing.",
        props.as_object().cloned().unwrap_or_default(),
        &[],
    )
}

fn undo_edit() -> Value {
    let props = json!({"file_path": {"type": "string", "description": "Undo the latest edit of this file (default: the latest edit)"}});
    tool(
        ToolName::UndoEdit,
        "Undo this session's latest committed edit (or the latest edit of file_path); refused if the file changed since.",
        bound(props.as_object().cloned().unwrap_or_default(), &[]),
        Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        },
    )
}

fn context_save() -> Value {
    let props = json!({
        "id": {"type": "string", "description": "Task id to resume later with Initialize task_id_to_resume"},
        "project_root_path": {"type": "string"},
        "description": {"type": "string"},
        "relevant_file_globs": {"type": "array", "items": {"type": "string"}},
    });
    tool(
        ToolName::ContextSave,
        "Save a task memory (description plus the matched files, capped and redacted) that a new conversation resumes with Initialize task_id_to_resume.",
        bound(
            props.as_object().cloned().unwrap_or_default(),
            &["id", "description"],
        ),
        Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    )
}

fn execution() -> Value {
    let id = json!({"type": "string"});
    let props = json!({"action": {
        "type": "object",
        "description": "list {limit} | get {execution_id} | explain {execution_id, recognizer} | read {execution_id, source output|screen|detection, page_bytes, cursor} | observe {items [{execution_id, source, page_bytes, cursor}], timeout_seconds} | wait {execution_ids, after, events, timeout_seconds}",
        "properties": {
            "type": {"type": "string", "enum": ["list", "get", "explain", "read", "observe", "wait"]},
            "execution_id": id,
            "execution_ids": {"type": "array", "items": id},
        },
        "required": ["type"],
    }});
    tool(
        ToolName::Execution,
        "History of this session's commands: list, get, page output/screen by cursor, observe several, wait for changes. Read-only.",
        bound(props.as_object().cloned().unwrap_or_default(), &["action"]),
        Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    )
}

/// Kept to the bone: `tools/list` has little room left (`CATALOG_BUDGET_BYTES`); the
/// description says what each argument is for.
fn code_map() -> Value {
    let s = json!({"type": "string"});
    let props = json!({
        "operation": {"enum": ["outline", "references"]},
        "path": s, "query": s, "name": s, "cursor": s,
    });
    tool(
        ToolName::CodeMap,
        "Before broad reads: outline a file (definitions with line ranges) or directory (files ranked by query; cursor pages); references of name, definitions first.",
        bound(
            props.as_object().cloned().unwrap_or_default(),
            &["operation"],
        ),
        Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    )
}

/// `action` is an object `{type, …}` or, in the seed's flat form, a string with the
/// action's fields beside it: listed here, typed when they are not strings (hosts that
/// type an untyped property take it for a string), else `{}`; their rules are the
/// action's. One description for both backends; an `anyOf` per backend or per action
/// would cost far more of the catalog budget.
fn agent() -> Value {
    let mut props = serde_json::Map::new();
    for (field, kind) in AGENT_FLAT_FIELDS {
        let schema = match kind {
            Some(k) => json!({"type": k}),
            None => json!({}),
        };
        props.insert((*field).into(), schema);
    }
    props.insert("backend".into(), json!({"enum": ["native", "herdr"]}));
    props.insert("action".into(), json!({
        "anyOf": [{"type": "object"}, {"type": "string"}],
        "description": "{type, ...fields}, or flat: type as a string, fields beside it. target = execution_id. native: list; get/read/explain/wait as Execution; prompt {target, prompt_id, text, recognizer, timeout_seconds} sends once to a program awaiting input; wait {target, prompt_id, until outcome|activity}: its receipt; catalog; admit {target, incarnation, request_id, text, return_final, final_timeout_ms, paste}; request {op get|cancel|watch, request_id, after}. herdr (target: alias): list, get, explain, read {lines}, prompt {text}, wait {until idle|working|blocked|done|unknown}",
    }));
    tool(
        ToolName::Agent,
        "Observe or prompt a coding agent: a native execution (Execution's catalog, plus recovery advice on get/explain) or an operator-configured Herdr target. prompt needs BashCommand and wcgw.",
        bound(props, &["action"]),
        Annotations {
            read_only: false,
            // Observation changes nothing; a prompt or admit adds a turn to another
            // agent's conversation (overwriting nothing), and that agent acts on the world.
            destructive: false,
            idempotent: false,
            open_world: true,
        },
    )
}

/// Every field an `Agent` action reads, allowed beside a flat `action` string, with its
/// JSON type when it is not a string (`after` and `until` take two types).
pub const AGENT_FLAT_FIELDS: &[(&str, Option<&str>)] = &[
    ("target", None),
    ("execution_id", None),
    ("prompt_id", None),
    ("text", None),
    ("recognizer", None),
    ("timeout_seconds", Some("number")),
    ("wait_seconds", Some("number")),
    ("until", None),
    ("source", None),
    ("page_bytes", Some("integer")),
    ("cursor", None),
    ("limit", Some("integer")),
    ("execution_ids", Some("array")),
    ("after", None),
    ("events", Some("array")),
    ("incarnation", None),
    ("request_id", None),
    ("return_final", Some("boolean")),
    ("final_timeout_ms", Some("integer")),
    ("paste", None),
    ("op", None),
    ("lines", Some("integer")),
];

fn verify_edit() -> Value {
    let mut props = serde_json::Map::new();
    verify_props(&mut props);
    tool(
        ToolName::VerifyEdit,
        "Rerun only a post-edit check (a foreground command under the session's mode).",
        bound(props, &["verify_command"]),
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

    /// Portability: hosts that map schemas to a single-type dialect reject type arrays
    /// (`["object", "string"]`); every union is an `anyOf` of single types.
    #[test]
    fn no_schema_uses_a_type_array() {
        fn walk(path: &str, v: &Value) {
            match v {
                Value::Object(m) => {
                    assert!(!m.get("type").is_some_and(Value::is_array), "{path}");
                    m.iter().for_each(|(k, x)| walk(&format!("{path}.{k}"), x));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(path, x)),
                _ => {}
            }
        }
        for t in ToolName::ALL.into_iter().filter(|t| t.implemented()) {
            walk(t.as_str(), &definition(t));
        }
    }

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
