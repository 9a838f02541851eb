//! `serve --http` over real sockets on 127.0.0.1 (seed 003): one test per row of
//! "Resource limits and responses" and per HTTP item of "Verification coverage", plus
//! the transport's own contract (eras, sessions, probes, bad input, drain, load).

use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use std::time::Duration;

fn auth_headers(token: &str) -> Vec<(String, String)> {
    vec![
        h("Authorization", &format!("Bearer {token}")),
        h("Content-Type", "application/json"),
    ]
}

fn assert_retry_after(r: &Resp, status: u16) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(
        r.header("Retry-After"),
        Some("1"),
        "{status} without Retry-After"
    );
}

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

// ---- Limits --------------------------------------------------------------------------

#[test]
fn source_over_the_window_gets_429_with_retry_after() {
    let s = Server::start(&["--requests-per-minute", "3"]);
    let mut c = s.conn();
    let hdrs = modern_headers("server/discover", None);
    for _ in 0..3 {
        assert_eq!(c.mcp(TOKEN, &hdrs, &discover()).status, 200);
    }
    assert_retry_after(&c.mcp(TOKEN, &hdrs, &discover()), 429);
    // Unauthenticated requests from the same source are limited too; probes are not.
    assert_retry_after(&s.conn().mcp("wrong", &hdrs, &discover()), 429);
    assert_eq!(s.conn().request("GET", "/healthz", &[], b"").status, 200);
}

/// A discover request with a 2 KiB body, so a partial body can be held on the wire.
fn padded_discover() -> Value {
    modern("server/discover", json!({"pad": "x".repeat(2048)}))
}

/// A request admitted and then held: its head promises a body that never fully arrives.
fn hold_a_request(s: &Server) -> Conn {
    let mut c = s.conn();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr);
    for (k, v) in auth_headers(TOKEN)
        .into_iter()
        .chain(modern_headers("server/discover", None))
    {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = serde_json::to_vec(&padded_discover()).unwrap();
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    c.send_raw(head.as_bytes()).unwrap();
    c.send_raw(&body[..10]).unwrap();
    c
}

/// Hold a request that owns the only dispatch slot (`--max-concurrency 1`): a
/// `BashCommand` waiting on a gate. A slow body holds no slot (bodies are read before a
/// slot is taken), so a running handler is what holds it.
fn hold_admitted(s: &Server) -> Held {
    blocked_call(s, TOKEN, "held")
}

#[test]
fn global_concurrency_exhausted_gets_503_with_retry_after() {
    let s = Server::start(&["--max-concurrency", "1", "--requests-per-minute", "1000000"]);
    let held = hold_admitted(&s);
    let hdrs = modern_headers("server/discover", None);
    assert_retry_after(&s.conn().mcp(TOKEN, &hdrs, &discover()), 503);
    assert_eq!(held.release(), 200);
    assert_eq!(s.conn().mcp(TOKEN, &hdrs, &discover()).status, 200);
}

#[test]
fn slow_body_past_the_request_deadline_gets_408() {
    let home = Home::new();
    let env = [
        ("WINX_HTTP_REQUEST_TIMEOUT_MS", "400"),
        ("WINX_HTTP_IO_TIMEOUT_MS", "100"),
    ];
    let s = Server::start_in(home, &[], &env, true);
    let mut held = hold_a_request(&s);
    let r = held.read().expect("408 for the stalled body");
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(r.text().contains("request timeout"), "{}", r.text());
    // The server keeps serving others.
    let hdrs = modern_headers("server/discover", None);
    assert_eq!(s.conn().mcp(TOKEN, &hdrs, &discover()).status, 200);
}

