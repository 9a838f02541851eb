//! Codex app-server messages, as a managed host reads them from the server's stdout
//! (newline-delimited JSON-RPC 2.0 without the `jsonrpc` field; protocol subset in
//! docs/architecture.md, "Managed app-server targets"), and the correlation of one
//! return-final request with the provider turn its `turn/start` began.
//!
//! Invariant: as for rollouts, a line that is not understood is `Other`/`Malformed`,
//! never guessed at; `AppCorrelation` completes only from the first provider turn that
//! starts after the armed event sequence, only with that same turn's final, and only if
//! that turn is the one `turn/start` answered with; anything else is `Indeterminate`.

use super::message_digest;
use super::turns::Verdict;
use serde_json::Value;

/// Longest line parsed (a larger one is `Oversized`).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// One line of the app-server's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The answer to one of our requests: `result` (as JSON) or an error message.
    Response {
        id: i64,
        result: Result<Value, String>,
    },
    /// A request from the server to us (approvals, user input): answered with an error.
    ServerRequest {
        id: Value,
        method: String,
    },
    /// `thread/started`: `params.thread.{id, sessionId}`.
    ThreadStarted {
        thread_id: String,
        session_id: Option<String>,
    },
    /// `turn/started`: `params.{threadId, turn.id}`.
    TurnStarted {
        thread_id: String,
        turn_id: String,
    },
    /// `item/completed` with a `userMessage` item: its text inputs joined by newlines.
    UserMessage {
        thread_id: String,
        turn_id: String,
        text: String,
    },
    /// `item/completed` with an `agentMessage` item: `item.text`.
    AgentMessage {
        thread_id: String,
        turn_id: String,
        text: String,
    },
    /// `turn/completed`: `params.turn.status` (`completed`, `interrupted`, `failed`) and
    /// `params.turn.error.message` when failed.
    TurnCompleted {
        thread_id: String,
        turn_id: String,
        status: String,
        error: Option<String>,
    },
    /// `thread/closed` for `params.threadId`.
    ThreadClosed {
        thread_id: String,
    },
    /// Any other notification (deltas, token usage, plans, …).
    Other {
        method: String,
    },
    Malformed,
    Oversized,
}

fn s(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for k in path {
        cur = cur.get(*k)?;
    }
    cur.as_str().map(str::to_string)
}

/// Parse one line (without its newline).
pub fn parse(line: &[u8]) -> Event {
    if line.len() > MAX_LINE {
        return Event::Oversized;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Event::Malformed;
    };
    if !v.is_object() {
        return Event::Malformed;
    }
    let method = v.get("method").and_then(Value::as_str);
    let id = v.get("id").filter(|i| !i.is_null());
    match (method, id) {
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                return Event::Malformed;
            };
            let result = match (v.get("result"), v.get("error")) {
                (Some(r), None) => Ok(r.clone()),
                (_, Some(e)) => Err(s(e, &["message"]).unwrap_or_else(|| e.to_string())),
                (None, None) => return Event::Malformed,
            };
            Event::Response { id, result }
        }
        (Some(m), Some(id)) => Event::ServerRequest {
            id: id.clone(),
            method: m.to_string(),
        },
        (Some(m), None) => notification(m, v.get("params").unwrap_or(&Value::Null)),
        (None, None) => Event::Malformed,
    }
}

