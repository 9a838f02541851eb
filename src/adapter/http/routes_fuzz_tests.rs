//! Property tests of the pure HTTP checks: routing, header decoding, media types, Host
//! and Origin validation, and era classification.

use super::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;

const B64_PREFIX: &str = "=?base64?";
const B64_SUFFIX: &str = "?=";

fn wrap_b64(payload: &str) -> String {
    format!("{B64_PREFIX}{payload}{B64_SUFFIX}")
}

/// Header-ish text: arbitrary unicode, long strings, `=?base64?…?=` shapes.
fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        1 => proptest::collection::vec(any::<char>(), 0..4096).prop_map(String::from_iter),
        1 => "[ -~]{1024,4096}",
        2 => "[A-Za-z0-9+/=?]{0,40}".prop_map(|p| wrap_b64(&p)),
        2 => any::<String>().prop_map(|s| wrap_b64(&STANDARD.encode(s))),
        1 => proptest::collection::vec(any::<u8>(), 0..32)
            .prop_map(|b| wrap_b64(&STANDARD.encode(b))),
        1 => prop::sample::select(vec![
            "", " ", "=?base64?", "?=", "=?base64??=", "=?base64?=", "=?BASE64?SW4=?=",
            "=?base64?SW5pdGlhbGl6ZQ==?=", "=?base64?SW5pdGlhbGl6ZQ?=", "=?base64?SW5pdGlhbGl6ZR==?=",
        ])
        .prop_map(str::to_string),
    ]
}

/// Host names with no port, bracket, colon or whitespace.
fn arb_plain_host() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "127.0.0.2",
            "0.0.0.0",
            "192.168.1.20",
            "mcp.example.com",
            "MCP.EXAMPLE.COM",
            "other.example",
            "evil.example",
            "localhost.evil.example",
            "lоcalhost",
            "ｌｏｃａｌｈｏｓｔ",
            "İocalhost",
            "",
        ])
        .prop_map(str::to_string),
        "[a-z0-9.\\-]{0,20}",
        any::<String>(),
    ]
    .prop_map(|h| {
        h.chars()
            .filter(|c| !matches!(c, ':' | '[' | ']') && !c.is_whitespace())
            .collect()
    })
}

fn arb_port() -> impl Strategy<Value = String> {
    prop_oneof![any::<u16>().prop_map(|p| p.to_string()), "[0-9]{0,7}"]
}

/// Authorities: `host`, `host:port`, `[v6]:port`, and broken bracket/port shapes.
fn arb_authority() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (arb_plain_host(), proptest::option::of(arb_port())).prop_map(|(h, p)| match p {
            Some(p) => format!("{h}:{p}"),
            None => h,
        }),
        2 => (
            prop::sample::select(vec!["::1", "::", "::ffff:127.0.0.1", "fe80::1", "", "::1%lo"]),
            prop::sample::select(vec!["", "]", "]:", "]:8000", "]x", "]:abc", "]]"]),
        )
            .prop_map(|(h, tail)| format!("[{h}{tail}")),
        1 => "[\\[\\]:0-9a-z. ]{0,24}",
        1 => arb_text(),
    ]
}

