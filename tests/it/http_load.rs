//! `serve --http` under faults and load (seed 003): bad input, drain on SIGTERM, 32
//! clients, pipelined framing, session affinity.

use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use std::time::Duration;

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
    let pair = &s.first_call(TOKEN);
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
