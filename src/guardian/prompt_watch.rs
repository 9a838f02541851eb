//! The prompts a guardian wrote (`prompt.rs` writes and observes them), kept so their
//! activity can be followed and reported by key.

use crate::shell::turn::Choice;
use std::collections::VecDeque;

/// Watches kept, oldest dropped first (the adapter allows 64 receipts per runtime).
pub const MAX_WATCHES: usize = 64;
/// A prompt written this recently, without activity seen yet, keeps the target busy: the
/// program may not have read it yet, and its input box (empty, or showing the echo) still
/// looks ready. It stops counting earlier once the program printed something and its
/// screen is back to the baseline (it took the line and did nothing with it).
pub const PENDING_MS: i64 = 3_000;

pub struct Watch {
    pub key: String,
    pub execution_id: String,
    pub generation: String,
    pub choice: Choice,
    pub baseline: String,
    pub suppressed: bool,
    pub activity: bool,
    pub written_ms: i64,
    /// The shell terminal's output total at the write.
    pub written_total: u64,
}

/// The prompts this guardian wrote, newest last.
#[derive(Default)]
pub struct Prompts {
    pub watches: VecDeque<Watch>,
}
