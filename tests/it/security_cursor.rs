//! Catalog cursors through the real binary (issue 36 item 14): `catalog_cursor` is the
//! install's global history sequence, so it is sealed (encrypted and authenticated), never
//! readable: equal positions look different, nothing decodes to the sequence, and `wait`
//! takes the sealed form back.

use crate::support;

use serde_json::{Value, json};
use support::history::{id_of, spawn_with, until_recorded};
use support::sc;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

#[test]
fn the_catalog_cursor_shows_nothing_of_the_history_sequence() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "echo one"})));
    until_recorded(&mut a, &s, &id);
    let list = |a: &mut support::Agent| -> Value {
        let r = a.call(
            "Execution",
            json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
                   "action": {"type": "list"}}),
        );
        sc(&r)["data"]["catalog_cursor"].clone()
    };
    let first = list(&mut a);
    let second = list(&mut a);
    let c = first.as_str().expect("a catalog cursor");
    assert_ne!(
        first, second,
        "the same position never reads the same twice"
    );
    for part in c.split('.') {
        let clear = String::from_utf8_lossy(&unhex(part)).into_owned();
        assert!(
            !clear.contains("wx1|"),
            "a cursor part decodes to {clear:?}: {c}"
        );
    }
    // `wait` takes the sealed form back: nothing happened since, so a poll times out.
    let r = a.call(
        "Execution",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": {"type": "wait", "execution_ids": [id], "after": c, "timeout_seconds": 0}}),
    );
    assert_eq!(sc(&r)["data"]["outcome"], "timeout", "{r}");
    let next = sc(&r)["data"]["catalog_cursor"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(next.starts_with("wx1c."), "{next}");
    // A cursor with one character changed is refused.
    let mut forged = c.to_string().into_bytes();
    let at = forged.len() - 1;
    forged[at] = if forged[at] == b'0' { b'1' } else { b'0' };
    let r = a.call(
        "Execution",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": {"type": "wait", "execution_ids": [id], "timeout_seconds": 0,
                          "after": String::from_utf8(forged).unwrap()}}),
    );
    assert_eq!(sc(&r)["errorCode"], "invalid_cursor", "{r}");
}
