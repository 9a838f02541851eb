//! stdio lanes and progress through the real binary: long waits never delay `ping`, task
//! lookups or a status check of a running command, and a request with a progress token
//! hears `notifications/progress` while it waits (never after its answer).

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::tasks::{Gate, Started, bash_args, q};
use support::{Agent, Opts};

/// A session in its own workspace `name` under the agent's temp dir.
fn session(a: &mut Agent, name: &str) -> (Value, Gate) {
    let ws = a.dir.path().join(name);
    std::fs::create_dir_all(&ws).unwrap();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws.to_string_lossy()}),
    );
    (r["structuredContent"].clone(), Gate::in_dir(&ws))
}

/// Wait for the answer to `id`, passing over (and returning) everything else seen first.
fn answer_to(a: &Agent, id: i64, within: Duration) -> (Option<Value>, Vec<Value>) {
    let mut others = Vec::new();
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match a.recv_within(left) {
            Some(m) if m["id"] == json!(id) => return (Some(m), others),
            Some(m) => others.push(m),
            None => return (None, others),
        }
    }
}

#[test]
fn long_waits_never_delay_ping_or_a_status_check() {
    // Two workers, both held by commands waiting on FIFOs.
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_WORKERS", "2")],
        ..Default::default()
    });
    let mut gates = Vec::new();
    let mut held = Vec::new();
    for name in ["one", "two"] {
        let (s, gate) = session(&mut a, name);
        let started = Started::in_dir(&a.dir.path().join(name));
        let id = a.fresh_id();
        let cmd = format!(
            "echo up > {}; read x < {}; echo got-$x",
            q(&started.0),
            q(&gate.0)
        );
        a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params":
            {"name": "BashCommand", "arguments": bash_args(&s, &cmd, json!({"wait_for_seconds": 45}))}}));
        started.wait();
        gates.push((s, gate));
        held.push(id);
    }
    let ping = a.fresh_id();
    a.send(&json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}));
    let (got, mut seen) = answer_to(&a, ping, Duration::from_secs(3));
    assert!(got.is_some(), "ping waited behind long commands");
    let status = a.fresh_id();
    let (s, _) = &gates[0];
    let mut args = bash_args(s, "", json!({"wait_for_seconds": 0}));
    args["action_json"] = json!({"status_check": true});
    a.send(
        &json!({"jsonrpc": "2.0", "id": status, "method": "tools/call",
        "params": {"name": "BashCommand", "arguments": args}}),
    );
    let (got, more) = answer_to(&a, status, Duration::from_secs(5));
    seen.extend(more);
    let got = got.expect("a status check waited behind long commands");
    assert_eq!(
        got["result"]["structuredContent"]["status"], "running",
        "{got}"
    );
    // Neither held command is answered before its gate opens.
    assert!(
        seen.is_empty(),
        "answered before the gates opened: {seen:?}"
    );
    for (i, (_, gate)) in gates.iter().enumerate() {
        gate.open(&format!("w{i}"));
    }
    // The two may finish in either order: collect every answer until both are in.
    let mut answers = Vec::new();
    for &id in &held {
        if answers.iter().any(|m: &Value| m["id"] == json!(id)) {
            continue;
        }
        let (got, others) = answer_to(&a, id, Duration::from_secs(20));
        answers.extend(others);
        answers.push(got.unwrap_or_else(|| panic!("held command {id} unanswered")));
    }
    for id in held {
        let got = answers.iter().find(|m| m["id"] == json!(id)).unwrap();
        assert_eq!(got["result"]["isError"], false, "{got}");
        let text = got["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("got-w"), "{got}");
    }
}

#[test]
fn a_progress_token_gets_progress_until_the_answer() {
    // One notification every 200 ms (the default is 10 s): the first arrives within one
    // interval of the start, not after the whole default.
    let mut a = Agent::spawn_env(&[("WINX_PROGRESS_INTERVAL_MS", "200")]);
    let (s, gate) = session(&mut a, "p");
    let id = a.fresh_id();
    let cmd = format!("read x < {}; echo got-$x", q(&gate.0));
    a.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params":
        {"name": "BashCommand", "arguments": bash_args(&s, &cmd, json!({"wait_for_seconds": 45})),
         "_meta": {"progressToken": "tok-1"}}}),
    );
    // The first notification comes within one interval of the start.
    let first = a
        .recv_within(Duration::from_secs(15))
        .expect("a progress notification within 15 s");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], "tok-1");
    assert_eq!(first["params"]["progress"], 1);
    gate.open("go");
    let (got, _) = answer_to(&a, id, Duration::from_secs(20));
    let got = got.expect("the command answered");
    assert!(
        got["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("got-go"),
        "{got}"
    );
    // Nothing about this request follows its answer: the next message answers a ping.
    let ping = a.fresh_id();
    a.send(&json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}));
    let next = a.recv();
    assert_eq!(next["id"], json!(ping), "{next}");
}
