//! The optional Herdr backend of `Agent` (seed 000, "Optional Herdr backend"): off unless
//! the operator names a configuration; every call validates it, checks the caller's
//! binding, and runs the configured executable once (`run`) with one of Herdr's agent
//! commands, whose answer `answer` reads strictly and `errors` maps to winx's codes.

pub mod actions;
pub mod answer;
pub mod config;
pub mod errors;
pub mod run;

use std::path::PathBuf;

/// What the server knows about Herdr before any call: decided by `config` (L9) from the
/// environment at startup, without reading the file.
#[derive(Clone, Debug, Default)]
pub struct Setting {
    /// `WINX_HERDR_CONFIG`, when set.
    pub config: Option<PathBuf>,
    /// The server's principals are HTTP principals (`http:<name>` keys), not `local`.
    pub http: bool,
    /// Names of the server's inherited `HERDR_*` variables, removed from every run.
    pub inherited: Vec<String>,
}

impl Setting {
    /// The binding key of `principal` (seed 000: `local`, or `http:<principal id>`).
    /// `principal` is an HTTP principal's name or already its key (`http:<name>`); names
    /// hold no `:`, so the two cannot be confused.
    pub fn principal_key(&self, principal: &str) -> String {
        match self.http {
            true if principal.starts_with("http:") => principal.to_string(),
            true => format!("http:{principal}"),
            false => "local".to_string(),
        }
    }

    /// `data.agent_backends` of every Initialize answer: presence only, no file read, no
    /// path, no target.
    pub fn hint(&self) -> serde_json::Value {
        let (present, availability, reason) = match self.config {
            None => (false, "disabled", "configuration_missing"),
            Some(_) => (true, "unknown", "configuration_not_validated"),
        };
        serde_json::json!({"herdr": {
            "configuration_present": present,
            "availability": availability,
            "reason": reason,
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_keys_are_local_or_http_names() {
        let http = Setting {
            http: true,
            ..Setting::default()
        };
        assert_eq!(http.principal_key("alice"), "http:alice");
        assert_eq!(http.principal_key("http:alice"), "http:alice");
        assert_eq!(Setting::default().principal_key("alice"), "local");
    }
}
