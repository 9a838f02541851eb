//! One usage-log line as `report` reads it: every field lenient. A field of the wrong type
//! (a string where a number belongs, an object, a huge number) becomes unknown instead of
//! failing the whole line; fields the report does not know are skipped. Only a line that
//! is not a JSON object at all is malformed.
//!
//! Strings are borrowed from the line when they carry no escapes, so most lines parse
//! without allocating.

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;

/// A JSON value reduced to what the report can use.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Scalar<'a> {
    #[default]
    Missing,
    Num(f64),
    Int(i64),
    Bool(bool),
    Str(Cow<'a, str>),
    /// null, an array or an object: present but unusable.
    Other,
}

impl<'a> Scalar<'a> {
    pub fn f64(&self) -> Option<f64> {
        match self {
            Scalar::Num(n) if n.is_finite() => Some(*n),
            Scalar::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// A whole number (a float with no fraction counts).
    pub fn i64(&self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(*i),
            Scalar::Num(n) if n.fract() == 0.0 && n.abs() < 9e15 => Some(*n as i64),
            _ => None,
        }
    }

    /// A non-negative whole number.
    pub fn u64(&self) -> Option<u64> {
        self.i64().and_then(|i| u64::try_from(i).ok())
    }

    pub fn bool(&self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

struct ScalarVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ScalarVisitor<'a> {
    type Value = Scalar<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar<'a>, E> {
        Ok(i64::try_from(v).map_or(Scalar::Num(v as f64), Scalar::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Num(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_string())))
    }
    fn visit_unit<E>(self) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Other)
    }
    fn visit_none<E>(self) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Other)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar<'a>, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar<'a>, D::Error> {
        d.deserialize_any(ScalarVisitor(std::marker::PhantomData))
    }
}

/// The fields of a usage line the report uses (absent: `Missing`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Line<'a> {
    #[serde(borrow)]
    pub event: Scalar<'a>,
    #[serde(borrow)]
    pub ts_ms: Scalar<'a>,
    #[serde(borrow)]
    pub build: Scalar<'a>,
    #[serde(borrow)]
    pub tool: Scalar<'a>,
    #[serde(borrow)]
    pub action: Scalar<'a>,
    #[serde(borrow)]
    pub backend: Scalar<'a>,
    #[serde(borrow)]
    pub input_sent: Scalar<'a>,
    #[serde(borrow)]
    pub prompt_delivery: Scalar<'a>,
    #[serde(borrow)]
    pub prompt_outcome: Scalar<'a>,
    #[serde(borrow)]
    pub outcome: Scalar<'a>,
    /// A tool call's envelope status (a string) or an HTTP status (a number).
    #[serde(borrow)]
    pub status: Scalar<'a>,
    /// `error_code` on the line.
    #[serde(borrow, rename = "error_code")]
    pub code: Scalar<'a>,
    #[serde(borrow)]
    pub retryable: Scalar<'a>,
    #[serde(borrow)]
    pub retry_same_call: Scalar<'a>,
    #[serde(borrow)]
    pub next_action_tool: Scalar<'a>,
    #[serde(borrow)]
    pub duration_ms: Scalar<'a>,
    #[serde(borrow)]
    pub response_bytes: Scalar<'a>,
    #[serde(borrow)]
    pub request_id: Scalar<'a>,
    #[serde(borrow)]
    pub usage_call_id: Scalar<'a>,
    #[serde(borrow)]
    pub transport: Scalar<'a>,
    #[serde(borrow)]
    pub principal: Scalar<'a>,
    #[serde(borrow)]
    pub thread: Scalar<'a>,
    #[serde(borrow)]
    pub command_category: Scalar<'a>,
    #[serde(borrow)]
    pub batch_items: Scalar<'a>,
    // Initialize.
    #[serde(borrow)]
    pub transition: Scalar<'a>,
    #[serde(borrow)]
    pub session_recovered: Scalar<'a>,
    #[serde(borrow)]
    pub session_reused: Scalar<'a>,
    #[serde(borrow)]
    pub response_mode: Scalar<'a>,
    #[serde(borrow)]
    pub code_writer_policy: Scalar<'a>,
    // BashCommand.
    #[serde(borrow)]
    pub exit_code: Scalar<'a>,
    #[serde(borrow)]
    pub truncated: Scalar<'a>,
    #[serde(borrow)]
    pub requested_wait_policy: Scalar<'a>,
    #[serde(borrow)]
    pub requested_wait_ms: Scalar<'a>,
    #[serde(borrow)]
    pub effective_wait_policy: Scalar<'a>,
    #[serde(borrow)]
    pub effective_wait_ms: Scalar<'a>,
    #[serde(borrow)]
    pub effective_wait_mode: Scalar<'a>,
    // ReadFiles.
    #[serde(borrow)]
    pub read_request_schema: Scalar<'a>,
    #[serde(borrow)]
    pub read_whole_file_requests: Scalar<'a>,
    #[serde(borrow)]
    pub read_bounded_range_requests: Scalar<'a>,
    #[serde(borrow)]
    pub read_open_ended_range_requests: Scalar<'a>,
    // Execution.
    #[serde(borrow)]
    pub workflow_schema: Scalar<'a>,
    #[serde(borrow)]
    pub observe_schema: Scalar<'a>,
    #[serde(borrow)]
    pub observe_requested_items: Scalar<'a>,
    #[serde(borrow)]
    pub observe_returned_items: Scalar<'a>,
    #[serde(borrow)]
    pub observe_items_with_issues: Scalar<'a>,
    #[serde(borrow)]
    pub wait_outcome: Scalar<'a>,
    // CodeMap: the canonical root fields, and the legacy camelCase ones they override.
    #[serde(borrow)]
    pub source_kind: Scalar<'a>,
    #[serde(borrow)]
    pub payload_bytes: Scalar<'a>,
    #[serde(borrow, rename = "sourceKind")]
    pub source_kind_legacy: Scalar<'a>,
    #[serde(borrow, rename = "payloadBytes")]
    pub payload_bytes_legacy: Scalar<'a>,
    // Edits.
    #[serde(borrow)]
    pub edit_committed: Scalar<'a>,
    #[serde(borrow)]
    pub edit_replayed: Scalar<'a>,
    // HTTP.
    #[serde(borrow)]
    pub reason: Scalar<'a>,
    #[serde(borrow)]
    pub rpc_method: Scalar<'a>,
}

