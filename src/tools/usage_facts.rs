//! What the usage log may learn from one finished tool call: closed classifications and
//! counts read from its arguments' *shape* (which action, how many items, which range
//! kind) and from its envelope. The command category is the only thing derived from text
//! a client wrote, and it is one of `usage::category::CATEGORIES`.
//!
//! Invariant: every string this module puts in `CallFacts` is a `&'static str` from a
//! fixed list here or in the tool that owns it; no argument or output text is copied.

use super::bash::action::{self, Action, POLICIES};
use super::envelope::{Status, ToolOutput};
use super::name::ToolName;
use crate::files::ranges::{LineRange, parse_spec};
use crate::requests::receipt::Class;
use crate::usage::category::command_category;
use crate::usage::event::{Facts, WORKFLOW_SCHEMA};
use serde_json::{Map, Value};

/// Initialize types, Execution actions, wait outcomes and transitions as the log names
/// them (the tools' own lists; anything else is left unknown).
const INITIALIZE_TYPES: &[&str] = &[
    "first_call",
    "status",
    "user_asked_mode_change",
    "reset_shell",
    "user_asked_change_workspace",
];
const EXECUTION_ACTIONS: &[&str] = &["list", "get", "explain", "read", "observe", "wait"];
const WAIT_OUTCOMES: &[&str] = &["changed", "timeout", "resync"];
const AGENT_ACTIONS: &[&str] = &[
    "list", "get", "read", "explain", "wait", "prompt", "catalog", "admit", "request",
];
const BACKENDS: &[&str] = &["native", "herdr"];
const DELIVERIES: &[&str] = &["delivered", "uncertain"];
const PROMPT_OUTCOMES: &[&str] = &[
    "waiting",
    "awaiting_input",
    "awaiting_approval",
    "exited",
    "timed_out",
    "generation_changed",
];
const TRANSITIONS: &[&str] = &[
    "created",
    "attached_existing",
    "status",
    "mode_changed",
    "reset",
];
const MODES: &[&str] = &["wcgw", "architect", "code_writer"];
const CODEMAP_OPERATIONS: &[&str] = &["outline", "references"];

/// How a call was routed, which decides its inline wait (seed 000's
/// `effective_wait_mode`): the server's selection, not the time it waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// No task possible: the normalized synchronous request (`synchronous`).
    Synchronous,
    /// 2026-07-28, tasks offered: a foreground command under `adaptive` waits its inline
    /// allowance and is promoted if still running (`task_inline`); under `until_complete`
    /// it is a Task at once, zero inline allowance (`task`).
    Offered,
    /// Tasks offered but none could be created: `until_complete` takes its bounded
    /// synchronous fallback (`synchronous`), `adaptive` keeps its inline allowance
    /// (`task_inline`).
    OfferedFallback,
    /// 2025-11-25 task-augmented call: the server accepted a Task at once (`task`, 0 ms).
    Requested,
}

/// The usage-relevant view of one call.
#[derive(Debug, Default)]
pub struct CallFacts {
    pub action: Option<&'static str>,
    pub command_category: Option<&'static str>,
    pub batch_items: u64,
    pub worker_limit: u64,
    pub facts: Facts,
}

