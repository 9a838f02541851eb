//! The usage log never holds what a client sent or a tool produced (seed 003, "Persistent
//! usage telemetry"): every tool runs — over stdio and over HTTP, several actions each —
//! with one canary string planted in every argument (commands, paths, file contents,
//! SEARCH/REPLACE text, thread ids, cursors, ids, descriptions, headers, tokens), and the
//! whole log is then searched for it. Also: HTTP and tool events share a `request_id`.

use crate::support;
use crate::support::http as http_support;

use http_support::{Home, Server, TOKEN, h, modern, modern_headers};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{Agent, HARD_TIMEOUT, Opts};

const CANARY: &str = "CanaryQz7Xw";

/// Every line of every file in `dir` (the active log and any rotated sibling).
fn log_lines(dir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        for l in text.lines() {
            lines.push(serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")));
        }
    }
    lines
}

/// The whole log directory as text, for the canary search (case-insensitive).
fn assert_no_canary(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let lower = text.to_lowercase();
        assert!(
            !lower.contains(&CANARY.to_lowercase()),
            "the canary reached {}:\n{}",
            e.path().display(),
            text.lines()
                .filter(|l| l.to_lowercase().contains(&CANARY.to_lowercase()))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The tool calls of the log, as (tool, action) pairs.
fn tool_calls(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["event"] == "tool_call")
        .map(|l| {
            (
                l["tool"].as_str().unwrap_or("").to_string(),
                l["action"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Every tool, with the canary in each argument it takes. `call` runs one tool call.
fn run_every_tool(ws: &Path, mut call: impl FnMut(&str, Value) -> Value) {
    let ws_s = ws.to_string_lossy().into_owned();
    let c = CANARY;
    let first = call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws_s, "thread_id": format!("thread-{c}")}),
    );
    let d = &first["structuredContent"]["data"];
    let pair = |extra: Value| {
        let mut a = json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let file = format!("{ws_s}/{c}.txt");
    // `.res`, not a scratch name like `.out` (which the artifact policy refuses), so the
    // canary runs through the shell's output.
    call(
        "BashCommand",
        pair(
            json!({"action_json": {"command": format!("echo {c} > {c}.res; cat {c}.res")},
                    "wait_for_seconds": 5}),
        ),
    );
    call(
        "BashCommand",
        pair(json!({"action_json": {"command": format!("{c}_no_such_program --{c}")}})),
    );
    call(
        "BashCommand",
        pair(json!({"action_json": {"send_text": c, "submit": true}})),
    );
    call(
        "BashCommand",
        pair(json!({"action_json": {"status_check": true, "bg_command_id": c}})),
    );
    call(
        "BashCommand",
        pair(json!({"action_json": {"screen": true}})),
    );
    call(
        "FileWriteOrEdit",
        pair(json!({"file_path": file, "percentage_to_change": 100,
                    "text_or_search_replace_blocks": format!("line {c}\nsecond {c}\n")})),
    );
    call(
        "ReadFiles",
        pair(json!({"file_paths": [format!("{file}:1-2"), format!("{ws_s}/missing-{c}")]})),
    );
    let blocks = format!("<<<<<<< SEARCH\nline {c}\n=======\nline {c} edited\n>>>>>>> REPLACE\n");
    call(
        "FileWriteOrEdit",
        pair(json!({"file_path": file, "percentage_to_change": 10,
                    "text_or_search_replace_blocks": blocks})),
    );
    let miss = format!("<<<<<<< SEARCH\nno {c} here\n=======\n{c}\n>>>>>>> REPLACE\n");
    call(
        "MultiFileEdit",
        pair(json!({"edits": [{"file_path": file, "text_or_search_replace_blocks": miss}]})),
    );
    call(
        "EditFiles",
        pair(
            json!({"files": [{"file_path": file, "mode": "replace", "content": format!("{c}\n")}]}),
        ),
    );
    call(
        "ApplyPatch",
        pair(
            json!({"file_path": file, "expected_revision": format!("sha256:{c}"),
                    "patches": [{"start_line": 1, "delete_lines": 1, "replacement": c}]}),
        ),
    );
    call("UndoEdit", pair(json!({"file_path": file})));
    call(
        "ReadImage",
        pair(json!({"file_path": format!("{ws_s}/{c}.png")})),
    );
    call(
        "VerifyEdit",
        pair(json!({"verify_command": format!("test -n {c}"), "verify_wait_for_seconds": 5})),
    );
    // Agent (native and Herdr) and CodeMap, each argument a canary.
    for (backend, action) in [
        ("native", json!({"type": "list", "limit": 5})),
        ("native", json!({"type": "get", "execution_id": c})),
        (
            "native",
            json!({"type": "prompt", "target": c, "prompt_id": c, "text": c}),
        ),
        (
            "native",
            json!({"type": "wait", "target": c, "prompt_id": c}),
        ),
        ("herdr", json!({"type": "prompt", "target": c, "text": c})),
        (
            "native",
            json!({"type": "admit", "target": c, "incarnation": c,
                          "request_id": "3d6f0a2b-1c4e-4f5a-8b9c-0d1e2f3a4b5c", "text": c}),
        ),
        (
            "native",
            json!({"type": "request", "op": "get", "request_id": c}),
        ),
    ] {
        call("Agent", pair(json!({"backend": backend, "action": action})));
    }
    call(
        "CodeMap",
        pair(json!({"operation": "outline", "path": format!("{c}.rs"), "query": c})),
    );
    call(
        "CodeMap",
        pair(json!({"operation": "references", "name": c, "path": "."})),
    );
    call(
        "ContextSave",
        pair(json!({"id": format!("task-{c}"), "project_root_path": ws_s,
                    "description": format!("about {c}"), "relevant_file_globs": [format!("*{c}*")]})),
    );
    call(
        "Initialize",
        json!({"type": "first_call", "task_id_to_resume": format!("task-{c}")}),
    );
    call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": d["thread_id"],
               "workspace_root": d["workspace_root"], "mode": "code_writer",
               "allowed_commands": [c], "allowed_globs": [format!("{c}/**")]}),
    );
    call(
        "Initialize",
        json!({"type": "status", "thread_id": c, "workspace_root": ws_s}),
    );
    for action in [
        json!({"type": "list", "limit": 5}),
        json!({"type": "get", "execution_id": c}),
        json!({"type": "read", "execution_id": c, "cursor": c}),
        json!({"type": "explain", "execution_id": c}),
        json!({"type": "observe", "items": [{"execution_id": c}]}),
        json!({"type": "wait", "execution_ids": [c], "after": c, "timeout_seconds": 0}),
        json!({"type": c}),
    ] {
        call("Execution", pair(json!({"action": action})));
    }
    call(&format!("Tool{c}"), json!({"x": c}));
}

fn workspace_in(dir: &Path) -> PathBuf {
    let ws = dir.join(format!("ws-{CANARY}"));
    std::fs::create_dir_all(&ws).unwrap();
    ws.canonicalize().unwrap()
}

#[test]
fn the_canary_never_reaches_the_log_over_stdio() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = workspace_in(tmp.path());
    let logs = tmp.path().join("logs");
    let log = logs.join("usage.jsonl");
    let mut a = Agent::spawn_with(Opts {
        env: &[
            ("WINX_RUNTIME", "embedded"),
            ("WINX_USAGE_LOG", log.to_str().unwrap()),
        ],
        workspace: Some(ws.clone()),
        ..Default::default()
    });
    let init = a.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "privacy-test", "version": "1.0"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    run_every_tool(&ws, |tool, args| {
        let r = a.request("tools/call", json!({"name": tool, "arguments": args}));
        r["result"].clone()
    });
    // A JSON-RPC level refusal too: arguments of the wrong type.
    a.request(
        "tools/call",
        json!({"name": "ReadFiles", "arguments": [CANARY]}),
    );
    a.close_stdin();
    assert!(a.wait_exit(HARD_TIMEOUT).is_some_and(|s| s.success()));
    let lines = log_lines(&logs);
    let calls = tool_calls(&lines);
    for tool in [
        "Initialize",
        "BashCommand",
        "ReadFiles",
        "FileWriteOrEdit",
        "MultiFileEdit",
        "EditFiles",
        "ApplyPatch",
        "UndoEdit",
        "ReadImage",
        "VerifyEdit",
        "ContextSave",
        "Execution",
        "Agent",
        "CodeMap",
        "unknown",
    ] {
        assert!(
            calls.iter().any(|(t, _)| t == tool),
            "no tool_call for {tool}: {calls:?}"
        );
    }
    assert_eq!(calls.len(), 37, "36 tool calls and one refused: {calls:?}");
    let agent: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "tool_call" && l["tool"] == "Agent")
        .collect();
    assert_eq!(agent.len(), 7, "{agent:?}");
    for l in &agent {
        assert_eq!(l["workflow_schema"], 1, "{l}");
        assert!(l["backend"] == "native" || l["backend"] == "herdr", "{l}");
    }
    assert!(
        agent
            .iter()
            .any(|l| l["action"] == "prompt" && l["backend"] == "herdr")
    );
    let bash = lines
        .iter()
        .find(|l| l["tool"] == "BashCommand" && l["action"] == "command")
        .unwrap();
    assert_eq!(bash["client_name"], "privacy-test");
    assert_eq!(bash["protocol"], "2025-06-18");
    assert!(bash["command_category"].is_string());
    assert_no_canary(&logs);
}

