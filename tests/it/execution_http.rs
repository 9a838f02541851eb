//! The execution history over authenticated HTTP: an execution id or cursor is no
//! authority across principals or workspaces (seed 000, "Discovery and authority").

use crate::support;
use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};

fn pair(s: &Server, token: &str, ws: &str, thread: Option<&str>) -> Value {
    let mut first = json!({"type": "first_call", "workspace_root": ws});
    if let Some(t) = thread {
        first["thread_id"] = json!(t);
    }
    let d = s.call(token, "Initialize", first)["structuredContent"]["data"].clone();
    json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]})
}

fn exec(s: &Server, token: &str, p: &Value, action: Value) -> Value {
    let mut args = p.clone();
    args["action"] = action;
    s.call(token, "Execution", args)["structuredContent"].clone()
}

#[test]
fn ids_and_cursors_do_not_cross_principals_or_workspaces() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let pa = pair(&s, &alice, &ws, Some("shared-id"));
    let mut args = pa.clone();
    args["action_json"] = json!({"command": "seq 1 3000"});
    let r = s.call(&alice, "BashCommand", args);
    let id = r["structuredContent"]["data"]["state"]["execution_id"].clone();
    let page = exec(
        &s,
        &alice,
        &pa,
        json!({"type": "read", "execution_id": id, "page_bytes": 64}),
    );
    assert!(
        page["data"]["page"]["text"]
            .as_str()
            .unwrap()
            .starts_with("1\n2\n"),
        "{page}"
    );
    let cursor = page["data"]["page"]["next_cursor"].clone();
    let catalog = exec(&s, &alice, &pa, json!({"type": "list"}))["data"]["catalog_cursor"].clone();

    // Bob, same workspace and the same external thread id: none of it is his.
    let pb = pair(&s, &bob, &ws, Some("shared-id"));
    for action in [
        json!({"type": "get", "execution_id": id}),
        json!({"type": "read", "execution_id": id}),
        json!({"type": "explain", "execution_id": id}),
    ] {
        let r = exec(&s, &bob, &pb, action.clone());
        assert_eq!(r["errorCode"], "execution_not_found", "{action}: {r}");
    }
    let listed = exec(&s, &bob, &pb, json!({"type": "list"}));
    assert_eq!(listed["data"]["executions"], json!([]), "{listed}");
    let r = exec(
        &s,
        &bob,
        &pb,
        json!({"type": "observe", "items": [{"execution_id": id}]}),
    );
    assert_eq!(r["data"]["items"][0]["status"], "missing", "{r}");
    // His own command, read with Alice's cursor: refused, not a read of her page.
    let mut args = pb.clone();
    args["action_json"] = json!({"command": "seq 1 3000"});
    let r = s.call(&bob, "BashCommand", args);
    let his = r["structuredContent"]["data"]["state"]["execution_id"].clone();
    let r = exec(
        &s,
        &bob,
        &pb,
        json!({"type": "read", "execution_id": his, "cursor": cursor}),
    );
    assert_eq!(r["errorCode"], "invalid_cursor", "{r}");
    let r = exec(
        &s,
        &bob,
        &pb,
        json!({"type": "wait", "execution_ids": [his], "after": catalog}),
    );
    assert_eq!(r["errorCode"], "invalid_cursor", "{r}");

    // Alice in another workspace: a separate scope too.
    let other = s.home.workspace.join("sub");
    std::fs::create_dir(&other).unwrap();
    let pa2 = pair(&s, &alice, &path_str(&other), None);
    let r = exec(&s, &alice, &pa2, json!({"type": "get", "execution_id": id}));
    assert_eq!(r["errorCode"], "execution_not_found", "{r}");
    let r = exec(
        &s,
        &alice,
        &pa2,
        json!({"type": "read", "execution_id": id, "cursor": cursor}),
    );
    assert_eq!(r["errorCode"], "execution_not_found", "{r}");
    // And in her own scope the cursor still reads on.
    let r = exec(
        &s,
        &alice,
        &pa,
        json!({"type": "read", "execution_id": id, "cursor": cursor}),
    );
    assert!(
        !r["data"]["page"]["text"].as_str().unwrap().is_empty(),
        "{r}"
    );
}

/// A native prompt's target and receipts belong to the principal (and session) that
/// prompted: another principal, same workspace and thread id, finds neither, and nothing
/// it tries reaches the program.
#[test]
fn prompt_targets_and_receipts_do_not_cross_principals() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let pa = pair(&s, &alice, &ws, Some("shared-id"));
    let log = s.home.workspace.join("codex.log");
    let fake = support::manifest_dir().join("tests/fake/fake-agent");
    let mut args = pa.clone();
    args["action_json"] =
        json!({"command": format!("python3 {} codex {}", fake.display(), log.display())});
    args["wait_for_seconds"] = json!(0.3);
    let r = s.call(&alice, "BashCommand", args);
    let id = r["structuredContent"]["data"]["state"]["execution_id"].clone();
    let mut args = pa.clone();
    args["action_json"] = json!({"wait_for_turn": true});
    let r = s.call(&alice, "BashCommand", args);
    assert_eq!(
        r["structuredContent"]["data"]["turn_state"], "awaiting_input",
        "{r}"
    );
    let agent = |token: &str, p: &Value, action: Value| {
        let mut args = p.clone();
        args["action"] = action;
        s.call(token, "Agent", args)["structuredContent"].clone()
    };
    let prompt = json!({"type": "prompt", "target": id, "prompt_id": "p1",
                        "text": "work:50 from alice", "timeout_seconds": 15});
    let r = agent(&alice, &pa, prompt.clone());
    assert_eq!(r["data"]["delivery"], "delivered", "{r}");
    assert_eq!(r["data"]["outcome"], "awaiting_input", "{r}");

    let pb = pair(&s, &bob, &ws, Some("shared-id"));
    let r = agent(&bob, &pb, prompt);
    assert_eq!(r["errorCode"], "execution_not_found", "{r}");
    let wait = json!({"type": "wait", "target": id, "prompt_id": "p1"});
    let r = agent(&bob, &pb, wait.clone());
    assert_eq!(r["errorCode"], "agent_receipt_not_found", "{r}");
    let r = agent(&alice, &pa, wait);
    assert_eq!(r["data"]["outcome"], "awaiting_input", "{r}");
    let got = std::fs::read_to_string(&log).unwrap();
    assert_eq!(got, "work:50 from alice\n");
}
