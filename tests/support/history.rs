//! Helpers of the execution-history suites (`tests/it/execution.rs`,
//! `tests/it/execution_faults.rs`): the `Execution` tool on a session, waiting until a record
//! is complete (event-woken, never polled on a timer), and reading a whole output by pages.
#![allow(dead_code)]

use super::{Agent, sc};
use serde_json::{Value, json};
use std::time::Duration;

/// An adapter of runtime `rt` ("daemon", "embedded", or "zsh" for the daemon with zsh).
pub fn spawn_with(rt: &str, extra: &[(&str, &str)]) -> Agent {
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    let mut env = vec![("WINX_RUNTIME", runtime), ("WINX_SHELL", shell)];
    env.extend_from_slice(extra);
    Agent::spawn_env(&env)
}

pub fn exec(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Execution",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

pub fn id_of(r: &Value) -> String {
    sc(r)["data"]["state"]["execution_id"]
        .as_str()
        .expect("a command answer names its execution")
        .to_string()
}

/// Wait (through the history) until `id` exited and its output is fully recorded: observe
/// it, then wait from that observation's catalog position, so no change slips by unseen.
pub fn until_recorded(a: &mut Agent, s: &Value, id: &str) {
    // Each wait ends at the next change (an output flood changes it every few ms), so the
    // number of waits is not bounded: the time is. A record that does not settle in two
    // minutes is a bug.
    let deadline = super::wait::Deadline::after("recorded", Duration::from_secs(120));
    let mut last = Value::Null;
    while !deadline.passed() {
        let r = exec(
            a,
            s,
            json!({"type": "observe", "items": [{"execution_id": id}]}),
        );
        let e = &sc(&r)["data"]["items"][0]["execution"];
        if e["process_status"] == "exited" && e["output_pending"] == false {
            return;
        }
        last = e.clone();
        let after = sc(&r)["data"]["catalog_cursor"].clone();
        let wait =
            json!({"type": "wait", "execution_ids": [id], "after": after, "timeout_seconds": 10});
        exec(a, s, wait);
    }
    panic!("{id} was never completely recorded by {deadline}; last seen {last}");
}

/// Every retained output byte of `id`, read in 64 KiB pages; panics on a retention gap.
pub fn read_all(a: &mut Agent, s: &Value, id: &str) -> String {
    let (mut got, mut cursor) = (String::new(), Value::Null);
    for _ in 0..1000 {
        let action =
            json!({"type": "read", "execution_id": id, "page_bytes": 65536, "cursor": cursor});
        let r = exec(a, s, action);
        let page = &sc(&r)["data"]["page"];
        assert!(page["retention_gap"].is_null(), "{id}: {r}");
        got.push_str(page["text"].as_str().expect("page text"));
        if page["has_more"] == false {
            return got;
        }
        cursor = page["next_cursor"].clone();
    }
    panic!("paging {id} never ended");
}

/// The fake agent TUI (`tests/fake/fake-agent`, as `flavor`: codex or claude) started in
/// the session and awaiting input: its execution id and the file it logs every received
/// line to.
pub fn start_fake_agent(a: &mut Agent, s: &Value, flavor: &str) -> (String, std::path::PathBuf) {
    let log = a.dir.path().join(format!("{flavor}.log"));
    let fake = super::manifest_dir().join("tests/fake/fake-agent");
    let cmd = format!("python3 {} {flavor} {}", fake.display(), log.display());
    let r = a.bash_with(s, json!({"command": cmd}), json!({"wait_for_seconds": 0.3}));
    assert_eq!(sc(&r)["status"], "running", "{r}");
    let id = id_of(&r);
    let r = a.bash(s, json!({"wait_for_turn": true}));
    assert_eq!(sc(&r)["data"]["turn_state"], "awaiting_input", "{r}");
    (id, log)
}

/// The lines a fake agent logged.
pub fn logged_lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}
