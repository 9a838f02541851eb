//! `cargo bench --bench requests` (`make bench`): return-final agent requests on the real
//! release binary (daemon runtime) to the fake Codex (`tests/fake/fake-codex`).
//!
//! - `admit`: one MCP `Agent admit` with `return_final` to an idle fake — the guardian's
//!   checked write, the request registered, its receipt stored and its observer started —
//!   from the request's write to its answer; target p50 ≤ 10 ms.
//! - `final.commit`: the fake appends `task_complete` (it notes the moment, unix ms) →
//!   the observer's terminal event (`at_unix_ms`, stamped in the committing
//!   transaction); target p99 ≤ 100 ms. `final.delivered`: the same moment → a pending
//!   `request watch` answering with the event (commit plus the watcher's wake).
//! - `watch.10k`: `agent request watch --after N --once` printing 10,000 stored events.
//!
//! A report, not a gate (see `report.rs`).

use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "report.rs"]
mod report;
use report::{Report, Samples};
#[path = "server.rs"]
mod server;
use server::{Client, Sandbox};

const ADMITS: usize = 40;
const ADMIT_P50_MS: f64 = 10.0;
const FINAL_P99_MS: f64 = 100.0;
const STORED: usize = 10_000;
const WATCH_MS: f64 = 1000.0;

fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn call(c: &mut Client, tool: &str, pair: &Value, extra: Value) -> (Duration, Value) {
    let mut args = pair.clone();
    for (k, v) in extra.as_object().expect("object") {
        args[k] = v.clone();
    }
    let (t, v) = c.timed("tools/call", json!({"name": tool, "arguments": args}));
    (t, v["result"]["structuredContent"].clone())
}

fn agent(c: &mut Client, pair: &Value, action: Value) -> (Duration, Value) {
    call(c, "Agent", pair, json!({"action": action}))
}

fn uuid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The fake's `task_complete` moment of `turn` (unix ms).
fn mark(marks: &std::path::Path, turn: &str) -> f64 {
    let text = std::fs::read_to_string(marks).expect("completion marks");
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(t, _)| *t == turn)
        .and_then(|(_, ms)| ms.parse().ok())
        .unwrap_or_else(|| panic!("no completion mark for {turn}"))
}

/// Insert `n` terminal events for `principal` in one transaction (the stream's schema).
fn store_events(state: &std::path::Path, principal: &str, n: usize) {
    let store = winx::store::Store::open(state).expect("state store");
    let mut conn = rusqlite::Connection::open(store.path()).expect("open the store");
    let tx = conn.transaction().expect("transaction");
    {
        let mut ins = tx
            .prepare(
                "INSERT INTO agent_request_events (principal, request_id, state, final_message,
                    reason, turn_id, at_ms) VALUES (?1, ?2, 'completed', ?3, NULL, ?4, ?5)",
            )
            .expect("prepare");
        for i in 0..n {
            let msg = format!("final answer number {i}: {}", "x".repeat(200));
            ins.execute(rusqlite::params![
                principal,
                uuid(1_000_000 + i),
                msg,
                format!("turn-{i}"),
                unix_ms() as i64
            ])
            .expect("insert");
        }
    }
    tx.commit().expect("commit");
}

fn main() {
    let sb = Sandbox::new();
    let mut r = Report::new("requests");
    eprintln!("winx requests bench (sandbox {})", sb.dir.path().display());
    let mut c = Client::start(sb.server("daemon"));
    let first = json!({"type": "first_call", "workspace_root": sb.workspace});
    let (_, sc) = call(&mut c, "Initialize", &json!({}), first);
    let pair = json!({"thread_id": sc["data"]["thread_id"], "workspace_root": sc["data"]["workspace_root"]});
    let log = sb.dir.path().join("fake.log");
    let marks = sb.dir.path().join("fake.marks");
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/fake-codex");
    let cmd = format!(
        "CODEX_HOME={} FAKE_CODEX_MARKS={} python3 {} {}",
        sb.dir.path().join("codex-home").display(),
        marks.display(),
        fake.display(),
        log.display()
    );
    call(
        &mut c,
        "BashCommand",
        &pair,
        json!({"action_json": {"command": cmd}, "wait_for_seconds": 0.3}),
    );
    let started = Instant::now();
    let target = loop {
        let (_, sc) = agent(&mut c, &pair, json!({"type": "catalog"}));
        let a = sc["data"]["agents"][0].clone();
        if a["state"] == "idle" && a["return_final_ready"] == true {
            break a;
        }
        assert!(
            started.elapsed() < server::HARD_TIMEOUT,
            "no idle agent: {sc}"
        );
    };

    let (mut admits, mut commits, mut delivered, mut busy) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut after = 0;
    for n in 0..ADMITS {
        let action = json!({"type": "admit", "target": target["agent_id"],
            "incarnation": target["incarnation"], "request_id": uuid(n),
            "text": format!("bench prompt {n}"), "return_final": true});
        // The guardian may not have read the previous turn's end yet: `busy` writes
        // nothing and frees the id, so the same admission is simply repeated.
        let t = loop {
            let (t, sc) = agent(&mut c, &pair, action.clone());
            match sc["data"]["receipt_class"].as_str() {
                Some("accepted") => break t,
                Some("busy") => busy += 1,
                _ => panic!("admission {n}: {sc}"),
            }
        };
        admits.push(t);
        let (_, sc) = agent(
            &mut c,
            &pair,
            json!({"type": "request", "op": "watch", "after": after, "timeout_seconds": 10}),
        );
        let seen = unix_ms();
        let e = &sc["data"]["events"][0];
        assert_eq!(e["state"], "completed", "{sc}");
        after = e["terminal_event_sequence"].as_i64().expect("a sequence");
        let at = mark(&marks, e["provider_turn"].as_str().expect("a turn"));
        let committed = e["at_unix_ms"].as_f64().expect("at_unix_ms");
        commits.push(Duration::from_secs_f64((committed - at).max(0.0) / 1000.0));
        delivered.push(Duration::from_secs_f64((seen - at).max(0.0) / 1000.0));
    }
    r.latency("admit", &Samples::new(admits), Some(ADMIT_P50_MS));
    r.add("admit.busy_retries", busy as f64, "", None);
    let commits = Samples::new(commits);
    r.add("final.commit.p50", commits.pct(50.0), "ms", None);
    r.add(
        "final.commit.p99",
        commits.pct(99.0),
        "ms",
        Some(FINAL_P99_MS),
    );
    r.latency("final.delivered", &Samples::new(delivered), None);

    store_events(&sb.dir.path().join("state-daemon"), "local", STORED);
    let mut cmd = sb.server("daemon");
    cmd.args([
        "agent",
        "request",
        "watch",
        "--after",
        &after.to_string(),
        "--once",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().expect("run agent request watch");
    let took = t.elapsed();
    let lines = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert_eq!(lines, STORED, "watch printed {lines} events");
    r.add(
        "watch.10k",
        took.as_secs_f64() * 1000.0,
        "ms",
        Some(WATCH_MS),
    );
    drop(c);
    sb.kill_leftovers();
    r.print();
}