fn notification(method: &str, p: &Value) -> Event {
    let other = || Event::Other {
        method: method.to_string(),
    };
    let thread = || s(p, &["threadId"]);
    match method {
        "thread/started" => match s(p, &["thread", "id"]) {
            Some(thread_id) => Event::ThreadStarted {
                thread_id,
                session_id: s(p, &["thread", "sessionId"]),
            },
            None => Event::Malformed,
        },
        "thread/closed" => match thread() {
            Some(thread_id) => Event::ThreadClosed { thread_id },
            None => Event::Malformed,
        },
        "turn/started" => match (thread(), s(p, &["turn", "id"])) {
            (Some(thread_id), Some(turn_id)) => Event::TurnStarted { thread_id, turn_id },
            _ => Event::Malformed,
        },
        "turn/completed" => match (thread(), s(p, &["turn", "id"]), s(p, &["turn", "status"])) {
            (Some(thread_id), Some(turn_id), Some(status)) => Event::TurnCompleted {
                thread_id,
                turn_id,
                status,
                error: s(p, &["turn", "error", "message"]),
            },
            _ => Event::Malformed,
        },
        "item/completed" => {
            let (Some(thread_id), Some(turn_id)) = (thread(), s(p, &["turnId"])) else {
                return Event::Malformed;
            };
            let item = p.get("item").unwrap_or(&Value::Null);
            match item.get("type").and_then(Value::as_str) {
                Some("agentMessage") => match s(item, &["text"]) {
                    Some(text) => Event::AgentMessage {
                        thread_id,
                        turn_id,
                        text,
                    },
                    None => Event::Malformed,
                },
                Some("userMessage") => {
                    let parts: Vec<String> = item
                        .get("content")
                        .and_then(Value::as_array)
                        .map(|c| {
                            c.iter()
                                .filter(|x| x.get("type").and_then(Value::as_str) == Some("text"))
                                .filter_map(|x| s(x, &["text"]))
                                .collect()
                        })
                        .unwrap_or_default();
                    Event::UserMessage {
                        thread_id,
                        turn_id,
                        text: parts.join("\n"),
                    }
                }
                _ => other(),
            }
        }
        _ => other(),
    }
}

/// The thread's state as its notifications show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    /// A `turn/start` was sent and its turn has not started yet.
    Starting,
    /// A turn is running.
    Busy(String),
}

impl Phase {
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Starting | Phase::Busy(_) => "busy",
        }
    }
}

/// One return request's view of the thread's events after its armed sequence.
#[derive(Debug)]
pub struct AppCorrelation {
    thread_id: String,
    prompt_digest: String,
    /// The turn id `turn/start` answered with, once known.
    expected: Option<String>,
    /// The first provider turn that started after the armed sequence.
    pub bound: Option<String>,
    first_checked: bool,
    last_agent_message: Option<String>,
}

impl AppCorrelation {
    pub fn new(thread_id: &str, prompt_digest: &str) -> AppCorrelation {
        AppCorrelation {
            thread_id: thread_id.to_string(),
            prompt_digest: prompt_digest.to_string(),
            expected: None,
            bound: None,
            first_checked: false,
            last_agent_message: None,
        }
    }

    fn indeterminate(reason: &str) -> Verdict {
        Verdict::Indeterminate {
            reason: reason.to_string(),
        }
    }

    /// `turn/start` answered with `turn_id`.
    pub fn expect(&mut self, turn_id: &str) -> Verdict {
        self.expected = Some(turn_id.to_string());
        match &self.bound {
            Some(b) if b != turn_id => AppCorrelation::indeterminate(
                "the first provider turn after the armed sequence is not the one turn/start began",
            ),
            _ => Verdict::Pending,
        }
    }

