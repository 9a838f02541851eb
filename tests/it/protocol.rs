//! The real binary over stdio: JSON-RPC framing, both MCP protocol eras, bad input.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::Agent;

const MODERN: &str = "2026-07-28";

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}})
}

#[test]
fn legacy_initialize_negotiates_each_handshake_version() {
    let mut a = Agent::spawn();
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let r = a.request(
            "initialize",
            json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        assert_eq!(r["result"]["protocolVersion"], v);
        assert_eq!(r["result"]["serverInfo"]["name"], "winx-code-agent");
        assert!(r["result"]["capabilities"]["tools"].is_object());
        // Seed 003's orchestration contract, every clause of it.
        let instructions = r["result"]["instructions"].as_str().unwrap();
        for clause in [
            "Call Initialize once",
            "thread_id",
            "CodeMap before broad reads",
            "batch related files in one ReadFiles",
            "read before editing",
            "fail-fast checks with &&",
            "never repeat a rejected call unchanged",
        ] {
            assert!(instructions.contains(clause), "{clause}: {instructions}");
        }
    }
    let r = a.request(
        "initialize",
        json!({"protocolVersion": "1999-01-01", "capabilities": {}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    // notifications are never answered: the next line is the ping's answer.
    a.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // A handshake-era client gets exactly its era's shapes: strict clients (the TypeScript
    // SDK) reject unknown keys, even on ping.
    let r = a.request("ping", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r = a.request("tools/list", json!({}));
    let keys: Vec<&String> = r["result"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tools"], "{r}");
    let ws = a.ws();
    let r = a.request(
        "tools/call",
        json!({"name": "Initialize", "arguments": {"type": "first_call", "workspace_root": ws}}),
    );
    assert!(r["result"].get("resultType").is_none(), "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
}

#[test]
fn modern_discover_and_list_carry_stateless_fields() {
    let mut a = Agent::spawn();
    let r = a.request("server/discover", json!({"_meta": modern_meta()}));
    let res = &r["result"];
    assert_eq!(res["supportedVersions"][0], MODERN);
    assert!(
        res["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2024-11-05"))
    );
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["cacheScope"], "private");
    assert!(res["ttlMs"].as_u64().is_some());
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "winx-code-agent"
    );
    let r = a.request("tools/list", json!({"_meta": modern_meta()}));
    let res = &r["result"];
    assert_eq!(res["resultType"], "complete");
    assert!(res["ttlMs"].is_u64() && res["cacheScope"].is_string());
    let ws = a.ws();
    let r = a.request(
        "tools/call",
        json!({"name": "Initialize", "arguments": {"type": "first_call", "workspace_root": ws}, "_meta": modern_meta()}),
    );
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["isError"], false);
}

#[test]
fn unsupported_modern_version_is_refused_with_the_supported_list() {
    let mut a = Agent::spawn();
    for method in ["server/discover", "tools/list", "tools/call"] {
        let r = a.request(
            method,
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
        );
        assert_eq!(r["error"]["code"], -32022, "{method}: {r}");
        assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
        assert!(
            r["error"]["data"]["supported"]
                .as_array()
                .unwrap()
                .contains(&json!(MODERN))
        );
    }
}

#[test]
fn malformed_messages_get_structured_errors_and_serving_continues() {
    let mut a = Agent::spawn_with(support::Opts {
        env: &[("WINX_LOG", "trace")],
        ..Default::default()
    });
    let cases: &[(&[u8], Value, i64)] = &[
        (b"{not json\n", Value::Null, -32700),
        (b"\xff\x00\xfe\n", Value::Null, -32700),
        (b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n", Value::Null, -32600),
        (b"{\"jsonrpc\":\"1.0\",\"id\":11,\"method\":\"ping\"}\n", json!(11), -32600),
        (b"{\"jsonrpc\":\"2.0\",\"id\":12}\n", json!(12), -32600),
        (b"{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"no/such\"}\n", json!(13), -32601),
        (b"{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{}}\n", json!(14), -32602),
        (b"{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\",\"params\":{\"name\":\"Initialize\",\"arguments\":\"x\"}}\n", json!(15), -32602),
        (b"{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\",\"params\":[1]}\n", json!(16), -32602),
        (b"{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}\n", Value::Null, -32600),
    ];
    for (bytes, id, code) in cases {
        a.send_raw(bytes);
        let r = a.recv();
        assert_eq!(
            (&r["id"], &r["error"]["code"]),
            (id, &json!(code)),
            "input {:?}",
            String::from_utf8_lossy(bytes)
        );
        assert!(r["error"]["message"].as_str().unwrap().len() > 5);
    }
    let r = a.request("ping", json!({}));
    assert!(r["result"].is_object());
    // Logs went to stderr, never stdout (support panics on a non-JSON stdout line).
    assert!(!a.stderr_log().is_empty());
}

#[test]
fn an_oversized_line_is_rejected_without_losing_the_next_message() {
    let mut a = Agent::spawn();
    let mut big = Vec::with_capacity(65 * 1024 * 1024);
    big.extend_from_slice(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"",
    );
    big.resize(64 * 1024 * 1024 + 10, b'a');
    big.extend_from_slice(b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
    a.send_raw(&big);
    let r = a.recv();
    assert_eq!(
        (&r["id"], &r["error"]["code"]),
        (&Value::Null, &json!(-32600))
    );
    assert!(r["error"]["message"].as_str().unwrap().contains("limit"));
    assert_eq!(a.recv()["id"], 2);
}

#[test]
fn unknown_tools_and_bad_arguments_are_tool_errors() {
    let mut a = Agent::spawn();
    let r = a.call("NoSuchTool", json!({}));
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["errorCode"], "unknown_tool");
    let available = r["structuredContent"]["data"]["available_tools"]
        .as_array()
        .unwrap();
    assert!(available.contains(&json!("Initialize")) && available.contains(&json!("BashCommand")));
    let r = a.call("Initialize", json!({"type": "first_call", "bogus": 1}));
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    assert!(
        r["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("bogus")
    );
    let r = a.call("Initialize", json!({"type": 7}));
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": "x".repeat(70_000)}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": "/no/such/dir/winx"}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "workspace_invalid");
    // A tool name that is a huge string is echoed only as a bounded prefix.
    let r = a.call(&"Z".repeat(100_000), json!({}));
    assert!(r["structuredContent"]["tool"].as_str().unwrap().len() <= 128);
}

#[test]
fn exits_promptly_on_stdin_eof() {
    let mut a = Agent::spawn();
    a.request("ping", json!({}));
    a.close_stdin();
    let status = a.wait_exit(Duration::from_secs(5)).expect("exited");
    assert!(status.success());
}

#[test]
fn concurrent_requests_are_all_answered() {
    let mut a = Agent::spawn();
    let ws = a.ws();
    for id in 100..164 {
        a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "Initialize", "arguments": {"type": "first_call", "workspace_root": ws}}}));
    }
    let mut ids: Vec<i64> = (0..64).map(|_| a.recv()["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (100..164).collect::<Vec<_>>());
}

/// JSON-RPC lets a client reuse an id once its answer has arrived. The id used to stay
/// registered as in flight until just after the answer was written, so a client that
/// reused it at once was refused now and then ("request id 1 is already in flight"; this
/// loop failed within 48 to 3,234 rounds, three runs of three).
#[test]
fn an_id_may_be_reused_as_soon_as_its_answer_arrives() {
    let mut a = Agent::spawn();
    for round in 0..20000 {
        a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
        let r = a.recv();
        assert_eq!(r["id"], 1);
        assert!(r.get("error").is_none(), "round {round}: {r}");
    }
}
