//! The tool-specific sections of the report: `initialize` (transitions and recovery),
//! `execution` (BashCommand exit codes, truncation and waits), `reads`, `observations`
//! and `workflows`.
//!
//! Invariant: an event whose field is missing or malformed adds to that field's
//! `unknown` count, never to a zero bucket or a sample.

use super::line::Line;
use super::stats::{Counter, MAX_KEYS, OTHER, Samples, cut};
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Initialize {
    calls: u64,
    types: Counter,
    transitions: Counter,
    response_modes: Counter,
    policies: Counter,
    recovered: Counter,
    reused: Counter,
}

fn flag(b: Option<bool>) -> Option<&'static str> {
    b.map(|b| if b { "true" } else { "false" })
}

impl Initialize {
    pub fn add(&mut self, l: &Line) {
        self.calls += 1;
        self.types.add_or_unknown(l.action.str());
        self.transitions.add_or_unknown(l.transition.str());
        self.response_modes.add_or_unknown(l.response_mode.str());
        self.policies.add_or_unknown(l.code_writer_policy.str());
        self.recovered
            .add_or_unknown(flag(l.session_recovered.bool()));
        self.reused.add_or_unknown(flag(l.session_reused.bool()));
    }

    pub fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "types": self.types.to_json(),
            "transitions": self.transitions.to_json(),
            "responseModes": self.response_modes.to_json(),
            "codeWriterPolicies": self.policies.to_json(),
            "recoveredMissingSession": self.recovered.to_json(),
            "reusedSession": self.reused.to_json(),
        })
    }
}

/// How calls recovered from lost state: recovered sessions, shell resets, the results
/// that sent an agent back to Initialize.
#[derive(Default)]
pub struct Recovery {
    recovered_sessions: u64,
    shell_resets: u64,
    needs_initialize: u64,
    shell_exited: u64,
    shell_unavailable: u64,
}

impl Recovery {
    pub fn add(&mut self, l: &Line) {
        let tool = l.tool.str();
        if tool == Some("Initialize") {
            self.recovered_sessions += u64::from(l.session_recovered.bool() == Some(true));
            self.shell_resets += u64::from(l.action.str() == Some("reset_shell"));
        }
        match l.code.str() {
            Some("needs_initialize") => self.needs_initialize += 1,
            Some("shell_exited") => self.shell_exited += 1,
            Some("shell_unavailable") => self.shell_unavailable += 1,
            _ => {}
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "recoveredMissingSessions": self.recovered_sessions,
            "shellResets": self.shell_resets,
            "needsInitializeResults": self.needs_initialize,
            "shellExitedResults": self.shell_exited,
            "shellUnavailableResults": self.shell_unavailable,
        })
    }
}

#[derive(Default)]
pub struct Execution {
    calls: u64,
    actions: Counter,
    categories: Counter,
    exit_codes: Counter,
    nonzero: u64,
    truncated: Counter,
    requested_policies: Counter,
    requested_wait_ms: Samples,
    effective_policies: Counter,
    effective_modes: Counter,
    effective_wait_ms: Samples,
    effective_unknown: u64,
}

impl Execution {
    pub fn add(&mut self, l: &Line) {
        self.calls += 1;
        self.actions.add_or_unknown(l.action.str());
        if l.action.str() == Some("command") {
            self.categories.add_or_unknown(l.command_category.str());
        }
        let code = l.exit_code.i64();
        if let Some(c) = code {
            self.exit_codes.add(&c.to_string());
            self.nonzero += u64::from(c != 0);
        }
        if l.action.str() == Some("command") || l.truncated.bool().is_some() {
            self.truncated.add_or_unknown(flag(l.truncated.bool()));
        }
        if let Some(p) = l.requested_wait_policy.str() {
            self.requested_policies.add(p);
        }
        self.requested_wait_ms.add(l.requested_wait_ms.f64());
        match l.effective_wait_ms.f64() {
            Some(ms) => {
                self.effective_wait_ms.add(Some(ms));
                self.effective_policies
                    .add_or_unknown(l.effective_wait_policy.str());
                self.effective_modes
                    .add_or_unknown(l.effective_wait_mode.str());
            }
            None => self.effective_unknown += 1,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "bashCalls": self.calls,
            "actions": self.actions.to_json(),
            "commandCategories": self.categories.to_json(),
            "exitCodes": self.exit_codes.to_json(),
            "exitCodesKnown": self.exit_codes.total(),
            "nonZeroExits": self.nonzero,
            "truncated": self.truncated.to_json(),
            "requestedWaitPolicies": self.requested_policies.to_json(),
            "requestedWaitMs": self.requested_wait_ms.summary(),
            "effectiveWaitCalls": self.effective_wait_ms.len(),
            "effectiveWaitUnknown": self.effective_unknown,
            "effectiveWaitMs": self.effective_wait_ms.summary(),
            "effectiveWaitPolicies": self.effective_policies.to_json(),
            "effectiveWaitModes": self.effective_modes.to_json(),
        })
    }
}