#[test]
fn stalled_connections_close_after_the_io_timeout_and_accepting_continues() {
    let env = [("WINX_HTTP_IO_TIMEOUT_MS", "100")];
    let s = Server::start_in(Home::new(), &[], &env, true);
    let hdrs = modern_headers("server/discover", None);
    // Each wait below is the server closing a stalled connection (EOF), several I/O
    // timeouts in a row: longer than the listener's own accept timeout.
    for _ in 0..5 {
        let mut idle = s.conn();
        assert_eq!(idle.mcp(TOKEN, &hdrs, &discover()).status, 200);
        assert!(
            idle.read().is_err(),
            "an idle keep-alive connection stayed open"
        );
        let mut slow = s.conn();
        slow.send_raw(format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr).as_bytes())
            .unwrap();
        assert!(
            slow.read().is_err(),
            "a stalled request head held its connection"
        );
    }
    assert_eq!(s.conn().mcp(TOKEN, &hdrs, &discover()).status, 200);
}

#[test]
fn handler_past_the_request_deadline_gets_408_and_the_work_continues() {
    let env = [("WINX_HTTP_REQUEST_TIMEOUT_MS", "1500")];
    let s = Server::start_in(Home::new(), &[], &env, true);
    let ws = path_str(&s.home.workspace);
    let init = s.call(
        TOKEN,
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let pair = &init["structuredContent"]["data"];
    // The command waits for the test, so it is still running when the 408 is sent.
    let gate = crate::support::tasks::Gate::in_dir(&s.home.workspace);
    let cmd = format!(
        "read x < {}; echo done-after-408 | tee after-408",
        crate::support::tasks::q(&gate.0)
    );
    let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
        "action_json": {"command": cmd}, "wait_for_seconds": 30,
        "wait_policy": "until_complete"});
    let r = s.conn().mcp(
        TOKEN,
        &modern_headers("tools/call", Some("BashCommand")),
        &modern(
            "tools/call",
            json!({"name": "BashCommand", "arguments": args}),
        ),
    );
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(
        r.elapsed < Duration::from_secs(3),
        "408 after {:?}",
        r.elapsed
    );
    // The command still runs in its shell, and completes once let go.
    gate.open("go");
    let mut out = String::new();
    for _ in 0..10 {
        let st = s.call(
            TOKEN,
            "BashCommand",
            json!({"thread_id": pair["thread_id"],
            "workspace_root": pair["workspace_root"], "action_json": {"status_check": true},
            "wait_for_seconds": 1}),
        );
        out.push_str(st["content"][0]["text"].as_str().unwrap_or_default());
        if out.contains("status: exited") {
            break;
        }
    }
    // Its output went to whichever call was following it (the timed-out handler goes on
    // following it too); the file and the exit code show it ran to the end.
    assert!(out.contains("status: exited, exit code 0"), "{out}");
    let after = std::fs::read_to_string(s.home.workspace.join("after-408")).unwrap();
    assert_eq!(after, "done-after-408\n");
}

#[test]
fn body_over_64_mib_gets_413_before_dispatch() {
    let s = Server::start(&[]);
    let mut hdrs = auth_headers(TOKEN);
    hdrs.extend(modern_headers("server/discover", None));
    // Declared too large: refused from the head, body never read.
    let mut c = s.conn();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr);
    for (k, v) in &hdrs {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let declared = format!("{head}Content-Length: {}\r\n\r\n", 64 * 1024 * 1024 + 1);
    c.send_raw(declared.as_bytes()).unwrap();
    assert_eq!(c.read().unwrap().status, 413);
    // An absurd declared length: still a clean 413 from the head, nothing allocated.
    let mut c = s.conn();
    let absurd = format!("{head}Content-Length: 99999999999999\r\n\r\n");
    c.send_raw(absurd.as_bytes()).unwrap();
    assert_eq!(c.read().unwrap().status, 413);
    // Chunked: counted as it streams. 64 chunks of 1 MiB are exactly the cap; one more
    // byte crosses it (and leaves nothing unread behind the 413).
    let mut c = s.conn();
    c.send_raw(format!("{head}Transfer-Encoding: chunked\r\n\r\n").as_bytes())
        .unwrap();
    let mut frame = format!("{:x}\r\n", 1 << 20).into_bytes();
    frame.extend_from_slice(&vec![b' '; 1 << 20]);
    frame.extend_from_slice(b"\r\n");
    for _ in 0..64 {
        c.send_raw(&frame).unwrap();
    }
    c.send_raw(b"1\r\nx\r\n").unwrap();
    assert_eq!(c.read().unwrap().status, 413);
    let ok = s
        .conn()
        .mcp(TOKEN, &modern_headers("server/discover", None), &discover());
    assert_eq!(ok.status, 200, "the server keeps serving");
}

