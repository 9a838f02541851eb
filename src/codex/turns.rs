//! Provider turns from rollout bytes: `Tracker` follows a whole file (is the agent idle,
//! which turn completed last, where does the file end), `Correlation` decides what one
//! submitted prompt became, from the lines after the cursor its admission armed.
//!
//! Invariant: a `Correlation` completes only from the first provider turn that starts
//! after its cursor, only if that turn's first user message is the submitted prompt, and
//! only with that same turn's final; anything else is `Indeterminate` with a reason —
//! a later turn's final is never substituted. A bound turn that ended with an error is
//! `Aborted` with the error's text, never `Completed` with an empty final.

use super::message_digest;
use super::rollout::{self, Item};

/// Where a byte range of the file ended, with the item its line held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Offset just past the line's newline.
    pub end: u64,
    pub item: Item,
}

/// Splits appended bytes into complete lines (a line still being written waits).
#[derive(Debug, Default)]
pub struct Lines {
    /// Offset of the first byte not yet part of a complete line.
    pub offset: u64,
    partial: Vec<u8>,
}

impl Lines {
    pub fn starting_at(offset: u64) -> Lines {
        Lines {
            offset,
            partial: Vec::new(),
        }
    }

    /// Bytes appended to the file at `self.offset + partial`; returns complete lines.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Seen> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let line_len = self.partial.len() + nl + 1;
            let item = if self.partial.is_empty() {
                rollout::parse(&rest[..nl])
            } else {
                self.partial.extend_from_slice(&rest[..nl]);
                rollout::parse(&self.partial)
            };
            self.partial.clear();
            self.offset += line_len as u64;
            out.push(Seen {
                end: self.offset,
                item,
            });
            rest = &rest[nl + 1..];
        }
        // An endless line is kept only up to the parse limit (it is Oversized anyway).
        if self.partial.len() < rollout::MAX_LINE + 1 {
            let room = rollout::MAX_LINE + 1 - self.partial.len();
            self.partial
                .extend_from_slice(&rest[..rest.len().min(room)]);
        }
        out
    }

    /// Bytes consumed into `partial` but not yet ended by a newline.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }
}

/// The agent's state as the rollout shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No turn has completed yet and none is running (no baseline to arm after).
    Fresh,
    /// The last turn completed or aborted and none is running.
    Idle,
    /// A turn is running.
    Busy,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fresh => "fresh",
            Phase::Idle => "idle",
            Phase::Busy => "busy",
        }
    }
}

/// Follows one rollout file from its start.
#[derive(Debug, Default)]
pub struct Tracker {
    pub lines: Lines,
    /// `session_meta`: the conversation id and declared working directory.
    pub session: Option<(String, String)>,
    /// The running turn's id (positional `@offset` for formats without ids).
    open: Option<String>,
    /// The turn that ended last.
    pub last_ended: Option<String>,
    /// Lines that were not JSON or not of a known shape.
    pub skipped: u64,
}

impl Tracker {
    pub fn feed(&mut self, bytes: &[u8]) {
        for seen in self.lines.feed(bytes) {
            match seen.item {
                Item::SessionMeta { id, cwd } if self.session.is_none() => {
                    self.session = Some((id, cwd))
                }
                Item::TurnStarted { turn_id } => {
                    self.open = Some(turn_id.unwrap_or_else(|| format!("@{}", seen.end)))
                }
                Item::TurnComplete { turn_id, .. } | Item::TurnAborted { turn_id, .. } => {
                    let open = self.open.take();
                    self.last_ended = turn_id.or(open).or(Some(format!("@{}", seen.end)));
                }
                Item::Malformed | Item::Oversized => self.skipped += 1,
                _ => {}
            }
        }
    }

    pub fn phase(&self) -> Phase {
        match (&self.open, &self.last_ended) {
            (Some(_), _) => Phase::Busy,
            (None, Some(_)) => Phase::Idle,
            (None, None) => Phase::Fresh,
        }
    }

    /// Idle with a completed baseline and no half-written line: the cursor a return
    /// request is armed at, with the baseline turn.
    pub fn armable(&self) -> Option<(u64, String)> {
        match (self.phase(), self.lines.pending()) {
            (Phase::Idle, 0) => Some((self.lines.offset, self.last_ended.clone()?)),
            _ => None,
        }
    }
}

/// What a submitted prompt became.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    Completed {
        turn_id: String,
        final_message: Option<String>,
    },
    Aborted {
        turn_id: String,
        reason: String,
    },
    Indeterminate {
        reason: String,
    },
}

