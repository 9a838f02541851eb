//! The recorder's side of turn recognition: store a running foreground command's screen
//! when it changed, and the `auto` recognizer's verdict as the record's `turn_state`.
//!
//! Invariant: the stored detection is exactly what `auto` decided from the stored screen
//! and quiet time; `explain` recomputes from the same inputs, never from display text.

use crate::shell::turn::{self, Choice, RecognitionInput, TurnState};
use crate::store::history::{self as table, Record, Screen};
use crate::wire::guardian::{ProcessStatus, ScreenFact};
use rusqlite::Connection;

/// The wire name of a state (`awaiting_input`, …).
pub fn state_name(s: TurnState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Store `fact` for `r` (its running foreground record) and update `r.turn_state`.
pub fn apply(
    c: &Connection,
    r: &mut Record,
    fact: &ScreenFact,
    max_bytes: usize,
    now_ms: i64,
) -> rusqlite::Result<()> {
    let mut text = fact.text.as_str();
    if text.len() > max_bytes {
        let mut cut = text.len() - max_bytes;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = &text[cut..];
    }
    let input = RecognitionInput {
        screen: text,
        quiet_ms: fact.quiet_ms,
        running: r.process_status == ProcessStatus::Running,
    };
    let detection = turn::recognize(&Choice::Auto, &input, None).ok();
    let previous = table::screen(c, r.rowid)?;
    let changed_text = previous.as_ref().is_none_or(|p| p.text != text);
    let snapshot = match &previous {
        Some(p) if !changed_text => p.snapshot,
        Some(p) => p.snapshot + 1,
        None => 1,
    };
    let json = detection
        .as_ref()
        .and_then(|d| serde_json::to_string(d).ok());
    if changed_text || previous.as_ref().is_some_and(|p| p.detection != json) {
        let screen = Screen {
            snapshot,
            text: text.to_string(),
            captured_at_ms: now_ms,
            quiet_ms: fact.quiet_ms as i64,
            detection: json,
        };
        table::put_screen(c, r.rowid, &screen)?;
    }
    r.turn_state = detection.map(|d| state_name(d.state));
    Ok(())
}