/// `s` as the matching entry of `list`, if it is one.
fn closed(list: &[&'static str], s: Option<&str>) -> Option<&'static str> {
    let s = s?;
    list.iter().find(|x| **x == s).copied()
}

/// The facts of an inline call of `tool` with `args` that produced `out`.
/// `read_parallelism` is the worker limit of batched reads.
pub fn facts(
    tool: ToolName,
    args: &Map<String, Value>,
    out: &ToolOutput,
    read_parallelism: usize,
) -> CallFacts {
    routed_facts(tool, args, Some(out), Route::Synchronous, read_parallelism)
}

/// The facts of a call routed by `route`: with `out` when it was answered inline, from
/// its arguments alone when the answer is a Task handle (its result comes later).
pub fn routed_facts(
    tool: ToolName,
    args: &Map<String, Value>,
    out: Option<&ToolOutput>,
    route: Route,
    read_parallelism: usize,
) -> CallFacts {
    let mut f = CallFacts::default();
    let null = Value::Null;
    let data = out.map_or(&null, |o| &o.envelope.data);
    match tool {
        ToolName::Initialize => {
            if let Some(out) = out {
                initialize(&mut f, args, out)
            }
        }
        ToolName::BashCommand => bash(&mut f, args, out, route),
        ToolName::CodeMap => codemap(&mut f, args, out),
        ToolName::ReadFiles => {
            f.worker_limit = read_parallelism as u64;
            read_files(&mut f, args);
        }
        ToolName::Execution => execution(&mut f, args, data),
        ToolName::Agent => agent(&mut f, args, data),
        ToolName::FileWriteOrEdit
        | ToolName::MultiFileEdit
        | ToolName::ApplyPatch
        | ToolName::EditFiles => {
            for key in ["edits", "files"] {
                if let Some(items) = args.get(key).and_then(Value::as_array) {
                    f.batch_items = items.len() as u64;
                }
            }
            if let Some(out) = out {
                let replayed = data.get("replayed").and_then(Value::as_bool) == Some(true);
                f.facts.edit_replayed = Some(replayed);
                f.facts.edit_committed =
                    Some(out.envelope.status == Status::Completed && !replayed);
            }
        }
        _ => {}
    }
    temporary(&mut f.facts, data);
    f
}

/// A measured temporary-directory audit in the result (`data.temporary`): its counts and
/// verdict, marked `temporary_usage_schema=1`. Anything missing or of the wrong type is
/// left out, never made zero; an unmeasured directory (`unavailable`) adds nothing.
fn temporary(x: &mut Facts, data: &Value) {
    let Some(t) = data.get("temporary").and_then(Value::as_object) else {
        return;
    };
    if t.contains_key("unavailable") {
        return;
    }
    let bytes = t.get("bytes").and_then(Value::as_u64);
    let files = t.get("files").and_then(Value::as_u64);
    let over = t.get("over_budget").and_then(Value::as_bool);
    if bytes.is_none() && files.is_none() && over.is_none() {
        return;
    }
    x.temporary_usage_schema = Some(1);
    x.temporary_bytes = bytes;
    x.temporary_files = files;
    x.temporary_over_budget = over;
}

fn initialize(f: &mut CallFacts, args: &Map<String, Value>, out: &ToolOutput) {
    let data = &out.envelope.data;
    let x = &mut f.facts;
    x.initialize_type = closed(INITIALIZE_TYPES, args.get("type").and_then(Value::as_str));
    f.action = x.initialize_type;
    x.transition = closed(TRANSITIONS, data.get("transition").and_then(Value::as_str));
    if x.transition.is_none() {
        return;
    }
    x.session_reused = Some(x.transition != Some("created"));
    x.session_recovered = data
        .get("initialize_recovered_missing_session")
        .and_then(Value::as_bool);
    x.response_mode = closed(
        &["full", "compact"],
        data.get("response_mode").and_then(Value::as_str),
    );
    x.context_bytes = Some(out.text.len() as u64);
    x.guideline_files = data
        .get("guidelines")
        .and_then(Value::as_array)
        .map(|g| g.len() as u64);
    x.initial_files = data.get("files_in_overview").and_then(Value::as_u64);
    let mode = data.get("mode");
    x.mode = closed(
        MODES,
        mode.and_then(|m| m.get("name")).and_then(Value::as_str),
    );
    x.code_writer_policy = match x.mode {
        Some("code_writer") => {
            let all = |k: &str| {
                mode.and_then(|m| m.get(k))
                    .and_then(Value::as_array)
                    .is_some_and(|l| l.iter().any(|v| v.as_str() == Some("all")))
            };
            Some(match (all("allowed_commands"), all("allowed_globs")) {
                (true, true) => "unrestricted",
                (false, true) => "commands_restricted",
                (true, false) => "globs_restricted",
                (false, false) => "restricted",
            })
        }
        Some(_) => Some("none"),
        None => None,
    };
}

fn bash(f: &mut CallFacts, args: &Map<String, Value>, out: Option<&ToolOutput>, route: Route) {
    let x = &mut f.facts;
    let policy = closed(POLICIES, args.get("wait_policy").and_then(Value::as_str));
    x.requested_wait_policy = policy;
    x.requested_wait_ms = args
        .get("wait_for_seconds")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| (s * 1000.0) as u64);
    let Ok(act) = action::parse_action(args.get("action_json")) else {
        return;
    };
    f.action = Some(match &act {
        Action::Command { .. } => "command",
        Action::StatusCheck { .. } => "status_check",
        Action::Input {
            text_as_command: Some(_),
            ..
        } => "send_text",
        Action::Input { .. } => "send_keys",
        Action::Screen { .. } => "screen",
        Action::Turn { wait: true, .. } => "wait_for_turn",
        Action::Turn { wait: false, .. } => "inspect",
    });
    if let Action::Command { command, .. } = &act {
        f.command_category = Some(command_category(command));
    }
    if let Some(out) = out {
        outcome(x, out);
    }
    // The selected inline allowance, for the wait-consuming actions only, and only once
    // the call got past its argument and session checks (seed 000); a Task handle means
    // the server accepted the call.
    let waits = matches!(
        act,
        Action::Command { .. } | Action::StatusCheck { .. } | Action::Input { .. }
    );
    let routed = out.is_none_or(|o| {
        !matches!(
            o.envelope.status,
            Status::InvalidInput
                | Status::NeedsInitialize
                | Status::Conflict
                | Status::PolicyBlocked
        )
    });
    let seconds = action::wait_seconds(args).ok().flatten();
    let effective = policy.unwrap_or("adaptive");
    if waits
        && routed
        && let Some(plan) = action::plan_wait(&act, effective, seconds)
    {
        let promotable = matches!(
            act,
            Action::Command {
                background: false,
                ..
            }
        ) && effective != "return_early";
        let until_complete = effective == "until_complete";
        let (mode, ms) = match route {
            Route::Requested => ("task", 0),
            Route::Offered if promotable && until_complete => ("task", 0),
            Route::Offered | Route::OfferedFallback if promotable && !until_complete => {
                ("task_inline", plan.timeout_ms)
            }
            _ => ("synchronous", plan.timeout_ms),
        };
        x.effective_wait_policy = Some(effective);
        x.effective_wait_ms = Some(ms);
        x.effective_wait_mode = Some(mode);
    }
}

/// What a BashCommand result says of its process (closed states and numbers only).
fn outcome(x: &mut Facts, out: &ToolOutput) {
    let data = &out.envelope.data;
    x.exit_code = data.get("exit_code").and_then(Value::as_i64);
    x.truncated = data.get("truncated").and_then(Value::as_bool);
    x.omitted_bytes = data.get("omitted_bytes").and_then(Value::as_u64);
    x.process_status = closed(
        &["exited", "running", "idle", "shell_exited"],
        data.get("state")
            .and_then(|s| s.get("process_status"))
            .and_then(Value::as_str),
    );
}

/// CodeMap: the operation, and for an answer, where the mapped source lies (`canonical`
/// workspace files, or a `helper` in the managed temporary directory, seed 003) and the
/// navigation payload's bytes (the text block an agent reads, what the helper cap bounds).
fn codemap(f: &mut CallFacts, args: &Map<String, Value>, out: Option<&ToolOutput>) {
    f.action = closed(
        CODEMAP_OPERATIONS,
        args.get("operation").and_then(Value::as_str),
    );
    let Some(out) = out.filter(|o| o.envelope.status == Status::Completed) else {
        return;
    };
    let data = &out.envelope.data;
    f.facts.source_kind = Some(match data.get("helper_map") {
        Some(Value::Object(_)) => "helper",
        _ => "canonical",
    });
    f.facts.payload_bytes = Some(out.text.len() as u64);
}

fn read_files(f: &mut CallFacts, args: &Map<String, Value>) {
    let Some(paths) = args.get("file_paths").and_then(Value::as_array) else {
        return;
    };
    f.batch_items = paths.len() as u64;
    let (mut whole, mut bounded, mut open) = (0, 0, 0);
    for p in paths {
        match p.as_str().map(parse_spec) {
            Some(Ok(spec)) => match spec.range {
                LineRange::Whole => whole += 1,
                LineRange::Between(..) | LineRange::To(_) => bounded += 1,
                LineRange::From(_) | LineRange::Line(_) => open += 1,
            },
            // An invalid entry makes the request's shape unknown.
            _ => return,
        }
    }
    let x = &mut f.facts;
    x.read_request_schema = Some(1);
    x.read_whole_file_requests = Some(whole);
    x.read_bounded_range_requests = Some(bounded);
    x.read_open_ended_range_requests = Some(open);
}

fn execution(f: &mut CallFacts, args: &Map<String, Value>, data: &Value) {
    let x = &mut f.facts;
    x.workflow_schema = Some(WORKFLOW_SCHEMA);
    let act = args.get("action").and_then(Value::as_object);
    f.action = closed(
        EXECUTION_ACTIONS,
        act.and_then(|a| a.get("type")).and_then(Value::as_str),
    );
    match f.action {
        Some("observe") => {
            x.observe_schema = Some(1);
            let requested = act
                .and_then(|a| a.get("items"))
                .and_then(Value::as_array)
                .map(|i| i.len() as u64);
            x.observe_requested_items = requested;
            f.batch_items = requested.unwrap_or(0);
            if let Some(items) = data.get("items").and_then(Value::as_array) {
                x.observe_returned_items = Some(items.len() as u64);
                x.observe_items_with_issues = Some(
                    items
                        .iter()
                        .filter(|i| i["errors"].as_array().is_some_and(|e| !e.is_empty()))
                        .count() as u64,
                );
            }
        }
        Some("wait") => {
            x.wait_outcome = closed(WAIT_OUTCOMES, data.get("outcome").and_then(Value::as_str));
            x.wait_timeout_ms = act
                .and_then(|a| a.get("timeout_seconds"))
                .and_then(Value::as_f64)
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| (s * 1000.0) as u64);
        }
        _ => {}
    }
}