/// One return request's view of the lines after its armed cursor.
#[derive(Debug)]
pub struct Correlation {
    prompt_digest: String,
    /// The provider turn bound to this request (the first that started after the cursor).
    pub bound: Option<String>,
    /// Whether the bound turn's first user message was checked against the prompt.
    first_checked: bool,
    /// A user message seen before its turn's start line.
    early_user: Option<String>,
}

impl Correlation {
    pub fn new(prompt_digest: &str) -> Correlation {
        Correlation {
            prompt_digest: prompt_digest.to_string(),
            bound: None,
            first_checked: false,
            early_user: None,
        }
    }

    fn indeterminate(reason: &str) -> Verdict {
        Verdict::Indeterminate {
            reason: reason.to_string(),
        }
    }

    fn check_first(&mut self, digest: &str) -> Verdict {
        self.first_checked = true;
        if digest == self.prompt_digest {
            Verdict::Pending
        } else {
            Correlation::indeterminate(
                "the first user message of the new provider turn is not the submitted prompt",
            )
        }
    }

    /// The turn an end line names is ours (formats without ids bind by position).
    fn ours(&self, turn_id: &Option<String>) -> bool {
        match (&self.bound, turn_id) {
            (Some(b), Some(t)) => b == t,
            (Some(b), None) => b.starts_with('@'),
            (None, _) => false,
        }
    }

