//! Return-final agent requests through MCP `Agent` actions (`catalog`, `admit`,
//! `request get|cancel|watch`), against a fake Codex in a winx session; the CLI and MCP
//! share one principal's requests (stdio's principal is `local`, as the CLI's), and two
//! admissions of one request id at once write once.

use crate::support;

use serde_json::{Value, json};
use support::codex::Codex;
use support::pair_args;

const R1: &str = "3d6f0a2b-1c4e-4f5a-8b9c-0d1e2f3a4b5c";
const R2: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
const R3: &str = "c0ffee00-1234-4abc-9def-001122334455";

fn agent_call(c: &mut Codex, action: Value) -> Value {
    let s = c.s.clone();
    c.a.call("Agent", pair_args(&s, json!({"action": action})))
}

fn admit(c: &mut Codex, agent: &Value, id: &str, text: &str, extra: Value) -> Value {
    let mut action = json!({"type": "admit", "target": agent["agent_id"],
        "incarnation": agent["incarnation"], "request_id": id, "text": text});
    for (k, v) in extra.as_object().unwrap() {
        action[k] = v.clone();
    }
    agent_call(c, action)
}

fn data(r: &Value) -> &Value {
    &r["structuredContent"]["data"]
}

fn code(r: &Value) -> &str {
    r["structuredContent"]["errorCode"].as_str().unwrap_or("")
}

