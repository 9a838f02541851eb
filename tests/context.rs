//! ContextSave and Initialize task_id_to_resume through the real binary.

mod support;

use serde_json::json;
use support::{Agent, Opts};

#[test]
fn a_saved_task_resumes_in_a_new_adapter() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::create_dir(a.workspace.join("src")).unwrap();
    std::fs::write(
        a.workspace.join("src/lib.rs"),
        "pub fn answer() -> u32 { 42 }\n",
    )
    .unwrap();
    std::fs::write(
        a.workspace.join("src/secret.rs"),
        "// token ghp_abcdefghijklmnopqrstuvwxyz0123456789\n",
    )
    .unwrap();
    std::fs::write(a.workspace.join("notes.md"), "not matched\n").unwrap();
    let r = a.call(
        "ContextSave",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "id": "fix-answer", "description": "Make answer() return 43", "relevant_file_globs": ["src/**"]}),
    );
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    assert_eq!(
        r["structuredContent"]["data"]["files"],
        json!(["src/lib.rs", "src/secret.rs"])
    );
    let mut b = Agent::spawn_with(Opts {
        state: Some(a.state.clone()),
        ..Default::default()
    });
    let ws = b.ws();
    let r = b.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws, "task_id_to_resume": "fix-answer"}),
    );
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Make answer() return 43") && text.contains("pub fn answer()"),
        "{text}"
    );
    assert!(
        !text.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "saved contents are redacted"
    );
    assert!(!text.contains("not matched"));
    assert_eq!(r["structuredContent"]["data"]["resumed_task"], "fix-answer");
    let r = b.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws, "task_id_to_resume": "nope"}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    let r = b.call(
        "Initialize",
        json!({"type": "first_call", "task_id_to_resume": "../escape"}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
}
