//! MCP Tasks over stdio, in both dialects: the 2026-07-28 `io.modelcontextprotocol/tasks`
//! extension (server-directed) and 2025-11-25 task-augmented `tools/call`
//! (requestor-driven). Commands wait on a FIFO the test controls, so every step is
//! synchronised on an event, never on time.

use crate::support;

use serde_json::{Value, json};
use support::tasks::*;
use support::wait::{Deadline, eventually};
use support::{Agent, Opts};

both_runtimes!(
    until_complete_becomes_a_task_that_completes_with_the_inline_envelope,
    adaptive_promotes_a_command_that_outlives_its_wait,
    cancelling_a_task_interrupts_its_command_and_keeps_the_output,
    handshake_task_augmented_call_and_blocking_tasks_result,
);

fn until_complete_becomes_a_task_that_completes_with_the_inline_envelope(rt: &str) {
    let mut a = spawn(rt);
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("echo started; read x < {}; echo done-$x", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    let task = r["result"].clone();
    assert_eq!(task["resultType"], "task", "{r}");
    assert_eq!(task["status"], "working");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("task_") && id.len() == 37, "{id}");
    assert!(task["ttlMs"].as_u64().unwrap() >= 60_000);
    assert_eq!(task["pollIntervalMs"], 1000);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    // Blocked on the gate: still working, no result yet.
    let now = modern(&mut a, "tasks/get", json!({"taskId": id}), true)["result"].clone();
    assert_eq!(now["status"], "working", "{now}");
    assert!(now.get("result").is_none());
    gate.open("go");
    let done = until_terminal(&mut a, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["resultType"], "complete");
    let sc = &result["structuredContent"];
    assert_eq!(sc["tool"], "BashCommand");
    assert_eq!(sc["status"], "completed");
    assert_eq!(sc["data"]["exit_code"], 0);
    let t = text(result);
    assert!(t.contains("started") && t.contains("done-go"), "{t}");
    // The same session goes on normally afterwards.
    let next = a.bash(&first, json!({"command": "echo after"}));
    assert!(text(&next).contains("after"), "{next}");
}