fn binds() -> Vec<SocketAddr> {
    [
        "127.0.0.1:8000",
        "0.0.0.0:8000",
        "192.168.1.20:80",
        "[::1]:8000",
        "[::]:1",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

fn arb_extra() -> impl Strategy<Value = Vec<String>> {
    // Extras are lowercase: `HttpConfig::build` lowercases --allowed-host.
    proptest::collection::vec(
        prop_oneof![
            prop::sample::select(vec!["mcp.example.com", "other.example:8443", "[fe80::1]:1"])
                .prop_map(str::to_string),
            arb_authority().prop_map(|a| a.trim().to_ascii_lowercase()),
        ],
        0..3,
    )
}

const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// `route` splits at the first `?` and only exact paths are served.
    #[test]
    fn route_splits_at_the_first_question_mark(url in prop_oneof![
        arb_text(),
        (prop::sample::select(vec!["/mcp", "/healthz", "/readyz", "/", "/MCP", ""]),
         proptest::option::of(arb_text()))
            .prop_map(|(p, q)| match q { Some(q) => format!("{p}?{q}"), None => p.to_string() }),
    ]) {
        let (r, query) = route(&url);
        let path = url.split('?').next().unwrap();
        prop_assert_eq!(query, url.split_once('?').map(|(_, q)| q));
        let expected = match path {
            "/mcp" => Route::Mcp,
            "/healthz" => Route::Healthz,
            "/readyz" => Route::Readyz,
            _ => Route::NotFound,
        };
        prop_assert_eq!(r, expected);
    }

    /// Verbatim values pass through; wrapped values decode exactly when the payload is
    /// canonical base64 of UTF-8, and a successful decode re-encodes to the payload.
    #[test]
    fn decode_header_value_is_total(v in arb_text()) {
        let out = decode_header_value(&v);
        match v.strip_prefix(B64_PREFIX).and_then(|r| r.strip_suffix(B64_SUFFIX)) {
            None => prop_assert_eq!(out, Some(v.clone())),
            Some(payload) => {
                if let Some(s) = out {
                    prop_assert_eq!(STANDARD.encode(s.as_bytes()), payload);
                }
            }
        }
    }

    #[test]
    fn decode_header_value_round_trips(s in any::<String>(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(decode_header_value(&wrap_b64(&STANDARD.encode(&s))), Some(s));
        prop_assert_eq!(
            decode_header_value(&wrap_b64(&STANDARD.encode(&bytes))),
            String::from_utf8(bytes).ok()
        );
    }

    /// `Accept`: JSON wins whenever listed, SSE needs `text/event-stream`, anything
    /// naming neither (and not blank) is refused.
    #[test]
    fn framing_is_total(accept in prop_oneof![
        arb_text(),
        proptest::collection::vec(prop_oneof![
            prop::sample::select(vec![
                "application/json", "Application/JSON;q=0.1", "text/event-stream",
                " text/event-stream ; q=1", "*/*", "application/*", "text/html", "", ";", "*",
            ]).prop_map(str::to_string),
            any::<String>(),
        ], 0..5).prop_map(|v| v.join(",")),
    ]) {
        let f = framing(Some(&accept));
        let lower = accept.to_ascii_lowercase();
        if !lower.contains("application/") && !lower.contains("*/*") && !lower.contains("text/event-stream") && !accept.trim().is_empty() {
            prop_assert_eq!(f, None);
        }
        if f == Some(Framing::Sse) {
            prop_assert!(lower.contains("text/event-stream"));
        }
        prop_assert_eq!(framing(Some(&format!("{accept},application/json"))), Some(Framing::Json));
        prop_assert_eq!(framing(Some(&format!("{accept}, */*;q=0.8"))), Some(Framing::Json));
    }

    #[test]
    fn content_type_ok_is_total(ct in arb_text(), params in arb_text()) {
        if content_type_ok(Some(&ct)) {
            prop_assert!(ct.to_ascii_lowercase().contains("application/json"));
        }
        let plain = format!("application/json;{params}");
        let shouty = format!(" APPLICATION/Json ;{params}");
        prop_assert!(content_type_ok(Some(&plain)));
        prop_assert!(content_type_ok(Some(&shouty)));
    }

    /// Host checks: only loopback names, the bound IP or an extra authority pass; ASCII
    /// case never matters; a numeric port never changes the answer for port-less extras.
    #[test]
    fn host_allowed_is_total(a in arb_authority(), extra in arb_extra(), bind_ix in 0usize..5, port in any::<u16>()) {
        let bind = binds()[bind_ix];
        let ok = host_allowed(&a, bind, &extra);
        prop_assert_eq!(ok, host_allowed(&a.to_ascii_uppercase(), bind, &extra));
        let host = host_of(&a);
        let lowered = a.trim().to_ascii_lowercase();
        if ok {
            let bound = !bind.ip().is_unspecified() && host == bind.ip().to_string();
            prop_assert!(
                LOOPBACK.contains(&host.as_str()) || bound || extra.iter().any(|e| *e == host || *e == lowered),
                "{a:?} allowed via host {host:?}"
            );
        }
        if extra.is_empty() && bind.ip().is_unspecified() {
            prop_assert_eq!(ok, LOOPBACK.contains(&host.as_str()));
        }
        prop_assert!(host_allowed(&a, bind, std::slice::from_ref(&host)));
        let v6 = format!("[::1]:{port}");
        prop_assert!(host_allowed(&v6, bind, &extra));
    }

    #[test]
    fn port_does_not_change_host_answer(h in arb_plain_host(), port in arb_port(), bind_ix in 0usize..5) {
        let bind = binds()[bind_ix];
        let extra = vec!["mcp.example.com".to_string()];
        prop_assert_eq!(
            host_allowed(&h, bind, &extra),
            host_allowed(&format!("{h}:{port}"), bind, &extra),
            "{:?} vs {:?}:{:?}", h, h, port
        );
    }

    /// An Origin is its authority behind `scheme://`, trailing slashes ignored; without
    /// `://` it is never allowed, and it is never allowed when its authority would not be
    /// an allowed Host (an Origin also checks the port of a loopback name).
    #[test]
    fn origin_allowed_is_total(
        scheme in prop_oneof![prop::sample::select(vec!["http", "https", "HTTP", "null", ""]).prop_map(str::to_string), "[a-z+.:/]{0,8}"],
        a in arb_authority(),
        slashes in 0usize..3,
        extra in arb_extra(),
        bind_ix in 0usize..5,
        raw in arb_text(),
    ) {
        let bind = binds()[bind_ix];
        let ok = origin_allowed(&raw, bind, &extra);
        if !raw.contains("://") {
            prop_assert!(!ok);
        }
        prop_assume!(!scheme.contains("://") && !a.trim_end().ends_with('/'));
        let origin = format!("{scheme}://{a}{}", "/".repeat(slashes));
        if origin_allowed(&origin, bind, &extra) {
            prop_assert!(host_allowed(&a, bind, &extra), "{:?}", origin);
        }
    }
}

fn arb_version() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just(MODERN_VERSION.to_string()),
        prop::sample::select(protocol::supported_versions()).prop_map(str::to_string),
        Just("1999-01-01".to_string()),
        arb_text(),
    ])
}

