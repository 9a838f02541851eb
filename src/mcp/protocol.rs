//! Protocol versions of both eras and the per-request `_meta` of the stateless revision.

use crate::jsonrpc::{ErrorCode, RpcError};
use serde_json::{Map, Value, json};

/// The stateless revision: no handshake, `_meta` on every request.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Handshake-era versions we negotiate through `initialize`, newest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Answer for an `initialize` asking for a version we do not know.
pub const LATEST_HANDSHAKE_VERSION: &str = HANDSHAKE_VERSIONS[0];

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Seed 003: a client that declares this extension gets `BashCommand` text without the
/// status trailer (the status is in `structuredContent`); others get the text unchanged.
pub const COMPACT_BASH_EXTENSION: &str = "io.winx/compact-bash-output";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Every version this server speaks, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    let mut v = vec![MODERN_VERSION];
    v.extend(HANDSHAKE_VERSIONS);
    v
}

/// The version to answer an `initialize` with: the client's if we support it, else ours.
pub fn negotiate_handshake(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| HANDSHAKE_VERSIONS.iter().find(|v| **v == r).copied())
        .unwrap_or(LATEST_HANDSHAKE_VERSION)
}

/// The request's era, read from `params._meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Era {
    /// No protocol version in `_meta`: a handshake-era request.
    Handshake,
    /// A stateless request at `MODERN_VERSION`.
    Modern { client_name: Option<String> },
}

/// Read `_meta` and check the stateless protocol version if one is named.
pub fn request_era(params: &Map<String, Value>) -> Result<Era, RpcError> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Ok(Era::Handshake);
    };
    let Some(version) = meta.get(META_PROTOCOL_VERSION) else {
        return Ok(Era::Handshake);
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"
        )));
    };
    if version != MODERN_VERSION {
        return Err(unsupported_version(version));
    }
    let client_name = meta
        .get(META_CLIENT_INFO)
        .and_then(|i| i.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Era::Modern { client_name })
}

/// `-32022` with the list of versions we speak.
pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::new(
        ErrorCode::UnsupportedProtocolVersion,
        format!("unsupported protocol version {requested:?}"),
    )
    .with_data(json!({"supported": supported_versions(), "requested": requested}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn negotiation_echoes_known_versions() {
        assert_eq!(negotiate_handshake(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate_handshake(Some("2025-06-18")), "2025-06-18");
        assert_eq!(
            negotiate_handshake(Some("1999-01-01")),
            LATEST_HANDSHAKE_VERSION
        );
        assert_eq!(
            negotiate_handshake(Some(MODERN_VERSION)),
            LATEST_HANDSHAKE_VERSION
        );
        assert_eq!(negotiate_handshake(None), LATEST_HANDSHAKE_VERSION);
    }

    #[test]
    fn era_from_meta() {
        assert_eq!(request_era(&params(json!({}))).unwrap(), Era::Handshake);
        let modern = params(json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: {"name": "mcp", "version": "1"}}}));
        assert_eq!(
            request_era(&modern).unwrap(),
            Era::Modern {
                client_name: Some("mcp".into())
            }
        );
        let bad = params(json!({"_meta": {META_PROTOCOL_VERSION: "2099-01-01"}}));
        let e = request_era(&bad).unwrap_err();
        assert_eq!(e.code.code(), -32022);
        assert_eq!(e.data.unwrap()["requested"], "2099-01-01");
        let wrong_type = params(json!({"_meta": {META_PROTOCOL_VERSION: 5}}));
        assert_eq!(request_era(&wrong_type).unwrap_err().code.code(), -32602);
    }
}
