//! `serve --http` limits (seed 003, "Resource limits and responses"): rate, concurrency,
//! request deadlines, I/O timeouts, body and head sizes, Host and Origin checks.

use crate::support::http as http_support;

use http_support::*;
use serde_json::json;
use std::time::Duration;

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
    let pair = &s.first_call(TOKEN);
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