fn arb_method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "initialize",
            "tools/call",
            "tools/list",
            "prompts/get",
            "resources/read",
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "notifications/initialized",
            "ping",
            "",
        ])
        .prop_map(str::to_string),
        any::<String>(),
    ]
}

fn arb_json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(MODERN_VERSION)),
        Just(json!("Initialize")),
        arb_text().prop_map(Value::String),
        Just(json!({})),
        Just(json!([MODERN_VERSION])),
    ]
}

fn arb_params() -> impl Strategy<Value = Map<String, Value>> {
    let meta = prop_oneof![
        Just(None),
        Just(Some(json!("not an object"))),
        proptest::option::of(arb_json_leaf()).prop_map(|v| Some(match v {
            Some(v) => json!({META_PROTOCOL_VERSION: v}),
            None => json!({}),
        })),
    ];
    let key = prop::sample::select(vec!["name", "uri", "taskId", "arguments", "other"]);
    (
        meta,
        proptest::collection::btree_map(key, arb_json_leaf(), 0..4),
    )
        .prop_map(|(meta, rest)| {
            let mut m: Map<String, Value> =
                rest.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if let Some(meta) = meta {
                m.insert("_meta".into(), meta);
            }
            m
        })
}

/// Headers, the name sometimes mirroring (verbatim or base64) the body's name field.
fn arb_case() -> impl Strategy<Value = (McpHeaders, String, Map<String, Value>)> {
    (
        arb_version(),
        proptest::option::of(arb_method()),
        arb_method(),
        arb_params(),
        0u8..4,
        proptest::option::of(arb_text()),
        prop::sample::select(vec![
            None,
            Some(VERSION_HEADER),
            Some(METHOD_HEADER),
            Some(NAME_HEADER),
            Some(SESSION_HEADER),
        ]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                version,
                method_h,
                method,
                mut params,
                name_mode,
                name_h,
                duplicated,
                same_method,
                coherent,
            )| {
                // Half the cases agree on version, method and duplicates, so the Mcp-Name
                // check and the Modern era are reached often.
                let (version, duplicated, same_method) = if coherent {
                    params.insert(
                        "_meta".into(),
                        json!({META_PROTOCOL_VERSION: MODERN_VERSION}),
                    );
                    (Some(MODERN_VERSION.to_string()), None, true)
                } else {
                    (version, duplicated, same_method)
                };
                let body_name = ["name", "uri", "taskId"]
                    .iter()
                    .find_map(|k| params.get(*k).and_then(Value::as_str))
                    .map(str::to_string);
                let name = match (name_mode, body_name) {
                    (0, Some(n)) => Some(n),
                    (1, Some(n)) => Some(wrap_b64(&STANDARD.encode(n))),
                    _ => name_h,
                };
                let h = McpHeaders {
                    version,
                    method: if same_method {
                        Some(method.clone())
                    } else {
                        method_h
                    },
                    name,
                    session: None,
                    conversation: None,
                    duplicated,
                };
                (h, method, params)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Classification is total, errors are only -32020/-32022, and every era it picks
    /// satisfies the conditions that define it.
    #[test]
    fn classify_is_total((h, method, params) in arb_case()) {
        let out = classify(&h, &method, &params);
        let body_version = params
            .get("_meta")
            .and_then(Value::as_object)
            .and_then(|m| m.get(META_PROTOCOL_VERSION));
        let version_known = h.version.as_deref().is_none_or(|v| protocol::supported_versions().contains(&v));
        match &out {
            Ok(Era::Initialize) => prop_assert_eq!(method.as_str(), "initialize"),
            Ok(Era::Legacy) => {
                prop_assert!(method != "initialize" && version_known);
                prop_assert!(h.version.as_deref() != Some(MODERN_VERSION) && body_version.is_none());
            }
            Ok(Era::Modern) => {
                prop_assert!(method != "initialize" && version_known);
                prop_assert!(h.duplicated.is_none());
                prop_assert_eq!(h.method.as_deref(), Some(method.as_str()));
                prop_assert!(body_version.is_some());
                prop_assert_eq!(h.version.as_deref(), body_version.and_then(Value::as_str));
                if let Some((_, key)) = NAME_BEARING.iter().find(|(m, _)| *m == method)
                    && let Some(n) = params.get(*key).and_then(Value::as_str)
                {
                    let decoded = h.name.as_deref().and_then(decode_header_value);
                    prop_assert_eq!(decoded.as_deref(), Some(n));
                }
            }
            Err(e) => {
                prop_assert!(method != "initialize");
                let code = e.code.code();
                prop_assert_eq!(code == -32022, !version_known, "code {}", code);
                prop_assert!(code == -32020 || code == -32022, "code {}", code);
            }
        }
        if method == "initialize" {
            prop_assert_eq!(out.unwrap(), Era::Initialize);
        }
    }
}
