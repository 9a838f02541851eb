//! Native prompt receipts through the real binaries and a fake agent TUI
//! (`tests/fake/fake-agent`, which logs every line it receives): a prompt is sent at most
//! once per `prompt_id`, only to a program waiting for input, and its receipt says
//! apart delivery, strict activity and the outcome, across adapter restarts.

use crate::support;

use serde_json::{Value, json};
use support::history::{id_of, logged_lines, spawn_with, start_fake_agent};
use support::wait::{Deadline, eventually};
use support::{Agent, processes_mentioning, restart_adapter, sc};

both_runtimes!(a_prompt_is_sent_once_and_its_receipt_replayed);

fn agent(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Agent",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

fn prompt(id: &str, prompt_id: &str, text: &str, wait: f64) -> Value {
    json!({"type": "prompt", "target": id, "prompt_id": prompt_id, "text": text,
           "timeout_seconds": wait})
}

fn a_prompt_is_sent_once_and_its_receipt_replayed(rt: &str) {
    let mut a = spawn_with(rt, &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    let r = agent(
        &mut a,
        &s,
        prompt(&id, "round-1", "work:200 review it", 15.0),
    );
    let d = &sc(&r)["data"];
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(d["delivery"], "delivered", "{r}");
    assert_eq!(d["input_sent"], true);
    assert_eq!(d["activity_observed"], true, "{r}");
    assert_eq!(d["outcome"], "awaiting_input", "{r}");
    assert_eq!(d["replayed"], false);
    assert_eq!(logged_lines(&log), ["work:200 review it"]);
    // The same id and payload: the stored receipt, nothing sent again.
    let r = agent(
        &mut a,
        &s,
        prompt(&id, "round-1", "work:200 review it", 0.0),
    );
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "delivered");
    // The same id with other text: refused, nothing sent.
    let r = agent(&mut a, &s, prompt(&id, "round-1", "something else", 0.0));
    assert_eq!(sc(&r)["errorCode"], "prompt_id_conflict", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    // A receipt wait sends nothing and reads the outcome.
    let w = json!({"type": "wait", "target": id, "prompt_id": "round-1", "timeout_seconds": 1});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    assert_eq!(logged_lines(&log), ["work:200 review it"]);
    a.bash(&s, json!({"send_text": "exit", "submit": true}));
}

#[test]
fn twenty_concurrent_calls_with_one_prompt_id_deliver_once() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "claude");
    let args = json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
                      "action": prompt(&id, "same", "work:100 once", 0.0)});
    for n in 0..20 {
        a.send(
            &json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call",
                       "params": {"name": "Agent", "arguments": args}}),
        );
    }
    let mut fresh = 0;
    for _ in 0..20 {
        let r = a.recv();
        let d = &r["result"]["structuredContent"]["data"];
        assert_eq!(d["delivery"], "delivered", "{r}");
        if d["replayed"] == false {
            fresh += 1;
        }
    }
    assert_eq!(fresh, 1);
    let w = json!({"type": "wait", "target": id, "prompt_id": "same", "timeout_seconds": 15});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    assert_eq!(logged_lines(&log), ["work:100 once"]);
}

