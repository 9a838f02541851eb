//! ContextSave and Initialize task_id_to_resume through the real binary.

use crate::support;

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

#[test]
fn resuming_without_a_workspace_is_keyed_by_the_saved_task() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let project = s["data"]["workspace_root"].as_str().unwrap().to_string();
    let save = |a: &mut Agent, id: &str| {
        let r = a.call(
            "ContextSave",
            json!({"thread_id": s["data"]["thread_id"], "workspace_root": project,
                   "id": id, "description": "carry on"}),
        );
        assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    };
    save(&mut a, "in-project");
    let resume = |a: &mut Agent, id: &str| {
        a.call(
            "Initialize",
            json!({"type": "first_call", "task_id_to_resume": id}),
        )["structuredContent"]["data"]
            .clone()
    };
    // No workspace given: the task's own project is the session's workspace.
    let d = resume(&mut a, "in-project");
    assert_eq!(d["workspace_root"], json!(project), "{d}");
    assert_eq!(
        d["thread_id"], s["data"]["thread_id"],
        "the same session, reattached"
    );
    // A task whose project is gone resumes in a scratch directory of its own.
    let gone = a.dir.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let g = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": gone}),
    )["structuredContent"]["data"]
        .clone();
    let r = a.call(
        "ContextSave",
        json!({"thread_id": g["thread_id"], "workspace_root": g["workspace_root"],
               "id": "orphan", "description": "project deleted"}),
    );
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    // `remove_dir_all`: Initialize made the session's `.winx/tmp` directory in it.
    std::fs::remove_dir_all(&gone).unwrap();
    let d = resume(&mut a, "orphan");
    let ws = d["workspace_root"].as_str().unwrap();
    assert!(ws.ends_with("/task-orphan"), "{d}");
    let again = resume(&mut a, "orphan");
    assert_eq!(
        again["thread_id"], d["thread_id"],
        "keyed by the task: stable"
    );
    // A plain first call without a workspace still gets the principal's shared scratch.
    let plain =
        a.call("Initialize", json!({"type": "first_call"}))["structuredContent"]["data"].clone();
    assert_ne!(plain["workspace_root"], d["workspace_root"]);
}
