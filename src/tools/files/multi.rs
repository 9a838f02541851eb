//! `MultiFileEdit`, `ApplyPatch` and `EditFiles`: more shapes over the same engine. Every
//! file of a call is planned before anything is written.

use super::absolute;
use super::edits;
use super::write::{looks_like_blocks, verify_args};
use crate::edit::engine::{FileEdit, Op};
use crate::edit::line_patch::Patch;
use crate::session::Binding;
use crate::tools::ToolContext;
use crate::tools::args::{Args, MAX_LIST_ITEMS, type_name};
use crate::tools::envelope::ToolOutput;
use crate::tools::error::ToolError;
use serde_json::{Map, Value};

const VERIFY: [&str; 2] = ["verify_command", "verify_wait_for_seconds"];

fn bad(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.into(),
    }
}

fn fields(own: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["thread_id", "workspace_root"];
    v.extend_from_slice(own);
    v.extend_from_slice(&VERIFY);
    v
}

fn bound<'a>(
    ctx: &ToolContext,
    map: &'a Map<String, Value>,
    own: &[&'static str],
) -> Result<(Args<'a>, Binding), ToolError> {
    crate::tools::session_args(ctx, map, &fields(own))
}

fn objects<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Result<Vec<&'a Map<String, Value>>, ToolError> {
    let Some(Value::Array(items)) = map.get(key) else {
        return Err(bad(format!("{key} must be a non-empty list of objects")));
    };
    if items.is_empty() || items.len() > MAX_LIST_ITEMS {
        return Err(bad(format!("{key} needs 1..={MAX_LIST_ITEMS} items")));
    }
    items
        .iter()
        .map(|v| {
            v.as_object().ok_or_else(|| {
                bad(format!(
                    "{key} items must be objects, found {}",
                    type_name(v)
                ))
            })
        })
        .collect()
}

fn patches(map: &Map<String, Value>) -> Result<Vec<Patch>, ToolError> {
    objects(map, "patches")?
        .into_iter()
        .map(|p| {
            let a = Args::strict(p, &["start_line", "delete_lines", "replacement"])?;
            let num = |k: &str| {
                p.get(k)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad(format!("patch {k} must be a whole number")))
            };
            Ok(Patch {
                start_line: num("start_line")? as usize,
                delete_lines: num("delete_lines")? as usize,
                replacement: a.opt_str("replacement")?.unwrap_or_default().to_string(),
            })
        })
        .collect()
}

pub fn multi_file_edit(
    ctx: &ToolContext,
    map: &Map<String, Value>,
) -> Result<ToolOutput, ToolError> {
    let (_, binding) = bound(ctx, map, &["edits"])?;
    let mut edits = Vec::new();
    for e in objects(map, "edits")? {
        let a = Args::strict(e, &["file_path", "text_or_search_replace_blocks"])?;
        let text = a.req_str("text_or_search_replace_blocks")?.to_string();
        let op = if looks_like_blocks(&text) {
            Op::SearchReplace { text }
        } else {
            Op::Replace { content: text }
        };
        edits.push(FileEdit {
            path: absolute(&binding.workspace_root, a.req_str("file_path")?),
            op,
        });
    }
    edits::run(
        ctx,
        "MultiFileEdit",
        &binding,
        map,
        edits,
        verify_args(map)?,
    )
}

pub fn apply_patch(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = bound(ctx, map, &["file_path", "expected_revision", "patches"])?;
    let edit = FileEdit {
        path: absolute(&binding.workspace_root, a.req_str("file_path")?),
        op: Op::LinePatch {
            patches: patches(map)?,
            expected_revision: a.req_str("expected_revision")?.to_string(),
        },
    };
    edits::run(
        ctx,
        "ApplyPatch",
        &binding,
        map,
        vec![edit],
        verify_args(map)?,
    )
}

pub fn edit_files(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = bound(ctx, map, &["files", "operation"])?;
    if a.opt_enum("operation", &["apply", "undo"])? == Some("undo") {
        // Undo the latest edit (of the first named file, if any) through UndoEdit.
        let mut undo = Map::new();
        for k in ["thread_id", "workspace_root"] {
            if let Some(v) = map.get(k) {
                undo.insert(k.into(), v.clone());
            }
        }
        let first = map
            .get("files")
            .and_then(Value::as_array)
            .and_then(|f| f.first())
            .and_then(|f| f.get("file_path"))
            .cloned();
        if let Some(p) = first {
            undo.insert("file_path".into(), p);
        }
        let mut out = super::undo::call(ctx, &undo)?;
        out.envelope.tool = "EditFiles".into();
        return Ok(out);
    }
    let mut edits = Vec::new();
    for f in objects(map, "files")? {
        let fa = Args::strict(
            f,
            &[
                "file_path",
                "mode",
                "content",
                "search_replace",
                "patches",
                "expected_revision",
            ],
        )?;
        let path = absolute(&binding.workspace_root, fa.req_str("file_path")?);
        let op = match fa
            .opt_enum("mode", &["replace", "search_replace", "line_patch"])?
            .unwrap_or("search_replace")
        {
            "replace" => Op::Replace {
                content: fa.req_str("content")?.to_string(),
            },
            "search_replace" => Op::SearchReplace {
                text: fa.req_str("search_replace")?.to_string(),
            },
            _ => Op::LinePatch {
                patches: patches(f)?,
                expected_revision: fa.req_str("expected_revision")?.to_string(),
            },
        };
        edits.push(FileEdit { path, op });
    }
    edits::run(ctx, "EditFiles", &binding, map, edits, verify_args(map)?)
}
