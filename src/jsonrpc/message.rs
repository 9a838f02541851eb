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

    pub fn to_value(&self) -> Value {
        let id = self.id.as_ref().map_or(Value::Null, Id::to_value);
        match &self.outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()}),
        }
    }

    /// Serialised form, without a trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising a Value built from valid parts cannot fail.
        serde_json::to_vec(&self.to_value()).unwrap_or_default()
    }
}
