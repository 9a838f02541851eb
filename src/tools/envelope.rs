//! The result envelope every tool returns as `structuredContent`, and its JSON Schema.

use super::error_code::ErrorCode;
use super::name::ToolName;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

/// Outcome class of a tool call; the envelope's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Completed,
    CompletedWithIssues,
    /// Some items of a batch failed; the successful ones are in the same result.
    PartiallyFailed,
    Running,
    NeedsInitialize,
    NeedsRead,
    Conflict,
    PolicyBlocked,
    InvalidInput,
    Failed,
}

impl Status {
    pub const ALL: [Status; 10] = [
        Status::Completed,
        Status::CompletedWithIssues,
        Status::PartiallyFailed,
        Status::Running,
        Status::NeedsInitialize,
        Status::NeedsRead,
        Status::Conflict,
        Status::PolicyBlocked,
        Status::InvalidInput,
        Status::Failed,
    ];

    /// The status as it appears on the wire (snake_case), for the usage log.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::CompletedWithIssues => "completed_with_issues",
            Status::PartiallyFailed => "partially_failed",
            Status::Running => "running",
            Status::NeedsInitialize => "needs_initialize",
            Status::NeedsRead => "needs_read",
            Status::Conflict => "conflict",
            Status::PolicyBlocked => "policy_blocked",
            Status::InvalidInput => "invalid_input",
            Status::Failed => "failed",
        }
    }

    /// Whether MCP `isError` is set for this status.
    pub fn is_error(self) -> bool {
        !matches!(
            self,
            Status::Completed | Status::CompletedWithIssues | Status::Running
        )
    }
}

/// The concrete call an agent should make next.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NextAction {
    pub tool: String,
    pub instruction: String,
    pub arguments: Value,
}

/// A read the agent must perform before an edit can proceed.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequiredRead {
    pub path: String,
    pub ranges: Vec<String>,
}

/// The tool an envelope reports: a tool the server defines, or (only for `unknown_tool`)
/// the bounded echo of a name no tool has. Serialised as the name string.
#[derive(Clone, Debug, PartialEq)]
pub enum CalledTool {
    Known(ToolName),
    Unknown(String),
}

impl CalledTool {
    /// A name from outside (a stored task's tool): known if a tool has it.
    pub fn parse(name: &str) -> CalledTool {
        ToolName::parse(name).map_or_else(|| CalledTool::Unknown(name.to_string()), Into::into)
    }

    pub fn as_str(&self) -> &str {
        match self {
            CalledTool::Known(t) => t.as_str(),
            CalledTool::Unknown(s) => s,
        }
    }
}

impl From<ToolName> for CalledTool {
    fn from(t: ToolName) -> CalledTool {
        CalledTool::Known(t)
    }
}

impl Serialize for CalledTool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The `structuredContent` of every tool result.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub status: Status,
    pub tool: CalledTool,
    pub message: String,
    pub error_code: Option<ErrorCode>,
    pub retryable: bool,
    pub retry_same_call: bool,
    pub next_action: Option<NextAction>,
    pub required_reads: Vec<RequiredRead>,
    pub data: Value,
}

impl Envelope {
    /// A successful result.
    pub fn completed(tool: ToolName, message: impl Into<String>, data: Value) -> Envelope {
        Envelope {
            status: Status::Completed,
            tool: tool.into(),
            message: message.into(),
            error_code: None,
            retryable: false,
            retry_same_call: false,
            next_action: None,
            required_reads: Vec::new(),
            data,
        }
    }
}

/// A finished tool result: the text shown to the model plus the envelope.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    pub text: String,
    pub envelope: Envelope,
    /// Image content blocks (mime type, base64 data), sent after the text block.
    pub images: Vec<(String, String)>,
}

