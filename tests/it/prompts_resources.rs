//! `prompts/*` and `resources/*` through the real binary (seed 003: "the same tools,
//! prompts, resources … over HTTP and stdio"): the handoff prompt and the embedded README,
//! in both protocol eras over stdio, and over HTTP with principal scoping and the
//! 2026-07-28 routing headers.

use crate::support;
use crate::support::http as http_support;

use http_support::{Home, Server, TOKEN, modern, modern_headers, path_str, two_principals};
use serde_json::{Value, json};
use support::Agent;

const README_URI: &str = "winx://docs/README.md";

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}})
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

fn message_text(r: &Value) -> &str {
    let m = &r["result"]["messages"];
    assert_eq!(m.as_array().unwrap().len(), 1, "{r}");
    assert_eq!(m[0]["role"], "user", "{r}");
    assert_eq!(m[0]["content"]["type"], "text", "{r}");
    m[0]["content"]["text"].as_str().unwrap()
}

fn readme() -> String {
    std::fs::read_to_string(support::manifest_dir().join("README.md")).unwrap()
}

#[test]
fn handshake_era_lists_and_reads_with_exactly_its_shapes() {
    let mut a = Agent::spawn();
    let r = a.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let caps = &r["result"]["capabilities"];
    assert_eq!(caps["prompts"], json!({"listChanged": false}), "{r}");
    assert_eq!(caps["resources"], json!({"listChanged": false}), "{r}");

    let r = a.request("prompts/list", json!({}));
    assert_eq!(keys(&r["result"]), ["prompts"], "{r}");
    let p = &r["result"]["prompts"][0];
    assert_eq!(p["name"], "handoff");
    let args: Vec<&str> = p["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(args, ["thread_id", "workspace_root"]);

    let r = a.request("resources/list", json!({}));
    assert_eq!(keys(&r["result"]), ["resources"], "{r}");
    let res = &r["result"]["resources"][0];
    assert_eq!(res["uri"], README_URI);
    assert_eq!(res["mimeType"], "text/markdown");
    assert!(res["name"].is_string() && res["title"].is_string());

    let r = a.request("resources/read", json!({"uri": README_URI}));
    assert_eq!(keys(&r["result"]), ["contents"], "{r}");
    let c = &r["result"]["contents"][0];
    assert_eq!(c["uri"], README_URI);
    assert_eq!(c["mimeType"], "text/markdown");
    assert_eq!(c["text"].as_str().unwrap(), readme());

    let r = a.request("resources/read", json!({"uri": "winx://docs/nope.md"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["uri"], "winx://docs/nope.md");

    // Without arguments the prompt says how to get a session instead of failing.
    let r = a.request("prompts/get", json!({"name": "handoff"}));
    assert_eq!(keys(&r["result"]), ["description", "messages"], "{r}");
    let text = message_text(&r);
    assert!(
        text.contains("Initialize") && text.contains("first_call"),
        "{text}"
    );

    let r = a.request("prompts/get", json!({"name": "nope"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn handoff_briefs_on_state_workspace_and_the_latest_memory() {
    let mut a = Agent::spawn();
    let ws = a.ws();
    std::fs::write(format!("{ws}/handoff-marker.txt"), "x").unwrap();
    let first = a.first_call();
    let (tid, wsr) = (
        first["data"]["thread_id"].as_str().unwrap().to_string(),
        first["data"]["workspace_root"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let pair = json!({"thread_id": tid, "workspace_root": wsr});
    for (id, desc) in [("older", "first notes"), ("newer", "port the parser to v2")] {
        let mut args = pair.clone();
        args["id"] = json!(id);
        args["description"] = json!(desc);
        args["relevant_file_globs"] = json!(["*.txt"]);
        let r = a.call("ContextSave", args);
        assert_eq!(r["isError"], false, "{r}");
    }
    let r = a.request(
        "prompts/get",
        json!({"name": "handoff", "arguments": {"thread_id": tid}}),
    );
    let text = message_text(&r);
    for needle in [
        tid.as_str(),
        wsr.as_str(),
        "mode: wcgw",
        "command running: none",
        "handoff-marker.txt",
        "port the parser to v2",
        "task_id_to_resume=\"newer\"",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert!(!text.contains("first notes"), "an older memory:\n{text}");

    // The workspace alone finds the workspace's session.
    let r = a.request(
        "prompts/get",
        json!({"name": "handoff", "arguments": {"workspace_root": wsr}}),
    );
    assert!(message_text(&r).contains(&tid), "{r}");

    let r = a.request(
        "prompts/get",
        json!({"name": "handoff", "arguments": {"thread_id": "ws_unknown_000000"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a known session")
    );
}

#[test]
fn stateless_era_gets_result_type_and_cache_fields() {
    let mut a = Agent::spawn();
    let r = a.request("server/discover", json!({"_meta": modern_meta()}));
    let caps = &r["result"]["capabilities"];
    assert_eq!(caps["prompts"], json!({"listChanged": false}), "{r}");
    assert_eq!(caps["resources"], json!({"listChanged": false}), "{r}");
    for method in ["prompts/list", "resources/list"] {
        let r = a.request(method, json!({"_meta": modern_meta()}));
        let res = &r["result"];
        assert_eq!(res["resultType"], "complete", "{method}: {r}");
        assert_eq!(res["cacheScope"], "private", "{method}: {r}");
        assert!(res["ttlMs"].is_u64(), "{method}: {r}");
    }
    let r = a.request(
        "resources/read",
        json!({"uri": README_URI, "_meta": modern_meta()}),
    );
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"].get("ttlMs").is_none(), "{r}");
    let r = a.request(
        "prompts/get",
        json!({"name": "handoff", "_meta": modern_meta()}),
    );
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(message_text(&r).contains("Initialize"));
}

#[test]
fn over_http_another_principals_thread_is_answered_like_an_unknown_one() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let first = json!({"type": "first_call", "workspace_root": ws});
    let pa = s.call(&alice, "Initialize", first)["structuredContent"]["data"].clone();
    let tid = pa["thread_id"].as_str().unwrap();
    let get = |token: &str, args: Value| {
        let r = s.conn().mcp(
            token,
            &modern_headers("prompts/get", Some("handoff")),
            &modern("prompts/get", json!({"name": "handoff", "arguments": args})),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let mine = get(&alice, json!({"thread_id": tid}));
    assert_eq!(mine["result"]["resultType"], "complete", "{mine}");
    assert!(message_text(&mine).contains(tid));

    let unknown = "ws_unknown_0000000000";
    let stolen = get(&bob, json!({"thread_id": tid}));
    let never = get(&bob, json!({"thread_id": unknown}));
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    assert_eq!(
        stolen["error"]["message"]
            .as_str()
            .unwrap()
            .replace(tid, "<id>"),
        never["error"]["message"]
            .as_str()
            .unwrap()
            .replace(unknown, "<id>"),
    );
    // Bob's workspace session does not exist: he is told how to start one.
    let bobs = get(&bob, json!({"workspace_root": pa["workspace_root"]}));
    let text = message_text(&bobs);
    assert!(
        text.contains("no winx session") && !text.contains(tid),
        "{text}"
    );

    // resources/read routes by its uri; a mismatched or missing Mcp-Name is refused.
    let read = modern("resources/read", json!({"uri": README_URI}));
    let r = s.conn().mcp(
        &alice,
        &modern_headers("resources/read", Some(README_URI)),
        &read,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["contents"][0]["text"], readme());
    for name in [Some("winx://other"), None] {
        let r = s
            .conn()
            .mcp(&alice, &modern_headers("resources/read", name), &read);
        assert_eq!(r.status, 400, "{name:?}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], -32020, "{name:?}");
    }
    let r = s.conn().mcp(
        &alice,
        &modern_headers("prompts/list", None),
        &modern("prompts/list", json!({})),
    );
    assert_eq!(r.json()["result"]["prompts"][0]["name"], "handoff");
}
