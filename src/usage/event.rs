//! The usage events (`usage_schema=1`): one JSON object per line, tagged by `event`.
//!
//! Invariant: every field is a closed classification, a count, a duration, a size, the
//! build, the principal's configured name, a bounded client name/version, or an id the
//! server made (random, or a salted hash of a client's identifier). No field can hold
//! command text, file contents, tool arguments, URLs, output, cursors, paths or tokens:
//! string fields are `&'static str` except those built by `Sink::hash`, `Sink`'s ids and
//! `bounded_label`.

use serde::Serialize;
use std::collections::BTreeMap;

/// The schema of every line this writer produces.
pub const USAGE_SCHEMA: u32 = 1;
/// The schema of the workflow fields on Execution (and, later, Agent) events.
pub const WORKFLOW_SCHEMA: u32 = 1;

/// One line: the schema, the time, then the event's own fields.
#[derive(Serialize)]
pub struct Record<'a> {
    pub usage_schema: u32,
    pub ts_ms: i64,
    #[serde(flatten)]
    pub event: &'a Event,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    ToolCall(Box<ToolCall>),
    ToolStarted(ToolStarted),
    ToolPhase(ToolPhase),
    HttpRequest(HttpRequest),
    HttpRejected(HttpRejected),
}

/// Where a request came from, as far as the log may say.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Origin {
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Server-made id shared by a request's `http_request` and its `tool_call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Salted hash of the MCP session (`Mcp-Session-Id`) or gateway conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// The negotiated protocol version (one of the versions this server speaks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<&'static str>,
    /// The client declared `io.winx/compact-bash-output` (not logged).
    #[serde(skip)]
    pub compact_bash: bool,
}

/// The terminal event of one `tools/call`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ToolCall {
    pub usage_call_id: String,
    #[serde(flatten)]
    pub origin: Origin,
    /// A catalog name, or `unknown` (a client's unknown name is never written).
    pub tool: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_category: Option<&'static str>,
    pub build: String,
    pub principal: String,
    /// Salted hash of the session's thread id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// `result` (a tool result, error or not), `rpc_error` (refused before a tool ran),
    /// `task` (handed to an MCP Task).
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// The envelope's `errorCode` (serialised as `error_code`).
    #[serde(rename = "error_code", skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_same_call: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_action_tool: Option<&'static str>,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    pub batch_items: u64,
    pub worker_limit: u64,
    #[serde(flatten)]
    pub facts: Facts,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<&'static str, PhaseTotal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases_suppressed: Option<u32>,
}

/// Tool-specific observations; absent means unknown or not applicable, never zero.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Facts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_schema: Option<u32>,
    // Initialize.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialize_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transition: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_reused: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_recovered: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guideline_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_writer_policy: Option<&'static str>,
    // BashCommand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_wait_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_wait_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_wait_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_bytes: Option<u64>,
    // ReadFiles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_request_schema: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_whole_file_requests: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_bounded_range_requests: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_open_ended_range_requests: Option<u64>,
    // Execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe_schema: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe_requested_items: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe_returned_items: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe_items_with_issues: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_timeout_ms: Option<u64>,
    // Agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
    /// Whether input reached the target: `true`, `false` or `unknown` (uncertain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_sent: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_delivery: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_activity_observed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_replayed: Option<bool>,
    /// A return-final admission's receipt class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_class: Option<&'static str>,
    // CodeMap (seed 000's canonical root fields).
    /// `canonical` (workspace source) or `helper` (a map of a managed temporary helper).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_kind: Option<&'static str>,
    /// Bytes of the navigation payload (the answer's text block).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u64>,
    // The managed temporary directory, as measured by this call's audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_usage_schema: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_over_budget: Option<bool>,
    // Edits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_committed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_replayed: Option<bool>,
}

/// A phase's inclusive total within one call (phases may nest or repeat).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct PhaseTotal {
    pub count: u32,
    pub total_ms: f64,
}

/// A call was admitted to its tool; shares `usage_call_id` with its `tool_call`.
#[derive(Clone, Debug, Serialize)]
pub struct ToolStarted {
    pub usage_call_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub tool: &'static str,
    pub principal: String,
}

/// One finished phase of a call (its start offset and duration: a start/finish pair), or
/// the one truncation marker (`phase: "truncated"`) after `MAX_PHASE_EVENTS`.
#[derive(Clone, Debug, Serialize)]
pub struct ToolPhase {
    pub usage_call_id: String,
    pub phase: &'static str,
    pub start_ms: f64,
    pub duration_ms: f64,
}

/// One HTTP request to `/mcp` that passed admission, answered.
#[derive(Clone, Debug, Serialize)]
pub struct HttpRequest {
    pub request_id: String,
    pub peer: String,
    pub method: &'static str,
    /// The JSON-RPC method when it is one this server knows, else `other`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc_method: Option<&'static str>,
    pub status: u16,
    pub duration_ms: f64,
    pub principal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_session: Option<String>,
    pub build: String,
}

/// One HTTP request to `/mcp` refused before it reached a tool.
#[derive(Clone, Debug, Serialize)]
pub struct HttpRejected {
    pub request_id: String,
    pub peer: String,
    pub method: &'static str,
    pub reason: &'static str,
    pub status: u16,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    pub build: String,
}

/// The longest client name or version written.
pub const MAX_LABEL_CHARS: usize = 64;

/// A client-supplied label (client name, version) as the log may hold it: at most
/// `MAX_LABEL_CHARS` of `[A-Za-z0-9._+-]`, other characters replaced by `_`. Nothing
/// that long or that free-form fits a path, a token or a command line.
pub fn bounded_label(s: &str) -> String {
    s.chars()
        .take(MAX_LABEL_CHARS)
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '+' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// HTTP methods as the log names them (anything else is `other`).
pub fn http_method(m: &str) -> &'static str {
    match m {
        "GET" => "GET",
        "POST" => "POST",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "PUT" => "PUT",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        _ => "other",
    }
}

/// JSON-RPC methods as the log names them (anything else is `other`).
pub fn rpc_method(m: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
        "notifications/initialized",
        "notifications/cancelled",
    ];
    KNOWN.iter().find(|k| **k == m).copied().unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_flat_object_tagged_by_event() {
        let e = Event::ToolPhase(ToolPhase {
            usage_call_id: "c1".into(),
            phase: "wait",
            start_ms: 0.5,
            duration_ms: 2.0,
        });
        let v = serde_json::to_value(Record {
            usage_schema: USAGE_SCHEMA,
            ts_ms: 7,
            event: &e,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"usage_schema": 1, "ts_ms": 7, "event": "tool_phase",
                "usage_call_id": "c1", "phase": "wait", "start_ms": 0.5, "duration_ms": 2.0})
        );
        let call = Event::ToolCall(Box::new(ToolCall {
            tool: "Initialize",
            outcome: "result",
            ..Default::default()
        }));
        let v = serde_json::to_value(Record {
            usage_schema: 1,
            ts_ms: 1,
            event: &call,
        })
        .unwrap();
        assert_eq!(v["event"], "tool_call");
        assert!(v.get("exit_code").is_none(), "unknown stays absent");
        assert!(v.get("phases").is_none());
    }

    #[test]
    fn labels_and_methods_are_bounded() {
        assert_eq!(bounded_label("claude-code 1.2/x"), "claude-code_1.2_x");
        assert_eq!(bounded_label(&"a".repeat(500)).len(), MAX_LABEL_CHARS);
        assert_eq!(http_method("BREW"), "other");
        assert_eq!(rpc_method("tools/call"), "tools/call");
        assert_eq!(rpc_method("secret/canary"), "other");
    }
}
