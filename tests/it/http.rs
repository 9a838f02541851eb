//! `serve --http` over real sockets on 127.0.0.1 (seed 003): start-up failures,
//! authentication, protocol eras and principals. Limits are in `http_limits`, faults, drain
//! and load in `http_load`.

use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use std::time::Duration;

// ---- Startup failures --------------------------------------------------------------

#[test]
fn public_bind_without_acknowledgement_is_a_startup_failure() {
    let home = Home::new();
    let tok = home.secret("token", TOKEN);
    for bind in ["0.0.0.0:0", "[::]:0", "192.168.1.20:8000"] {
        let out = home.start_failing(
            &["serve", "--http", "--bind", bind, "--token-file", &tok],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{bind}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not a loopback address") && err.contains("--allow-non-loopback"),
            "{err}"
        );
    }
    // Acknowledged, a wildcard listener starts (and is reached over loopback only).
    let s = Server::start_in(
        Home::new(),
        &["--allow-non-loopback", "--bind", "0.0.0.0:0"],
        &[],
        true,
    );
    assert!(s.addr.ip().is_unspecified());
}

#[test]
fn missing_two_weak_or_unsafe_credentials_are_startup_failures() {
    let home = Home::new();
    let good = home.secret("token", TOKEN);
    let weak = home.secret("weak", "short\n");
    let open = home.path("open");
    std::fs::write(&open, TOKEN).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let link = home.path("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let dir = home.path("home");
    let http = ["serve", "--http", "--bind", "127.0.0.1:0"];
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (vec![], vec![], "exactly one credential source"),
        (
            vec!["--token-file", &good, "--token", TOKEN],
            vec![],
            "--token-file and --token",
        ),
        (
            vec!["--token", TOKEN],
            vec![("WINX_HTTP_TOKEN", TOKEN)],
            "--token and WINX_HTTP_TOKEN",
        ),
        (vec!["--token-file", &weak], vec![], "at least 32"),
        (vec!["--token", "short"], vec![], "at least 32"),
        (vec![], vec![("WINX_HTTP_TOKEN", "short")], "at least 32"),
        (
            vec!["--token-file", open.to_str().unwrap()],
            vec![],
            "group or others",
        ),
        (
            vec!["--token-file", link.to_str().unwrap()],
            vec![],
            "symlink",
        ),
        (
            vec!["--token-file", dir.to_str().unwrap()],
            vec![],
            "not a regular file",
        ),
        (
            vec!["--token-file", "/nonexistent/token"],
            vec![],
            "cannot open token file",
        ),
    ];
    for (args, env, needle) in cases {
        let all: Vec<&str> = http.iter().copied().chain(args.iter().copied()).collect();
        let out = home.start_failing(&all, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
        assert!(!err.contains(TOKEN), "a token leaked into the error: {err}");
    }
    // --allow-weak-token is the explicit local-testing escape hatch.
    let s = Server::start_in(
        Home::new(),
        &["--token", "short", "--allow-weak-token"],
        &[],
        false,
    );
    assert_eq!(
        s.conn()
            .mcp(
                "short",
                &modern_headers("server/discover", None),
                &discover()
            )
            .status,
        200
    );
}

#[test]
fn principal_config_problems_are_startup_failures() {
    let home = Home::new();
    let a = home.secret("a.token", &format!("{TOKEN}-a"));
    let b = home.secret("b.token", &format!("{TOKEN}-b"));
    let entry = |name: &str, file: &str, extra: &str| {
        format!("[[principals]]\nname = \"{name}\"\ntoken_file = \"{file}\"\n{extra}\n")
    };
    let cases = vec![
        (
            entry("a", &a, "") + &entry("a", &b, ""),
            "duplicate principal name",
        ),
        (
            entry("a", &a, "") + &entry("A", &b, ""),
            "duplicate principal name",
        ),
        (entry("a", &a, "") + &entry("b", &a, ""), "share a token"),
        (entry("a", &a, "colour = \"red\""), "unknown field"),
        ("principals = []\nextra = 1\n".to_string(), "unknown field"),
        (
            entry("a", &a, "allowed_tools = [\"bashcommand\"]"),
            "unknown tool",
        ),
        (entry("a", &a, "allowed_tools = []"), "cannot be empty"),
        (
            entry("a", &a, "tool_profile = \"everything\""),
            "unknown tool profile",
        ),
        (
            entry("a", &a, "token_env = \"X\""),
            "exactly one of token_file or token_env",
        ),
        (
            "[[principals]]\nname = \"a\"\n".to_string(),
            "exactly one of token_file or token_env",
        ),
        (entry("a b", &a, ""), "ASCII letters"),
        (entry("ci", "/nope", ""), "cannot open token file"),
        (
            "[[principals]]\nname = \"ci\"\ntoken_env = \"WINX_TEST_UNSET\"\n".to_string(),
            "not set",
        ),
        ("principals = []\n".to_string(), "no [[principals]]"),
    ];
    for (toml, needle) in cases {
        let cfg = principal_config(&home, &toml);
        let out = home.principal_config_failure(&cfg);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}: {err}");
        assert!(
            err.contains(needle),
            "expected {needle:?} for\n{toml}\ngot: {err}"
        );
    }
    let cfg = principal_config(&home, &entry("a", &a, ""));
    let out = home.start_failing(
        &[
            "serve",
            "--http",
            "--bind",
            "127.0.0.1:0",
            "--principal-config",
            &cfg,
            "--tool-profile",
            "coding",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn thread_and_conversation_affinity_are_refused_until_implemented() {
    let home = Home::new();
    let tok = home.secret("token", TOKEN);
    {
        let mode = "bogus";
        let out = home.start_failing(
            &[
                "serve",
                "--http",
                "--bind",
                "127.0.0.1:0",
                "--token-file",
                &tok,
                "--session-affinity",
                mode,
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{mode}");
    }
    let s = Server::start(&["--session-affinity", "workspace"]);
    assert_eq!(
        s.post(&discover()).status,
        400,
        "modern body without headers is a mismatch"
    );
}

// ---- Authentication ------------------------------------------------------------------

#[test]
fn missing_or_invalid_token_is_401_after_100ms() {
    let s = Server::start(&[]);
    let hdrs = modern_headers("server/discover", None);
    let ok = s.conn().mcp(TOKEN, &hdrs, &discover());
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["result"]["supportedVersions"][0], "2026-07-28");
    for bad in ["wrong-token-0123456789abcdef0123456789abcdef", ""] {
        let r = s.conn().mcp(bad, &hdrs, &discover());
        assert_eq!(r.status, 401);
        assert_eq!(r.header("WWW-Authenticate"), Some("Bearer"));
        assert!(
            r.elapsed >= Duration::from_millis(100),
            "401 after {:?}",
            r.elapsed
        );
    }
    let mut c = s.conn();
    let r = c.request(
        "POST",
        "/mcp",
        &[h("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(r.status, 401);
    assert!(r.elapsed >= Duration::from_millis(100));
    // Keep-alive survives a 401.
    assert_eq!(c.mcp(TOKEN, &hdrs, &discover()).status, 200);
}

#[test]
fn query_token_only_with_allow_query_token() {
    let body = serde_json::to_vec(&discover()).unwrap();
    let mut hdrs = modern_headers("server/discover", None);
    hdrs.push(h("Content-Type", "application/json"));
    let path = format!("/mcp?token={TOKEN}");
    let off = Server::start(&[]);
    assert_eq!(off.conn().request("POST", &path, &hdrs, &body).status, 401);
    let on = Server::start(&["--allow-query-token"]);
    let r = on.conn().request("POST", &path, &hdrs, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        on.conn()
            .request("POST", "/mcp?token=nope", &hdrs, &body)
            .status,
        401
    );
}

#[test]
fn discovery_probes_are_plain_404_and_mcp_stays_protected() {
    let s = Server::start(&[]);
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
        "/",
        "/mcp/extra",
    ] {
        let r = s.conn().request("GET", path, &[], b"");
        assert_eq!(r.status, 404, "{path}");
        assert!(
            r.header("WWW-Authenticate").is_none(),
            "{path} asked for auth"
        );
        assert!(
            r.elapsed < Duration::from_millis(100),
            "{path} was delayed like a 401"
        );
    }
    assert_eq!(s.conn().request("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(s.conn().request("GET", "/readyz", &[], b"").status, 200);
    assert_eq!(s.conn().request("GET", "/mcp", &[], b"").status, 401);
}

// ---- Protocol eras -------------------------------------------------------------------

#[test]
fn modern_stateless_discovery_listing_and_header_checks() {
    let s = Server::start(&["--tool-profile", "terminal"]);
    let list = s.conn().mcp(
        TOKEN,
        &modern_headers("tools/list", None),
        &modern("tools/list", json!({})),
    );
    assert_eq!(list.status, 200);
    assert!(
        list.header("Mcp-Session-Id").is_none(),
        "stateless requests get no session"
    );
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Initialize", "BashCommand", "Execution", "Agent"]);
    // Mismatched method header.
    let r = s.conn().mcp(
        TOKEN,
        &modern_headers("tools/call", None),
        &modern("tools/list", json!({})),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
    // Mcp-Name disagrees with the tool name.
    let call = modern("tools/call", json!({"name": "Initialize", "arguments": {}}));
    let r = s.conn().mcp(
        TOKEN,
        &modern_headers("tools/call", Some("BashCommand")),
        &call,
    );
    assert_eq!(r.json()["error"]["code"], -32020);
    // Unsupported version.
    let mut bad = modern("tools/list", json!({}));
    bad["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let hdrs = vec![
        h("MCP-Protocol-Version", "2099-01-01"),
        h("Mcp-Method", "tools/list"),
    ];
    let r = s.conn().mcp(TOKEN, &hdrs, &bad);
    assert_eq!(r.status, 400);
    let e = &r.json()["error"];
    assert_eq!(e["code"], -32022);
    assert!(
        e["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    // A missing Accept header is fine; an SSE-only client gets one event.
    let mut c = s.conn();
    let mut hdrs = auth_headers(TOKEN);
    hdrs.extend(modern_headers("server/discover", None));
    let body = serde_json::to_vec(&discover()).unwrap();
    assert_eq!(c.request("POST", "/mcp", &hdrs, &body).status, 200);
    hdrs.push(h("Accept", "text/event-stream"));
    let r = c.request("POST", "/mcp", &hdrs, &body);
    assert_eq!(r.header("Content-Type"), Some("text/event-stream"));
    assert!(
        r.text().starts_with("event: message\ndata: {"),
        "{}",
        r.text()
    );
    hdrs.pop();
    hdrs.push(h("Accept", "text/html"));
    assert_eq!(c.request("POST", "/mcp", &hdrs, &body).status, 406);
}

fn initialize_body(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[test]
fn legacy_session_initialization_and_lifecycle() {
    let s = Server::start(&[]);
    // initialize is never refused for its version header.
    let r = s.conn().mcp(
        TOKEN,
        &[h("MCP-Protocol-Version", "1999-01-01")],
        &initialize_body("2025-06-18"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    let sid = r.header("Mcp-Session-Id").expect("session id").to_string();
    assert!(
        sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{sid}"
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let with = |extra: Vec<(String, String)>, body: &Value| s.conn().mcp(TOKEN, &extra, body);
    let session = |v: &str| vec![h("Mcp-Session-Id", &sid), h("MCP-Protocol-Version", v)];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = with(session("2025-06-18"), &note);
    assert_eq!((r.status, r.body.len()), (202, 0));
    assert_eq!(with(vec![], &list).status, 400, "missing session");
    assert_eq!(
        with(vec![h("Mcp-Session-Id", "nope")], &list).status,
        404,
        "unknown session"
    );
    let ok = with(session("2025-06-18"), &list);
    assert_eq!(ok.status, 200);
    assert!(ok.json()["result"]["tools"].is_array());
    // Absent version header means 2025-03-26; an unsupported one is 400.
    assert_eq!(with(vec![h("Mcp-Session-Id", &sid)], &list).status, 200);
    assert_eq!(with(session("2030-01-01"), &list).status, 400);
    // A client response is accepted without a body.
    let response = json!({"jsonrpc": "2.0", "id": 9, "result": {}});
    assert_eq!(with(session("2025-06-18"), &response).status, 202);
    // No server-initiated stream.
    let mut g = auth_headers(TOKEN);
    g.push(h("Mcp-Session-Id", &sid));
    assert_eq!(s.conn().request("GET", "/mcp", &g, b"").status, 405);
    // Another principal's (or no) session: DELETE ends it, after which it is unknown.
    assert_eq!(s.conn().request("DELETE", "/mcp", &g, b"").status, 204);
    assert_eq!(s.conn().request("DELETE", "/mcp", &g, b"").status, 404);
    assert_eq!(with(session("2025-06-18"), &list).status, 404);
}

// ---- Principals and isolation --------------------------------------------------------

fn tool_names(s: &Server, token: &str) -> Vec<String> {
    let r = s.conn().mcp(
        token,
        &modern_headers("tools/list", None),
        &modern("tools/list", json!({})),
    );
    r.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn per_principal_tool_policy_at_discovery_and_dispatch() {
    let home = Home::new();
    let cfg = two_principals(&home, "allowed_tools = [\"Initialize\"]");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (a, b) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    assert!(tool_names(&s, &a).contains(&"BashCommand".to_string()));
    assert_eq!(tool_names(&s, &b), ["Initialize"]);
    let r = s.call(
        &b,
        "BashCommand",
        json!({"action_json": {"command": "true"}}),
    );
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["errorCode"], "policy_blocked");
    assert_eq!(
        s.conn().mcp(TOKEN, &[], &discover()).status,
        401,
        "no default principal"
    );
}

#[test]
fn two_principals_with_the_same_external_id_do_not_cross() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (a, b) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let first = json!({"type": "first_call", "workspace_root": ws, "thread_id": "shared-id"});
    let pa = s.call(&a, "Initialize", first.clone())["structuredContent"]["data"].clone();
    let pb = s.call(&b, "Initialize", first)["structuredContent"]["data"].clone();
    assert_ne!(
        pa["thread_id"], pb["thread_id"],
        "principals share a namespace"
    );
    let run = |token: &str, pair: &Value, cmd: &str| {
        s.call(
            token,
            "BashCommand",
            json!({"thread_id": pair["thread_id"],
            "workspace_root": pair["workspace_root"], "action_json": {"command": cmd},
            "wait_for_seconds": 10}),
        )
    };
    let ra = run(&a, &pa, "export WHO=alice; echo shell-$$");
    assert_eq!(ra["isError"], false, "{ra}");
    // Bob presenting Alice's external ID reaches nothing of hers.
    let stolen = run(&b, &pa, "echo $WHO");
    assert_eq!(stolen["isError"], true, "{stolen}");
    assert_eq!(stolen["structuredContent"]["status"], "needs_initialize");
    let rb = run(&b, &pb, "echo who=$WHO");
    assert!(
        !rb["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("who=alice"),
        "{rb}"
    );
}

#[test]
fn one_principal_and_workspace_reuse_a_session_despite_unstable_first_call_ids() {
    let s = Server::start(&[]);
    let ws = path_str(&s.home.workspace);
    let ids: Vec<Value> = ["release_02333", "release_0_2_333", ""]
        .iter()
        .map(|id| {
            let r = s.call(
                TOKEN,
                "Initialize",
                json!({"type": "first_call", "workspace_root": ws, "thread_id": id}),
            );
            r["structuredContent"]["data"]["thread_id"].clone()
        })
        .collect();
    assert!(ids[0].as_str().unwrap().starts_with("ws_"), "{ids:?}");
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
}
