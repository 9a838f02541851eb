//! `FileWriteOrEdit`: one file, whole content or SEARCH/REPLACE blocks.

use super::absolute;
use super::edits;
use super::verify::verify_args;
use crate::edit::engine::{FileEdit, Op};
use crate::tools::ToolContext;
use crate::tools::envelope::ToolOutput;
use crate::tools::error::ToolError;
use crate::tools::name::ToolName;
use serde_json::{Map, Value};

const TOOL: ToolName = ToolName::FileWriteOrEdit;
const FIELDS: &[&str] = &[
    "thread_id",
    "workspace_root",
    "file_path",
    "percentage_to_change",
    "text_or_search_replace_blocks",
    "verify_command",
    "verify_wait_for_seconds",
];

/// Text with a SEARCH marker line is a block edit; anything else is whole content.
pub fn looks_like_blocks(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_end().starts_with("<<<<<<<") && l.contains("SEARCH"))
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let path = a.req_str("file_path")?;
    let text = a.req_str("text_or_search_replace_blocks")?;
    if let Some(p) = map.get("percentage_to_change")
        && !p.as_f64().is_some_and(|p| (0.0..=100.0).contains(&p))
    {
        return Err(ToolError::InvalidInput {
            detail: "percentage_to_change must be a number 0..=100".into(),
        });
    }
    let op = if looks_like_blocks(text) {
        Op::SearchReplace {
            text: text.to_string(),
        }
    } else {
        Op::Replace {
            content: text.to_string(),
        }
    };
    let edit = FileEdit {
        path: absolute(&binding.workspace_root, path),
        op,
    };
    edits::run(ctx, TOOL, &binding, map, vec![edit], verify_args(map)?)
}
