//! Who a request's client is, as the usage log may say it: the client name and version
//! (bounded labels) and the negotiated protocol version, learned from `initialize` (the
//! handshake era, remembered by the transport per connection or MCP session) or from a
//! stateless request's own `_meta`.

use super::protocol::{
    self, COMPACT_BASH_EXTENSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO,
    META_PROTOCOL_VERSION, MODERN_VERSION,
};
use crate::tools::execution::WaitProfile;
use crate::usage::Origin;
use crate::usage::event::bounded_label;
use serde_json::{Map, Value};

/// What a transport remembers of a handshake-era client.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Client {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol: Option<&'static str>,
    /// It declared `io.winx/compact-bash-output`.
    pub compact_bash: bool,
}

/// Whether a capabilities object declares the compact-output extension.
fn declares_compact(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(COMPACT_BASH_EXTENSION))
        .is_some()
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
        compact_bash: declares_compact(params.get("capabilities")),
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
                compact_bash: declares_compact(meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES))),
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
        compact_bash: client.compact_bash,
    }
}

/// The wait profile of a request's client (seed 000's default wait budgets): ChatGPT and
/// Codex over HTTP (`clientInfo.name` naming OpenAI, ChatGPT or Codex), Claude over HTTP,
/// and everything else, stdio included, as local. An unnamed HTTP client gets the local
/// (shorter) default: a short wait is repeated, a long one can outlast a host's timeout.
pub fn wait_profile(o: &Origin) -> WaitProfile {
    let name = o.client_name.as_deref().unwrap_or("").to_ascii_lowercase();
    let names = |words: &[&str]| words.iter().any(|w| name.contains(w));
    match o.transport {
        "http" if names(&["openai", "chatgpt", "codex"]) => WaitProfile::ChatGptHttp,
        "http" if names(&["claude", "anthropic"]) => WaitProfile::ClaudeHttp,
        _ => WaitProfile::Local,
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

    #[test]
    fn wait_profiles_follow_the_transport_and_the_client_name() {
        let of = |transport, name: Option<&str>| {
            let params = match name {
                Some(n) => map(json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION,
                    META_CLIENT_INFO: {"name": n}}})),
                None => Map::new(),
            };
            wait_profile(&origin(transport, None, None, None, &params))
        };
        assert_eq!(of("http", Some("openai-mcp")), WaitProfile::ChatGptHttp);
        assert_eq!(of("http", Some("ChatGPT")), WaitProfile::ChatGptHttp);
        assert_eq!(
            of("http", Some("codex-mcp-client")),
            WaitProfile::ChatGptHttp
        );
        assert_eq!(of("http", Some("claude-ai")), WaitProfile::ClaudeHttp);
        assert_eq!(of("http", None), WaitProfile::Local);
        assert_eq!(of("stdio", Some("codex-mcp-client")), WaitProfile::Local);
        assert_eq!(WaitProfile::Local.default_seconds(), 5.0);
        assert_eq!(WaitProfile::ClaudeHttp.default_seconds(), 5.0);
        assert_eq!(WaitProfile::ChatGptHttp.default_seconds(), 50.0);
    }
}