    /// The next event after the armed sequence.
    pub fn on(&mut self, e: &Event) -> Verdict {
        let ours = |t: &str| t == self.thread_id;
        match e {
            Event::ThreadClosed { thread_id } if ours(thread_id) => {
                AppCorrelation::indeterminate("the app-server closed the thread")
            }
            Event::TurnStarted { thread_id, turn_id } if ours(thread_id) => match &self.bound {
                None => {
                    self.bound = Some(turn_id.clone());
                    match &self.expected {
                        Some(x) if x != turn_id => AppCorrelation::indeterminate(
                            "the first provider turn after the armed sequence is not the one \
                             turn/start began",
                        ),
                        _ => Verdict::Pending,
                    }
                }
                Some(_) => AppCorrelation::indeterminate(
                    "another provider turn started before the bound turn completed",
                ),
            },
            Event::UserMessage {
                thread_id,
                turn_id,
                text,
            } if ours(thread_id) => match self.bound.as_deref() {
                Some(b) if b == turn_id => {
                    if self.first_checked {
                        return Verdict::Pending; // steering within the bound turn
                    }
                    self.first_checked = true;
                    if message_digest(text) == self.prompt_digest {
                        Verdict::Pending
                    } else {
                        AppCorrelation::indeterminate(
                            "the first user message of the new provider turn is not the \
                             submitted prompt",
                        )
                    }
                }
                Some(_) => AppCorrelation::indeterminate("a user message of another turn"),
                None => Verdict::Pending,
            },
            Event::AgentMessage {
                thread_id,
                turn_id,
                text,
            } if ours(thread_id) => match self.bound.as_deref() {
                Some(b) if b == turn_id => {
                    self.last_agent_message = Some(text.clone());
                    Verdict::Pending
                }
                Some(_) => AppCorrelation::indeterminate("an agent message of another turn"),
                None => Verdict::Pending,
            },
            Event::TurnCompleted {
                thread_id,
                turn_id,
                status,
                error,
            } if ours(thread_id) => match self.bound.as_deref() {
                Some(b) if b == turn_id => match status.as_str() {
                    "completed" => Verdict::Completed {
                        turn_id: turn_id.clone(),
                        final_message: self.last_agent_message.clone(),
                    },
                    "interrupted" => Verdict::Aborted {
                        turn_id: turn_id.clone(),
                        reason: "interrupted".into(),
                    },
                    "failed" => Verdict::Aborted {
                        turn_id: turn_id.clone(),
                        reason: format!("failed: {}", error.as_deref().unwrap_or("no message")),
                    },
                    other => AppCorrelation::indeterminate(&format!(
                        "the bound turn ended with an unknown status {other:?}"
                    )),
                },
                Some(_) => AppCorrelation::indeterminate(
                    "another provider turn completed before the bound turn",
                ),
                None => AppCorrelation::indeterminate(
                    "a provider turn completed before a new turn started",
                ),
            },
            _ => Verdict::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn line(v: Value) -> Event {
        parse(v.to_string().as_bytes())
    }

    fn started(t: &str) -> Event {
        line(json!({"method": "turn/started",
                    "params": {"threadId": "th", "turn": {"id": t, "status": "inProgress", "items": []}}}))
    }

    fn completed(t: &str, status: &str) -> Event {
        line(json!({"method": "turn/completed",
                    "params": {"threadId": "th", "turn": {"id": t, "status": status,
                               "error": {"message": "boom"}}}}))
    }

    fn item(t: &str, item: Value) -> Event {
        line(json!({"method": "item/completed",
                    "params": {"threadId": "th", "turnId": t, "item": item}}))
    }

    fn user(t: &str, text: &str) -> Event {
        item(
            t,
            json!({"type": "userMessage", "id": "u", "content": [{"type": "text", "text": text}]}),
        )
    }

    fn agent(t: &str, text: &str) -> Event {
        item(t, json!({"type": "agentMessage", "id": "a", "text": text}))
    }

    fn run(events: &[Event], expected: Option<&str>) -> Verdict {
        let mut c = AppCorrelation::new("th", &message_digest("do it"));
        if let Some(x) = expected {
            assert_eq!(c.expect(x), Verdict::Pending);
        }
        for e in events {
            match c.on(e) {
                Verdict::Pending => {}
                v => return v,
            }
        }
        Verdict::Pending
    }

    #[test]
    fn shapes() {
        assert_eq!(
            parse(br#"{"id":2,"result":{"thread":{"id":"th"}}}"#),
            Event::Response {
                id: 2,
                result: Ok(json!({"thread": {"id": "th"}}))
            }
        );
        assert_eq!(
            parse(br#"{"id":3,"error":{"code":-32600,"message":"no"}}"#),
            Event::Response {
                id: 3,
                result: Err("no".into())
            }
        );
        assert!(matches!(
            parse(br#"{"id":"x","method":"item/commandExecution/requestApproval","params":{}}"#),
            Event::ServerRequest { .. }
        ));
        assert_eq!(
            line(
                json!({"method": "thread/started", "params": {"thread": {"id": "th", "sessionId": "se"}}})
            ),
            Event::ThreadStarted {
                thread_id: "th".into(),
                session_id: Some("se".into())
            }
        );
        assert_eq!(
            started("t1"),
            Event::TurnStarted {
                thread_id: "th".into(),
                turn_id: "t1".into()
            }
        );
        assert!(matches!(user("t1", "x"), Event::UserMessage { text, .. } if text == "x"));
        assert!(matches!(agent("t1", "y"), Event::AgentMessage { text, .. } if text == "y"));
        assert!(
            matches!(completed("t1", "failed"), Event::TurnCompleted { error: Some(e), .. } if e == "boom")
        );
        assert_eq!(parse(b"not json"), Event::Malformed);
        assert_eq!(parse(b"[1]"), Event::Malformed);
        assert!(matches!(
            line(json!({"method": "item/agentMessage/delta", "params": {}})),
            Event::Other { .. }
        ));
    }

    #[test]
    fn the_bound_turn_supplies_the_final() {
        let ok = [
            started("t2"),
            user("t2", "do it\n"),
            agent("t2", "one"),
            user("t2", "steer"),
            agent("t2", "two"),
            completed("t2", "completed"),
            started("t3"),
            agent("t3", "later"),
            completed("t3", "completed"),
        ];
        assert_eq!(
            run(&ok, Some("t2")),
            Verdict::Completed {
                turn_id: "t2".into(),
                final_message: Some("two".into())
            }
        );
        // Another turn id than turn/start's, before or after the answer.
        assert!(matches!(
            run(&ok, Some("t9")),
            Verdict::Indeterminate { .. }
        ));
        let mut c = AppCorrelation::new("th", &message_digest("do it"));
        assert_eq!(c.on(&started("t2")), Verdict::Pending);
        assert!(matches!(c.expect("t9"), Verdict::Indeterminate { .. }));
        // A mismatched first message, a second turn first, an early completion.
        for bad in [
            vec![started("t2"), user("t2", "other")],
            vec![started("t2"), started("t3")],
            vec![started("t2"), completed("t3", "completed")],
            vec![completed("t1", "completed")],
            vec![
                started("t2"),
                line(json!({"method": "thread/closed", "params": {"threadId": "th"}})),
            ],
        ] {
            assert!(
                matches!(run(&bad, None), Verdict::Indeterminate { .. }),
                "{bad:?}"
            );
        }
        assert!(matches!(
            run(&[started("t2"), completed("t2", "interrupted")], None),
            Verdict::Aborted { .. }
        ));
        assert!(
            matches!(run(&[started("t2"), completed("t2", "failed")], None), Verdict::Aborted { reason, .. } if reason.contains("boom"))
        );
        // Other threads' events are not ours.
        let other =
            parse(br#"{"method":"turn/started","params":{"threadId":"zz","turn":{"id":"t5"}}}"#);
        assert_eq!(run(&[other], None), Verdict::Pending);
    }

    proptest! {
        /// Any bytes parse to some event without panicking, and a correlation fed any
        /// events never completes with a turn other than the first one it bound.
        #[test]
        fn arbitrary_lines_never_panic(lines in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..200), 0..20)) {
            let mut c = AppCorrelation::new("th", "d");
            for l in &lines {
                let e = parse(l);
                if let Verdict::Completed { turn_id, .. } = c.on(&e) {
                    prop_assert_eq!(Some(turn_id), c.bound.clone());
                }
            }
        }

        #[test]
        fn shaped_events_complete_only_the_bound_turn(
            seq in proptest::collection::vec((0u8..6, 0u8..3), 0..30)) {
            let mut c = AppCorrelation::new("th", &message_digest("do it"));
            let mut first = None;
            for (kind, t) in seq {
                let t = format!("t{t}");
                let e = match kind {
                    0 => started(&t),
                    1 => user(&t, "do it"),
                    2 => agent(&t, "x"),
                    3 => completed(&t, "completed"),
                    4 => completed(&t, "interrupted"),
                    _ => line(json!({"method": "turn/diff/updated", "params": {}})),
                };
                if kind == 0 && first.is_none() {
                    first = Some(t.clone());
                }
                match c.on(&e) {
                    Verdict::Pending => {}
                    Verdict::Completed { turn_id, .. } | Verdict::Aborted { turn_id, .. } => {
                        prop_assert_eq!(Some(turn_id), first.clone());
                        break;
                    }
                    Verdict::Indeterminate { .. } => break,
                }
            }
        }
    }
}
