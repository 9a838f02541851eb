//! `resources/list` and `resources/read`: the project README, embedded at build time so an
//! installed binary serves it without a checkout.
//!
//! An unknown URI is `-32602` (Invalid params) with `data.uri`: SEP-2164 (final) moved
//! "resource not found" off the older `-32002` recommendation onto the JSON-RPC code, and
//! `-32602` is what the TypeScript SDK (the strictest client we test) already sends.

use crate::jsonrpc::RpcError;
use serde_json::{Map, Value, json};

/// The one resource: the README at the repository root.
pub const README_URI: &str = "winx://docs/README.md";
const README: &str = include_str!("../../README.md");
const README_MIME: &str = "text/markdown";

fn readme_entry() -> Value {
    json!({
        "uri": README_URI,
        "name": "README.md",
        "title": "winx README",
        "description": "What winx is, how to install and run it, its tools and configuration.",
        "mimeType": README_MIME,
        "size": README.len(),
    })
}

/// The list; `Server` adds the stateless era's cache fields.
pub fn list() -> Value {
    json!({"resources": [readme_entry()]})
}

pub fn read(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = match params.get("uri") {
        Some(Value::String(u)) => u.as_str(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "resources/read: uri must be a string",
            ));
        }
        None => return Err(RpcError::invalid_params("resources/read: missing uri")),
    };
    if uri != README_URI {
        return Err(RpcError::invalid_params(format!(
            "resource not found: {uri:?} (resources/list names the resources of this server)"
        ))
        .with_data(json!({"uri": uri})));
    }
    Ok(json!({"contents": [{"uri": README_URI, "mimeType": README_MIME, "text": README}]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn lists_and_reads_the_readme() {
        let l = list();
        assert_eq!(l.as_object().unwrap().len(), 1);
        assert_eq!(l["resources"][0]["uri"], README_URI);
        let r = read(&params(json!({"uri": README_URI}))).unwrap();
        assert!(r["contents"][0]["text"].as_str().unwrap().contains("winx"));
    }

    #[test]
    fn unknown_or_missing_uri_is_invalid_params() {
        let e = read(&params(json!({"uri": "winx://nope"}))).unwrap_err();
        assert_eq!(e.code.code(), -32602);
        assert_eq!(e.data.unwrap()["uri"], "winx://nope");
        assert_eq!(read(&params(json!({}))).unwrap_err().code.code(), -32602);
        assert_eq!(
            read(&params(json!({"uri": 3}))).unwrap_err().code.code(),
            -32602
        );
    }
}
