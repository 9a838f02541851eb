//! MCP Tasks across adapter processes: a task taken over after its adapter was killed (in
//! both dialects), one whose embedded shell died with it, and one a second live adapter
//! must see but never run.

use crate::support;

use serde_json::json;
use support::tasks::*;
use support::wait::{Deadline, eventually};

#[test]
fn a_task_outlives_an_adapter_restart() {
    let mut a = spawn("daemon");
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!(
        "echo before-restart; read x < {}; echo after-$x",
        q(&gate.0)
    );
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    // While the task's command runs, the session refuses a second foreground command.
    let args = bash_args(
        &first,
        "sleep 0.2; echo finished-early",
        json!({"wait_policy": "until_complete"}),
    );
    let r = bash_call(&mut a, args, true);
    assert_eq!(
        r["result"]["structuredContent"]["errorCode"], "command_already_running",
        "{r}"
    );
    a.kill9();
    let mut b = restart_adapter(&a, "daemon");
    // The new adapter knows the task from the state store and follows the command.
    let now = modern(&mut b, "tasks/get", json!({"taskId": id}), true)["result"].clone();
    assert_eq!(now["status"], "working", "{now}");
    let listed = modern(&mut b, "tasks/list", json!({}), true);
    assert_eq!(
        listed["result"]["tasks"][0]["taskId"],
        json!(id),
        "{listed}"
    );
    gate.open("restart");
    let done = until_terminal(&mut b, &id);
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_eq!(
        result["structuredContent"]["data"]["exit_code"], 0,
        "{result}"
    );
    let all = whole_output(result);
    assert!(
        all.contains("before-restart") && all.contains("after-restart"),
        "{all}"
    );
    // And a third adapter reads the finished task back as it was.
    b.kill9();
    let mut c = restart_adapter(&a, "daemon");
    let again = modern(&mut c, "tasks/get", json!({"taskId": id}), true)["result"].clone();
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["result"], done["result"]);
}

#[test]
fn a_task_whose_shell_died_with_the_adapter_reports_an_unknown_outcome() {
    let mut a = spawn("embedded");
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("read x < {}", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    let modern_id = r["result"]["taskId"].as_str().unwrap().to_string();
    a.kill9();
    // Embedded shells end with their adapter: nothing is left to follow.
    let mut b = restart_adapter(&a, "embedded");
    let done = until_terminal(&mut b, &modern_id);
    assert_eq!(done["status"], "completed", "{done}");
    let sc = &done["result"]["structuredContent"];
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert_eq!(sc["errorCode"], "task_outcome_unknown", "{done}");
    assert_eq!(
        sc["nextAction"]["arguments"]["action_json"]["status_check"],
        true
    );
    // Unknown IDs stay unknown after a restart.
    let r = modern(&mut b, "tasks/get", json!({"taskId": "task_nope"}), true);
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn a_handshake_task_outlives_an_adapter_restart() {
    let mut a = spawn("daemon");
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!(
        "echo legacy-before; read x < {}; echo legacy-$x",
        q(&gate.0)
    );
    let r = a.request(
        "tools/call",
        json!({"name": "BashCommand", "arguments": bash_args(&first, &cmd, json!({})),
               "task": {"ttl": 600000}}),
    );
    let id = r["result"]["task"]["taskId"].as_str().unwrap().to_string();
    // Killed right after answering: the command was already recorded with the task.
    a.kill9();
    let mut b = restart_adapter(&a, "daemon");
    gate.open("after");
    let res = b.request("tasks/result", json!({"taskId": id}));
    let result = &res["result"];
    assert_eq!(result["structuredContent"]["data"]["exit_code"], 0, "{res}");
    let all = whole_output(result);
    assert!(
        all.contains("legacy-before") && all.contains("legacy-after"),
        "{all}"
    );
    let got = b.request("tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
}

/// a's runner rechecks the store for b's cancel every `WINX_TASK_CANCEL_CHECK_MS` (default
/// 5 s, which the test waited out): 100 ms here.
#[test]
fn a_second_live_adapter_sees_a_task_but_never_runs_it() {
    let mut a = support::Agent::spawn_env(&[
        ("WINX_RUNTIME", "daemon"),
        ("WINX_TASK_CANCEL_CHECK_MS", "100"),
    ]);
    let first = a.first_call();
    let gate = Gate::new(&a);
    let cmd = format!("echo shared-task; read x < {}", q(&gate.0));
    let args = bash_args(&first, &cmd, json!({"wait_policy": "until_complete"}));
    let r = bash_call(&mut a, args, true);
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    // Another adapter of the same user on the same state directory, both alive.
    let mut b = restart_adapter(&a, "daemon");
    let listed = modern(&mut b, "tasks/list", json!({}), true);
    assert_eq!(
        listed["result"]["tasks"][0]["taskId"],
        json!(id),
        "{listed}"
    );
    let got = modern(&mut b, "tasks/get", json!({"taskId": id}), true);
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert_eq!(
        threads_named(b.pid(), "task-runner"),
        0,
        "b follows a's command"
    );
    let early = b.request("tasks/result", json!({"taskId": id}));
    assert_eq!(early["error"]["data"]["retryable"], true, "{early}");
    // A cancel recorded by b reaches the command through a's runner.
    let ack = modern(&mut b, "tasks/cancel", json!({"taskId": id}), true);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = eventually(
        Deadline::hard("cancel reaches a"),
        "a sees the cancel's outcome",
        || modern(&mut a, "tasks/get", json!({"taskId": id}), true)["result"].clone(),
        |g| g.get("result").is_some(),
    );
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["data"]["exit_code"],
        130
    );
    // b reads the same outcome from the store (a writes it there just after publishing it).
    let seen = eventually(
        Deadline::hard("outcome reaches b"),
        "b sees the outcome in the store",
        || modern(&mut b, "tasks/get", json!({"taskId": id}), true)["result"].clone(),
        |g| g.get("result").is_some(),
    );
    assert_eq!(
        (seen["status"].clone(), seen["result"].clone()),
        (done["status"].clone(), done["result"].clone())
    );
}
