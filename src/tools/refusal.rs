//! `Refusal`: a tool-specific refusal whose every envelope field its tool chooses (today
//! the managed temporary directory's, `tools::temporary`), carried by
//! `ToolError::Temporary` and mapped in `error.rs` like every other error.

use super::envelope::{NextAction, Status};
use super::error_code::ErrorCode;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub status: Status,
    pub retryable: bool,
    pub message: String,
    pub data: Value,
    pub next: Option<NextAction>,
}
