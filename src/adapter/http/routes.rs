//! Pure request checks and response building: routes, Host and Origin, Accept and
//! Content-Type, the era of an MCP POST and the 2026-07-28 header/body agreement.
//!
//! Invariant: nothing here does I/O or touches shared state; every function is a value in,
//! a value out, unit-tested on literals.

use crate::jsonrpc::{ErrorCode, Response as RpcResponse, RpcError};
use crate::mcp::lane::{self, Cost};
use crate::mcp::protocol::{self, META_PROTOCOL_VERSION, MODERN_VERSION};
use serde_json::{Map, Value};
use std::net::SocketAddr;

pub use super::reply::Reply;
use super::wire::Head;

pub const SESSION_HEADER: &str = "Mcp-Session-Id";
pub const CONVERSATION_HEADER: &str = "X-Winx-Conversation-Id";
pub const VERSION_HEADER: &str = "MCP-Protocol-Version";
pub const METHOD_HEADER: &str = "Mcp-Method";
pub const NAME_HEADER: &str = "Mcp-Name";
/// Methods whose `Mcp-Name` header mirrors a body parameter (2026-07-28).
const NAME_BEARING: [(&str, &str); 6] = [
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
    ("tasks/get", "taskId"),
    ("tasks/update", "taskId"),
    ("tasks/cancel", "taskId"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Mcp,
    Healthz,
    Readyz,
    /// Everything else, the OAuth/OIDC discovery probes included: plain 404, no auth.
    NotFound,
}

/// Split a request target into its route and query string.
pub fn route(url: &str) -> (Route, Option<&str>) {
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (url, None),
    };
    let r = match path {
        "/mcp" => Route::Mcp,
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        _ => Route::NotFound,
    };
    (r, query)
}

/// The value of the first header named `name` (case-insensitive).
pub fn header<'a>(rq: &'a Head, name: &str) -> Option<&'a str> {
    rq.header(name)
}

/// The host part of an authority (`host`, `host:port`, `[v6]:port`), lowercased.
fn host_of(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_string();
    }
    match a.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_string(),
        _ => a,
    }
}

/// Whether an authority names no host (`""`, `:8000`, `[]:8000`): an `http` URI with an
/// empty host is invalid (RFC 9110 §4.2.1), so such a `Host` is a bad request (400,
/// RFC 9112 §3.2), not a misdirected one.
pub fn host_is_empty(authority: &str) -> bool {
    host_of(authority).is_empty()
}

/// Host validation (DNS-rebinding defence): loopback names, the bound IP, and the
/// configured extra authorities (`host` matches any port, `host:port` only that port).
/// The port of a loopback `Host` is not checked: port forwarding (`ssh -L 9000:…:8000`)
/// legitimately changes it, and a rebinding attack cannot make a browser send a
/// loopback name.
pub fn host_allowed(authority: &str, bind: SocketAddr, extra: &[String]) -> bool {
    let host = host_of(authority);
    let lowered = authority.trim().to_ascii_lowercase();
    is_local_name(&host, bind) || extra.iter().any(|e| *e == lowered || *e == host)
}

fn is_local_name(host: &str, bind: SocketAddr) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1")
        || (!bind.ip().is_unspecified() && host == bind.ip().to_string())
}

/// A present `Origin` must name this server: a loopback name or the bound IP *on the
/// bound port* (a page served by another local port is another site), or a configured
/// extra authority (`host` any port, `host:port` only that port). `null` and anything
/// without a scheme are refused.
pub fn origin_allowed(origin: &str, bind: SocketAddr, extra: &[String]) -> bool {
    let Some((scheme, rest)) = origin.trim().split_once("://") else {
        return false;
    };
    let authority = rest.trim_end_matches('/').to_ascii_lowercase();
    if authority.is_empty() || authority.contains('/') {
        return false;
    }
    let host = host_of(&authority);
    if extra.iter().any(|e| *e == authority || *e == host) {
        return true;
    }
    let port = match authority.rsplit_once(':') {
        Some((_, p)) if !authority.ends_with(']') => p.parse::<u16>().ok(),
        _ => match scheme.to_ascii_lowercase().as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        },
    };
    is_local_name(&host, bind) && port == Some(bind.port())
}

/// How the answer to a POST is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Json,
    /// The client accepts only `text/event-stream`: one `message` event.
    Sse,
}

/// `Accept` negotiation; a missing header means JSON (many clients omit it). `None`: 406.
pub fn framing(accept: Option<&str>) -> Option<Framing> {
    let Some(accept) = accept else {
        return Some(Framing::Json);
    };
    let types: Vec<String> = accept
        .split(',')
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let has = |t: &str| types.iter().any(|x| x == t);
    if has("application/json") || has("application/*") || has("*/*") || accept.trim().is_empty() {
        Some(Framing::Json)
    } else if has("text/event-stream") {
        Some(Framing::Sse)
    } else {
        None
    }
}

/// A POST body must be declared JSON (a browser's cross-site form cannot do that).
pub fn content_type_ok(ct: Option<&str>) -> bool {
    ct.and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"))
}

/// The MCP routing headers of one request.
#[derive(Debug, Default)]
pub struct McpHeaders {
    pub version: Option<String>,
    pub method: Option<String>,
    pub name: Option<String>,
    pub session: Option<String>,
    /// `X-Winx-Conversation-Id`, injected by a reviewed gateway (conversation affinity).
    pub conversation: Option<String>,
    /// A routing header that appears more than once.
    pub duplicated: Option<&'static str>,
}