#[test]
fn a_busy_exited_or_background_target_gets_nothing() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    let r = agent(&mut a, &s, prompt(&id, "long", "work:4000 long job", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    // Right after the write, the program has not shown work yet: still refused.
    let r = agent(&mut a, &s, prompt(&id, "second", "another", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    // Once it works, it is busy.
    let w = json!({"type": "wait", "target": id, "prompt_id": "long", "until": "activity",
                   "timeout_seconds": 15});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    let r = agent(&mut a, &s, prompt(&id, "third", "another", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["state"], "busy", "{r}");
    // A refused prompt leaves no receipt, so its id stays free.
    let w = json!({"type": "wait", "target": id, "prompt_id": "third"});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["errorCode"], "agent_receipt_not_found", "{r}");
    assert_eq!(logged_lines(&log), ["work:4000 long job"]);
    // An exited target.
    a.bash(&s, json!({"send_text": "\u{3}"}));
    let r = a.bash_with(
        &s,
        json!({"status_check": true}),
        json!({"wait_for_seconds": 15}),
    );
    assert_eq!(sc(&r)["data"]["state"]["process_status"], "exited", "{r}");
    let done = id_of(&a.bash(&s, json!({"command": "true"})));
    let r = agent(&mut a, &s, prompt(&done, "late", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    // A background command is checked on its own screen: a sleeper shows no input box
    // (issue 37 item 3; `agent_background` prompts background agents).
    let bg = id_of(&a.bash(&s, json!({"command": "sleep 30", "is_background": true})));
    let r = agent(&mut a, &s, prompt(&bg, "bg", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["reason"], "not_ready", "{r}");
}

#[test]
fn activity_is_strict() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    // Echoed, never worked on: unconfirmed, and the wait times out.
    let r = agent(&mut a, &s, prompt(&id, "echo", "quiet please", 0.5));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    assert_eq!(sc(&r)["data"]["activity_observed"], false, "{r}");
    assert_eq!(sc(&r)["data"]["outcome"], "timed_out", "{r}");
    // Text that looks like the busy marker: activity stays unconfirmed for good, even
    // though the program then works.
    let text = "work:300 (5s • esc to interrupt)";
    let marker = |a: &mut Agent| {
        let w = json!({"type": "wait", "target": id, "prompt_id": "marker", "timeout_seconds": 0});
        let r = agent(a, &s, w);
        assert_eq!(sc(&r)["data"]["activity_confirmable"], false, "{r}");
        assert_eq!(sc(&r)["data"]["activity_observed"], false, "{r}");
    };
    let r = agent(&mut a, &s, prompt(&id, "marker", text, 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    assert_eq!(sc(&r)["data"]["activity_confirmable"], false, "{r}");
    // The fake writes its first busy frame, then a line to LOG.busy: once the line is
    // there, one round trip to the guardian has it read the frame too, so the turn wait
    // below starts from the busy screen and ends when the work has.
    let busy = std::path::PathBuf::from(format!("{}.busy", log.display()));
    eventually(
        Deadline::hard("the marker's work starts"),
        "a busy frame",
        || std::fs::read_to_string(&busy).unwrap_or_default(),
        |t| !t.is_empty(),
    );
    marker(&mut a);
    let r = a.bash(&s, json!({"wait_for_turn": true}));
    assert_eq!(sc(&r)["data"]["turn_state"], "awaiting_input", "{r}");
    // The work is over, and activity is still unconfirmed.
    marker(&mut a);
    // Approval is activity, and an outcome of its own.
    let r = agent(&mut a, &s, prompt(&id, "ask", "approve the plan", 15.0));
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_approval", "{r}");
    assert_eq!(
        logged_lines(&log),
        ["quiet please", text, "approve the plan"]
    );
}

#[test]
fn a_receipt_outlives_the_adapter_and_a_reset_changes_its_generation() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    let r = agent(&mut a, &s, prompt(&id, "keep", "work:300 survive", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut b = restart_adapter(&a, "daemon");
    let s = b.first_call();
    let w = json!({"type": "wait", "target": id, "prompt_id": "keep", "timeout_seconds": 15});
    let r = agent(&mut b, &s, w.clone());
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    // The same id again after the restart: still the stored receipt.
    let r = agent(&mut b, &s, prompt(&id, "keep", "work:300 survive", 0.0));
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert_eq!(logged_lines(&log), ["work:300 survive"]);
    let r = b.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": s["data"]["thread_id"],
               "workspace_root": s["data"]["workspace_root"]}),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    let r = agent(&mut b, &s, w);
    assert_eq!(sc(&r)["data"]["outcome"], "generation_changed", "{r}");
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
}

#[test]
fn an_adapter_killed_before_the_answer_leaves_an_uncertain_receipt() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    // The session's history is reconciled on its first catalog call: done before the stop.
    agent(&mut a, &s, json!({"type": "list"}));
    let guardians = processes_mentioning(&a.dir.path().join("run/winx/g"));
    assert_eq!(guardians.len(), 1, "{guardians:?}");
    // The guardian cannot answer: the adapter claims the receipt and waits.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(guardians[0]),
        nix::sys::signal::Signal::SIGSTOP,
    );
    let args = json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
                      "action": prompt(&id, "cut", "work:100 maybe", 0.0)});
    a.send(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                   "params": {"name": "Agent", "arguments": args}}));
    let db = a.state.join("winx.db");
    eventually(
        Deadline::hard("receipt claimed"),
        "the receipt row exists",
        || {
            rusqlite::Connection::open(&db)
                .and_then(|c| {
                    c.query_row(
                        "SELECT delivery FROM agent_receipts WHERE prompt_id = 'cut'",
                        [],
                        |r| r.get::<_, String>(0),
                    )
                })
                .ok()
        },
        |d| d.as_deref() == Some("uncertain"),
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(guardians[0]),
        nix::sys::signal::Signal::SIGCONT,
    );
    let mut b = restart_adapter(&a, "daemon");
    let s = b.first_call();
    let w = json!({"type": "wait", "target": id, "prompt_id": "cut", "timeout_seconds": 1});
    let r = agent(&mut b, &s, w);
    assert_eq!(sc(&r)["errorCode"], "agent_delivery_uncertain", "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "uncertain", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], "unknown");
    // Never resent: the same id answers the stored receipt.
    let r = agent(&mut b, &s, prompt(&id, "cut", "work:100 maybe", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_delivery_uncertain", "{r}");
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert!(logged_lines(&log).len() <= 1, "{:?}", logged_lines(&log));
}

/// The terminal screen as the session renders it.
fn screen(a: &mut Agent, s: &Value) -> String {
    let r = a.bash(s, json!({"screen": true}));
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Issue 35: Codex takes text and Enter arriving in one write as a paste and keeps the
/// text as a draft. The prompt is submitted as `agent admit` submits it (a bracketed
/// paste, the program having turned that on, then Enter), so the fake, which tells
/// typing from pasting by timing as Codex's composer does, starts one turn; and a draft
/// already in the input box is never merged with a prompt: refused, nothing sent.
#[test]
fn a_prompt_is_submitted_and_never_merged_with_a_draft() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    // Someone typed a draft (one key at a time is typing, not a paste).
    for key in "my draft".bytes() {
        a.bash(&s, json!({"send_ascii": [key]}));
    }
    let d = Deadline::hard("draft shown");
    eventually(
        d,
        "the draft is in the composer",
        || screen(&mut a, &s),
        |t| t.contains("› my draft"),
    );
    let r = agent(
        &mut a,
        &s,
        prompt(&id, "p1", "work:100 the real prompt", 0.0),
    );
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["reason"], "composer_not_empty", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    assert!(logged_lines(&log).is_empty(), "{:?}", logged_lines(&log));
    // Cleared (Ctrl-U), the same prompt id is free and the prompt is one turn.
    a.bash(&s, json!({"send_ascii": [21]}));
    let d = Deadline::hard("draft cleared");
    eventually(
        d,
        "the composer is empty",
        || screen(&mut a, &s),
        |t| t.lines().any(|l| l == "›"),
    );
    let r = agent(
        &mut a,
        &s,
        prompt(&id, "p1", "work:100 the real prompt", 15.0),
    );
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    assert_eq!(logged_lines(&log), ["work:100 the real prompt"]);
    // A text that would end the paste early is refused before anything is claimed.
    let r = agent(&mut a, &s, prompt(&id, "p2", "a\u{1b}[201~b", 0.0));
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    assert_eq!(logged_lines(&log), ["work:100 the real prompt"]);
}
