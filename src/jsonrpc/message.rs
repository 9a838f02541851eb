//! JSON-RPC 2.0 message values and error codes.

use serde_json::{Map, Value, json};
use std::fmt;

/// A request id: MCP allows strings and integers, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) => n.as_i64().map(Id::Num),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => json!(n),
            Id::Str(s) => json!(s),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A call that expects an answer.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: Id,
    pub method: String,
    /// Always an object: absent params become `{}`; array params are refused by framing
    /// because no MCP method takes positional parameters.
    pub params: Map<String, Value>,
}

/// A call that must never be answered.
#[derive(Clone, Debug)]
pub struct Notification {
    pub method: String,
    pub params: Map<String, Value>,
}

/// Standard and MCP-specific error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    /// 2026-07-28: an HTTP header disagrees with the body.
    HeaderMismatch,
    /// 2026-07-28: the requested protocol version is not supported.
    UnsupportedProtocolVersion,
    /// 2026-07-28: the request needs a client capability it did not declare.
    MissingClientCapability,
    /// The request was cancelled before it ran.
    RequestCancelled,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::HeaderMismatch => -32020,
            ErrorCode::MissingClientCapability => -32021,
            ErrorCode::UnsupportedProtocolVersion => -32022,
            ErrorCode::RequestCancelled => -32800,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Clone, Debug)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, message)
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut err = json!({"code": self.code.code(), "message": self.message});
        if let Some(data) = &self.data {
            err["data"] = data.clone();
        }
        err
    }
}

/// An answer to a request (or to an unparseable message, with `id: null`).
#[derive(Clone, Debug)]
pub struct Response {
    pub id: Option<Id>,
    pub outcome: Result<Value, RpcError>,
}

impl Response {
    pub fn ok(id: Id, result: Value) -> Response {
        Response {
            id: Some(id),
            outcome: Ok(result),
        }
    }

    pub fn err(id: Option<Id>, error: RpcError) -> Response {
        Response {
            id,
            outcome: Err(error),
        }
    }

    /// The answer as a JSON object (a copy of the result; `to_bytes` writes without one).
    pub fn to_value(&self) -> Value {
        // Serialising valid parts into a Value cannot fail.
        serde_json::to_value(Wire(self)).unwrap_or_default()
    }

    /// Serialised form, without a trailing newline: the bytes of `to_value`, written from
    /// the borrowed parts, with no copy of the result tree on the way.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising valid parts into a Vec cannot fail.
        serde_json::to_vec(&Wire(self)).unwrap_or_default()
    }
}

/// A `Response` as its JSON object, the one definition of its shape; keys in `Value`'s
/// (sorted) order, so `to_bytes` and `to_value` agree byte for byte.
struct Wire<'a>(&'a Response);

impl serde::Serialize for Wire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let id = self.0.id.as_ref().map_or(Value::Null, Id::to_value);
        let mut m = s.serialize_map(Some(3))?;
        match &self.0.outcome {
            Ok(result) => {
                m.serialize_entry("id", &id)?;
                m.serialize_entry("jsonrpc", "2.0")?;
                m.serialize_entry("result", result)?;
            }
            Err(e) => {
                m.serialize_entry("error", &e.to_json())?;
                m.serialize_entry("id", &id)?;
                m.serialize_entry("jsonrpc", "2.0")?;
            }
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes written are those of `to_value`, whatever the id and the outcome.
    #[test]
    fn bytes_are_those_of_the_value() {
        let result = json!({"content": [{"type": "text", "text": "a \"quoted\"\nline ✓"}],
            "structuredContent": {"z": 1, "a": [true, null, 2.5], "m": {"y": {}, "b": []}},
            "isError": false});
        let error = RpcError::new(ErrorCode::InvalidParams, "bad \u{1} thing");
        let ids = [
            Some(Id::Num(7)),
            Some(Id::Num(-1)),
            Some(Id::Str("r-1 \"x\"".into())),
            None,
        ];
        for id in ids {
            let with_data = error.clone().with_data(json!({"k": [1, "two"]}));
            for outcome in [
                Ok(result.clone()),
                Ok(Value::Null),
                Err(error.clone()),
                Err(with_data),
            ] {
                let r = Response {
                    id: id.clone(),
                    outcome,
                };
                let expected = serde_json::to_vec(&r.to_value()).unwrap();
                assert_eq!(
                    String::from_utf8(r.to_bytes()).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
            }
        }
    }
}