#[test]
fn mcp_admits_once_returns_the_final_and_shares_requests_with_the_cli() {
    let mut c = Codex::start("");
    let cli = c.agent_in("idle");
    // The caller's session catalog shows the same agent as the operator's.
    let r = agent_call(&mut c, json!({"type": "catalog"}));
    let agents = data(&r)["agents"].as_array().cloned().unwrap_or_default();
    assert_eq!(agents.len(), 1, "{r}");
    let agent = agents[0].clone();
    assert_eq!(agent["agent_id"], cli["agent_id"]);
    assert_eq!(agent["incarnation"], cli["incarnation"]);
    assert_eq!(data(&r)["capabilities"]["capabilities_version"], 1);
    // Admit with return_final: accepted, armed.
    let r = admit(
        &mut c,
        &agent,
        R1,
        "work:20 summarise",
        json!({"return_final": true}),
    );
    let d = data(&r).clone();
    assert_eq!(d["receipt_class"], "accepted", "{r}");
    assert_eq!(d["prompt_written"], true);
    assert_eq!(d["reply_pending"], true);
    assert!(d["armed_cursor"].as_u64().unwrap() > 0, "{d}");
    // The final arrives on the stream; an inline watch waits for it.
    let w = agent_call(
        &mut c,
        json!({"type": "request", "op": "watch", "after": 0, "timeout_seconds": 20}),
    );
    let events = data(&w)["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(events.len(), 1, "{w}");
    assert_eq!(events[0]["request_id"], R1);
    assert_eq!(events[0]["state"], "completed");
    assert_eq!(events[0]["final_message"], "final: work:20 summarise");
    let seq = events[0]["terminal_event_sequence"].as_i64().unwrap();
    assert_eq!(data(&w)["next_after"], seq);
    // Nothing more after it (an immediate answer with no wait).
    let w = agent_call(
        &mut c,
        json!({"type": "request", "op": "watch", "after": seq}),
    );
    assert_eq!(data(&w)["events"], json!([]), "{w}");
    // Repeating the admission replays the receipt; the CLI sees the same request, and
    // its admission of the same id with the same input replays too: one write in all.
    let again = admit(
        &mut c,
        &agent,
        R1,
        "work:20 summarise",
        json!({"return_final": true}),
    );
    assert_eq!(data(&again)["replayed"], true, "{again}");
    let (g, code_) = c.agent(&["request", "get", R1]);
    assert_eq!(code_, 0);
    assert_eq!(g["terminal"]["terminal_event_sequence"], seq, "{g}");
    let (cli_again, _) = c.admit(&agent, R1, "work:20 summarise", &["--return-final"]);
    assert_eq!(cli_again["replayed"], true, "{cli_again}");
    assert_eq!(c.lines(), ["work:20 summarise"]);
    // Same id, other input: rejected with the receipt, nothing written.
    let other = admit(&mut c, &agent, R1, "something else", json!({}));
    assert_eq!(code(&other), "agent_request_rejected", "{other}");
    assert_eq!(data(&other)["receipt_class"], "invalid");
    assert_eq!(data(&other)["prompt_written"], false);
    // get and cancel of a terminal request: the terminal event stays, cancel is a no-op.
    let g = agent_call(
        &mut c,
        json!({"type": "request", "op": "get", "request_id": R1}),
    );
    assert_eq!(data(&g)["state"], "terminal", "{g}");
    assert_eq!(data(&g)["terminal"]["state"], "completed");
    let x = agent_call(
        &mut c,
        json!({"type": "request", "op": "cancel", "request_id": R1}),
    );
    assert_eq!(data(&x)["cancelled"], false, "{x}");
    // An unknown id, a stale incarnation, bad arguments: structured, nothing written.
    let g = agent_call(
        &mut c,
        json!({"type": "request", "op": "get", "request_id": R3}),
    );
    assert_eq!(code(&g), "agent_receipt_not_found", "{g}");
    let mut stale = agent.clone();
    stale["incarnation"] = json!("0123456789abcdef01234567");
    let r = admit(&mut c, &stale, R2, "work:1 hello", json!({}));
    assert_eq!(code(&r), "agent_request_rejected", "{r}");
    assert_eq!(data(&r)["receipt_class"], "stale_incarnation");
    for (action, why) in [
        (
            json!({"type": "admit", "target": "x", "incarnation": "y", "request_id": "nope", "text": "t"}),
            "request_id",
        ),
        (
            json!({"type": "admit", "target": "x", "incarnation": "y", "request_id": R3, "text": "t", "return_final": "yes"}),
            "return_final",
        ),
        (
            json!({"type": "request", "op": "watch", "timeout_seconds": 31}),
            "timeout_seconds",
        ),
        (json!({"type": "request", "op": "drop"}), "op"),
        (json!({"type": "catalog", "extra": 1}), "extra"),
    ] {
        let r = agent_call(&mut c, action.clone());
        assert_eq!(code(&r), "invalid_tool_input", "{action}: {r}");
        assert!(r.to_string().contains(why), "{action}: {r}");
    }
    let s = c.s.clone();
    let r = c.a.call(
        "Agent",
        pair_args(
            &s,
            json!({"backend": "herdr", "action": {"type": "catalog"}}),
        ),
    );
    assert_eq!(code(&r), "invalid_tool_input", "{r}");
    assert_eq!(c.lines(), ["work:20 summarise"]);
}

#[test]
fn two_admissions_of_one_id_at_once_write_once() {
    let c = Codex::start("");
    let agent = c.agent_in("idle");
    let (a, b) = std::thread::scope(|s| {
        let one = s.spawn(|| c.admit(&agent, R2, "work:1 once", &["--return-final"]));
        let two = s.spawn(|| c.admit(&agent, R2, "work:1 once", &["--return-final"]));
        (one.join().unwrap(), two.join().unwrap())
    });
    let receipts = [&a.0, &b.0];
    let fresh: Vec<_> = receipts.iter().filter(|r| r["replayed"] != true).collect();
    assert_eq!(fresh.len(), 1, "exactly one admission wrote: {a:?} {b:?}");
    assert_eq!(fresh[0]["receipt_class"], "accepted", "{a:?} {b:?}");
    // The other found the registration: the stored receipt, or (while the first was
    // still writing) an indeterminate answer that never writes.
    for r in receipts.iter().filter(|r| r["replayed"] == true) {
        assert!(
            r["receipt_class"] == "accepted" || r["receipt_class"] == "indeterminate",
            "{r}"
        );
    }
    let w = c.watch(0);
    assert_eq!(w.next()["state"], "completed");
    assert_eq!(c.lines(), ["work:1 once"]);
}
