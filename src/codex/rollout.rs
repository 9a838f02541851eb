//! One rollout line → one `Item`. Current Codex writes `{"timestamp", "type", "payload"}`
//! envelopes (`session_meta`, `event_msg`, `response_item`, `turn_context`, …) and puts
//! the provider turn id on `task_started` / `task_complete` / `turn_aborted`; older
//! builds wrote no turn id (and the oldest no envelope for the first, meta, line). Both
//! are understood; a missing turn id is `None` and the caller binds by position.
//!
//! The user's message has two forms: `event_msg`/`user_message` with a `message` string
//! (up to Codex 0.1xx), and `event_msg`/`item_completed` whose `item` is a `UserMessage`
//! with `content[*]` text parts (Codex 0.169 writes only this one). A failed turn ends
//! with `task_complete` carrying `"last_agent_message": null` and an `error` object
//! (0.169); its message is kept so the turn is reported as failed, not as an empty final.

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
    /// A provider turn finished; `last_agent_message` is its final answer. `error` is
    /// the message of the error that ended it instead (the turn failed).
    TurnComplete {
        turn_id: Option<String>,
        last_agent_message: Option<String>,
        error: Option<String>,
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
        Some("item_completed") => completed_item(p),
        Some("task_complete") | Some("turn_complete") => Item::TurnComplete {
            turn_id,
            last_agent_message: text(p, "last_agent_message"),
            error: failure(p),
        },
        Some("turn_aborted") => Item::TurnAborted {
            turn_id,
            reason: text(p, "reason").unwrap_or_else(|| "unknown".into()),
        },
        Some(_) => Item::Other,
        None => Item::Malformed,
    }
}

/// `item_completed`: a `UserMessage` item is the user's message (its text parts joined
/// by newlines, as the app-server's `userMessage` is read); other items are of no use.
fn completed_item(p: &Value) -> Item {
    let Some(item) = p.get("item") else {
        return Item::Malformed;
    };
    if item.get("type").and_then(Value::as_str) != Some("UserMessage") {
        return Item::Other;
    }
    let Some(parts) = item.get("content").and_then(Value::as_array) else {
        return Item::Malformed;
    };
    let texts: Vec<&str> = parts
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        // An image-only message: nothing a prompt's digest could match.
        return Item::UserMessage {
            text: String::new(),
        };
    }
    Item::UserMessage {
        text: texts.join("\n"),
    }
}

/// The error a `task_complete` reports, if the turn failed: its `message`, or the error
/// as written when it has none (a failure is never mistaken for a completion).
fn failure(p: &Value) -> Option<String> {
    match p.get("error")? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        e => Some(text(e, "message").unwrap_or_else(|| e.to_string())),
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
                last_agent_message: Some("done".into()),
                error: None,
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

    /// Lines as Codex 0.169.0 wrote them (recorded from the real TUI against a scripted
    /// model; issue 35): the prompt as an `item_completed` `UserMessage`, the final on
    /// `task_complete`, and a model failure as `task_complete` with an `error`.
    #[test]
    fn codex_0_169_lines_are_understood() {
        let l = br#"{"type":"event_msg","payload":{"type":"item_completed","turn_id":"t9","item":{"type":"UserMessage","content":[{"type":"text","text":"return final one","text_elements":[]}]}}}"#;
        assert_eq!(
            parse(l),
            Item::UserMessage {
                text: "return final one".into()
            }
        );
        let l = br#"{"type":"event_msg","payload":{"type":"task_complete","turn_id":"t9","last_agent_message":"FINAL-2: return final one"}}"#;
        assert_eq!(
            parse(l),
            Item::TurnComplete {
                turn_id: Some("t9".into()),
                last_agent_message: Some("FINAL-2: return final one".into()),
                error: None,
            }
        );
        let l = r#"{"timestamp":"2026-12-04T07:15:23.066Z","ordinal":19,"type":"event_msg","payload":{"type":"task_complete","root_turn_id":"t9","turn_id":"t9","last_agent_message":null,"error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codex_error_info":"internal_server_error"},"started_at":1796368498,"completed_at":1796368523,"duration_ms":24707}}"#;
        assert_eq!(
            parse(l.as_bytes()),
            Item::TurnComplete {
                turn_id: Some("t9".into()),
                last_agent_message: None,
                error: Some(
                    "We’re currently experiencing high demand, which may cause temporary errors."
                        .into()
                ),
            }
        );
        // Several text parts are one message; other parts and other items are skipped.
        let l = br#"{"type":"event_msg","payload":{"type":"item_completed","turn_id":"t","item":{"type":"UserMessage","content":[{"type":"text","text":"a"},{"type":"image","image_url":"x"},{"type":"text","text":"b"}]}}}"#;
        assert_eq!(
            parse(l),
            Item::UserMessage {
                text: "a\nb".into()
            }
        );
        let l = br#"{"type":"event_msg","payload":{"type":"item_completed","turn_id":"t","item":{"type":"AgentMessage","id":"m","content":[{"type":"Text","text":"x"}]}}}"#;
        assert_eq!(parse(l), Item::Other);
        let l = br#"{"type":"event_msg","payload":{"type":"item_completed","turn_id":"t","item":{"type":"UserMessage"}}}"#;
        assert_eq!(parse(l), Item::Malformed);
        // An explicit `"error": null` is no failure.
        let l = br#"{"type":"event_msg","payload":{"type":"task_complete","turn_id":"t","last_agent_message":"ok","error":null}}"#;
        assert!(matches!(parse(l), Item::TurnComplete { error: None, .. }));
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
