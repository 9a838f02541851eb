//! Catalog cursors through the real binary (issue 36 item 14): a `catalog_cursor` holds
//! the caller's own per-scope change counter, HMAC-sealed like a page cursor, never the
//! install's global history sequence. So another principal's activity leaves it exactly
//! as it was, and a forged or cut cursor is `invalid_cursor` with a next call that works.

use crate::support::http as http_support;

use http_support::*;
use serde_json::{Value, json};

fn pair(s: &Server, token: &str, ws: &str) -> Value {
    let first = json!({"type": "first_call", "workspace_root": ws});
    let d = s.call(token, "Initialize", first)["structuredContent"]["data"].clone();
    json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]})
}

fn exec(s: &Server, token: &str, p: &Value, action: Value) -> Value {
    let mut args = p.clone();
    args["action"] = action;
    s.call(token, "Execution", args)["structuredContent"].clone()
}

fn run(s: &Server, token: &str, p: &Value, command: &str) -> Value {
    let mut args = p.clone();
    args["action_json"] = json!({ "command": command });
    s.call(token, "BashCommand", args)["structuredContent"]["data"]["state"]["execution_id"].clone()
}

/// Until `id` exited and its output is fully recorded: observe, then wait from that
/// observation's cursor (event-woken, never a timer).
fn until_recorded(s: &Server, token: &str, p: &Value, id: &Value) {
    for _ in 0..200 {
        let r = exec(
            s,
            token,
            p,
            json!({"type": "observe", "items": [{"execution_id": id}]}),
        );
        let e = &r["data"]["items"][0]["execution"];
        if e["process_status"] == "exited" && e["output_pending"] == false {
            return;
        }
        let after = r["data"]["catalog_cursor"].clone();
        exec(
            s,
            token,
            p,
            json!({"type": "wait", "execution_ids": [id], "after": after, "timeout_seconds": 10}),
        );
    }
    panic!("{id} was never completely recorded");
}

fn catalog(s: &Server, token: &str, p: &Value) -> String {
    exec(s, token, p, json!({"type": "list"}))["data"]["catalog_cursor"]
        .as_str()
        .expect("a catalog cursor")
        .to_string()
}

#[test]
fn another_principals_activity_leaves_a_catalog_cursor_as_it_was() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let ws = path_str(&s.home.workspace);
    let pa = pair(&s, &alice, &ws);
    let pb = pair(&s, &bob, &ws);
    let hers = run(&s, &alice, &pa, "echo one");
    until_recorded(&s, &alice, &pa, &hers);
    let before = catalog(&s, &alice, &pa);
    assert_eq!(before, catalog(&s, &alice, &pa), "one position, one cursor");

    // Bob works: several commands, each with output and an exit, all recorded.
    let mut his = Value::Null;
    for i in 0..3 {
        his = run(&s, &bob, &pb, &format!("seq 1 {}", 100 * (i + 1)));
        until_recorded(&s, &bob, &pb, &his);
    }
    let bobs = catalog(&s, &bob, &pb);
    let after = catalog(&s, &alice, &pa);
    assert_eq!(
        before, after,
        "Alice's cursor moved while only Bob acted: it counts his activity"
    );
    assert_ne!(after, bobs, "each scope has its own cursor");
    // Her wait from it sees nothing new: Bob's changes are not hers.
    let r = exec(
        &s,
        &alice,
        &pa,
        json!({"type": "wait", "execution_ids": [hers], "after": after, "timeout_seconds": 0}),
    );
    assert_eq!(r["data"]["outcome"], "timeout", "{r}");
    assert_eq!(r["data"]["catalog_cursor"], json!(after), "{r}");
    // Her own next command moves it, and a wait from the old cursor sees it.
    let next = run(&s, &alice, &pa, "echo two");
    until_recorded(&s, &alice, &pa, &next);
    let r = exec(
        &s,
        &alice,
        &pa,
        json!({"type": "wait", "execution_ids": [next], "after": after, "timeout_seconds": 0}),
    );
    assert_eq!(r["data"]["outcome"], "changed", "{r}");
    assert_ne!(catalog(&s, &alice, &pa), after);
    // Bob cannot use her cursor, even to wait on his own execution (the cursor is checked
    // before the ids: a cursor that opened for him would answer `timeout` or `changed`).
    let r = exec(
        &s,
        &bob,
        &pb,
        json!({"type": "wait", "execution_ids": [his], "after": after, "timeout_seconds": 0}),
    );
    assert_eq!(r["errorCode"], "invalid_cursor", "{r}");
}

#[test]
fn a_forged_or_cut_catalog_cursor_is_refused_with_a_next_call() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let alice = format!("{TOKEN}-a");
    let ws = path_str(&s.home.workspace);
    let pa = pair(&s, &alice, &ws);
    let id = run(&s, &alice, &pa, "echo one");
    until_recorded(&s, &alice, &pa, &id);
    let good = catalog(&s, &alice, &pa);
    let mut flipped = good.clone().into_bytes();
    let at = flipped.len() - 1;
    flipped[at] = if flipped[at] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let cut = good[..good.len() - 2].to_string();
    let mut sections = good.splitn(3, '.');
    let (v, payload, mac) = (
        sections.next().unwrap(),
        sections.next().unwrap(),
        sections.next().unwrap(),
    );
    // The position raised by one, the MAC kept: refused.
    let raised = {
        let clear: Vec<u8> = (0..payload.len() / 2)
            .map(|i| u8::from_str_radix(&payload[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let clear = String::from_utf8(clear).unwrap();
        let (head, n) = clear.rsplit_once('|').unwrap();
        let more = format!("{head}|{}", n.parse::<i64>().unwrap() + 1);
        let hexed: String = more.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{v}.{hexed}.{mac}")
    };
    for bad in [flipped, cut, raised, "wx1c.00.00.00".to_string()] {
        let r = exec(
            &s,
            &alice,
            &pa,
            json!({"type": "wait", "execution_ids": [id], "after": bad, "timeout_seconds": 0}),
        );
        assert_eq!(r["errorCode"], "invalid_cursor", "{bad}: {r}");
        let next = &r["nextAction"];
        assert_eq!(next["tool"], "Execution", "{r}");
        assert!(next["arguments"]["action"]["after"].is_null(), "{r}");
        // The next call works as given.
        let again = s.call(&alice, "Execution", next["arguments"].clone());
        assert_eq!(
            again["structuredContent"]["data"]["outcome"], "timeout",
            "{again}"
        );
    }
}
