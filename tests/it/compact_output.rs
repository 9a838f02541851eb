//! Seed 003's `io.winx/compact-bash-output` extension: a client that declares it (in
//! `initialize`'s capabilities, or in a stateless request's `_meta` client capabilities)
//! gets `BashCommand` text without the status trailer; every other client gets the text
//! unchanged. The server advertises the extension in both eras.

use crate::support;

use serde_json::json;
use support::{Agent, sc, text};

const EXT: &str = "io.winx/compact-bash-output";

fn echo_text(declare: bool) -> String {
    let mut a = Agent::spawn();
    let caps = match declare {
        true => json!({"extensions": {EXT: {}}}),
        false => json!({}),
    };
    let r = a.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": caps,
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(
        r["result"]["capabilities"]["extensions"][EXT].is_object(),
        "{r}"
    );
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "echo compact-me"}));
    assert_eq!(sc(&r)["data"]["exit_code"], 0, "{r}");
    text(&r).to_string()
}

#[test]
fn a_client_that_declares_the_extension_gets_no_trailer() {
    let compact = echo_text(true);
    assert_eq!(compact, "compact-me\n");
    let full = echo_text(false);
    assert!(
        full.starts_with("compact-me\n---\nstatus: exited, exit code 0\ncwd: "),
        "{full}"
    );
}

/// A stateless (2026-07-28) request declares it in its own `_meta`.
#[test]
fn a_stateless_request_declares_it_in_its_meta() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let call = |a: &mut Agent, caps: serde_json::Value| {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": caps,
                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
        let args = json!({"thread_id": s["data"]["thread_id"],
                          "workspace_root": s["data"]["workspace_root"],
                          "action_json": {"command": "echo stateless"}});
        let r = a.request(
            "tools/call",
            json!({"name": "BashCommand", "arguments": args, "_meta": meta}),
        );
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        call(&mut a, json!({"extensions": {EXT: {}}})),
        "stateless\n"
    );
    assert!(call(&mut a, json!({})).contains("---\nstatus: exited"));
}
