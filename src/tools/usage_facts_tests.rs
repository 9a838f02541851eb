//! Unit tests of `usage_facts`: closed values only, and the route → wait-mode table.

use super::*;
use crate::tools::envelope::Envelope;
use serde_json::json;

fn out(tool: ToolName, data: Value, text: &str) -> ToolOutput {
    ToolOutput {
        text: text.into(),
        envelope: Envelope::completed(tool, "m", data),
        images: Vec::new(),
    }
}

fn map(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn bash_facts_name_the_category_and_waits_but_copy_nothing() {
    let args = map(json!({"action_json": {"command": "cargo test SECRET"},
        "wait_for_seconds": 2.5, "wait_policy": "adaptive"}));
    let o = out(
        ToolName::BashCommand,
        json!({"exit_code": 3, "truncated": false, "state": {"process_status": "exited"}}),
        "SECRET output",
    );
    let f = facts(ToolName::BashCommand, &args, &o, 4);
    assert_eq!(f.action, Some("command"));
    assert_eq!(f.command_category, Some("test"));
    assert_eq!(f.facts.requested_wait_ms, Some(2500));
    assert_eq!(f.facts.effective_wait_ms, Some(2500));
    assert_eq!(f.facts.exit_code, Some(3));
    assert_eq!(f.facts.process_status, Some("exited"));
    let text = serde_json::to_string(&f.facts).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
}

/// Seed 000's modes: the route decides, the policy and action say whether a task
/// could take the command; a Task handle (no output) still records the call's facts.
#[test]
fn the_route_selects_the_wait_mode() {
    let mode = |args: Value, out: Option<&ToolOutput>, route: Route| {
        let f = routed_facts(ToolName::BashCommand, &map(args), out, route, 4);
        (
            f.action,
            f.facts.effective_wait_mode,
            f.facts.effective_wait_ms,
        )
    };
    let cmd = |extra: Value| {
        let mut a = json!({"action_json": {"command": "sleep 9"}, "wait_for_seconds": 2});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let until = json!({"wait_policy": "until_complete"});
    let early = json!({"wait_policy": "return_early"});
    let c = Some("command");
    assert_eq!(
        mode(cmd(json!({})), None, Route::Requested),
        (c, Some("task"), Some(0))
    );
    assert_eq!(
        mode(cmd(until.clone()), None, Route::Offered),
        (c, Some("task"), Some(0))
    );
    assert_eq!(
        mode(cmd(json!({})), None, Route::Offered),
        (c, Some("task_inline"), Some(2000))
    );
    let done = out(ToolName::BashCommand, json!({"exit_code": 0}), "");
    assert_eq!(
        mode(cmd(json!({})), Some(&done), Route::OfferedFallback),
        (c, Some("task_inline"), Some(2000))
    );
    assert_eq!(
        mode(cmd(until), Some(&done), Route::OfferedFallback),
        (c, Some("synchronous"), Some(50_000))
    );
    assert_eq!(
        mode(cmd(early), Some(&done), Route::Offered),
        (c, Some("synchronous"), Some(2000))
    );
    let status = json!({"action_json": {"status_check": true}});
    assert_eq!(
        mode(status, Some(&done), Route::Offered),
        (Some("status_check"), Some("synchronous"), Some(10_000))
    );
    let screen = json!({"action_json": {"screen": true}});
    assert_eq!(
        mode(screen, None, Route::Requested),
        (Some("screen"), None, None)
    );
}

#[test]
fn codemap_facts_name_the_source_kind_and_the_payload() {
    let args = map(json!({"operation": "outline", "path": "CANARY"}));
    let o = out(ToolName::CodeMap, json!({"path": "CANARY"}), "12345");
    let f = facts(ToolName::CodeMap, &args, &o, 4);
    assert_eq!(f.action, Some("outline"));
    assert_eq!(f.facts.source_kind, Some("canonical"));
    assert_eq!(f.facts.payload_bytes, Some(5));
    let o = out(
        ToolName::CodeMap,
        json!({"helper_map": {"capped": false}}),
        "",
    );
    let f = facts(ToolName::CodeMap, &args, &o, 4);
    assert_eq!(f.facts.source_kind, Some("helper"));
    let text = serde_json::to_string(&f.facts).unwrap();
    assert!(!text.contains("CANARY"), "{text}");
}

#[test]
fn read_shapes_follow_the_range_table_and_bad_entries_stay_unknown() {
    let args = map(json!({"file_paths": ["a", "b:1-2", "c:-5", "d:7", "e:9-"]}));
    let o = out(ToolName::ReadFiles, json!({}), "");
    let f = facts(ToolName::ReadFiles, &args, &o, 4);
    assert_eq!(f.batch_items, 5);
    assert_eq!(f.worker_limit, 4);
    assert_eq!(f.facts.read_whole_file_requests, Some(1));
    assert_eq!(f.facts.read_bounded_range_requests, Some(2));
    assert_eq!(f.facts.read_open_ended_range_requests, Some(2));
    let bad = map(json!({"file_paths": ["a", 7]}));
    let f = facts(ToolName::ReadFiles, &bad, &o, 4);
    assert_eq!(f.facts.read_whole_file_requests, None);
}

#[test]
fn initialize_and_execution_facts_are_closed_values() {
    let args = map(json!({"type": "first_call", "mode": "code_writer"}));
    let data = json!({"transition": "created", "response_mode": "full",
        "initialize_recovered_missing_session": false, "guidelines": ["AGENTS.md"],
        "files_in_overview": 4,
        "mode": {"name": "code_writer", "allowed_commands": ["all"], "allowed_globs": ["src/**"]}});
    let f = facts(
        ToolName::Initialize,
        &args,
        &out(ToolName::Initialize, data, "abc"),
        4,
    );
    assert_eq!(f.facts.transition, Some("created"));
    assert_eq!(f.facts.session_reused, Some(false));
    assert_eq!(f.facts.context_bytes, Some(3));
    assert_eq!(f.facts.code_writer_policy, Some("globs_restricted"));
    let args = map(json!({"action": {"type": "observe", "items": [{}, {}]}}));
    let data = json!({"items": [{"errors": []}, {"errors": [{"stage": "read"}]}]});
    let f = facts(
        ToolName::Execution,
        &args,
        &out(ToolName::Execution, data, ""),
        4,
    );
    assert_eq!(f.facts.workflow_schema, Some(1));
    assert_eq!(f.facts.observe_requested_items, Some(2));
    assert_eq!(f.facts.observe_items_with_issues, Some(1));
    let args = map(json!({"action": {"type": "CANARY"}}));
    let f = facts(
        ToolName::Execution,
        &args,
        &out(ToolName::Execution, json!({}), ""),
        4,
    );
    assert_eq!(f.action, None);
}

#[test]
fn agent_facts_name_the_backend_and_the_receipt_states_only() {
    let args = map(json!({"action": {"type": "prompt", "target": "CANARY", "text": "CANARY"}}));
    let data = json!({"prompt_id": "CANARY", "delivery": "delivered", "outcome": "awaiting_input",
        "activity_observed": true, "replayed": false, "target": "CANARY"});
    let f = facts(ToolName::Agent, &args, &out(ToolName::Agent, data, ""), 4);
    assert_eq!(f.action, Some("prompt"));
    assert_eq!(f.facts.workflow_schema, Some(1));
    assert_eq!(f.facts.backend, Some("native"));
    assert_eq!(f.facts.prompt_delivery, Some("delivered"));
    assert_eq!(f.facts.prompt_outcome, Some("awaiting_input"));
    assert_eq!(f.facts.prompt_activity_observed, Some(true));
    assert_eq!(f.facts.input_sent, None);
    let text = serde_json::to_string(&f.facts).unwrap();
    assert!(!text.contains("CANARY"), "{text}");
    let args = map(json!({"backend": "CANARY", "action": {"type": "wait"}}));
    let f = facts(
        ToolName::Agent,
        &args,
        &out(ToolName::Agent, json!({}), ""),
        4,
    );
    assert_eq!((f.action, f.facts.backend), (Some("wait"), None));
}

#[test]
fn temporary_facts_are_measured_values_only() {
    let args = map(json!({"action_json": {"command": "echo hi"}}));
    let data = json!({"temporary": {"dir": "/x/CANARY", "bytes": 0, "files": 0,
        "over_budget": false, "generation": "CANARY"}});
    let f = facts(
        ToolName::BashCommand,
        &args,
        &out(ToolName::BashCommand, data, ""),
        4,
    );
    assert_eq!(f.facts.temporary_usage_schema, Some(1));
    assert_eq!(f.facts.temporary_bytes, Some(0));
    assert_eq!(f.facts.temporary_over_budget, Some(false));
    let text = serde_json::to_string(&f.facts).unwrap();
    assert!(!text.contains("CANARY"), "{text}");
    let data = json!({"temporary": {"unavailable": "read-only", "bytes": 0}});
    let f = facts(
        ToolName::BashCommand,
        &args,
        &out(ToolName::BashCommand, data, ""),
        4,
    );
    assert_eq!(f.facts.temporary_usage_schema, None);
    let data = json!({"temporary": {"bytes": "many"}});
    let f = facts(
        ToolName::BashCommand,
        &args,
        &out(ToolName::BashCommand, data, ""),
        4,
    );
    assert_eq!(f.facts.temporary_usage_schema, None);
}