impl ToolOutput {
    /// The MCP `CallToolResult` value. `structuredContent` is complete on its own: Claude
    /// Code and Codex show the model only its JSON when it is present, so it carries the
    /// text block verbatim as `text` (the last key: a host that cuts a long result in its
    /// middle keeps the envelope and the text's end, where the tail of an output and the
    /// status line are). The exceptions are results whose `data` already says it all
    /// (`data.page.text` of an `Execution`/`Agent` read, `data.text` of a Herdr read, the
    /// item pages of an `observe`, a completed `CodeMap` answer): nothing is written twice.
    pub fn to_result(&self) -> Value {
        let mut structured = serde_json::to_value(&self.envelope).unwrap_or(Value::Null);
        if !self.data_holds_text()
            && let Value::Object(map) = &mut structured
        {
            map.insert("text".into(), Value::String(self.text.clone()));
        }
        let mut content = vec![json!({"type": "text", "text": self.text})];
        for (mime, data) in &self.images {
            content.push(json!({"type": "image", "data": data, "mimeType": mime}));
        }
        // Built from the parts, not with `json!`, which would copy both trees once more.
        let mut result = serde_json::Map::new();
        result.insert("content".into(), Value::Array(content));
        result.insert("structuredContent".into(), structured);
        let is_error = self.envelope.status.is_error();
        result.insert("isError".into(), Value::Bool(is_error));
        Value::Object(result)
    }

    /// A refusal, its text rendered from `envelope`: the code, the message and the next
    /// call, so the text is complete on its own (Claude Code shows the model only the
    /// text block of a result marked `isError`).
    pub fn refusal(envelope: Envelope) -> ToolOutput {
        let code = envelope.error_code.map_or("error", |c| c.as_str());
        let mut text = format!("Error ({code}): {}", envelope.message);
        if let Some(next) = &envelope.next_action {
            text.push_str(&format!("\nNext: {} {}", next.tool, next.arguments));
        }
        ToolOutput {
            text,
            envelope,
            images: Vec::new(),
        }
    }

    /// Whether `data` already says everything the text block does (see `to_result`): it
    /// holds the text verbatim, it is a completed `CodeMap` answer, whose `data` is the
    /// same outline, map or references structured (its text is their compact rendering),
    /// or it is an `observe`, whose items carry their pages.
    fn data_holds_text(&self) -> bool {
        let data = &self.envelope.data;
        let verbatim = [&data["page"]["text"], &data["text"]]
            .into_iter()
            .any(|t| t.as_str() == Some(self.text.as_str()));
        let code_map = self.envelope.tool == CalledTool::Known(ToolName::CodeMap)
            && !self.envelope.status.is_error();
        // An `observe`: each item's page is in `data.items` (seed 000: output appears once,
        // in the item pages, with no concatenated copy beside them).
        let history = [ToolName::Execution, ToolName::Agent]
            .iter()
            .any(|t| self.envelope.tool == CalledTool::Known(*t));
        let observe = history
            && data["items"]
                .as_array()
                .is_some_and(|items| items.iter().all(|i| i.get("page").is_some()));
        verbatim || code_map || observe
    }
}

/// The one `outputSchema` every tool advertises. Kept terse on purpose: it is repeated
/// for every tool in `tools/list`, which every agent pays for in context. It names the
/// required envelope fields, lists `status`, the one property a host branches on, and
/// `text`, the property a host that shows only `structuredContent` reads; the
/// others (`errorCode` string or null from the closed `ErrorCode::ALL`, `nextAction`
/// object or null, `data` object, `retryable`, …) are documented in the README and allowed
/// as extra properties. Describing `errorCode`, `nextAction` and `data` here cost 136
/// bytes per tool (1.9 KiB of `tools/list`), which the `Agent` tool needed under the
/// 16 KiB budget `tests/it/cli.rs` enforces. No type arrays, so hosts that map schemas to a
/// single-type dialect accept it.
/// What `text` is, once per tool in `tools/list` (so kept short).
const TEXT_DESCRIPTION: &str =
    "The text content block, verbatim; absent when data holds it (page, items, text, CodeMap)";

