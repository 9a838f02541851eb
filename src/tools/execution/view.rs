//! How a history record looks to an agent: compact metadata for lists and observations,
//! the full record (with its runtime identity) for `get`, and a one-line summary.
//!
//! Invariant: text recorded from a shell (a command, its working directory) is shown only
//! through `display`, so a raw ESC, BEL or other control character in it reaches neither a
//! tool's text nor `data`: a command cannot move the reader's cursor, rewrite its title
//! bar or ring its bell when a list is printed on a terminal.

use crate::store::history::{ProcessStatus, Record};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::fmt::Write;

/// `s` safe to show on a terminal: C0 controls other than `\n` and `\t`, DEL and the C1
/// controls (U+0080..=U+009F, which some terminals read like ESC sequences) become
/// visible escapes (`\x1b`, `\x7f`, `\u009b`); everything else is kept as it is.
pub fn display(s: &str) -> Cow<'_, str> {
    let hidden = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.contains(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !hidden(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// Metadata every action shows. `unknown` is never rendered as success: its exit code is
/// null and `unknown_reason` says why.
pub fn compact(r: &Record) -> Value {
    json!({
        "execution_id": r.execution_id,
        "command": display(&r.command),
        "background_id": r.bg_command_id,
        "process_status": r.process_status,
        "exit_code": r.exit_code,
        "unknown_reason": r.unknown_reason,
        "turn_state": r.turn_state,
        "first_observed_at_unix_ms": r.first_at_ms,
        "observed_at_unix_ms": r.observed_at_ms,
        "finished_at_unix_ms": r.finished_at_ms,
        "activity_seq": r.activity_seq,
        "output_activity_seq": r.output_activity_seq,
        "output_pending": r.output_pending,
        "output": retained(r),
    })
}

/// The retained-output window: text offsets `[start, end)`, what was pruned from the head
/// and what was never captured.
pub fn retained(r: &Record) -> Value {
    json!({
        "retained_start": r.retained_start,
        "retained_end": r.text_end,
        "retained_bytes": r.retained_bytes,
        "head_truncated": r.retained_start > 0,
        "gap_bytes": r.gap_bytes,
        "raw_bytes_reported": r.raw_bytes,
    })
}

/// Everything, for `get`.
pub fn full(r: &Record) -> Value {
    let mut v = compact(r);
    v["cwd"] = json!(display(&r.cwd));
    v["expires_at_unix_ms"] = json!(r.expires_at_ms);
    v["runtime"] = json!({
        "guardian": r.guardian,
        "session_key": r.session_key,
    });
    v
}

/// `<id> <status> <command>` for text answers.
pub fn line(r: &Record) -> String {
    let status = match (r.process_status, r.exit_code) {
        (ProcessStatus::Exited, Some(c)) => format!("exited {c}"),
        (s, _) => s.as_str().to_string(),
    };
    let bg = r
        .bg_command_id
        .as_deref()
        .map(|b| format!(" [{b}]"))
        .unwrap_or_default();
    let cut: String = r.command.chars().take(120).collect();
    let mut cmd = display(&cut).into_owned();
    if cut.len() < r.command.len() {
        cmd.push('…');
    }
    format!("{} {status}{bg} {cmd}", r.execution_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_and_the_rest_kept() {
        assert!(matches!(display("ls -la | grep 'a\\|b'"), Cow::Borrowed(_)));
        assert_eq!(display("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            display("printf ok \u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{7f}\u{9b}31m é"),
            "printf ok \\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x7f\\u009b31m é"
        );
    }
}
