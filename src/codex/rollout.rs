//! One rollout line → one `Item`. Current Codex writes `{"timestamp", "type", "payload"}`
//! envelopes (`session_meta`, `event_msg`, `response_item`, `turn_context`, …) and puts
//! the provider turn id on `task_started` / `task_complete` / `turn_aborted`; older
//! builds wrote no turn id (and the oldest no envelope for the first, meta, line). Both
//! are understood; a missing turn id is `None` and the caller binds by position.

use serde_json::Value;

/// The most of one line that is parsed; a longer line is `Item::Oversized` (Codex lines
/// hold whole tool outputs, but never this much).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The conversation's identity and declared working directory (first line).
    SessionMeta { id: String, cwd: String },
    /// A provider turn began.
    TurnStarted { turn_id: Option<String> },
    /// A user message reached the provider (the prompt, or steering within a turn).
    UserMessage { text: String },
    /// A provider turn finished; `last_agent_message` is its final answer.
    TurnComplete {
        turn_id: Option<String>,
        last_agent_message: Option<String>,
    },
    /// A provider turn was interrupted or replaced.
    TurnAborted {
        turn_id: Option<String>,
        reason: String,
    },
    /// Valid JSON this observer has no use for.
    Other,
    /// Not JSON, or JSON of an unknown shape where a known one was promised.
    Malformed,
    /// Over `MAX_LINE`.
    Oversized,
}

/// Parse one line (without its newline).
pub fn parse(line: &[u8]) -> Item {
    if line.len() > MAX_LINE {
        return Item::Oversized;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Item::Malformed;
    };
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        // The oldest format: a bare meta object first.
        return meta(&v).unwrap_or(Item::Other);
    };
    let payload = v.get("payload").unwrap_or(&Value::Null);
    match kind {
        "session_meta" => meta(payload).unwrap_or(Item::Malformed),
        "event_msg" => event(payload),
        _ => Item::Other,
    }
}

fn meta(v: &Value) -> Option<Item> {
    let id = v.get("id")?.as_str()?.to_string();
    let cwd = v
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Some(Item::SessionMeta { id, cwd })
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn event(p: &Value) -> Item {
    let turn_id = text(p, "turn_id");
    match p.get("type").and_then(Value::as_str) {
        Some("task_started") | Some("turn_started") => Item::TurnStarted { turn_id },
        Some("user_message") => match text(p, "message") {
            Some(text) => Item::UserMessage { text },
            None => Item::Malformed,
        },
        Some("task_complete") | Some("turn_complete") => Item::TurnComplete {
            turn_id,
            last_agent_message: text(p, "last_agent_message"),
        },
        Some("turn_aborted") => Item::TurnAborted {
            turn_id,
            reason: text(p, "reason").unwrap_or_else(|| "unknown".into()),
        },
        Some(_) => Item::Other,
        None => Item::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_and_older_lines_are_understood() {
        let l = br#"{"timestamp":"t","type":"session_meta","payload":{"id":"s-1","cwd":"/w","cli_version":"0.77.0"}}"#;
        assert_eq!(
            parse(l),
            Item::SessionMeta {
                id: "s-1".into(),
                cwd: "/w".into()
            }
        );
        let l = br#"{"timestamp":"t","type":"event_msg","payload":{"type":"task_started","turn_id":"7","model_context_window":1}}"#;
        assert_eq!(
            parse(l),
            Item::TurnStarted {
                turn_id: Some("7".into())
            }
        );
        let l = br#"{"timestamp":"t","type":"event_msg","payload":{"type":"task_started","model_context_window":1}}"#;
        assert_eq!(parse(l), Item::TurnStarted { turn_id: None });
        let l = br#"{"type":"event_msg","payload":{"type":"user_message","message":"hi","images":null}}"#;
        assert_eq!(parse(l), Item::UserMessage { text: "hi".into() });
        let l = br#"{"type":"event_msg","payload":{"type":"task_complete","turn_id":"7","last_agent_message":"done"}}"#;
        assert_eq!(
            parse(l),
            Item::TurnComplete {
                turn_id: Some("7".into()),
                last_agent_message: Some("done".into())
            }
        );
        let l = br#"{"type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#;
        assert_eq!(
            parse(l),
            Item::TurnAborted {
                turn_id: None,
                reason: "interrupted".into()
            }
        );
        // The oldest meta line has no envelope.
        assert_eq!(
            parse(br#"{"id":"old","timestamp":"t","instructions":null}"#),
            Item::SessionMeta {
                id: "old".into(),
                cwd: String::new()
            }
        );
        let l = br#"{"type":"response_item","payload":{"type":"message","role":"user"}}"#;
        assert_eq!(parse(l), Item::Other);
    }

    #[test]
    fn hostile_lines_never_panic() {
        for l in [
            &b""[..],
            b"{",
            b"null",
            b"[1,2]",
            b"{\"type\":7}",
            b"{\"type\":\"event_msg\"}",
            b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\"}}",
            b"{\"type\":\"session_meta\",\"payload\":{}}",
            b"\xff\xfe",
        ] {
            let _ = parse(l);
        }
        // A byte-level fuzz over mutations of a real line.
        let base = br#"{"type":"event_msg","payload":{"type":"task_complete","turn_id":"7","last_agent_message":"d"}}"#;
        let mut seed = 0x2545_f491_u32;
        for _ in 0..5000 {
            let mut l = base.to_vec();
            for _ in 0..3 {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                let i = seed as usize % l.len();
                l[i] = (seed >> 8) as u8;
            }
            let _ = parse(&l);
        }
    }
}
