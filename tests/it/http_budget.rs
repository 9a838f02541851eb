//! What request bodies may cost the HTTP server in memory (issue 36 items 5 and 6): bytes
//! held across connections are capped by a body budget shared by the principals (a
//! stalled body holds its grant, and the next one past the budget is refused before a
//! byte of it is read), and a body that would parse into a tree much larger than itself
//! is refused with a JSON-RPC error instead of being built.
//!
//! Memory is the server's own `VmRSS`; a grant is observed through `Expect: 100-continue`
//! (the server says `100 Continue` only once the declared length is granted). Every loop
//! is bounded, every wait has a deadline, and every connection is to loopback.

use crate::support;
use crate::support::http as http_support;

use http_support::*;
use support::wait::{Deadline, eventually};

const MIB: usize = 1 << 20;
/// What each stalling client declares: a body just under the 64 MiB cap, one byte of
/// which never comes.
const DECLARED: usize = 60 * MIB + 1;

/// The head of an MCP POST (a discover) declaring `len` body bytes, with `extra` lines.
fn post_head(s: &Server, token: &str, len: usize, extra: &str) -> Vec<u8> {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\n{extra}",
        s.addr
    );
    for (k, v) in modern_headers("server/discover", None) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// Declare `len` bytes with `Expect: 100-continue` on a fresh connection and return it
/// with the status of the first answer: 100 when the length was granted.
fn declare(s: &Server, token: &str, len: usize) -> (Conn, Resp) {
    let mut c = s.conn();
    c.send_raw(&post_head(s, token, len, "Expect: 100-continue\r\n"))
        .unwrap();
    let r = c.read().expect("an answer to the declared body");
    (c, r)
}

/// Declare `DECLARED` bytes and send all but the last, 64 KiB at a time, stopping as
/// soon as the server answers (a refusal comes right after the head). `Ok`: every byte
/// but the last was taken in and the connection waits for it; `Err`: the refusal's
/// status and `Retry-After`.
fn stall(s: &Server) -> Result<Conn, (u16, Option<String>)> {
    let mut c = s.conn();
    c.send_raw(&post_head(s, TOKEN, DECLARED, "")).unwrap();
    let piece = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < DECLARED - 1 && !c.answered() {
        let n = piece.len().min(DECLARED - 1 - sent);
        if c.send_raw(&piece[..n]).is_err() {
            break;
        }
        sent += n;
    }
    if sent == DECLARED - 1 && !c.answered() {
        return Ok(c);
    }
    let r = c.read().expect("the refusal's answer");
    Err((r.status, r.header("Retry-After").map(str::to_string)))
}

