//! Adapter ↔ winxd messages. One request per frame, one response each.

use serde::{Deserialize, Serialize};

/// Control protocol version carried in `Hello`.
pub const PROTOCOL: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Attach to the guardian of `key`, or start it. Answered with `Ensured`.
    Ensure {
        key: String,
        workspace: String,
        shell: String,
        /// "bash" or "zsh".
        dialect: String,
        session_dir: String,
        env: Vec<(String, String)>,
    },
    /// Every guardian this daemon knows or finds on disk.
    List,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Ensured { socket: String, created: bool },
    Sessions { keys: Vec<String> },
    Error { message: String },
}