/// Agent calls: the Execution facts for the shared native observations, plus the
/// backend and a prompt receipt's closed states.
fn agent(f: &mut CallFacts, args: &Map<String, Value>, data: &Value) {
    execution(f, args, data);
    let kind = args
        .get("action")
        .and_then(Value::as_object)
        .and_then(|a| a.get("type"))
        .and_then(Value::as_str);
    f.action = closed(AGENT_ACTIONS, kind);
    let x = &mut f.facts;
    x.backend = match args.get("backend") {
        None => Some("native"),
        Some(v) => closed(BACKENDS, v.as_str()),
    };
    x.input_sent = match data.get("input_sent") {
        Some(Value::Bool(true)) => Some("true"),
        Some(Value::Bool(false)) => Some("false"),
        Some(v) if v == "unknown" => Some("unknown"),
        _ => None,
    };
    x.request_class = data
        .get("receipt_class")
        .and_then(Value::as_str)
        .and_then(|c| Class::ALL.iter().map(|k| k.as_str()).find(|k| *k == c));
    if data.get("prompt_id").is_some() {
        x.prompt_delivery = closed(DELIVERIES, data.get("delivery").and_then(Value::as_str));
        x.prompt_outcome = closed(PROMPT_OUTCOMES, data.get("outcome").and_then(Value::as_str));
        x.prompt_activity_observed = data.get("activity_observed").and_then(Value::as_bool);
        x.prompt_replayed = data.get("replayed").and_then(Value::as_bool);
    }
}

#[cfg(test)]
#[path = "usage_facts_tests.rs"]
mod tests;
