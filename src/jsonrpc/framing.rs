//! Framing as a pure function: one message's bytes in, one classified message out.

use super::cost::{MAX_DEPTH, TREE_FLOOR, TooCostly};
use super::message::{ErrorCode, Id, Notification, Request, Response, RpcError};
use serde_json::{Map, Value, json};

/// What one incoming message turned out to be.
#[derive(Debug)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
    /// A response to a request we sent; carried for completeness, currently ignored.
    Response(Id),
    /// Not a usable message; the error answer is ready to send.
    Invalid(Response),
}

fn invalid(id: Option<Id>, message: impl Into<String>) -> Incoming {
    Incoming::Invalid(Response::err(
        id,
        RpcError::new(ErrorCode::InvalidRequest, message),
    ))
}

/// Classify one message. Never panics, whatever the bytes. A message whose parsed tree
/// would cost much more than its size (`cost::check`) is refused before it is built.
pub fn parse_message(bytes: &[u8]) -> Incoming {
    if let Err(why) = super::cost::check(bytes) {
        return Incoming::Invalid(Response::err(None, too_costly(why)));
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid(Response::err(
                None,
                RpcError::new(ErrorCode::ParseError, format!("parse error: {e}")),
            ));
        }
    };
    classify(value)
}

/// The error for a message refused by `cost::check`: what it would cost and the limit.
fn too_costly(why: TooCostly) -> RpcError {
    let mib = |b: u64| b.div_ceil(1 << 20);
    match why {
        TooCostly::TooDeep => RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "the message nests arrays and objects deeper than {MAX_DEPTH} levels; send \
                 flatter parameters"
            ),
        )
        .with_data(json!({"maxDepth": MAX_DEPTH})),
        TooCostly::TooLarge { allowed } => RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "the message would take more than {} MiB in memory once parsed, the limit for \
                 its size (twice its size plus {} MiB): it holds too many small values; send \
                 fewer, larger values (one string instead of an array of numbers) or split \
                 the request",
                mib(allowed),
                TREE_FLOOR >> 20
            ),
        )
        .with_data(json!({"allowedBytes": allowed})),
    }
}

/// Classify an already-parsed JSON value.
pub fn classify(value: Value) -> Incoming {
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return invalid(
                None,
                "JSON-RPC batches are not supported; send one message per line",
            );
        }
        _ => return invalid(None, "a JSON-RPC message must be a JSON object"),
    };
    let id_value = obj.remove("id");
    let id = match &id_value {
        None => None,
        Some(v) => match Id::from_value(v) {
            Some(id) => Some(id),
            None => return invalid(None, "id must be a string or an integer"),
        },
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "jsonrpc must be \"2.0\"");
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return invalid(id, "method must be a string"),
        None => {
            return match id {
                Some(id) if obj.contains_key("result") || obj.contains_key("error") => {
                    Incoming::Response(id)
                }
                _ => invalid(id, "missing method"),
            };
        }
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return match id {
                Some(id) => Incoming::Invalid(Response::err(
                    Some(id),
                    RpcError::invalid_params("params must be an object"),
                )),
                // A notification with bad params cannot be answered.
                None => Incoming::Notification(Notification {
                    method,
                    params: Map::new(),
                }),
            };
        }
    };
    match id {
        Some(id) => Incoming::Request(Request { id, method, params }),
        None => Incoming::Notification(Notification { method, params }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_code(inc: Incoming) -> (Option<Id>, i64) {
        match inc {
            Incoming::Invalid(r) => (r.id.clone(), r.outcome.unwrap_err().code.code()),
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn request_with_params() {
        let inc = parse_message(br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":1}}"#);
        match inc {
            Incoming::Request(r) => {
                assert_eq!(r.id, Id::Num(7));
                assert_eq!(r.method, "ping");
                assert_eq!(r.params["a"], 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notification_has_no_id() {
        let inc = parse_message(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(
            matches!(inc, Incoming::Notification(n) if n.method == "notifications/initialized")
        );
    }

    #[test]
    fn parse_error_has_null_id() {
        assert_eq!(error_code(parse_message(b"{not json")), (None, -32700));
        assert_eq!(error_code(parse_message(b"\xff\xfe")), (None, -32700));
        assert_eq!(error_code(parse_message(b"")), (None, -32700));
    }

    #[test]
    fn a_message_costing_far_more_than_its_size_is_refused_before_parsing() {
        let zeros = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":[0{}]}}}}"#,
            ",0".repeat(3 << 20)
        );
        let Incoming::Invalid(r) = parse_message(zeros.as_bytes()) else {
            panic!("parsed");
        };
        let e = r.outcome.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.contains("MiB in memory"), "{}", e.message);
        assert_eq!(
            e.data.unwrap()["allowedBytes"],
            super::super::cost::allowance(zeros.len())
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let Incoming::Invalid(r) = parse_message(deep.as_bytes()) else {
            panic!("parsed");
        };
        assert!(r.outcome.unwrap_err().message.contains("deeper than 128"));
    }

    #[test]
    fn batch_is_refused() {
        assert_eq!(error_code(parse_message(b"[]")), (None, -32600));
        assert_eq!(
            error_code(parse_message(
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#
            )),
            (None, -32600)
        );
    }

    #[test]
    fn invalid_requests_keep_a_usable_id() {
        assert_eq!(
            error_code(parse_message(
                br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#
            )),
            (Some(Id::Num(3)), -32600)
        );
        assert_eq!(
            error_code(parse_message(br#"{"jsonrpc":"2.0","id":"x","method":5}"#)),
            (Some(Id::Str("x".into())), -32600)
        );
        assert_eq!(
            error_code(parse_message(
                br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#
            )),
            (None, -32600)
        );
        assert_eq!(
            error_code(parse_message(
                br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#
            )),
            (None, -32600)
        );
        assert_eq!(error_code(parse_message(b"42")), (None, -32600));
    }

    #[test]
    fn positional_params_are_invalid_params() {
        assert_eq!(
            error_code(parse_message(
                br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#
            )),
            (Some(Id::Num(1)), -32602)
        );
    }

    #[test]
    fn responses_from_the_client_are_recognised() {
        let inc = parse_message(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
        assert!(matches!(inc, Incoming::Response(Id::Num(9))));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse_message(&bytes);
        }

        #[test]
        fn never_panics_on_json_shaped_text(s in r#"[\{\}\[\]":,0-9a-z\\. -]{0,200}"#) {
            let _ = parse_message(s.as_bytes());
        }
    }
}