#[derive(Default)]
pub struct Reads {
    calls: u64,
    shaped: u64,
    whole: u64,
    bounded: u64,
    open_ended: u64,
}

impl Reads {
    pub fn add(&mut self, l: &Line) {
        self.calls += 1;
        let counts = (
            l.read_whole_file_requests.u64(),
            l.read_bounded_range_requests.u64(),
            l.read_open_ended_range_requests.u64(),
        );
        if l.read_request_schema.u64() == Some(1)
            && let (Some(w), Some(b), Some(o)) = counts
        {
            self.shaped += 1;
            self.whole += w;
            self.bounded += b;
            self.open_ended += o;
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "callsWithShape": self.shaped,
            "shapeUnknown": self.calls - self.shaped,
            "wholeFileRequests": self.whole,
            "boundedRangeRequests": self.bounded,
            "openEndedRangeRequests": self.open_ended,
        })
    }
}

#[derive(Default)]
pub struct Observations {
    calls: u64,
    measured: u64,
    requested: u64,
    returned: u64,
    with_issues: u64,
    partial: u64,
}

impl Observations {
    pub fn add(&mut self, l: &Line) {
        self.calls += 1;
        if l.observe_schema.u64() != Some(1) {
            return;
        }
        let (Some(req), Some(ret), Some(iss)) = (
            l.observe_requested_items.u64(),
            l.observe_returned_items.u64(),
            l.observe_items_with_issues.u64(),
        ) else {
            return;
        };
        self.measured += 1;
        self.requested += req;
        self.returned += ret;
        self.with_issues += iss;
        self.partial += u64::from(iss > 0);
    }

    pub fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "measuredCalls": self.measured,
            "unverifiable": self.calls - self.measured,
            "requestedItems": self.requested,
            "returnedItems": self.returned,
            "itemsWithIssues": self.with_issues,
            "partialResults": self.partial,
        })
    }
}

/// Workflow calls (`workflow_schema=1`) by tool, action and backend: at most `MAX_KEYS`
/// groups, the rest in one `(other)` group.
#[derive(Default)]
pub struct Workflows {
    groups: BTreeMap<(String, String, String), Workflow>,
}

#[derive(Default)]
struct Workflow {
    calls: u64,
    latency: Samples,
    statuses: Counter,
    wait_outcomes: Counter,
    /// Receipts answered (a receipt read again counts again): by delivery and outcome.
    receipt_deliveries: Counter,
    receipt_outcomes: Counter,
    /// Input sent to the target: `true`, `false` or `unknown` (uncertain).
    input_sent: Counter,
}

impl Workflows {
    pub fn add(&mut self, l: &Line) {
        if l.workflow_schema.u64() != Some(1) {
            return;
        }
        let mut key = (
            cut(l.tool.str().unwrap_or("unknown")).into_owned(),
            cut(l.action.str().unwrap_or("unknown")).into_owned(),
            cut(l.backend.str().unwrap_or("native")).into_owned(),
        );
        if self.groups.len() >= MAX_KEYS && !self.groups.contains_key(&key) {
            key = (OTHER.into(), OTHER.into(), OTHER.into());
        }
        let w = self.groups.entry(key).or_default();
        w.calls += 1;
        w.latency.add(l.duration_ms.f64());
        w.statuses.add_or_unknown(l.status.str());
        if let Some(o) = l.wait_outcome.str() {
            w.wait_outcomes.add(o);
        }
        if let Some(d) = l.prompt_delivery.str() {
            w.receipt_deliveries.add(d);
            w.receipt_outcomes.add_or_unknown(l.prompt_outcome.str());
        }
        if let Some(s) = l.input_sent.str() {
            w.input_sent.add(s);
        }
    }

    pub fn to_json(&self) -> Value {
        Value::Array(
            self.groups
                .iter()
                .map(|((tool, action, backend), w)| {
                    json!({
                        "tool": tool, "action": action, "backend": backend,
                        "calls": w.calls,
                        "latencyMs": w.latency.summary(),
                        "statuses": w.statuses.to_json(),
                        "waitOutcomes": w.wait_outcomes.to_json(),
                        "receiptDeliveries": w.receipt_deliveries.to_json(),
                        "receiptOutcomes": w.receipt_outcomes.to_json(),
                        "inputSent": w.input_sent.to_json(),
                    })
                })
                .collect(),
        )
    }
}