/// The kinds of line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ToolCall,
    ToolStarted,
    ToolPhase,
    HttpRequest,
    HttpRejected,
    Unknown,
}

impl Kind {
    /// Auxiliary lines are counted but ignored before `--last` applies (seed 000).
    pub fn auxiliary(self) -> bool {
        matches!(self, Kind::ToolStarted | Kind::ToolPhase)
    }
}

fn kind_of(event: Option<&str>) -> Kind {
    match event {
        Some("tool_call") => Kind::ToolCall,
        Some("tool_started") => Kind::ToolStarted,
        Some("tool_phase") => Kind::ToolPhase,
        Some("http_request") => Kind::HttpRequest,
        Some("http_rejected") => Kind::HttpRejected,
        _ => Kind::Unknown,
    }
}

impl Line<'_> {
    pub fn kind(&self) -> Kind {
        kind_of(self.event.str())
    }
}

/// The fields the filters and the window look at, for the counting pass of `--last`
/// (skipping the rest of a line is cheaper than reading it).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Head<'a> {
    #[serde(borrow)]
    pub event: Scalar<'a>,
    #[serde(borrow)]
    pub ts_ms: Scalar<'a>,
    #[serde(borrow)]
    pub build: Scalar<'a>,
    /// Joins a call's auxiliary lines to its `tool_call`.
    #[serde(borrow)]
    pub usage_call_id: Scalar<'a>,
}

impl Head<'_> {
    pub fn kind(&self) -> Kind {
        kind_of(self.event.str())
    }
}

/// A line's head; `None` when it is not a JSON object (malformed).
pub fn parse_head(bytes: &[u8]) -> Option<Head<'_>> {
    let trimmed = bytes.trim_ascii();
    if !trimmed.starts_with(b"{") {
        return None;
    }
    serde_json::from_slice(trimmed).ok()
}

/// Parse one line; `None` when it is not a JSON object (malformed).
pub fn parse(bytes: &[u8]) -> Option<Line<'_>> {
    let trimmed = bytes.trim_ascii();
    if !trimmed.starts_with(b"{") {
        return None;
    }
    serde_json::from_slice(trimmed).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_become_unknown_not_errors() {
        let l = parse(br#"{"event":"tool_call","duration_ms":"fast","tool":{"x":[1]},"exit_code":2.0,"new_field":[1,2],"status":"completed"}"#).unwrap();
        assert_eq!(l.kind(), Kind::ToolCall);
        assert_eq!(l.duration_ms.f64(), None);
        assert_eq!(l.tool, Scalar::Other);
        assert_eq!(l.exit_code.i64(), Some(2));
        assert_eq!(l.status.str(), Some("completed"));
        assert_eq!(l.batch_items, Scalar::Missing);
        assert!(
            parse(b"{\"event\":\"tool_call\",\"dur").is_none(),
            "truncated"
        );
        assert!(parse(b"\x1f\x8b\x08garbage").is_none());
        assert!(parse(b"[1,2]").is_none());
        let esc = parse(br#"{"event":"tool\u005fcall"}"#).unwrap();
        assert_eq!(esc.kind(), Kind::ToolCall);
    }
}
