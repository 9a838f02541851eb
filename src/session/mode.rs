//! Session modes (`wcgw`, `architect`, `code_writer`) and their persisted form.

use serde::{Deserialize, Serialize};

/// What a session may do. Persisted as JSON in the `sessions` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Mode {
    /// Full access.
    Wcgw,
    /// Read-only exploration.
    Architect,
    /// Commands and writes restricted to allowlists; `["all"]` means unrestricted.
    CodeWriter {
        allowed_commands: Vec<String>,
        allowed_globs: Vec<String>,
    },
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Wcgw => "wcgw",
            Mode::Architect => "architect",
            Mode::CodeWriter { .. } => "code_writer",
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"name":"architect"}"#.into())
    }

    /// Parse a stored mode. An unreadable row fails closed to read-only.
    pub fn from_json(s: &str) -> Mode {
        serde_json::from_str(s).unwrap_or(Mode::Architect)
    }

    /// A one-line description for tool texts.
    pub fn describe(&self) -> String {
        match self {
            Mode::Wcgw => "wcgw (full access)".into(),
            Mode::Architect => "architect (read-only: no file writes, read-only commands)".into(),
            Mode::CodeWriter {
                allowed_commands,
                allowed_globs,
            } => format!(
                "code_writer (commands: {}; writable globs: {})",
                allowed_commands.join(", "),
                allowed_globs.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_fail_closed() {
        let m = Mode::CodeWriter {
            allowed_commands: vec!["cargo".into()],
            allowed_globs: vec!["src/**".into()],
        };
        assert_eq!(Mode::from_json(&m.to_json()), m);
        assert_eq!(Mode::from_json(&Mode::Wcgw.to_json()), Mode::Wcgw);
        assert_eq!(Mode::from_json("garbage"), Mode::Architect);
    }
}
