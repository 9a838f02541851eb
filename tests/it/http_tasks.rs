//! MCP Tasks over Streamable HTTP: completion in both eras, per-principal scoping of task
//! IDs, and the `Mcp-Name` routing header of `tasks/*`. Commands wait on a FIFO the test
//! opens, so nothing depends on timing.

use crate::support;
use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use support::tasks::{EXT, Gate, threads_named};
use support::wait::{Deadline, eventually};

/// A 2026-07-28 body declaring the tasks extension.
fn with_tasks(method: &str, params: Value) -> Value {
    let mut body = modern(method, params);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {EXT: {}}});
    body
}

/// POST a tasks-declaring modern request with matching routing headers.
fn post(s: &Server, token: &str, method: &str, name: Option<&str>, params: Value) -> Resp {
    s.conn().mcp(
        token,
        &modern_headers(method, name),
        &with_tasks(method, params),
    )
}

#[test]
fn a_task_completes_over_http_and_no_other_principal_can_reach_it() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (a, b) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let pair = s.call(
        &a,
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    )["structuredContent"]["data"]
        .clone();
    let fifo = Gate::in_dir(&s.home.workspace);
    let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
        "action_json": {"command": format!("echo over-http; read x < '{}'; echo end-$x", fifo.0.display())},
        "wait_policy": "until_complete"});
    let r = post(
        &s,
        &a,
        "tools/call",
        Some("BashCommand"),
        json!({"name": "BashCommand", "arguments": args}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let task = r.json()["result"].clone();
    assert_eq!(task["resultType"], "task", "{task}");
    let id = task["taskId"].as_str().unwrap().to_string();

    // Bob knows the ID but reaches nothing: get, cancel, update and list all answer as if
    // it never existed.
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let r = post(
            &s,
            &b,
            method,
            Some(&id),
            json!({"taskId": id, "inputResponses": {}}),
        );
        assert_eq!(
            r.json()["error"]["code"],
            -32602,
            "bob {method}: {}",
            r.text()
        );
    }
    let listed = post(&s, &b, "tasks/list", None, json!({}));
    assert_eq!(
        listed.json()["result"]["tasks"],
        json!([]),
        "{}",
        listed.text()
    );
    // Bob's cancel did not touch it: still working for Alice.
    let r = post(&s, &a, "tasks/get", Some(&id), json!({"taskId": id}));
    assert_eq!(r.json()["result"]["status"], "working", "{}", r.text());

    fifo.open("ok");
    let done = eventually(
        Deadline::hard("task end"),
        "the task leaves `working`",
        || {
            let r = post(&s, &a, "tasks/get", Some(&id), json!({"taskId": id}));
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()["result"].clone()
        },
        |t| t["status"] != "working",
    );
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("over-http") && text.contains("end-ok"),
        "{text}"
    );
    assert_eq!(done["result"]["structuredContent"]["data"]["exit_code"], 0);
}