/// Six clients each send 60 MiB of a body declared 60 MiB + 1 and stall: the budget (two
/// largest bodies for a lone principal) holds two of them; the other four are refused
/// with 503 before their bodies are read, and the server's memory grows by the two it
/// holds, not by six. Small requests still pass; a stalled client's grant comes back when
/// it leaves.
#[test]
fn stalled_large_bodies_are_refused_once_the_body_budget_is_taken() {
    let s = Server::start(&["--requests-per-minute", "1000000"]);
    let hdrs = modern_headers("server/discover", None);
    assert_eq!(s.conn().mcp(TOKEN, &hdrs, &discover()).status, 200);
    let rss0 = s.rss_kib();
    let (mut held, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..6 {
        match stall(&s) {
            Ok(c) => held.push(c),
            Err(r) => refused.push(r),
        }
    }
    let rss1 = s.rss_kib();
    let grown_mib = (rss1.saturating_sub(rss0)) / 1024;
    eprintln!("six stalled 60 MiB bodies: VmRSS {rss0} KiB -> {rss1} KiB (+{grown_mib} MiB)");
    assert_eq!(held.len(), 2, "bodies held at once (refused: {refused:?})");
    assert_eq!(refused, vec![(503, Some("1".to_string())); 4]);
    assert!(
        grown_mib < 2 * 64 + 24,
        "VmRSS grew by {grown_mib} MiB with six stalled bodies"
    );
    // What the budget leaves is enough for ordinary requests.
    assert_eq!(s.conn().mcp(TOKEN, &hdrs, &discover()).status, 200);
    // A large one is refused until a stalled client leaves; then it is granted.
    assert_eq!(declare(&s, TOKEN, DECLARED).1.status, 503);
    drop(held);
    eventually(
        Deadline::hard("grants given back"),
        "a 60 MiB body is granted again",
        || declare(&s, TOKEN, DECLARED).1.status,
        |status| *status == 100,
    );
}

/// Two principals, bob read-only: each may hold half the budget (one largest body), so
/// neither can take the other's share by stalling bodies, and a refusal says whose limit
/// it was.
#[test]
fn a_principal_holds_only_its_share_of_body_memory() {
    let home = Home::new();
    let cfg = two_principals(&home, "tool_profile = \"read-only\"");
    let args = [
        "--principal-config",
        &cfg,
        "--requests-per-minute",
        "1000000",
    ];
    let s = Server::start_in(home, &args, &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let (_bob_big, r) = declare(&s, &bob, DECLARED);
    assert_eq!(r.status, 100, "bob's first large body: {}", r.text());
    let (_, r) = declare(&s, &bob, 8 * MIB);
    assert_eq!(r.status, 503, "bob past his share: {}", r.text());
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert!(r.text().contains("principal"), "{}", r.text());
    // Alice's share is untouched by bob's.
    let (alice_big, r) = declare(&s, &alice, DECLARED);
    assert_eq!(r.status, 100, "alice's large body: {}", r.text());
    assert_eq!(declare(&s, &alice, 8 * MIB).1.status, 503);
    let hdrs = modern_headers("server/discover", None);
    assert_eq!(s.conn().mcp(&alice, &hdrs, &discover()).status, 200);
    drop(alice_big);
    eventually(
        Deadline::hard("alice's grant given back"),
        "alice's large body is granted again",
        || declare(&s, &alice, DECLARED).1.status,
        |status| *status == 100,
    );
}

/// A chunked body is granted chunk by chunk, as its buffer grows: past the budget the
/// next chunk is refused (503) instead of read.
#[test]
fn a_chunked_body_past_the_budget_is_refused_mid_stream() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let args = [
        "--principal-config",
        &cfg,
        "--requests-per-minute",
        "1000000",
    ];
    let s = Server::start_in(home, &args, &[], false);
    let alice = format!("{TOKEN}-a");
    let (_held, r) = declare(&s, &alice, DECLARED);
    assert_eq!(r.status, 100);
    let mut c = s.conn();
    let head = String::from_utf8(post_head(&s, &alice, 0, "")).unwrap();
    let head = head.replace("Content-Length: 0\r\n", "Transfer-Encoding: chunked\r\n");
    c.send_raw(head.as_bytes()).unwrap();
    // 1 MiB chunks: alice has 4 MiB of her share left.
    let chunk = format!("{:x}\r\n{}\r\n", MIB, " ".repeat(MIB));
    let mut sent = 0;
    while sent < 16 && !c.answered() {
        if c.send_raw(chunk.as_bytes()).is_err() {
            break;
        }
        sent += 1;
    }
    let r = c.read().expect("the refusal");
    assert_eq!(r.status, 503, "after {sent} chunks: {}", r.text());
    assert!(sent < 16, "{sent} MiB were sent before the refusal");
}

/// The server's peak resident set so far, in KiB.
fn peak_kib(s: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Issue 36 item 6: a 16 MiB array of zeros would parse into 8 million `Value`s (about
/// 16 times its size). It is refused with a JSON-RPC error naming the cost before any
/// tree is built, so the server's peak memory grows by about the body, and the same
/// bytes as one string are served.
#[test]
fn a_body_that_would_parse_into_a_huge_tree_is_refused_at_about_its_size() {
    let s = Server::start(&["--requests-per-minute", "1000000"]);
    let hdrs = modern_headers("ping", None);
    let ping = |params: &str| -> Resp {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{},"x":{params}}}}}"#,
            meta()
        );
        let mut all = vec![
            h("Authorization", &format!("Bearer {TOKEN}")),
            h("Content-Type", "application/json"),
        ];
        all.extend(hdrs.iter().cloned());
        s.conn().request("POST", "/mcp", &all, body.as_bytes())
    };
    assert_eq!(ping("0").status, 200);
    let peak0 = peak_kib(&s);
    let zeros = format!("[0{}]", ",0".repeat(8 * MIB - 1));
    let r = ping(&zeros);
    let peak1 = peak_kib(&s);
    eprintln!(
        "16 MiB array of zeros: {} {}; VmHWM {peak0} KiB -> {peak1} KiB",
        r.status,
        r.text().chars().take(200).collect::<String>()
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MiB in memory"),
        "{v}"
    );
    let grown_mib = peak1.saturating_sub(peak0) / 1024;
    assert!(
        grown_mib < 16 + 16,
        "peak memory grew by {grown_mib} MiB for a 16 MiB body"
    );
    // The same size as one string costs about its size and is answered.
    let text = format!("\"{}\"", "0".repeat(16 * MIB));
    assert_eq!(ping(&text).status, 200);
}
