//! Native prompts to agents running as background commands of one session (issue 37 item
//! 3, seed 000: "a native prompt requires an explicit execution ID"): each background
//! command has its own PTY, readiness is checked on its own screen, the text goes to its
//! own terminal, and receipts are once-only as for the foreground program. The agents are
//! the fake TUI (`tests/fake/fake-agent`, which logs every line it receives) and, when
//! `make hosts` installed it, the real Codex CLI against a scripted model.

use crate::support;

use serde_json::{Value, json};
use std::path::PathBuf;
use support::history::{exec, id_of, logged_lines, spawn_with};
use support::wait::{Deadline, eventually};
use support::{Agent, sc};

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

/// Everything the execution `id` printed so far (retained output, one page).
fn output(a: &mut Agent, s: &Value, id: &str) -> String {
    let r = exec(
        a,
        s,
        json!({"type": "read", "execution_id": id, "source": "output", "page_bytes": 65536}),
    );
    sc(&r)["data"]["page"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The fake agent TUI (`flavor`: codex or claude) started as a background command, once
/// its output shows its input screen: its execution id and the file it logs lines to.
fn start_background_agent(a: &mut Agent, s: &Value, flavor: &str) -> (String, PathBuf) {
    let log = a.dir.path().join(format!("{flavor}-bg.log"));
    let fake = support::manifest_dir().join("tests/fake/fake-agent");
    let cmd = format!("python3 {} {flavor} {}", fake.display(), log.display());
    let r = a.bash(s, json!({"command": cmd, "is_background": true}));
    assert!(sc(&r)["data"]["state"]["bg_command_id"].is_string(), "{r}");
    let id = id_of(&r);
    let ready = match flavor {
        "codex" => "context left",
        _ => "? for shortcuts",
    };
    eventually(
        Deadline::hard("background agent drawn"),
        "its input screen is drawn",
        || output(a, s, &id),
        |t| t.contains(ready),
    );
    (id, log)
}

#[test]
fn two_background_agents_each_take_their_own_prompt_once() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (one, log_one) = start_background_agent(&mut a, &s, "codex");
    let (two, log_two) = start_background_agent(&mut a, &s, "claude");
    assert_ne!(one, two);
    for (id, pid, text) in [
        (&one, "one-1", "work:200 review the parser"),
        (&two, "two-1", "work:200 review the lexer"),
    ] {
        let r = agent(&mut a, &s, prompt(id, pid, text, 15.0));
        let d = &sc(&r)["data"];
        assert_eq!(sc(&r)["status"], "completed", "{r}");
        assert_eq!(d["delivery"], "delivered", "{r}");
        assert_eq!(d["input_sent"], true, "{r}");
        assert_eq!(d["target"], id.as_str(), "{r}");
        // Its own screen showed work after the baseline, then input again.
        assert_eq!(d["activity_observed"], true, "{r}");
        assert_eq!(d["outcome"], "awaiting_input", "{r}");
        assert_eq!(d["replayed"], false, "{r}");
    }
    // Each received its own prompt, and only that one.
    assert_eq!(logged_lines(&log_one), ["work:200 review the parser"]);
    assert_eq!(logged_lines(&log_two), ["work:200 review the lexer"]);
    // The same prompt_id and payload: the stored receipt, nothing written again.
    let r = agent(
        &mut a,
        &s,
        prompt(&one, "one-1", "work:200 review the parser", 0.0),
    );
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let w = json!({"type": "wait", "target": two, "prompt_id": "two-1", "timeout_seconds": 1});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    assert_eq!(logged_lines(&log_one), ["work:200 review the parser"]);
    assert_eq!(logged_lines(&log_two), ["work:200 review the lexer"]);
    // The first agent works on a long job: busy on its own screen, so refused, while
    // the second (its own screen ready) still takes a prompt.
    let r = agent(&mut a, &s, prompt(&one, "one-2", "work:6000 long job", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let w = json!({"type": "wait", "target": one, "prompt_id": "one-2", "until": "activity",
                   "timeout_seconds": 15});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    let r = agent(&mut a, &s, prompt(&one, "one-3", "meanwhile", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
    assert_eq!(sc(&r)["data"]["state"], "busy", "{r}");
    let r = agent(&mut a, &s, prompt(&two, "two-2", "quiet second look", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    // A refused prompt leaves no receipt: its id stays free.
    let w = json!({"type": "wait", "target": one, "prompt_id": "one-3"});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["errorCode"], "agent_receipt_not_found", "{r}");
    eventually(
        Deadline::hard("second prompt logged"),
        "the second agent logged its second prompt",
        || logged_lines(&log_two),
        |l| l.len() == 2,
    );
    assert_eq!(
        logged_lines(&log_one),
        ["work:200 review the parser", "work:6000 long job"]
    );
    assert_eq!(
        logged_lines(&log_two),
        ["work:200 review the lexer", "quiet second look"]
    );
}

/// A background command that ended takes no prompt, and one whose screen is no agent's
/// input screen is not ready.
#[test]
fn an_ended_or_unready_background_command_gets_nothing() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "sleep 30", "is_background": true}));
    let sleeper = id_of(&r);
    let r = agent(&mut a, &s, prompt(&sleeper, "sleep", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["reason"], "not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
    let r = a.bash(&s, json!({"command": "true", "is_background": true}));
    let done = id_of(&r);
    let bg = sc(&r)["data"]["state"]["bg_command_id"].clone();
    eventually(
        Deadline::hard("background command ends"),
        "it exited",
        || {
            let r = a.bash(&s, json!({"status_check": true, "bg_command_id": bg}));
            sc(&r)["data"]["state"]["process_status"].clone()
        },
        |st| st == "exited",
    );
    let r = agent(&mut a, &s, prompt(&done, "late", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
}