impl McpHeaders {
    pub fn read(rq: &Head) -> McpHeaders {
        let get = |n: &'static str| header(rq, n).map(|v| v.trim().to_string());
        let duplicated = [VERSION_HEADER, METHOD_HEADER, NAME_HEADER, SESSION_HEADER]
            .into_iter()
            .find(|n| rq.count(n) > 1);
        McpHeaders {
            version: get(VERSION_HEADER),
            method: get(METHOD_HEADER),
            name: get(NAME_HEADER),
            session: get(SESSION_HEADER),
            conversation: get(CONVERSATION_HEADER).filter(|v| !v.is_empty()),
            duplicated,
        }
    }
}

/// Whether `method` is answered on the connection's own thread instead of an
/// `mcp-worker`: the methods built from fixed data (`mcp::lane::Cost::Fixed`, the one list
/// both transports share). Everything else, task lookups included (they may read the
/// state store), runs on a worker under the request deadline.
pub fn inline(method: &str) -> bool {
    lane::method_cost(method) == Cost::Fixed
}

/// Which lifecycle a POSTed message belongs to.
#[derive(Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize`: never refused for its version header; issues a session.
    Initialize,
    /// Stateless 2026-07-28: headers checked against the body, no session.
    Modern,
    /// Handshake era: needs the session from `initialize`.
    Legacy,
}

fn header_mismatch(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::HeaderMismatch, msg)
}

/// Classify a message (`method`, `params`) and, for the stateless era, check that the
/// routing headers agree with the body (`-32020`); an unknown version header is `-32022`.
/// A request without `MCP-Protocol-Version` and without a stateless `_meta` is legacy
/// (the transport spec's default for a missing header is 2025-03-26).
pub fn classify(
    h: &McpHeaders,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Era, RpcError> {
    if method == "initialize" {
        return Ok(Era::Initialize);
    }
    if let Some(v) = &h.version
        && !protocol::supported_versions().contains(&v.as_str())
    {
        return Err(protocol::unsupported_version(v));
    }
    let body_version = params
        .get("_meta")
        .and_then(Value::as_object)
        .and_then(|m| m.get(META_PROTOCOL_VERSION));
    if h.version.as_deref() != Some(MODERN_VERSION) && body_version.is_none() {
        return Ok(Era::Legacy);
    }
    if let Some(d) = h.duplicated {
        return Err(header_mismatch(format!(
            "{d} header appears more than once"
        )));
    }
    if h.version.as_deref() != body_version.and_then(Value::as_str) {
        return Err(header_mismatch(format!(
            "{VERSION_HEADER} header does not match params._meta[\"{META_PROTOCOL_VERSION}\"]"
        )));
    }
    if h.method.as_deref() != Some(method) {
        return Err(header_mismatch(format!(
            "{METHOD_HEADER} header does not match the body's method {method:?}"
        )));
    }
    if let Some((_, key)) = NAME_BEARING.iter().find(|(m, _)| *m == method)
        && let Some(body_name) = params.get(*key).and_then(Value::as_str)
        && h.name.as_deref().and_then(decode_header_value).as_deref() != Some(body_name)
    {
        return Err(header_mismatch(format!(
            "{NAME_HEADER} header does not match the body's {key:?}"
        )));
    }
    Ok(Era::Modern)
}

/// A header value as sent by MCP clients: verbatim, or `=?base64?…?=` for values that are
/// not printable ASCII. A malformed encoding matches nothing.
pub fn decode_header_value(v: &str) -> Option<String> {
    use base64::Engine;
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        None => Some(v.to_string()),
        Some(payload) => base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
    }
}

/// The HTTP status of a JSON-RPC answer: malformed and mismatched requests are 400.
pub fn rpc_status(resp: &RpcResponse) -> u16 {
    match &resp.outcome {
        Err(e) => match e.code {
            ErrorCode::ParseError
            | ErrorCode::InvalidRequest
            | ErrorCode::HeaderMismatch
            | ErrorCode::UnsupportedProtocolVersion => 400,
            _ => 200,
        },
        Ok(_) => 200,
    }
}

/// A plain-text reply (errors, probes).
pub fn plain(status: u16, text: &str) -> Reply {
    Reply::new(status)
        .with_header("Content-Type", "text/plain; charset=utf-8")
        .with_header("Cache-Control", "no-store")
        .with_body(format!("{text}\n").into_bytes())
}

/// 429 / 503 with `Retry-After`.
pub fn retry_later(status: u16, text: &str) -> Reply {
    plain(status, text).with_header("Retry-After", super::limits::RETRY_AFTER_SECS)
}

pub fn unauthorized() -> Reply {
    plain(401, "missing or invalid bearer token").with_header("WWW-Authenticate", "Bearer")
}

pub fn method_not_allowed(allow: &'static str) -> Reply {
    plain(405, "method not allowed").with_header("Allow", allow)
}

pub fn with_session(r: Reply, id: &str) -> Reply {
    r.with_header(SESSION_HEADER, id.to_string())
}

/// No body: notifications and client responses.
pub fn accepted() -> Reply {
    Reply::new(202)
}

pub fn no_content() -> Reply {
    Reply::new(204)
}

/// A JSON-RPC answer, framed as JSON or as one SSE `message` event.
pub fn rpc(resp: &RpcResponse, framing: Framing) -> Reply {
    let status = rpc_status(resp);
    let json = resp.to_bytes();
    let (body, ctype) = match framing {
        Framing::Json => (json, "application/json"),
        Framing::Sse => {
            let mut b = b"event: message\ndata: ".to_vec();
            b.extend_from_slice(&json);
            b.extend_from_slice(b"\n\n");
            (b, "text/event-stream")
        }
    };
    Reply::new(status)
        .with_header("Content-Type", ctype)
        .with_header("Cache-Control", "no-store")
        .with_body(body)
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
