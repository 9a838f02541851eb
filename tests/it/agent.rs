//! The `Agent` tool's native backend through the real binary: observations over the
//! execution history answered as `Agent`, conversation-recovery advice, and the checks a
//! native prompt passes before anything is sent (receipts: `tests/it/agent_prompt.rs`).

use crate::support;

use serde_json::{Value, json};
use support::history::{id_of, spawn_with, until_recorded};
use support::{Agent, manifest_dir, sc};

both_runtimes!(
    native_observations_follow_a_bash_command,
    get_advises_recovery_of_an_explicit_claude_launch,
);

fn agent(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Agent",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

fn native_observations_follow_a_bash_command(rt: &str) {
    let mut a = spawn_with(rt, &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "printf 'x\\ny\\n'; (exit 4)"})));
    until_recorded(&mut a, &s, &id);
    let r = agent(&mut a, &s, json!({"type": "list"}));
    assert_eq!(sc(&r)["tool"], "Agent", "{r}");
    assert_eq!(sc(&r)["data"]["executions"][0]["execution_id"], id.as_str());
    let cursor = sc(&r)["data"]["catalog_cursor"].clone();
    let r = agent(&mut a, &s, json!({"type": "get", "execution_id": id}));
    assert_eq!(sc(&r)["data"]["exit_code"], 4, "{r}");
    assert_eq!(sc(&r)["data"]["recovery"]["advice"], "unavailable", "{r}");
    let r = agent(&mut a, &s, json!({"type": "read", "execution_id": id}));
    assert_eq!(sc(&r)["data"]["page"]["text"], "x\ny\n", "{r}");
    let r = agent(
        &mut a,
        &s,
        json!({"type": "explain", "execution_id": id, "recognizer": "auto"}),
    );
    assert!(sc(&r)["data"]["detection"].is_object(), "{r}");
    assert!(sc(&r)["data"]["recovery"].is_object(), "{r}");
    let r = agent(
        &mut a,
        &s,
        json!({"type": "wait", "execution_ids": [id], "after": cursor, "timeout_seconds": 0}),
    );
    assert_eq!(sc(&r)["data"]["outcome"], "timeout", "{r}");
    // The BashCommand cursor was not consumed.
    let r = a.bash(&s, json!({"status_check": true}));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}

fn get_advises_recovery_of_an_explicit_claude_launch(rt: &str) {
    let mut a = spawn_with(rt, &[]);
    let s = a.first_call();
    let fake = manifest_dir().join("tests/fake/bin");
    let path = format!("export PATH={}:$PATH", fake.display());
    a.bash(&s, json!({"command": path}));
    let uuid = "123e4567-e89b-42d3-a456-426614174000";
    let launch = format!("claude --resume {uuid}");
    let r = a.bash_with(
        &s,
        json!({"command": launch}),
        json!({"wait_for_seconds": 1}),
    );
    let id = id_of(&r);
    let r = agent(&mut a, &s, json!({"type": "get", "execution_id": id}));
    let advice = &sc(&r)["data"]["recovery"];
    assert_eq!(advice["advice"], "explicit_target", "{r}");
    assert_eq!(advice["source"], "launch_argument");
    assert_eq!(advice["current_conversation_verified"], false);
    assert_eq!(
        advice["recommended_command"],
        format!("claude --resume {uuid}")
    );
    a.bash(&s, json!({"send_text": "bye", "submit": true}));
}

#[test]
fn prompt_arguments_are_checked_before_anything_is_sent() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "true"})));
    let ok = json!({"type": "prompt", "target": id, "prompt_id": "round-1", "text": "hi"});
    for (patch, what) in [
        (json!({"target": "writer"}), "not an execution id"),
        (json!({"prompt_id": "bad id!"}), "prompt_id"),
        (json!({"prompt_id": "x".repeat(129)}), "prompt_id"),
        (json!({"text": "a".repeat(16 * 1024 + 1)}), "text must be"),
        (json!({"text": "a\u{0}b"}), "NUL"),
        (json!({"timeout_seconds": 31}), "timeout_seconds"),
        (json!({"extra": 1}), "unexpected field"),
    ] {
        let mut action = ok.clone();
        for (k, v) in patch.as_object().unwrap() {
            action[k] = v.clone();
        }
        let r = agent(&mut a, &s, action);
        assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{what}: {r}");
        assert!(
            sc(&r)["message"].as_str().unwrap().contains(what),
            "{what}: {r}"
        );
    }
    // An exited target gets nothing, and leaves no receipt.
    let r = agent(&mut a, &s, ok.clone());
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    let wait = json!({"type": "wait", "target": id, "prompt_id": "round-1"});
    let r = agent(&mut a, &s, wait);
    assert_eq!(sc(&r)["errorCode"], "agent_receipt_not_found", "{r}");
    let mut configurable = ok.clone();
    configurable["recognizer"] = json!("configurable");
    let r = agent(&mut a, &s, configurable);
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    // An architect session cannot delegate input.
    let r = a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "mode": "architect",
               "thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"]}),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    let r = agent(&mut a, &s, ok);
    assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    // Observation still works there.
    let r = agent(&mut a, &s, json!({"type": "get", "execution_id": id}));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}

#[test]
fn observation_needs_no_bash_command_but_prompting_does() {
    let mut a = Agent::spawn_with(support::Opts {
        args: &["--allow-tool", "Initialize", "--allow-tool", "Agent"],
        env: &[("WINX_RUNTIME", "embedded")],
        ..Default::default()
    });
    let s = a.first_call();
    let r = agent(&mut a, &s, json!({"type": "list"}));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    let prompt = json!({"type": "prompt", "target": "1a-1", "prompt_id": "p", "text": "hi"});
    let r = agent(&mut a, &s, prompt);
    assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
}