pub fn output_schema() -> Value {
    let statuses: Vec<Value> = Status::ALL
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .collect();
    json!({
        "type": "object",
        "properties": {
            "status": {"enum": statuses},
            "text": {"type": "string", "description": TEXT_DESCRIPTION}
        },
        "required": ["status", "tool", "message"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_serialises_with_camel_case_fields() {
        let e = Envelope::completed(ToolName::Initialize, "ok", json!({"a": 1}));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["tool"], "Initialize");
        assert_eq!(v["errorCode"], Value::Null);
        assert_eq!(v["retrySameCall"], false);
        assert_eq!(v["requiredReads"], json!([]));
        let out = ToolOutput {
            text: "hello\n".into(),
            envelope: e,
            images: Vec::new(),
        };
        let sc = &out.to_result()["structuredContent"];
        for key in output_schema()["properties"].as_object().unwrap().keys() {
            assert!(sc.get(key).is_some(), "{key} missing");
        }
    }

    #[test]
    fn structured_content_carries_the_text_block_once() {
        let mut out = ToolOutput {
            text: "hello-from-host\n---\nstatus: exited, exit code 0\n".into(),
            envelope: Envelope::completed(ToolName::BashCommand, "ok", json!({"exit_code": 0})),
            images: Vec::new(),
        };
        let r = out.to_result();
        assert_eq!(r["structuredContent"]["text"], r["content"][0]["text"]);
        // The text is the last key, where a cut in the middle of the JSON cannot reach.
        let json = serde_json::to_string(&r["structuredContent"]).unwrap();
        assert!(json.ends_with(r#""text":"hello-from-host\n---\nstatus: exited, exit code 0\n","tool":"BashCommand"}"#), "{json}");
        // A page whose data holds the same text is not written twice.
        out.text = "page\n".into();
        out.envelope.data = json!({"page": {"text": "page\n"}});
        let r = out.to_result();
        assert!(r["structuredContent"].get("text").is_none());
        assert_eq!(r["structuredContent"]["data"]["page"]["text"], "page\n");
        // Data holding other text does not count.
        out.envelope.data = json!({"page": {"text": "other\n"}});
        assert_eq!(out.to_result()["structuredContent"]["text"], "page\n");
        // A completed CodeMap answer's data is its text, structured; its refusal is not.
        let mut map = Envelope::completed(ToolName::CodeMap, "m", json!({"symbols": []}));
        out.envelope = map.clone();
        assert!(out.to_result()["structuredContent"].get("text").is_none());
        map.status = Status::InvalidInput;
        out.envelope = map;
        assert_eq!(out.to_result()["structuredContent"]["text"], "page\n");
        // An observe's items carry their pages.
        let items = json!({"items": [{"execution_id": "e", "page": {"text": "page\n"}}]});
        out.envelope = Envelope::completed(ToolName::Execution, "o", items);
        assert!(out.to_result()["structuredContent"].get("text").is_none());
    }

    #[test]
    fn every_status_is_in_the_schema_and_no_property_has_a_type_array() {
        let schema = output_schema();
        let statuses = schema["properties"]["status"]["enum"].as_array().unwrap();
        for s in Status::ALL {
            assert!(statuses.contains(&serde_json::to_value(s).unwrap()));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for (key, prop) in schema["properties"].as_object().unwrap() {
            assert!(!prop["type"].is_array(), "{key} has a type array");
        }
    }

    #[test]
    fn every_error_code_fits_the_schema_and_serialises_as_its_string() {
        // The schema leaves `errorCode` undescribed (see `output_schema`: extra properties
        // are allowed); every code the server can put there serialises as its string.
        let schema = output_schema();
        assert!(schema["properties"].get("errorCode").is_none());
        assert!(schema.get("additionalProperties").is_none());
        let mut e = Envelope::completed(ToolName::ReadFiles, "x", json!({}));
        for c in ErrorCode::ALL {
            e.error_code = Some(*c);
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["errorCode"], c.as_str());
        }
    }

    #[test]
    fn is_error_follows_status() {
        assert!(!Status::Completed.is_error());
        assert!(!Status::CompletedWithIssues.is_error());
        assert!(Status::NeedsInitialize.is_error());
        assert!(Status::PolicyBlocked.is_error());
    }
}