    pub fn on(&mut self, seen: &Seen) -> Verdict {
        match &seen.item {
            Item::SessionMeta { .. } => {
                Correlation::indeterminate("the rollout began another conversation")
            }
            Item::TurnStarted { turn_id } => match &self.bound {
                None => {
                    self.bound = Some(turn_id.clone().unwrap_or_else(|| format!("@{}", seen.end)));
                    match self.early_user.take() {
                        Some(d) => self.check_first(&d),
                        None => Verdict::Pending,
                    }
                }
                Some(b) if turn_id.as_ref() == Some(b) => Verdict::Pending,
                Some(_) => Correlation::indeterminate(
                    "another provider turn started before the bound turn completed",
                ),
            },
            Item::UserMessage { text } => {
                let d = message_digest(text);
                match (&self.bound, self.first_checked) {
                    (None, _) if self.early_user.is_none() => {
                        self.early_user = Some(d);
                        Verdict::Pending
                    }
                    // The same message in its other form (`user_message` beside
                    // `item_completed`) is one message, not two.
                    (None, _) if self.early_user.as_deref() == Some(d.as_str()) => Verdict::Pending,
                    (None, _) => Correlation::indeterminate(
                        "two user messages arrived before any provider turn started",
                    ),
                    (Some(_), false) => self.check_first(&d),
                    // Steering within the bound turn keeps the correlation.
                    (Some(_), true) => Verdict::Pending,
                }
            }
            Item::TurnComplete {
                turn_id,
                last_agent_message,
                error,
            } => {
                if !self.ours(turn_id) {
                    Correlation::indeterminate("a provider turn other than the bound one completed")
                } else if !self.first_checked {
                    Correlation::indeterminate("the bound provider turn had no user message")
                } else if let Some(e) = error {
                    // As the app-server path reports a failed turn.
                    Verdict::Aborted {
                        turn_id: self.bound.clone().unwrap_or_default(),
                        reason: format!("failed: {e}"),
                    }
                } else {
                    Verdict::Completed {
                        turn_id: self.bound.clone().unwrap_or_default(),
                        final_message: last_agent_message.clone(),
                    }
                }
            }
            Item::TurnAborted { turn_id, reason } => {
                if self.ours(turn_id) || (turn_id.is_none() && self.bound.is_some()) {
                    Verdict::Aborted {
                        turn_id: self.bound.clone().unwrap_or_default(),
                        reason: reason.clone(),
                    }
                } else {
                    Correlation::indeterminate("a provider turn other than the bound one ended")
                }
            }
            Item::Other | Item::Malformed | Item::Oversized => Verdict::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(payload: &str) -> String {
        format!("{{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{payload}}}\n")
    }
    fn start(id: &str) -> String {
        ev(&format!(
            "{{\"type\":\"task_started\",\"turn_id\":\"{id}\"}}"
        ))
    }
    fn user(text: &str) -> String {
        ev(&format!(
            "{{\"type\":\"user_message\",\"message\":\"{text}\"}}"
        ))
    }
    fn done(id: &str, msg: &str) -> String {
        ev(&format!(
            "{{\"type\":\"task_complete\",\"turn_id\":\"{id}\",\"last_agent_message\":\"{msg}\"}}"
        ))
    }
    const META: &str = "{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{\"id\":\"s1\",\"cwd\":\"/w\"}}\n";

    fn run(prompt: &str, lines: &[String]) -> Verdict {
        let mut c = Correlation::new(&message_digest(prompt));
        let mut l = Lines::starting_at(100);
        for seen in l.feed(lines.concat().as_bytes()) {
            match c.on(&seen) {
                Verdict::Pending => {}
                v => return v,
            }
        }
        Verdict::Pending
    }

    #[test]
    fn the_tracker_knows_idle_busy_and_the_armed_cursor() {
        let mut t = Tracker::default();
        t.feed(META.as_bytes());
        assert_eq!(t.phase(), Phase::Fresh);
        assert_eq!(t.armable(), None);
        t.feed(start("1").as_bytes());
        assert_eq!(t.phase(), Phase::Busy);
        let d = done("1", "ok");
        let (a, b) = d.as_bytes().split_at(10);
        t.feed(a);
        assert_eq!(t.phase(), Phase::Busy);
        t.feed(b);
        assert_eq!(t.phase(), Phase::Idle);
        let end = (META.len() + start("1").len() + d.len()) as u64;
        assert_eq!(t.armable(), Some((end, "1".to_string())));
        t.feed(b"{\"type\":");
        assert_eq!(t.armable(), None, "a half-written line is not a cursor");
        assert_eq!(t.session, Some(("s1".into(), "/w".into())));
    }

    #[test]
    fn the_bound_turn_final_completes_the_request() {
        let v = run(
            "do it",
            &[start("2"), user("do it"), user("steer"), done("2", "fin")],
        );
        assert_eq!(
            v,
            Verdict::Completed {
                turn_id: "2".into(),
                final_message: Some("fin".into())
            }
        );
        // A user message written before its turn start still binds.
        let v = run("do it", &[user("do it"), start("2"), done("2", "fin")]);
        assert!(matches!(v, Verdict::Completed { .. }));
    }

    #[test]
    fn mismatches_are_indeterminate_never_another_final() {
        for lines in [
            vec![start("2"), user("something else"), done("2", "x")],
            vec![start("2"), user("do it"), start("3"), done("3", "later")],
            vec![start("2"), user("do it"), done("3", "other")],
            vec![done("1", "baseline again")],
            vec![start("2"), done("2", "no user message")],
            vec![META.to_string(), start("2")],
        ] {
            assert!(
                matches!(run("do it", &lines), Verdict::Indeterminate { .. }),
                "{lines:?}"
            );
        }
        let aborted =
            ev("{\"type\":\"turn_aborted\",\"turn_id\":\"2\",\"reason\":\"interrupted\"}");
        assert_eq!(
            run("do it", &[start("2"), user("do it"), aborted]),
            Verdict::Aborted {
                turn_id: "2".into(),
                reason: "interrupted".into()
            }
        );
    }

    /// Codex 0.169 writes the prompt as an `item_completed` `UserMessage` after the turn
    /// start (issue 35); the lines are the real ones with shorter ids.
    fn user_0169(turn: &str, text: &str) -> String {
        ev(&format!(
            "{{\"type\":\"item_completed\",\"thread_id\":\"th\",\"turn_id\":\"{turn}\",\"item\":{{\"type\":\"UserMessage\",\"id\":\"u1\",\"client_id\":\"c1\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\",\"text_elements\":[]}}]}},\"started_at_ms\":1,\"completed_at_ms\":1}}"
        ))
    }

    #[test]
    fn codex_0_169_prompts_bind_and_complete() {
        let v = run(
            "return final one",
            &[
                start("t2"),
                user_0169("t2", "return final one"),
                done("t2", "FINAL-2: return final one"),
            ],
        );
        assert_eq!(
            v,
            Verdict::Completed {
                turn_id: "t2".into(),
                final_message: Some("FINAL-2: return final one".into())
            }
        );
        // The same correlation rules as the older form.
        for lines in [
            vec![
                start("t2"),
                user_0169("t2", "something else"),
                done("t2", "x"),
            ],
            vec![start("t2"), start("t3"), user_0169("t3", "do it")],
            vec![
                user_0169("t2", "do it"),
                user_0169("t2", "again"),
                start("t2"),
            ],
        ] {
            assert!(
                matches!(run("do it", &lines), Verdict::Indeterminate { .. }),
                "{lines:?}"
            );
        }
        // Both forms of one message before the turn start are one message.
        let v = run(
            "do it",
            &[
                user("do it"),
                user_0169("t2", "do it"),
                start("t2"),
                done("t2", "ok"),
            ],
        );
        assert!(matches!(v, Verdict::Completed { .. }), "{v:?}");
        // Steering in the new form keeps the correlation.
        let v = run(
            "do it",
            &[
                start("t2"),
                user_0169("t2", "do it"),
                user_0169("t2", "steer"),
                done("t2", "fin"),
            ],
        );
        assert!(matches!(v, Verdict::Completed { final_message: Some(ref m), .. } if m == "fin"));
    }

    /// A whole rollout recorded from the real Codex 0.169.0 TUI against a scripted model
    /// (`tests/fixtures/codex/`; long texts elided, paths neutral): five prompts, each
    /// correlated from a cursor armed before its turn — two finals, an approval refused
    /// with Esc, an Esc during work, and a model failure (HTTP 500 until retries ran out).
    #[test]
    fn a_recorded_codex_0_169_rollout_correlates_every_turn() {
        let trace = include_str!("../../tests/fixtures/codex/rollout-0.169.0.jsonl");
        let mut t = Tracker::default();
        t.feed(trace.as_bytes());
        assert_eq!(t.skipped, 0);
        assert_eq!(t.phase(), Phase::Idle);
        let (id, cwd) = t.session.clone().unwrap();
        assert_eq!((id.len(), cwd.as_str()), (36, "/home/dev/project"));
        let mut starts = Vec::new();
        let mut at = 0;
        for line in trace.split_inclusive('\n') {
            if line.contains("\"type\":\"task_started\"") {
                starts.push(at);
            }
            at += line.len();
        }
        let prompts = [
            "add a --verbose flag to the CLI",
            "SLOW 15 run the tests",
            "RUNCMD create the marker file",
            "RUNCMD create the marker file",
            "FAIL500 please",
        ];
        assert_eq!(starts.len(), prompts.len());
        let verdicts: Vec<Verdict> = starts
            .iter()
            .zip(prompts)
            .map(|(&at, prompt)| {
                let mut c = Correlation::new(&message_digest(prompt));
                let mut l = Lines::starting_at(at as u64);
                l.feed(&trace.as_bytes()[at..])
                    .iter()
                    .map(|seen| c.on(seen))
                    .find(|v| *v != Verdict::Pending)
                    .unwrap_or(Verdict::Pending)
            })
            .collect();
        let finals: Vec<Option<&str>> = verdicts
            .iter()
            .map(|v| match v {
                Verdict::Completed { final_message, .. } => final_message.as_deref(),
                _ => None,
            })
            .collect();
        assert_eq!(
            finals[..2],
            [
                Some("FINAL: add a --verbose flag to the CLI"),
                Some("FINAL: SLOW 15 run the tests")
            ]
        );
        let reasons: Vec<&str> = verdicts[2..]
            .iter()
            .map(|v| match v {
                Verdict::Aborted { reason, .. } => reason.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            reasons,
            [
                "interrupted",
                "interrupted",
                "failed: We’re currently experiencing high demand, which may cause temporary errors."
            ]
        );
    }

    #[test]
    fn a_failed_turn_is_aborted_with_the_error_text() {
        let failed = ev(
            "{\"type\":\"task_complete\",\"turn_id\":\"t2\",\"last_agent_message\":null,\"error\":{\"message\":\"fake upstream exploded\",\"codex_error_info\":\"internal_server_error\"}}",
        );
        assert_eq!(
            run("do it", &[start("t2"), user_0169("t2", "do it"), failed]),
            Verdict::Aborted {
                turn_id: "t2".into(),
                reason: "failed: fake upstream exploded".into()
            }
        );
        // A null final without an error is a completion that said nothing.
        let quiet =
            ev("{\"type\":\"task_complete\",\"turn_id\":\"t2\",\"last_agent_message\":null}");
        assert_eq!(
            run("do it", &[start("t2"), user_0169("t2", "do it"), quiet]),
            Verdict::Completed {
                turn_id: "t2".into(),
                final_message: None
            }
        );
    }

    #[test]
    fn the_older_format_binds_by_position() {
        let s = ev("{\"type\":\"task_started\"}");
        let d = ev("{\"type\":\"task_complete\",\"last_agent_message\":\"old\"}");
        let v = run("p", &[s, user("p"), d]);
        assert!(matches!(v, Verdict::Completed { final_message: Some(ref m), .. } if m == "old"));
    }
}
