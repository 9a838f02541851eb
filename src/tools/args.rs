//! Strict argument reading: unknown fields, wrong types and over-long strings are
//! `invalid_tool_input` errors that name the field, never silently coerced.

use super::error::ToolError;
use serde_json::{Map, Value};

/// Longest string accepted in an ordinary argument. Longer values are refused whole.
pub const MAX_STRING_ARG_BYTES: usize = 64 * 1024;
/// Most items accepted in a list argument.
pub const MAX_LIST_ITEMS: usize = 256;

fn bad(detail: String) -> ToolError {
    ToolError::InvalidInput { detail }
}

/// A view of one call's arguments.
pub struct Args<'a> {
    pub map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Reject any key not in `allowed` (the schema says `additionalProperties: false`).
    pub fn strict(map: &'a Map<String, Value>, allowed: &[&str]) -> Result<Args<'a>, ToolError> {
        let mut unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !allowed.contains(k))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(bad(format!(
                "unknown field(s) {}; accepted fields: {}",
                unknown.join(", "),
                allowed.join(", ")
            )));
        }
        Ok(Args { map })
    }

    /// An optional string; `null` counts as absent.
    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ToolError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.len() > MAX_STRING_ARG_BYTES => Err(bad(format!(
                "{key} is {} bytes; the limit is {MAX_STRING_ARG_BYTES}",
                s.len()
            ))),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(bad(format!(
                "{key} must be a string, got {}",
                type_name(other)
            ))),
        }
    }

    pub fn req_str(&self, key: &str) -> Result<&'a str, ToolError> {
        self.opt_str(key)?
            .ok_or_else(|| bad(format!("missing required field {key}")))
    }

    /// One of a fixed set of strings.
    pub fn opt_enum(&self, key: &str, choices: &[&str]) -> Result<Option<&'a str>, ToolError> {
        match self.opt_str(key)? {
            Some(s) if !choices.contains(&s) => Err(bad(format!(
                "{key} must be one of {}, got {s:?}",
                choices.join(", ")
            ))),
            other => Ok(other),
        }
    }

    /// An optional list of strings.
    pub fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>, ToolError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => {
                if items.len() > MAX_LIST_ITEMS {
                    return Err(bad(format!("{key} has more than {MAX_LIST_ITEMS} items")));
                }
                items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) if s.len() <= MAX_STRING_ARG_BYTES => Ok(s.clone()),
                        Value::String(_) => Err(bad(format!("an item of {key} is too long"))),
                        other => Err(bad(format!(
                            "{key} must be a list of strings, found {}",
                            type_name(other)
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some)
            }
            Some(other) => Err(bad(format!(
                "{key} must be a list of strings, got {}",
                type_name(other)
            ))),
        }
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
    fn strict_rejects_unknown_fields() {
        let m = map(json!({"a": 1, "zz": 2}));
        let err = Args::strict(&m, &["a"]).err().unwrap();
        assert!(err.message().contains("zz"));
    }

    #[test]
    fn types_and_lengths() {
        let long = "x".repeat(MAX_STRING_ARG_BYTES + 1);
        let m = map(json!({"s": "v", "n": 3, "l": ["a", 1], "big": long, "e": "q"}));
        let a = Args::strict(&m, &["s", "n", "l", "big", "e"]).unwrap();
        assert_eq!(a.opt_str("s").unwrap(), Some("v"));
        assert!(
            a.opt_str("n")
                .unwrap_err()
                .message()
                .contains("must be a string, got a number")
        );
        assert!(a.opt_str_list("l").is_err());
        assert!(a.opt_str("big").unwrap_err().message().contains("limit"));
        assert!(a.opt_enum("e", &["x", "y"]).is_err());
        assert_eq!(a.opt_str("missing").unwrap(), None);
        assert!(a.req_str("missing").is_err());
    }
}
