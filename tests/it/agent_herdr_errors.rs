//! `Agent` with `backend: herdr`: each of Herdr 0.8.2's refusals and errors, and each
//! answer outside its reference, maps to one winx `errorCode` with `input_sent` and a
//! next action — through the real binary and `tests/fake/herdr`.

use crate::support::herdr as herdr_support;

use herdr_support::*;
use serde_json::{Value, json};

/// `errorCode`, `data.herdr_code`, `data.input_sent` and the next action's `action.type`.
fn mapped(v: &Value) -> (String, String, Value, String) {
    let s = |x: &Value| x.as_str().unwrap_or("").to_string();
    assert_eq!(v["nextAction"]["tool"], "Agent", "{v}");
    assert_eq!(v["nextAction"]["arguments"]["backend"], "herdr", "{v}");
    (
        s(&v["errorCode"]),
        s(&v["data"]["herdr_code"]),
        v["data"]["input_sent"].clone(),
        s(&v["nextAction"]["arguments"]["action"]["type"]),
    )
}

#[test]
fn herdr_refusals_and_errors_map_to_winx_codes_with_a_next_action() {
    let mut r = Rig::new();
    r.configure(5000);
    let m = |c: &str, h: &str, sent: Value, next: &str| {
        (c.to_string(), h.to_string(), sent, next.to_string())
    };
    // A blocked agent: Herdr refuses and sends nothing; look at the dialog.
    let v = r.herdr(json!({"type": "prompt", "target": "rev", "text": "go on"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_not_ready",
            "agent_blocked",
            json!(false),
            "read"
        ),
        "{v}"
    );
    assert_eq!(
        v["nextAction"]["arguments"]["action"],
        json!({"type": "read", "target": "rev", "source": "visible"})
    );
    assert!(
        r.world()["agents"][1].get("prompts").is_none(),
        "nothing was typed"
    );
    // Not ready (still starting, or not the foreground agent).
    r.edit(|w| w["agents"][0]["ready"] = json!(false));
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "go on"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_not_ready",
            "agent_not_ready",
            json!(false),
            "get"
        ),
        "{v}"
    );
    assert_eq!(v["retryable"], true, "{v}");
    // Alternate-screen history while busy.
    r.edit(|w| {
        w["agents"][0]["alt_screen"] = json!(true);
        w["agents"][0]["agent_status"] = json!("working");
    });
    let v = r.herdr(json!({"type": "read", "target": "writer"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_not_ready",
            "agent_not_idle",
            json!(false),
            "read"
        ),
        "{v}"
    );
    // A wait that does not settle in time is an answer, not an error.
    let v = r.herdr(
        json!({"type": "wait", "target": "writer", "until": "idle", "timeout_seconds": 0.2}),
    );
    assert_eq!(
        (&v["status"], &v["data"]["outcome"]),
        (&json!("completed"), &json!("timed_out")),
        "{v}"
    );
    // No agent there; an agent that ends during the wait; an ambiguous name.
    let v = r.herdr(json!({"type": "get", "target": "gone"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_unavailable",
            "agent_not_found",
            json!(false),
            "list"
        ),
        "{v}"
    );
    r.edit(|w| w["agents"][0]["exits_on_wait"] = json!(true));
    let v = r.herdr(json!({"type": "wait", "target": "writer"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_unavailable",
            "agent_not_running",
            json!(false),
            "list"
        ),
        "{v}"
    );
    r.edit(|w| w["agents"][2]["name"] = json!("reviewer"));
    let v = r.herdr(json!({"type": "get", "target": "rev"}));
    assert_eq!(
        mapped(&v),
        m(
            "agent_target_unavailable",
            "agent_target_ambiguous",
            json!(false),
            "list"
        ),
        "{v}"
    );
    assert!(
        !v.to_string().contains("w9:p9"),
        "the other candidate stays hidden: {v}"
    );
    // The server: not running (no socket), or from another protocol version.
    r.set_world(&world());
    std::fs::remove_file(r.dir.path().join("sock")).unwrap();
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(
        mapped(&v),
        m(
            "herdr_unavailable",
            "server_not_running",
            json!(false),
            "list"
        ),
        "{v}"
    );
    assert_eq!(v["data"]["operator_action_required"], true, "{v}");
    assert!(!v.to_string().contains("sock"), "no socket path: {v}");
    r.set_world(&world());
    r.fault("protocol_mismatch");
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(mapped(&v).0, "herdr_unavailable", "{v}");
    // Exits and answers outside the reference.
    r.fault("usage");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "x"}));
    assert_eq!(
        (&v["errorCode"], &v["data"]["exit_code"]),
        (&json!("herdr_failed"), &json!(2)),
        "{v}"
    );
    assert_eq!(
        v["data"]["input_sent"], false,
        "a usage error sends nothing: {v}"
    );
    r.fault("crash");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "x"}));
    assert_eq!(
        mapped(&v),
        m("herdr_failed", "", json!("unknown"), "read"),
        "{v}"
    );
    assert!(v["message"].as_str().unwrap().contains("fake crash"), "{v}");
    r.fault("garbage");
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "invalid_herdr_response", "{v}");
    r.fault("stranger");
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(v["errorCode"], "invalid_herdr_response", "{v}");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "x"}));
    assert_eq!(
        (&v["errorCode"], &v["data"]["input_sent"]),
        (&json!("invalid_herdr_response"), &json!("unknown")),
        "{v}"
    );
    only_agent_commands(&r);
}
