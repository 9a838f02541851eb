//! Many sessions over `serve --http` (issue "Module layering", item 2): the per-session
//! state registry (`tools::state`) keeps at most `WINX_SESSION_STATES` sessions, evicts the
//! least recently used, and the adapter's memory stays bounded however many sessions come
//! and go.
//!
//! Sessions are cheap here on purpose: each has its own workspace and calls `ReadFiles`
//! with the workspace-derived thread ID (`ws_<label>_<hash>`), which the adapter recovers
//! without an `Initialize` and so without starting a shell.

use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Instant;

/// The principal key of a single-token server (`http:` and its name).
const PRINCIPAL: &str = "http:default";

/// One abandoned-after-use session: its workspace (holding `a.txt`) and thread ID.
struct Session {
    workspace: String,
    thread_id: String,
}

fn session(home: &Home, i: usize) -> Session {
    let dir: PathBuf = home.path("ws").join(format!("w{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    let dir = dir.canonicalize().unwrap();
    Session {
        thread_id: winx::session::ids::workspace_thread_id(PRINCIPAL, &dir),
        workspace: dir.to_string_lossy().into_owned(),
    }
}

fn call(c: &mut Conn, tool: &str, s: &Session, extra: Value) -> Value {
    let mut args = json!({"thread_id": s.thread_id, "workspace_root": s.workspace});
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    let r = c.mcp(
        TOKEN,
        &modern_headers("tools/call", Some(tool)),
        &modern("tools/call", json!({"name": tool, "arguments": args})),
    );
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    let v = r.json();
    assert!(v.get("error").is_none(), "JSON-RPC error: {v}");
    v["result"].clone()
}

fn status(r: &Value) -> &str {
    r["structuredContent"]["status"]
        .as_str()
        .unwrap_or_default()
}

fn read(c: &mut Conn, s: &Session) {
    let r = call(c, "ReadFiles", s, json!({"file_paths": ["a.txt"]}));
    assert_eq!(r["isError"], false, "{r}");
}

fn edit(c: &mut Conn, s: &Session, from: &str, to: &str) -> Value {
    let block = format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n");
    call(
        c,
        "FileWriteOrEdit",
        s,
        json!({"file_path": "a.txt", "text_or_search_replace_blocks": block}),
    )
}

fn server(limit: Option<&str>) -> Server {
    let env: Vec<(&str, &str)> = limit
        .map(|l| vec![("WINX_SESSION_STATES", l)])
        .unwrap_or_default();
    Server::start_in(
        Home::new(),
        &["--requests-per-minute", "1000000"],
        &env,
        true,
    )
}

/// 500 sessions through a registry of 64: memory stays flat, the newest session kept its
/// permit in memory, evicted ones get theirs back from the store only for an unchanged
/// revision.
#[test]
fn sessions_beyond_the_limit_are_evicted_and_memory_stays_bounded() {
    let s = server(Some("64"));
    let mut c = s.conn();
    let sessions: Vec<Session> = (0..500).map(|i| session(&s.home, i)).collect();
    for x in &sessions[..100] {
        read(&mut c, x);
    }
    let warm = s.rss_kib();
    for x in &sessions[100..] {
        read(&mut c, x);
    }
    let after = s.rss_kib();
    eprintln!("RSS after 100 sessions {warm} KiB, after 500 {after} KiB");
    assert!(
        after < warm + 4 * 1024,
        "RSS grew from {warm} to {after} KiB"
    );
    // The newest session still holds its permit: the edit goes through.
    let newest = &sessions[499];
    let r = edit(&mut c, newest, "one", "two");
    assert_eq!(status(&r), "completed", "{r}");
    // The oldest was evicted from memory: its read comes back from the state store
    // (`read_permits`), valid only while the file keeps the revision that was read.
    let oldest = &sessions[0];
    std::fs::write(
        std::path::Path::new(&oldest.workspace).join("a.txt"),
        "one\nchanged since the read\n",
    )
    .unwrap();
    let r = edit(&mut c, oldest, "one", "two");
    assert_eq!(status(&r), "needs_read", "{r}");
    read(&mut c, oldest);
    let r = edit(&mut c, oldest, "one", "two");
    assert_eq!(status(&r), "completed", "{r}");
    // Another evicted session whose file is unchanged edits on its stored permit.
    let r = edit(&mut c, &sessions[1], "one", "two");
    assert_eq!(status(&r), "completed", "{r}");
}

/// RSS of the adapter while 10,000 sessions are created and abandoned, with the default
/// limit. Not a pass/fail test: run with
/// `cargo test --release --test http_sessions bench_ -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: run by `make bench`, not a correctness test"]
fn bench_ten_thousand_abandoned_sessions() {
    const SESSIONS: usize = 10_000;
    let s = server(None);
    let mut c = s.conn();
    let sessions: Vec<Session> = (0..SESSIONS).map(|i| session(&s.home, i)).collect();
    eprintln!("idle RSS: {} KiB", s.rss_kib());
    let started = Instant::now();
    for (i, x) in sessions.iter().enumerate() {
        read(&mut c, x);
        if (i + 1) % 1_000 == 0 {
            eprintln!(
                "{:>6} sessions: RSS {} KiB ({:.0} sessions/s)",
                i + 1,
                s.rss_kib(),
                (i + 1) as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
}
