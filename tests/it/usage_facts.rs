//! What the usage log learns of calls routed through MCP Tasks and of CodeMap answers
//! (seed 000, "Usage metrics for plugin workflows"), read from the log the real binary
//! writes over stdio: `effective_wait_mode` is `synchronous`, `task_inline` (the adaptive
//! inline allowance of an offered task, kept when the command is promoted) or `task` (zero
//! inline allowance, a Task at once); Task-routed calls carry their action and wait facts;
//! CodeMap lines carry `source_kind` and `payload_bytes`.

use crate::support;

use serde_json::{Value, json};
use std::path::Path;
use support::tasks::*;
use support::{Agent, HARD_TIMEOUT, Opts};

/// A stdio server with the usage log at `log`, its state and workspace in `dir`.
fn agent(dir: &Path, log: &Path) -> Agent {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    Agent::spawn_with(Opts {
        env: &[
            ("WINX_RUNTIME", "embedded"),
            ("WINX_USAGE_LOG", log.to_str().unwrap()),
        ],
        state: Some(dir.join("state")),
        workspace: Some(ws),
        ..Default::default()
    })
}

/// Exit cleanly (the writer flushes on the way out), then the log's `tool_call` lines of
/// `tool`, in order.
fn calls_of(a: &mut Agent, log: &Path, tool: &str) -> Vec<Value> {
    a.close_stdin();
    assert!(a.wait_exit(HARD_TIMEOUT).is_some_and(|s| s.success()));
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "tool_call" && e["tool"] == tool)
        .collect()
}

/// The wait facts of a line: (mode, policy, ms).
fn wait(line: &Value) -> (Value, Value, Value) {
    (
        line["effective_wait_mode"].clone(),
        line["effective_wait_policy"].clone(),
        line["effective_wait_ms"].clone(),
    )
}

