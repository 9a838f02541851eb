//! Return-final agent requests over authenticated HTTP: two principals never see each
//! other's agents, requests or terminal events, even in one workspace under one external
//! thread id (issue 15, "two principals over MCP").

use crate::support;
use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use std::time::Duration;
use support::manifest_dir;
use support::wait::{Deadline, eventually};

const R1: &str = "5b2c7d1e-3f4a-4b5c-9d6e-7f8a9b0c1d2e";

fn pair(s: &Server, token: &str, ws: &str) -> Value {
    let first = json!({"type": "first_call", "workspace_root": ws, "thread_id": "shared-id"});
    let d = s.call(token, "Initialize", first)["structuredContent"]["data"].clone();
    json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]})
}

fn agent(s: &Server, token: &str, p: &Value, action: Value) -> Value {
    let mut args = p.clone();
    args["action"] = action;
    s.call(token, "Agent", args)["structuredContent"].clone()
}

#[test]
fn two_principals_never_see_each_others_requests() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let codex_home = home.path("codex-home");
    let log = home.path("codex.log");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let pa = pair(&s, &alice, &ws);
    let mut args = pa.clone();
    args["action_json"] = json!({"command": format!(
        "CODEX_HOME={} python3 {} {}",
        codex_home.display(),
        manifest_dir().join("tests/fake/fake-codex").display(),
        log.display()
    )});
    args["wait_for_seconds"] = json!(0.2);
    let r = s.call(&alice, "BashCommand", args);
    assert_eq!(r["structuredContent"]["status"], "running", "{r}");
    let d = Deadline::after("alice's agent is idle", Duration::from_secs(20));
    let agents = eventually(
        d,
        "one idle agent in alice's catalog",
        || agent(&s, &alice, &pa, json!({"type": "catalog"}))["data"]["agents"].clone(),
        |a| a[0]["state"] == "idle",
    );
    let target = agents[0].clone();
    let admit = json!({"type": "admit", "target": target["agent_id"],
        "incarnation": target["incarnation"], "request_id": R1, "text": "for alice",
        "return_final": true});
    let r = agent(&s, &alice, &pa, admit.clone());
    assert_eq!(r["data"]["receipt_class"], "accepted", "{r}");
    let w = agent(
        &s,
        &alice,
        &pa,
        json!({"type": "request", "op": "watch", "timeout_seconds": 20}),
    );
    assert_eq!(
        w["data"]["events"][0]["final_message"], "final: for alice",
        "{w}"
    );

    // Bob, same workspace, same external thread id: no agent, no request, no event.
    let pb = pair(&s, &bob, &ws);
    let c = agent(&s, &bob, &pb, json!({"type": "catalog"}));
    assert_eq!(c["data"]["agents"], json!([]), "{c}");
    for op in ["get", "cancel"] {
        let r = agent(
            &s,
            &bob,
            &pb,
            json!({"type": "request", "op": op, "request_id": R1}),
        );
        assert_eq!(r["errorCode"], "agent_receipt_not_found", "{op}: {r}");
    }
    let w = agent(&s, &bob, &pb, json!({"type": "request", "op": "watch"}));
    assert_eq!(w["data"]["events"], json!([]), "{w}");
    // His admission of her agent (ids copied from her catalog) finds nothing to write to.
    let r = agent(&s, &bob, &pb, admit);
    assert_eq!(r["errorCode"], "agent_request_rejected", "{r}");
    assert_eq!(r["data"]["receipt_class"], "unavailable");
    assert_eq!(r["data"]["prompt_written"], false);
    // Hers is untouched.
    let g = agent(
        &s,
        &alice,
        &pa,
        json!({"type": "request", "op": "get", "request_id": R1}),
    );
    assert_eq!(g["data"]["terminal"]["state"], "completed", "{g}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().collect::<Vec<_>>(), ["for alice"]);
}
