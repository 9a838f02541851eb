//! Turn recognition of a program in the session's terminal, through the real binary, with
//! the fake agent TUI (`tests/fake/agent_tui.sh`): BashCommand `wait_for_turn` and
//! `inspect`, the running answer's `turn_state`, and `Execution` explain / read / wait.

use crate::support;

use serde_json::{Value, json};
use support::{Agent, manifest_dir, sc, text};

each_runtime!(an_agent_tui_is_recognised_on_cue);

fn spawn(rt: &str) -> Agent {
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    Agent::spawn_env(&[("WINX_RUNTIME", runtime), ("WINX_SHELL", shell)])
}

fn exec(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Execution",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

/// Send a cue line to the fake TUI; the call must deliver it. It answers at once
/// (`wait_for_seconds: 0`): the test then waits on the state the cue means (a turn, the
/// screen, the history), not on the default input settle (300 ms of quiet, never reached
/// while the busy spinner redraws, so 3 s).
fn cue(a: &mut Agent, s: &Value, word: &str) -> Value {
    let r = a.bash_with(
        s,
        json!({"send_text": word, "submit": true}),
        json!({"wait_for_seconds": 0}),
    );
    assert!(sc(&r)["errorCode"].is_null(), "cue {word}: {r}");
    r
}

/// The lines the fake TUI read, with the state it read each in (`TUI_LOG`), for a
/// failure's message.
fn tui_log(s: &Value) -> String {
    let ws = s["data"]["workspace_root"].as_str().unwrap_or_default();
    std::fs::read_to_string(std::path::Path::new(ws).join("tui.log"))
        .unwrap_or_else(|e| format!("(no TUI log: {e})"))
}

fn turn(a: &mut Agent, s: &Value, action: Value) -> String {
    let r = a.bash(s, action);
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    sc(&r)["data"]["turn_state"].as_str().unwrap().to_string()
}

fn an_agent_tui_is_recognised_on_cue(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let tui = manifest_dir().join("tests/fake/agent_tui.sh");
    let r = a.bash_with(
        &s,
        json!({"command": format!("TUI_LOG=tui.log bash {}", tui.display())}),
        json!({"wait_for_seconds": 0}),
    );
    assert_eq!(sc(&r)["status"], "running", "{r}");
    let id = sc(&r)["data"]["state"]["execution_id"]
        .as_str()
        .unwrap()
        .to_string();
    let wait = json!({"wait_for_turn": true});
    assert_eq!(turn(&mut a, &s, wait.clone()), "awaiting_input");
    // The running answer itself says the program awaits input (seed 003's state); asked
    // for now, not after the default status wait (10 s) for a program that never ends.
    let r = a.bash_with(
        &s,
        json!({"status_check": true}),
        json!({"wait_for_seconds": 0}),
    );
    assert_eq!(
        sc(&r)["data"]["state"]["turn_state"],
        "awaiting_input",
        "{r}"
    );
    cue(&mut a, &s, "approve");
    // Until the TUI has read the cue, its input box still shows and the wait answers
    // awaiting_input at once: wait until it answers for the approval menu.
    let t = support::wait::settle(
        support::wait::Deadline::hard("approval menu"),
        || turn(&mut a, &s, wait.clone()),
        |t| t != "awaiting_input",
    )
    .unwrap_or_else(|t| t);
    assert_eq!(t, "awaiting_approval", "TUI read:\n{}", tui_log(&s));
    cue(&mut a, &s, "busy");
    // The TUI redraws after it reads the cue: inspect until the busy screen is up (a
    // screen caught mid-redraw reads as unknown).
    let r = support::wait::settle(
        support::wait::Deadline::hard("busy screen"),
        || a.bash(&s, json!({"inspect": true, "recognizer": "claude_code"})),
        |r| sc(r)["data"]["turn_state"] == "busy",
    )
    .unwrap_or_else(|r| r);
    assert_eq!(sc(&r)["data"]["turn_state"], "busy", "{}", text(&r));
    assert_eq!(
        sc(&r)["data"]["detection"]["rule"],
        "spinner_esc_to_interrupt"
    );
    // A wait on the history wakes when the recorder sees the input box come back.
    let r = exec(&mut a, &s, json!({"type": "list", "limit": 1}));
    let after = sc(&r)["data"]["catalog_cursor"].clone();
    cue(&mut a, &s, "input");
    let r = exec(
        &mut a,
        &s,
        json!({"type": "wait", "execution_ids": [id], "after": after,
               "events": ["awaiting_input"], "timeout_seconds": 15}),
    );
    if sc(&r)["data"]["outcome"] != "changed" {
        let screen = a.bash(&s, json!({"inspect": true}));
        panic!(
            "no awaiting_input after the cue: {r}\nTUI read:\n{}\nscreen now: {}",
            tui_log(&s),
            text(&screen)
        );
    }
    let r = exec(&mut a, &s, json!({"type": "explain", "execution_id": id}));
    let d = &sc(&r)["data"]["detection"];
    assert_eq!(d["recognizer"], "claude_code", "{r}");
    assert_eq!(d["state"], "awaiting_input");
    assert!(d["priority"].as_u64().unwrap() >= 300, "{d}");
    let r = exec(
        &mut a,
        &s,
        json!({"type": "read", "execution_id": id, "source": "screen"}),
    );
    assert!(
        sc(&r)["data"]["page"]["text"]
            .as_str()
            .unwrap()
            .contains("? for shortcuts"),
        "{r}"
    );
    let r = exec(
        &mut a,
        &s,
        json!({"type": "read", "execution_id": id, "source": "detection"}),
    );
    assert!(text(&r).contains("\"awaiting_input\""), "{}", text(&r));
    cue(&mut a, &s, "exit");
    let r = a.bash(&s, json!({"status_check": true}));
    assert_eq!(sc(&r)["data"]["state"]["process_status"], "exited", "{r}");
    // Asking for an unknown recognizer is a clear error, not a guess.
    let r = a.bash(&s, json!({"inspect": true, "recognizer": "gemini"}));
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
}