#[test]
fn offered_tasks_record_task_and_task_inline_with_their_action_and_wait_facts() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let mut a = agent(tmp.path(), &log);
    let first = a.first_call();
    // 1. No tasks: the synchronous allowance (the default 20 s of a command).
    let r = bash_call(&mut a, bash_args(&first, "echo plain", json!({})), false);
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    // 2. Offered, until_complete: a Task at once, zero inline allowance.
    let gate = Gate::new(&a);
    let cmd = format!("read x < {}; echo done-$x", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    gate.open("one");
    assert_eq!(until_terminal(&mut a, &id)["status"], "completed");
    // 3. Offered, adaptive, still running when its 0.3 s end: promoted, and the inline
    //    allowance it had is what the log keeps.
    let args = bash_args(&first, &cmd, json!({"wait_for_seconds": 0.3}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    gate.open("two");
    assert_eq!(until_terminal(&mut a, &id)["status"], "completed");
    // 4. Offered, adaptive, finished within its inline wait: answered inline.
    let args = bash_args(&first, "echo quick", json!({"wait_for_seconds": 15}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let calls = calls_of(&mut a, &log, "BashCommand");
    assert_eq!(calls.len(), 4, "{calls:?}");
    let [plain, until, promoted, quick] = &calls[..] else {
        unreachable!()
    };
    assert_eq!(
        wait(plain),
        (json!("synchronous"), json!("adaptive"), json!(20_000))
    );
    assert_eq!(plain["outcome"], "result");
    for task in [until, promoted] {
        assert_eq!(task["outcome"], "task", "{task}");
        assert_eq!(task["action"], "command", "{task}");
        assert!(task["command_category"].is_string(), "{task}");
    }
    assert_eq!(
        wait(until),
        (json!("task"), json!("until_complete"), json!(0)),
        "{until}"
    );
    assert_eq!(until["requested_wait_policy"], "until_complete");
    assert_eq!(
        wait(promoted),
        (json!("task_inline"), json!("adaptive"), json!(300)),
        "{promoted}"
    );
    assert_eq!(promoted["requested_wait_ms"], 300);
    // Answered inline: the whole synchronous set of facts, with the offered route's mode.
    assert_eq!(quick["outcome"], "result", "{quick}");
    assert_eq!(
        wait(quick),
        (json!("task_inline"), json!("adaptive"), json!(15_000)),
        "{quick}"
    );
    assert_eq!(quick["action"], "command");
    assert_eq!(quick["exit_code"], 0, "{quick}");
    assert_eq!(quick["process_status"], "exited", "{quick}");
    assert_eq!(quick["status"], "completed");
    // The inline part of an offered call is traced like a synchronous call's.
    for traced in [quick, promoted] {
        assert!(
            traced["phases"]["wait"]["count"].as_u64() >= Some(1),
            "{traced}"
        );
    }
    // The report counts the modes as written.
    let r = a.op_json(&["report", "--log", log.to_str().unwrap()]);
    assert_eq!(
        r["execution"]["effectiveWaitModes"],
        json!({"synchronous": 1, "task": 1, "task_inline": 2}),
        "{}",
        r["execution"]
    );
}

#[test]
fn a_requested_task_records_task_with_zero_inline_allowance() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let mut a = agent(tmp.path(), &log);
    let init = a.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("error").is_none(), "{init}");
    let first = a.first_call();
    let args = bash_args(
        &first,
        "echo requested",
        json!({"wait_for_seconds": 7, "wait_policy": "adaptive"}),
    );
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": args, "task": {"ttl": 60000}}),
    );
    let id = r["result"]["task"]["taskId"].as_str().unwrap().to_string();
    let res = a.request("tasks/result", json!({"taskId": id}));
    assert!(text(&res["result"]).contains("requested"), "{res}");
    let calls = calls_of(&mut a, &log, "BashCommand");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let c = &calls[0];
    assert_eq!(c["outcome"], "task", "{c}");
    assert_eq!(c["action"], "command", "{c}");
    assert_eq!(c["requested_wait_policy"], "adaptive");
    assert_eq!(c["requested_wait_ms"], 7000);
    assert_eq!(wait(c), (json!("task"), json!("adaptive"), json!(0)), "{c}");
    assert!(c["thread"].is_string(), "{c}");
}

#[test]
fn codemap_lines_carry_source_kind_and_payload_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let mut a = agent(tmp.path(), &log);
    let first = a.first_call();
    std::fs::write(a.workspace.join("lib.rs"), "fn alpha() {}\nfn beta() {}\n").unwrap();
    let helper = Path::new(first["data"]["temp_dir"].as_str().unwrap()).join("helper.rs");
    std::fs::write(&helper, "fn gamma() {}\n").unwrap();
    let map = |a: &mut Agent, path: &str, op: &str| {
        let mut args = json!({
            "thread_id": first["data"]["thread_id"],
            "workspace_root": first["data"]["workspace_root"],
            "operation": op, "path": path,
        });
        if op == "references" {
            args["name"] = json!("alpha");
        }
        let r = a.call("CodeMap", args);
        assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
        text(&r).len() as u64
    };
    let canonical = map(&mut a, "lib.rs", "outline");
    let refs = map(&mut a, ".", "references");
    let helped = map(&mut a, helper.to_str().unwrap(), "outline");
    let calls = calls_of(&mut a, &log, "CodeMap");
    assert_eq!(calls.len(), 3, "{calls:?}");
    let facts = |c: &Value| {
        (
            c["action"].clone(),
            c["source_kind"].clone(),
            c["payload_bytes"].clone(),
        )
    };
    assert_eq!(
        facts(&calls[0]),
        (json!("outline"), json!("canonical"), json!(canonical))
    );
    assert_eq!(
        facts(&calls[1]),
        (json!("references"), json!("canonical"), json!(refs))
    );
    assert_eq!(
        facts(&calls[2]),
        (json!("outline"), json!("helper"), json!(helped))
    );
    // The report reads them back.
    let r = a.op_json(&["report", "--log", log.to_str().unwrap()]);
    let cm = &r["codeMap"];
    assert_eq!(cm["calls"], 3, "{cm}");
    assert_eq!(
        cm["sourceKinds"],
        json!({"canonical": 2, "helper": 1}),
        "{cm}"
    );
    assert_eq!(
        cm["payloadBytes"]["total"],
        json!((canonical + refs + helped) as f64)
    );
}