fn adaptive_promotes_a_command_that_outlives_its_wait(rt: &str) {
    let mut a = spawn(rt);
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("echo before-wait; read x < {}; echo after-$x", q(&gate.0));
    // Without the extension: the usual inline `running` answer, never a task.
    let args = bash_args(&first, &cmd, json!({"wait_for_seconds": 0.3}));
    let r = bash_call(&mut a, args, false);
    assert_ne!(r["result"]["resultType"], "task", "{r}");
    assert_eq!(r["result"]["structuredContent"]["status"], "running", "{r}");
    gate.open("one");
    let r = a.bash_with(
        &first,
        json!({"status_check": true}),
        json!({"wait_for_seconds": 10}),
    );
    assert!(text(&r).contains("after-one"), "{r}");
    // With it: the same command is promoted once its inline wait ends.
    let args = bash_args(&first, &cmd, json!({"wait_for_seconds": 0.3}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    gate.open("two");
    let done = until_terminal(&mut a, &id);
    let t = text(&done["result"]);
    // Output from before the promotion is part of the task result.
    assert!(t.contains("before-wait") && t.contains("after-two"), "{t}");
    // A command that finishes inline stays inline even when tasks are offered.
    let args = bash_args(&first, "echo quick", json!({}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(text(&r["result"]).contains("quick"));
}

fn cancelling_a_task_interrupts_its_command_and_keeps_the_output(rt: &str) {
    let mut a = spawn(rt);
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("echo cancel-me; read x < {}", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let ack = modern(&mut a, "tasks/cancel", json!({"taskId": id}), true);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    // Cancelled at once; the interrupted command's output arrives with its end.
    let got = eventually(
        Deadline::hard("outcome after cancel"),
        "the cancelled task carries its outcome",
        || {
            let g = modern(&mut a, "tasks/get", json!({"taskId": id}), true)["result"].clone();
            assert_eq!(g["status"], "cancelled", "{g}");
            g
        },
        |g| g.get("result").is_some(),
    );
    let result = &got["result"];
    assert!(text(result).contains("cancel-me"), "{result}");
    assert_eq!(
        result["structuredContent"]["data"]["exit_code"], 130,
        "{result}"
    );
    // The shell is free again.
    let next = a.bash(&first, json!({"command": "echo free"}));
    assert!(text(&next).contains("free"), "{next}");
}

fn handshake_task_augmented_call_and_blocking_tasks_result(rt: &str) {
    let mut a = spawn(rt);
    let init = a.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    let caps = &init["result"]["capabilities"]["tasks"];
    assert!(caps["requests"]["tools"]["call"].is_object(), "{init}");
    assert!(caps["list"].is_object() && caps["cancel"].is_object());
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("echo legacy; read x < {}; echo got-$x", q(&gate.0));
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": bash_args(&first, &cmd, json!({})),
               "task": {"ttl": 120000}}),
    );
    let task = r["result"]["task"].clone();
    assert_eq!(task["status"], "working", "{r}");
    assert!(r["result"].get("resultType").is_none(), "{r}");
    assert_eq!(task["ttl"], 120000);
    assert_eq!(task["pollInterval"], 1000);
    let id = task["taskId"].as_str().unwrap().to_string();
    let got = a.request("tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert!(got["result"].get("result").is_none());
    let listed = a.request("tasks/list", json!({}));
    assert_eq!(
        listed["result"]["tasks"][0]["taskId"],
        json!(id),
        "{listed}"
    );
    // tasks/result blocks until the command ends.
    gate.open("it");
    let res = a.request("tasks/result", json!({"taskId": id}));
    let result = &res["result"];
    assert_eq!(result["isError"], false, "{res}");
    assert!(text(result).contains("legacy") && text(result).contains("got-it"));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(id)
    );
    let got = a.request("tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert!(got["result"].get("pollInterval").is_none());
    let again = a.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(again["error"]["code"], -32602, "{again}");
}

#[test]
fn handshake_tool_errors_fail_the_task_and_unsupported_tools_are_refused() {
    let mut a = Agent::spawn();
    let first = a.first_call();
    // A tool error (no such session) ends the task `failed`, with the same result.
    let mut args = bash_args(&first, "true", json!({}));
    args["thread_id"] = json!("no-such-thread");
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": args, "task": {}}),
    );
    let id = r["result"]["task"]["taskId"].as_str().unwrap().to_string();
    let res = a.request("tasks/result", json!({"taskId": id}));
    assert_eq!(res["result"]["isError"], true, "{res}");
    assert_eq!(
        res["result"]["structuredContent"]["status"], "needs_initialize",
        "{res}"
    );
    let got = a.request("tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "failed", "{got}");
    // Tools without task support, and malformed task requests.
    let ws = a.ws();
    let r = a.request(
        "tools/call",
        json!({"name": "ReadFiles", "arguments": {"file_paths": [ws]}, "task": {}}),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = a.request(
        "tools/call",
        json!({"name": "NoSuchTool", "arguments": {}, "task": {}}),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    for bad in [json!(5), json!({"ttl": "soon"}), json!({"ttl": -1})] {
        let r = a.request(
            "tools/call",
            json!({"name": "BashCommand", "arguments": {}, "task": bad}),
        );
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
    }
    for (method, params) in [
        ("tasks/get", json!({})),
        ("tasks/get", json!({"taskId": 7})),
        (
            "tasks/result",
            json!({"taskId": "task_00000000000000000000000000000000"}),
        ),
        ("tasks/cancel", json!({"taskId": "nope"})),
        ("tasks/list", json!({"cursor": "not-a-cursor"})),
    ] {
        let r = a.request(method, params.clone());
        assert_eq!(r["error"]["code"], -32602, "{method} {params}: {r}");
    }
    let r = a.request("tasks/frobnicate", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
}

#[test]
fn modern_task_methods_need_the_extension_and_capabilities_are_advertised() {
    let mut a = Agent::spawn();
    let r = modern(&mut a, "tasks/get", json!({"taskId": "task_x"}), false);
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert!(r["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object());
    let r = modern(&mut a, "tasks/get", json!({"taskId": "task_x"}), true);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = modern(
        &mut a,
        "tasks/update",
        json!({"taskId": "task_x", "inputResponses": {}}),
        true,
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let d = modern(&mut a, "server/discover", json!({}), false);
    assert!(
        d["result"]["capabilities"]["extensions"][EXT].is_object(),
        "{d}"
    );
    let tools = modern(&mut a, "tools/list", json!({}), false)["result"]["tools"].clone();
    let support = |name: &str| -> Value {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["execution"]["taskSupport"]
            .clone()
    };
    assert_eq!(support("BashCommand"), "optional");
    assert_eq!(support("VerifyEdit"), "optional");
    assert_eq!(support("ReadFiles"), Value::Null);
}

#[test]
fn at_the_working_task_limit_calls_fall_back_inline() {
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_MAX_TASKS", "1")],
        ..Default::default()
    });
    let first = a.first_call();
    let other = a.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let second = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": other}),
    )["structuredContent"]
        .clone();
    assert_ne!(first["data"]["thread_id"], second["data"]["thread_id"]);
    // The one working slot: a command waiting on the gate.
    let gate = Gate::new(&a);
    let cmd = format!("read x < {}; echo slot-$x", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    // until_complete without a free slot: the synchronous wait, answered inline.
    let args = bash_args(
        &second,
        "sleep 0.3; echo fallback-ok",
        json!({"wait_policy": "until_complete"}),
    );
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(text(&r["result"]).contains("fallback-ok"), "{r}");
    assert_eq!(r["result"]["structuredContent"]["data"]["exit_code"], 0);
    // adaptive without a free slot: the usual `running` answer.
    let args = bash_args(&second, "sleep 30", json!({"wait_for_seconds": 0.2}));
    let r = bash_call(&mut a, args, true);
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["structuredContent"]["status"], "running", "{r}");
    a.bash(&second, json!({"send_specials": ["Ctrl-c"]}));
    // 2025-11-25 asks for a task outright: a retryable error.
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": bash_args(&second, "true", json!({})),
               "task": {}}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["data"]["retryAfterMs"].is_u64(), "{r}");
    // Once the working task ends, its slot serves the next one.
    gate.open("freed");
    let done = until_terminal(&mut a, &id);
    assert!(text(&done["result"]).contains("slot-freed"), "{done}");
    // The slot is released before the outcome is published.
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": bash_args(&second, "echo again", json!({})),
               "task": {}}),
    );
    let id = r["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let res = a.request("tasks/result", json!({"taskId": id}));
    assert!(text(&res["result"]).contains("again"), "{res}");
}