#[test]
fn oversized_request_heads_get_431_and_the_server_keeps_serving() {
    let s = Server::start(&[]);
    let mut base = auth_headers(TOKEN);
    base.extend(modern_headers("server/discover", None));
    let body = serde_json::to_vec(&discover()).unwrap();
    // One 1 MiB header line.
    let mut big = base.clone();
    big.push(h("X-Filler", &"a".repeat(1 << 20)));
    let r = s.conn().request("POST", "/mcp", &big, &body);
    assert_eq!(r.status, 431, "{}", r.text());
    // Many small fields, and a huge URL: the same answer, even unauthenticated.
    let mut many = base.clone();
    many.extend((0..200).map(|i| h(&format!("X-F{i}"), "v")));
    assert_eq!(s.conn().request("POST", "/mcp", &many, &body).status, 431);
    let url = format!("/mcp?{}", "q".repeat(70 * 1024));
    assert_eq!(s.conn().request("GET", &url, &[], b"").status, 431);
    // Just under the limits is served.
    let mut fine = base.clone();
    fine.push(h("X-Filler", &"a".repeat(32 * 1024)));
    assert_eq!(s.conn().request("POST", "/mcp", &fine, &body).status, 200);
}

#[test]
fn host_and_origin_are_validated() {
    let s = Server::start(&["--allowed-host", "mcp.example.com"]);
    let mut base = auth_headers(TOKEN);
    base.extend(modern_headers("server/discover", None));
    let body = serde_json::to_vec(&discover()).unwrap();
    let with = |extra: &[(String, String)]| {
        let mut all = base.clone();
        all.extend(extra.iter().cloned());
        s.conn().request("POST", "/mcp", &all, &body).status
    };
    assert_eq!(with(&[]), 200);
    assert_eq!(with(&[h("Host", "localhost:8000")]), 200);
    assert_eq!(with(&[h("Host", "mcp.example.com")]), 200);
    assert_eq!(with(&[h("Host", "evil.example")]), 421);
    // Another local port is another site (tests/it/http_hostile.rs has the rest).
    assert_eq!(with(&[h("Origin", "http://localhost:5173")]), 403);
    assert_eq!(with(&[h("Origin", "https://mcp.example.com")]), 200);
    assert_eq!(with(&[h("Origin", "https://evil.example")]), 403);
    assert_eq!(with(&[h("Origin", "null")]), 403);
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

// ---- Faults, drain, load ---------------------------------------------------------------

#[test]
fn bad_input_is_refused_and_the_server_keeps_serving() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    c.send_raw(b"GARBAGE\r\n\r\n").unwrap();
    assert_eq!(c.read().unwrap().status, 400);
    let mut hdrs = auth_headers(TOKEN);
    let r = s.conn().request("POST", "/mcp", &hdrs, b"{not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    let r = s.conn().request("POST", "/mcp", &hdrs, b"[]");
    assert_eq!(r.status, 400);
    hdrs[1] = h("Content-Type", "text/plain");
    assert_eq!(s.conn().request("POST", "/mcp", &hdrs, b"{}").status, 415);
    // A client that disconnects mid-request frees its worker.
    for _ in 0..4 {
        drop(hold_a_request(&s));
    }
    // Thousands of bogus session IDs: each a 404, no growth, still serving.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let mut c = s.conn();
    for i in 0..2000 {
        let r = c.mcp(TOKEN, &[h("Mcp-Session-Id", &format!("bogus-{i}"))], &list);
        if r.status == 429 {
            break;
        }
        assert_eq!(r.status, 404);
    }
    let hdrs = modern_headers("server/discover", None);
    let _ = s.conn().mcp(TOKEN, &hdrs, &discover());
    assert!(s.conn().request("GET", "/healthz", &[], b"").status == 200);
}

#[test]
fn sigterm_flips_readiness_and_finishes_in_flight_requests() {
    let mut s = Server::start(&["--max-concurrency", "1", "--requests-per-minute", "1000000"]);
    // The held request must be in flight (admitted) before the signal.
    let held = hold_admitted(&s);
    s.signal(nix::sys::signal::Signal::SIGTERM);
    let mut readiness = 0;
    for _ in 0..200 {
        readiness = s.conn().request("GET", "/readyz", &[], b"").status;
        if readiness == 503 {
            break;
        }
    }
    assert_eq!(readiness, 503, "readiness never flipped");
    assert_retry_after(&s.post(&discover()), 503);
    assert_eq!(held.release(), 200, "in-flight request was cut");
    let status = s
        .wait_exit(Duration::from_secs(10))
        .expect("server did not exit after draining");
    assert!(status.success(), "{status:?}\n{}", s.stderr_log());
}

#[test]
fn load_32_clients_see_only_success_or_retry_after() {
    for (args, allowed) in [
        (vec![], vec![200u16, 429]),
        (
            vec!["--requests-per-minute", "1000000", "--max-concurrency", "4"],
            vec![200, 503],
        ),
    ] {
        let s = Server::start(&args);
        let idle_rss = s.rss_kib();
        let addr = s.addr;
        let threads: Vec<_> = (0..32)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut c = Conn::connect(addr);
                    let hdrs = modern_headers("server/discover", None);
                    (0..100)
                        .map(|_| {
                            let r = c.mcp(TOKEN, &hdrs, &discover());
                            (r.status, r.header("Retry-After").map(str::to_string))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut counts = std::collections::BTreeMap::new();
        for t in threads {
            for (status, retry) in t.join().unwrap() {
                assert!(allowed.contains(&status), "{args:?}: status {status}");
                if status != 200 {
                    assert_eq!(retry.as_deref(), Some("1"), "{status} without Retry-After");
                }
                *counts.entry(status).or_insert(0u32) += 1;
            }
        }
        assert!(counts.get(&200).copied().unwrap_or(0) > 0, "{counts:?}");
        let rss = s.rss_kib();
        eprintln!("{args:?}: {counts:?}, RSS idle {idle_rss} KiB, after {rss} KiB");
        assert!(
            rss < idle_rss + 16 * 1024,
            "RSS grew from {idle_rss} to {rss} KiB"
        );
    }
}

/// The bytes of a POST to /mcp with the default token, `extra` headers and `body`.
fn post_bytes(s: &Server, extra: &[(String, String)], body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr);
    for (k, v) in auth_headers(TOKEN).iter().chain(extra) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// Requests written all at once on one connection — a head longer than the connection's
/// first read buffer, a body of many reads, an answer far larger than one socket write,
/// then a `ping` answered on the connection's own thread — are answered in order, each
/// framed on its own (issue 18: the read buffer grows and compacts in place, an answer
/// goes out as one vectored write of head and body, cheap calls skip the worker pool).
#[test]
fn pipelined_long_heads_bodies_and_answers_keep_their_framing() {
    let s = Server::start(&["--requests-per-minute", "1000000"]);
    // Four files of 1 MiB: ReadFiles answers its whole call budget (256 KiB of text).
    let big = "0123456789abcdef\n".repeat(64 * 1024);
    let files: Vec<String> = (0..4).map(|i| format!("big{i}.txt")).collect();
    for f in &files {
        std::fs::write(s.home.workspace.join(f), &big).unwrap();
    }
    let ws = path_str(&s.home.workspace);
    let init = s.call(
        TOKEN,
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let pair = &init["structuredContent"]["data"];
    let mut discover = modern("server/discover", json!({"pad": "x".repeat(300 * 1024)}));
    discover["id"] = json!(1);
    let mut long_head = modern_headers("server/discover", None);
    long_head.push(h("X-Pad", &"p".repeat(24 * 1024)));
    let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
        "file_paths": files});
    let mut read = modern(
        "tools/call",
        json!({"name": "ReadFiles", "arguments": args}),
    );
    read["id"] = json!(2);
    let mut ping = modern("ping", json!({}));
    ping["id"] = json!(3);
    let mut all = post_bytes(&s, &long_head, &discover);
    all.extend(post_bytes(
        &s,
        &modern_headers("tools/call", Some("ReadFiles")),
        &read,
    ));
    all.extend(post_bytes(&s, &modern_headers("ping", None), &ping));
    let mut c = s.conn();
    c.send_raw(&all).unwrap();
    let answers: Vec<(usize, Value)> = (1..=3)
        .map(|id| {
            let r = c.read().expect("an answer per request");
            assert_eq!(r.status, 200, "request {id}: {}", r.text());
            let v = r.json();
            assert_eq!(v["id"], json!(id), "answers out of order: {v}");
            (r.body.len(), v)
        })
        .collect();
    assert!(answers[0].1["result"]["supportedVersions"].is_array());
    assert_eq!(answers[1].1["result"]["isError"], json!(false));
    assert!(
        answers[1].0 > 200 * 1024,
        "ReadFiles answered {} bytes",
        answers[1].0
    );
    assert_eq!(answers[2].1["result"], json!({"resultType": "complete"}));
    // The connection is still in step: one more request on it.
    assert_eq!(
        c.mcp(TOKEN, &modern_headers("ping", None), &ping).status,
        200
    );
}

#[test]
fn thread_and_conversation_affinity_key_sessions_as_the_seed_says() {
    let s = Server::start(&["--session-affinity", "thread"]);
    let ws = path_str(&s.home.workspace);
    let init = |id: &str, ws: &str| {
        s.call(
            TOKEN,
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws, "thread_id": id}),
        )["structuredContent"]
            .clone()
    };
    let (a, b, a2) = (
        init("conv-a", &ws),
        init("conv-b", &ws),
        init("conv-a", &ws),
    );
    assert_eq!(a["data"]["thread_id"], "conv-a", "{a}");
    assert_ne!(
        a["data"]["shell"]["pid"], b["data"]["shell"]["pid"],
        "separate shells"
    );
    assert_eq!(
        a["data"]["shell"]["pid"], a2["data"]["shell"]["pid"],
        "same id reattaches"
    );
    let other = s.home.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let moved = init("conv-a", &path_str(&other));
    assert_eq!(
        moved["errorCode"], "initialize_workspace_already_bound",
        "{moved}"
    );
    drop(s);

    let s = Server::start(&["--session-affinity", "conversation"]);
    let ws = path_str(&s.home.workspace);
    let init = |conversation: &str| {
        let mut hdrs = modern_headers("tools/call", Some("Initialize"));
        hdrs.push(("X-Winx-Conversation-Id".into(), conversation.into()));
        let body = modern(
            "tools/call",
            json!({"name": "Initialize",
            "arguments": {"type": "first_call", "workspace_root": ws, "thread_id": "model-made-up"}}),
        );
        s.conn().mcp(TOKEN, &hdrs, &body).json()["result"]["structuredContent"].clone()
    };
    let (x, y, x2) = (
        init("gateway-conv-1"),
        init("gateway-conv-2"),
        init("gateway-conv-1"),
    );
    let tid = x["data"]["thread_id"].as_str().unwrap().to_string();
    assert!(tid.starts_with("cv_"), "{x}");
    assert!(
        !tid.contains("gateway-conv"),
        "the identity is hashed, never shown"
    );
    assert_ne!(x["data"]["thread_id"], y["data"]["thread_id"]);
    assert_ne!(x["data"]["shell"]["pid"], y["data"]["shell"]["pid"]);
    assert_eq!(x2["data"]["thread_id"], x["data"]["thread_id"]);
    assert_eq!(x2["data"]["shell"]["pid"], x["data"]["shell"]["pid"]);
}
