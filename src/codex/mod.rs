//! Codex, as winx observes it from outside: its rollout files (one JSONL file per
//! conversation under `$CODEX_HOME/sessions/…/rollout-*.jsonl`) read as a sequence of
//! provider turns, and the processes that hold them open.
//!
//! Invariant: everything here only reads. A rollout is parsed line by line from a byte
//! offset; nothing is inferred from elapsed time, and a line that is not understood is
//! skipped (counted), never guessed at.

pub mod app_server;
pub mod daemon;
pub mod procfs;
pub mod rollout;
pub mod rollout_file;
pub mod turns;

use sha2::{Digest, Sha256};

/// The digest a submitted prompt and a rollout's user message are compared by: the text
/// with surrounding whitespace removed (the TUI trims what it submits; an orchestrator's
/// trailing newline is not part of the message).
pub fn message_digest(text: &str) -> String {
    let d = Sha256::digest(text.trim().as_bytes());
    crate::hex::lower(&d)
}
