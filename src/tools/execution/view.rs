//! How a history record looks to an agent: compact metadata for lists and observations,
//! the full record (with its runtime identity) for `get`, and a one-line summary.

use crate::store::history::Record;
use serde_json::{Value, json};

/// Metadata every action shows. `unknown` is never rendered as success: its exit code is
/// null and `unknown_reason` says why.
pub fn compact(r: &Record) -> Value {
    json!({
        "execution_id": r.execution_id,
        "command": r.command,
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
    v["cwd"] = json!(r.cwd);
    v["expires_at_unix_ms"] = json!(r.expires_at_ms);
    v["runtime"] = json!({
        "guardian": r.guardian,
        "session_key": r.session_key,
    });
    v
}

/// `<id> <status> <command>` for text answers.
pub fn line(r: &Record) -> String {
    let status = match (r.process_status.as_str(), r.exit_code) {
        ("exited", Some(c)) => format!("exited {c}"),
        ("unknown", _) => "unknown".to_string(),
        (s, _) => s.to_string(),
    };
    let bg = r
        .bg_command_id
        .as_deref()
        .map(|b| format!(" [{b}]"))
        .unwrap_or_default();
    let mut cmd: String = r.command.chars().take(120).collect();
    if cmd.len() < r.command.len() {
        cmd.push('…');
    }
    format!("{} {status}{bg} {cmd}", r.execution_id)
}
