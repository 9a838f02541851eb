//! MCP tools: names, the result envelope, typed errors, the catalog and each tool.
//!
//! Invariant: tools never see JSON-RPC; they take parsed arguments and return a
//! `ToolOutput` (or a `ToolError`, mapped to an envelope in `error.rs` only).

pub mod args;
pub mod catalog;
pub mod envelope;
pub mod error;
pub mod initialize;
pub mod name;

use crate::config::profile::ToolPolicy;
use crate::session::SessionService;
use envelope::ToolOutput;
use error::ToolError;
use name::ToolName;
use serde_json::{Map, Value};

/// How much of an unknown tool name is echoed back.
const MAX_ECHOED_NAME_CHARS: usize = 128;

/// What a tool call may use.
pub struct ToolContext<'a> {
    pub sessions: &'a SessionService,
    pub principal: &'a str,
    pub policy: &'a ToolPolicy,
    /// `WINX_SERVER_INSTRUCTIONS`, repeated in full Initialize answers.
    pub extra_instructions: Option<&'a str>,
    /// The request came in the stateless 2026-07-28 era.
    pub modern: bool,
}

/// Resolve the name, enforce policy, run the tool. Never panics on bad input.
pub fn dispatch(ctx: &ToolContext, name: &str, args: &Map<String, Value>) -> ToolOutput {
    let tool = match ToolName::parse(name) {
        Some(t) if t.implemented() => t,
        _ => {
            // Echo a bounded prefix only: the name is untrusted and may be huge.
            let shown: String = name.chars().take(MAX_ECHOED_NAME_CHARS).collect();
            let available = ctx
                .policy
                .served()
                .map(|t| t.as_str().to_string())
                .collect();
            return ToolError::UnknownTool {
                name: shown.clone(),
                available,
            }
            .into_output(&shown);
        }
    };
    if !ctx.policy.permits(tool) {
        return ToolError::PolicyBlocked {
            tool: tool.as_str().into(),
        }
        .into_output(tool.as_str());
    }
    let result = match tool {
        ToolName::Initialize => initialize::call(ctx, args),
        // `implemented()` is false for every other tool, so they never reach here.
        other => Err(ToolError::UnknownTool {
            name: other.as_str().into(),
            available: Vec::new(),
        }),
    };
    result.unwrap_or_else(|e| e.into_output(tool.as_str()))
}
