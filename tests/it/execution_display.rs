//! A recorded command holding raw control characters (issue 36 item 12): `Execution` and
//! `Agent` `list` and `get` show it escaped (`\x1b`, `\x07`) in their text and in
//! `data.command`, so printing an answer cannot retitle the reader's terminal, clear its
//! screen or ring its bell.

use crate::support;

use serde_json::{Value, json};
use support::history::{id_of, spawn_with, until_recorded};
use support::sc;

/// Whether `s` holds a control character other than a line feed or a tab.
fn raw_control(s: &str) -> bool {
    s.contains(|c: char| c.is_control() && c != '\n' && c != '\t')
}

#[test]
fn list_and_get_escape_control_characters_of_recorded_commands() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    // A comment carries the sequences: the command itself runs and exits 0.
    let cmd = "echo shown # \u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}";
    let id = id_of(&a.bash(&s, json!({"command": cmd})));
    until_recorded(&mut a, &s, &id);
    let escaped = "echo shown # \\x1b]0;pwned\\x07\\x1b[2J\\u009b";
    for tool in ["Execution", "Agent"] {
        for action in [
            json!({"type": "list"}),
            json!({"type": "get", "execution_id": id}),
        ] {
            let r = a.call(
                tool,
                json!({"thread_id": s["data"]["thread_id"],
                       "workspace_root": s["data"]["workspace_root"], "action": action}),
            );
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            let data = &sc(&r)["data"];
            let command = match action["type"].as_str() {
                Some("list") => &data["executions"][0]["command"],
                _ => &data["command"],
            };
            let what = format!("{tool} {}", action["type"]);
            assert_eq!(command, escaped, "{what}: {r}");
            assert!(text.contains(escaped), "{what}: {text:?}");
            // Anywhere in the answer: the text block and every string of the envelope.
            assert!(
                !collect_strings(&r).iter().any(|s| raw_control(s)),
                "{what}: a raw control character in {r}"
            );
        }
    }
}

/// Every string anywhere in `v`.
fn collect_strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(collect_strings).collect(),
        Value::Object(m) => m.values().flat_map(collect_strings).collect(),
        _ => vec![],
    }
}