#[test]
fn task_methods_route_by_mcp_name() {
    let s = Server::start(&[]);
    let id = "task_0123456789abcdef0123456789abcdef";
    // The header must name the task the body names.
    let r = post(
        &s,
        TOKEN,
        "tasks/get",
        Some("task_other"),
        json!({"taskId": id}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32020);
    let r = post(&s, TOKEN, "tasks/cancel", None, json!({"taskId": id}));
    assert_eq!(r.status, 400, "missing Mcp-Name: {}", r.text());
    // Matching headers reach the method, which knows no such task.
    let r = post(&s, TOKEN, "tasks/get", Some(id), json!({"taskId": id}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32602);
    // Without the extension declared: -32021 naming it.
    let r = s.conn().mcp(
        TOKEN,
        &modern_headers("tasks/get", Some(id)),
        &modern("tasks/get", json!({"taskId": id})),
    );
    assert_eq!(r.json()["error"]["code"], -32021, "{}", r.text());
}

#[test]
fn handshake_era_task_result_over_an_http_session() {
    let s = Server::start(&[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = s.conn().mcp(TOKEN, &[], &init);
    assert!(r.json()["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
    let sid = r.header("Mcp-Session-Id").unwrap().to_string();
    let hs = vec![
        h("Mcp-Session-Id", &sid),
        h("MCP-Protocol-Version", "2025-11-25"),
    ];
    let rpc = |id: i64, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let r = s.conn().mcp(TOKEN, &hs, &body);
        assert_eq!(r.status, 200, "{method}: {}", r.text());
        r.json()
    };
    let ws = path_str(&s.home.workspace);
    let pair = rpc(
        2,
        "tools/call",
        json!({"name": "Initialize", "arguments": {"type": "first_call", "workspace_root": ws}}),
    )["result"]["structuredContent"]["data"]
        .clone();
    let fifo = Gate::in_dir(&s.home.workspace);
    let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
        "action_json": {"command": format!("read x < '{}'; echo legacy-$x", fifo.0.display())}});
    let created = rpc(
        3,
        "tools/call",
        json!({"name": "BashCommand", "arguments": args, "task": {"ttl": 60000}}),
    );
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    fifo.open("http");
    // tasks/result blocks until the command ends, then answers the tools/call result.
    let res = rpc(4, "tasks/result", json!({"taskId": id}));
    let text = res["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("legacy-http"), "{res}");
    assert_eq!(
        rpc(5, "tasks/get", json!({"taskId": id}))["result"]["status"],
        "completed"
    );
}

#[test]
fn cancelling_many_tasks_at_once_leaves_no_runner_behind() {
    const N: usize = 8;
    let s = Server::start(&[
        "--session-affinity",
        "thread",
        "--requests-per-minute",
        "100000",
    ]);
    let ws = path_str(&s.home.workspace);
    let ids: Vec<String> = (0..N)
        .map(|i| {
            let pair = s.call(
                TOKEN,
                "Initialize",
                json!({"type": "first_call", "workspace_root": ws, "thread_id": format!("t{i}")}),
            )["structuredContent"]["data"]
                .clone();
            let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
                "action_json": {"command": format!("echo task-{i}; sleep 600")},
                "wait_policy": "until_complete"});
            let r = post(
                &s,
                TOKEN,
                "tools/call",
                Some("BashCommand"),
                json!({"name": "BashCommand", "arguments": args}),
            );
            r.json()["result"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("{}", r.text()))
                .to_string()
        })
        .collect();
    // A runner names itself once it runs, which may be just after its task was answered.
    eventually(
        Deadline::hard("every runner is named"),
        "one task-runner thread per task",
        || threads_named(s.pid() as u32, "task-runner"),
        |n| *n == N,
    );
    // Cancel them all at once, from as many clients.
    std::thread::scope(|sc| {
        for id in &ids {
            let s = &s;
            sc.spawn(move || {
                let r = post(s, TOKEN, "tasks/cancel", Some(id), json!({"taskId": id}));
                assert_eq!(r.status, 200, "{}", r.text());
            });
        }
    });
    let cancels = Deadline::hard("cancelled tasks end");
    for (i, id) in ids.iter().enumerate() {
        let t = eventually(
            cancels,
            &format!("task {id} carries its outcome"),
            || {
                let t =
                    post(&s, TOKEN, "tasks/get", Some(id), json!({"taskId": id})).json()["result"]
                        .clone();
                assert_eq!(t["status"], "cancelled", "{t}");
                t
            },
            |t| t.get("result").is_some(),
        );
        let result = &t["result"];
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("task-{i}")), "{text}");
        assert_eq!(
            result["structuredContent"]["data"]["exit_code"], 130,
            "{result}"
        );
    }
    // Every runner has ended: no thread is left following anything.
    eventually(
        Deadline::hard("runner threads end"),
        "no task-runner thread is left",
        || threads_named(s.pid() as u32, "task-runner"),
        |n| *n == 0,
    );
}
