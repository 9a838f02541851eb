//! `trace_audit`: the orchestration invariants checked over the log, in order.
//!
//! - `retry_same_call`: no result may advise repeating the same call (`retrySameCall`).
//! - `committed_edit_retried`: a committed edit is never retried — an identical call
//!   replayed from its receipt, or a committed result that calls itself retryable.
//! - `needs_read_without_read_files`: every `needs_read` (or `read_required`) result
//!   points its next action at `ReadFiles`.
//! - `search_conflict_kept_read_evidence`: after a SEARCH conflict on a thread, the next
//!   edit on that thread does not commit unless a `ReadFiles` came in between (the
//!   conflict invalidates the read evidence).
//!
//! Invariant: at most `MAX_VIOLATIONS` are listed; every one is counted.

use super::line::Line;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};

pub const MAX_VIOLATIONS: usize = 100;

const EDIT_TOOLS: [&str; 4] = [
    "FileWriteOrEdit",
    "MultiFileEdit",
    "ApplyPatch",
    "EditFiles",
];
const SEARCH_CONFLICTS: [&str; 2] = ["search_block_not_found", "search_block_ambiguous"];

#[derive(Default)]
pub struct Audit {
    checked: u64,
    by_rule: BTreeMap<&'static str, u64>,
    listed: Vec<Value>,
    /// Threads (principal, thread) with a SEARCH conflict not yet followed by a read.
    conflicted: HashSet<(String, String)>,
    /// Edit calls whose thread is unknown: the conflict rule cannot judge them.
    unthreaded_edits: u64,
}

impl Audit {
    /// Check one `tool_call`.
    pub fn call(&mut self, l: &Line) {
        self.checked += 1;
        let tool = l.tool.str().unwrap_or("");
        let edit = EDIT_TOOLS.contains(&tool);
        if l.retry_same_call.bool() == Some(true) {
            self.violation("retry_same_call", l, "the result set retrySameCall");
        }
        if edit && l.edit_replayed.bool() == Some(true) {
            self.violation(
                "committed_edit_retried",
                l,
                "an identical committed edit came again (replayed from its receipt)",
            );
        } else if edit && l.edit_committed.bool() == Some(true) && l.retryable.bool() == Some(true)
        {
            self.violation(
                "committed_edit_retried",
                l,
                "a committed edit was answered as retryable",
            );
        }
        let needs_read =
            l.status.str() == Some("needs_read") || l.code.str() == Some("read_required");
        if needs_read && l.next_action_tool.str() != Some("ReadFiles") {
            self.violation(
                "needs_read_without_read_files",
                l,
                "a needs_read result whose next action is not ReadFiles",
            );
        }
        self.conflicts(l, tool, edit);
    }

    fn conflicts(&mut self, l: &Line, tool: &str, edit: bool) {
        let (Some(p), Some(t)) = (l.principal.str(), l.thread.str()) else {
            if edit {
                self.unthreaded_edits += 1;
            }
            return;
        };
        let key = (p.to_string(), t.to_string());
        if tool == "ReadFiles" {
            self.conflicted.remove(&key);
            return;
        }
        if !edit {
            return;
        }
        let code = l.code.str().unwrap_or("");
        if SEARCH_CONFLICTS.contains(&code) {
            self.conflicted.insert(key);
            return;
        }
        if self.conflicted.contains(&key) && l.edit_committed.bool() == Some(true) {
            self.violation(
                "search_conflict_kept_read_evidence",
                l,
                "an edit committed after a SEARCH conflict without a ReadFiles in between",
            );
            self.conflicted.remove(&key);
        }
    }

    fn violation(&mut self, rule: &'static str, l: &Line, detail: &str) {
        *self.by_rule.entry(rule).or_default() += 1;
        if self.listed.len() < MAX_VIOLATIONS {
            self.listed.push(json!({
                "rule": rule,
                "detail": detail,
                "tsMs": l.ts_ms.i64(),
                "tool": l.tool.str(),
                "action": l.action.str(),
                "usageCallId": l.usage_call_id.str(),
                "requestId": l.request_id.str(),
                "thread": l.thread.str(),
            }));
        }
    }

    pub fn to_json(&self) -> Value {
        let total: u64 = self.by_rule.values().sum();
        let mut by_rule = serde_json::Map::new();
        for rule in [
            "retry_same_call",
            "committed_edit_retried",
            "needs_read_without_read_files",
            "search_conflict_kept_read_evidence",
        ] {
            by_rule.insert(rule.into(), json!(self.by_rule.get(rule).unwrap_or(&0)));
        }
        json!({
            "checkedCalls": self.checked,
            "violationsTotal": total,
            "byRule": by_rule,
            "listed": self.listed.len(),
            "listLimit": MAX_VIOLATIONS,
            "editsWithoutThread": self.unthreaded_edits,
            "violations": self.listed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::line::parse;
    use super::*;

    fn run(lines: &[&str]) -> Value {
        let mut a = Audit::default();
        for l in lines {
            a.call(&parse(l.as_bytes()).unwrap());
        }
        a.to_json()
    }

    #[test]
    fn each_rule_fires_on_its_pattern_only() {
        let v = run(&[
            r#"{"tool":"BashCommand","retry_same_call":true}"#,
            r#"{"tool":"EditFiles","edit_replayed":true,"principal":"p","thread":"t"}"#,
            r#"{"tool":"EditFiles","status":"needs_read","next_action_tool":"ReadFiles"}"#,
            r#"{"tool":"EditFiles","status":"needs_read","next_action_tool":"EditFiles"}"#,
            r#"{"tool":"EditFiles","error_code":"search_block_not_found","principal":"p","thread":"t"}"#,
            r#"{"tool":"EditFiles","edit_committed":true,"principal":"p","thread":"u"}"#,
            r#"{"tool":"EditFiles","edit_committed":true,"principal":"p","thread":"t"}"#,
            r#"{"tool":"EditFiles","error_code":"search_block_ambiguous","principal":"p","thread":"t"}"#,
            r#"{"tool":"ReadFiles","principal":"p","thread":"t"}"#,
            r#"{"tool":"EditFiles","edit_committed":true,"principal":"p","thread":"t"}"#,
        ]);
        assert_eq!(v["checkedCalls"], 10);
        assert_eq!(
            v["byRule"],
            json!({"retry_same_call": 1, "committed_edit_retried": 1,
                   "needs_read_without_read_files": 1, "search_conflict_kept_read_evidence": 1})
        );
        assert_eq!(v["violations"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn the_list_is_capped_but_every_violation_counts() {
        let lines = vec![r#"{"tool":"BashCommand","retry_same_call":true}"#; 150];
        let v = run(&lines);
        assert_eq!(v["violationsTotal"], 150);
        assert_eq!(v["violations"].as_array().unwrap().len(), MAX_VIOLATIONS);
    }
}
