use super::*;
use serde_json::json;

fn bind() -> SocketAddr {
    "127.0.0.1:8000".parse().unwrap()
}

#[test]
fn routes_and_queries() {
    assert_eq!(route("/mcp"), (Route::Mcp, None));
    assert_eq!(route("/mcp?token=x"), (Route::Mcp, Some("token=x")));
    assert_eq!(route("/healthz").0, Route::Healthz);
    assert_eq!(route("/readyz").0, Route::Readyz);
    for probe in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/openid-configuration",
        "/",
        "/mcp/",
        "/MCP",
    ] {
        assert_eq!(route(probe).0, Route::NotFound, "{probe}");
    }
}

#[test]
fn hosts_and_origins() {
    let extra = vec![
        "mcp.example.com".to_string(),
        "other.example:8443".to_string(),
    ];
    for ok in [
        "localhost",
        "localhost:8000",
        "127.0.0.1:1",
        "[::1]:8000",
        "MCP.example.com",
        "mcp.example.com:443",
        "other.example:8443",
    ] {
        assert!(host_allowed(ok, bind(), &extra), "{ok}");
    }
    for bad in [
        "evil.example",
        "other.example:9",
        "127.0.0.2",
        "localhost.evil.example",
        "",
    ] {
        assert!(!host_allowed(bad, bind(), &extra), "{bad}");
    }
    let lan: SocketAddr = "192.168.1.20:8000".parse().unwrap();
    assert!(host_allowed("192.168.1.20:8000", lan, &[]));
    let wildcard: SocketAddr = "0.0.0.0:8000".parse().unwrap();
    assert!(!host_allowed("0.0.0.0:8000", wildcard, &[]));
    let port = bind().port();
    assert!(origin_allowed(
        &format!("http://localhost:{port}"),
        bind(),
        &[]
    ));
    assert!(origin_allowed(
        &format!("http://[::1]:{port}/"),
        bind(),
        &[]
    ));
    // Another local port is another site, unless listed.
    assert!(!origin_allowed("http://localhost:3000", bind(), &[]));
    assert!(!origin_allowed("http://localhost", bind(), &[]));
    assert!(origin_allowed(
        "http://localhost:3000",
        bind(),
        &["localhost:3000".into()]
    ));
    assert!(!origin_allowed(
        "http://localhost:3001",
        bind(),
        &["localhost:3000".into()]
    ));
    assert!(origin_allowed("https://mcp.example.com", bind(), &extra));
    assert!(!origin_allowed("https://evil.example", bind(), &extra));
    assert!(!origin_allowed("null", bind(), &extra));
}

#[test]
fn accept_and_content_type() {
    assert_eq!(framing(None), Some(Framing::Json));
    assert_eq!(
        framing(Some("application/json, text/event-stream")),
        Some(Framing::Json)
    );
    assert_eq!(framing(Some("*/*")), Some(Framing::Json));
    assert_eq!(framing(Some("text/event-stream")), Some(Framing::Sse));
    assert_eq!(framing(Some("text/html")), None);
    assert!(content_type_ok(Some("application/json")));
    assert!(content_type_ok(Some("Application/JSON; charset=utf-8")));
    assert!(!content_type_ok(Some("text/plain")));
    assert!(!content_type_ok(None));
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn modern_headers(method: &str) -> McpHeaders {
    McpHeaders {
        version: Some(MODERN_VERSION.into()),
        method: Some(method.into()),
        ..McpHeaders::default()
    }
}

#[test]
fn eras_and_header_agreement() {
    let meta = json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}});
    let none = McpHeaders::default();
    assert_eq!(
        classify(&none, "initialize", &Map::new()).unwrap(),
        Era::Initialize
    );
    assert_eq!(
        classify(&none, "tools/list", &Map::new()).unwrap(),
        Era::Legacy
    );
    // initialize is never refused for its version header.
    let odd = McpHeaders {
        version: Some("1999-01-01".into()),
        ..McpHeaders::default()
    };
    assert_eq!(
        classify(&odd, "initialize", &Map::new()).unwrap(),
        Era::Initialize
    );
    let e = classify(&odd, "tools/list", &Map::new()).unwrap_err();
    assert_eq!(e.code.code(), -32022);
    assert_eq!(
        classify(
            &modern_headers("tools/list"),
            "tools/list",
            &params(meta.clone())
        )
        .unwrap(),
        Era::Modern
    );
    // Method header disagrees with the body.
    let e = classify(
        &modern_headers("tools/call"),
        "tools/list",
        &params(meta.clone()),
    )
    .unwrap_err();
    assert_eq!(e.code.code(), -32020);
    // Version header present, body silent (and the reverse).
    let e = classify(&modern_headers("tools/list"), "tools/list", &Map::new()).unwrap_err();
    assert_eq!(e.code.code(), -32020);
    let e = classify(&none, "tools/list", &params(meta.clone())).unwrap_err();
    assert_eq!(e.code.code(), -32020);
    // Mcp-Name mirrors the tool name, verbatim or base64-encoded.
    let call =
        params(json!({"name": "Initialize", "_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}}));
    let mut h = modern_headers("tools/call");
    assert_eq!(
        classify(&h, "tools/call", &call).unwrap_err().code.code(),
        -32020
    );
    h.name = Some("Initialize".into());
    assert_eq!(classify(&h, "tools/call", &call).unwrap(), Era::Modern);
    h.name = Some("=?base64?SW5pdGlhbGl6ZQ==?=".into());
    assert_eq!(classify(&h, "tools/call", &call).unwrap(), Era::Modern);
    h.name = Some("BashCommand".into());
    assert_eq!(
        classify(&h, "tools/call", &call).unwrap_err().code.code(),
        -32020
    );
    let mut dup = modern_headers("tools/list");
    dup.duplicated = Some(METHOD_HEADER);
    assert_eq!(
        classify(&dup, "tools/list", &params(meta))
            .unwrap_err()
            .code
            .code(),
        -32020
    );
}

#[test]
fn rpc_errors_map_to_http_status() {
    use crate::jsonrpc::Id;
    let ok = RpcResponse::ok(Id::Num(1), json!({}));
    assert_eq!(rpc_status(&ok), 200);
    let mismatch = RpcResponse::err(
        Some(Id::Num(1)),
        RpcError::new(ErrorCode::HeaderMismatch, "x"),
    );
    assert_eq!(rpc_status(&mismatch), 400);
    let missing = RpcResponse::err(
        Some(Id::Num(1)),
        RpcError::new(ErrorCode::MethodNotFound, "x"),
    );
    assert_eq!(rpc_status(&missing), 200);
}

#[path = "routes_fuzz_tests.rs"]
mod fuzz;
