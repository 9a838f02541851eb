//! Who a request's client is, as the usage log may say it: the client name and version
//! (bounded labels) and the negotiated protocol version, learned from `initialize` (the
//! handshake era, remembered by the transport per connection or MCP session) or from a
//! stateless request's own `_meta`.

use super::protocol::{self, META_CLIENT_INFO, META_PROTOCOL_VERSION, MODERN_VERSION};
use crate::usage::Origin;
use crate::usage::event::bounded_label;
use serde_json::{Map, Value};

/// What a transport remembers of a handshake-era client.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Client {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol: Option<&'static str>,
}

fn info(v: Option<&Value>) -> (Option<String>, Option<String>) {
    let label = |k: &str| {
        v.and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .map(bounded_label)
    };
    (label("name"), label("version"))
}

/// The client an `initialize` request describes, with the version we answer.
pub fn from_initialize(params: &Map<String, Value>) -> Client {
    let (name, version) = info(params.get("clientInfo"));
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    Client {
        name,
        version,
        protocol: Some(protocol::negotiate_handshake(requested)),
    }
}

/// The origin of one request: a stateless request speaks for itself (`_meta`); a
/// handshake-era one is the `remembered` client.
pub fn origin(
    transport: &'static str,
    request_id: Option<String>,
    mcp_session: Option<String>,
    remembered: Option<&Client>,
    params: &Map<String, Value>,
) -> Origin {
    let meta = params.get("_meta").and_then(Value::as_object);
    let modern = meta
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
        == Some(MODERN_VERSION);
    let client = match (modern, remembered) {
        (true, _) => {
            let (name, version) = info(meta.and_then(|m| m.get(META_CLIENT_INFO)));
            Client {
                name,
                version,
                protocol: Some(MODERN_VERSION),
            }
        }
        (false, Some(c)) => c.clone(),
        (false, None) => Client::default(),
    };
    Origin {
        transport,
        request_id,
        mcp_session,
        client_name: client.name,
        client_version: client.version,
        protocol: client.protocol,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn handshake_clients_are_remembered_and_stateless_ones_speak_for_themselves() {
        let c = from_initialize(&map(json!({"protocolVersion": "2025-06-18",
            "clientInfo": {"name": "claude code", "version": "1.0"}})));
        assert_eq!(c.name.as_deref(), Some("claude_code"));
        assert_eq!(c.protocol, Some("2025-06-18"));
        let o = origin("stdio", None, None, Some(&c), &Map::new());
        assert_eq!(o.client_version.as_deref(), Some("1.0"));
        let modern = map(json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: {"name": "codex"}}}));
        let o = origin("http", Some("r1".into()), None, Some(&c), &modern);
        assert_eq!(o.client_name.as_deref(), Some("codex"));
        assert_eq!(o.protocol, Some(MODERN_VERSION));
        let unknown = from_initialize(&map(json!({"protocolVersion": "1999-01-01"})));
        assert_eq!(unknown.protocol, Some(protocol::LATEST_HANDSHAKE_VERSION));
    }
}