#[test]
fn the_canary_never_reaches_the_log_over_http_and_requests_correlate() {
    let home = Home::new();
    let ws = workspace_in(&home.workspace);
    let logs = home.path("logs");
    let log = logs.join("usage.jsonl");
    let mut s = Server::start_in(
        home,
        &[],
        &[("WINX_USAGE_LOG", log.to_str().unwrap())],
        true,
    );
    let conversation = format!("conv-{CANARY}");
    run_every_tool(&ws, |tool, args| {
        let mut headers = modern_headers("tools/call", Some(tool));
        headers.push(h("X-Winx-Conversation-Id", &conversation));
        let r = s.conn().mcp(
            TOKEN,
            &headers,
            &modern("tools/call", json!({"name": tool, "arguments": args})),
        );
        r.json()["result"].clone()
    });
    // Refusals that carry the canary: a wrong token, another session's id, a query string.
    let bad_token = format!("{CANARY}-0123456789abcdef0123456789abcdef");
    let r = s.conn().mcp(&bad_token, &[], &modern("ping", json!({})));
    assert_eq!(r.status, 401);
    let legacy = json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {}});
    let r = s.conn().mcp(
        TOKEN,
        &[h("Mcp-Session-Id", &format!("s-{CANARY}"))],
        &legacy,
    );
    assert_eq!(r.status, 404);
    let mut c = s.conn();
    let body = serde_json::to_vec(&modern("ping", json!({}))).unwrap();
    let q = format!("/mcp?{CANARY}=1");
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        h("Authorization", &auth),
        h("Content-Type", "application/json"),
    ];
    headers.extend(modern_headers("ping", None));
    let r = c.request("POST", &q, &headers, &body);
    assert_eq!(r.status, 200);
    // A handshake-era client: its clientInfo and negotiated version, remembered with its
    // MCP session, label its later calls.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "legacy-client", "version": "0.9"}}});
    let r = s.conn().mcp(TOKEN, &[], &init);
    let session = r.header("Mcp-Session-Id").expect("a session").to_string();
    let status = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "Initialize", "arguments": {"type": "status", "thread_id": CANARY,
        "workspace_root": ws}}});
    let r = s
        .conn()
        .mcp(TOKEN, &[h("Mcp-Session-Id", &session)], &status);
    assert_eq!(r.status, 200);
    s.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(s.wait_exit(HARD_TIMEOUT).is_some());
    let lines = log_lines(&logs);
    assert_no_canary(&logs);
    // Correlation: every HTTP tool call has an http_request with its request_id.
    let http_ids: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "http_request")
        .filter_map(|l| l["request_id"].as_str())
        .collect();
    let legacy: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "tool_call" && l["client_name"] == "legacy-client")
        .collect();
    assert_eq!(legacy.len(), 1, "{legacy:?}");
    assert_eq!(legacy[0]["protocol"], "2025-06-18");
    assert_eq!(legacy[0]["client_version"], "0.9");
    assert!(legacy[0]["mcp_session"].is_string());
    let tool_ids: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "tool_call" && l["client_name"] != "legacy-client")
        .map(|l| {
            assert_eq!(l["transport"], "http", "{l}");
            assert_eq!(l["protocol"], "2026-07-28", "{l}");
            assert!(l["mcp_session"].is_string(), "hashed conversation: {l}");
            l["request_id"]
                .as_str()
                .expect("an HTTP tool call has a request_id")
        })
        .collect();
    assert_eq!(tool_ids.len(), 36);
    for id in &tool_ids {
        assert!(http_ids.contains(id), "tool call {id} has no http_request");
    }
    let reasons: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "http_rejected")
        .filter_map(|l| l["reason"].as_str())
        .collect();
    assert!(
        reasons.contains(&"auth") && reasons.contains(&"foreign_session"),
        "{reasons:?}"
    );
}
