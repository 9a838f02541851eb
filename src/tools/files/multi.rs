//! `MultiFileEdit`, `ApplyPatch` and `EditFiles`: more shapes over the same engine. Every
//! file of a call is planned before anything is written.

use super::absolute;
use super::edits;
use super::verify::verify_args;
use super::write::looks_like_blocks;
use crate::edit::engine::{FileEdit, Op};
use crate::edit::line_patch::Patch;
use crate::session::Binding;
use crate::tools::ToolContext;
use crate::tools::args::{Args, MAX_LIST_ITEMS, type_name};
use crate::tools::envelope::ToolOutput;
use crate::tools::error::ToolError;
use crate::tools::name::ToolName;
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
        ToolName::MultiFileEdit,
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
        ToolName::ApplyPatch,
        &binding,
        map,
        vec![edit],
        verify_args(map)?,
    )
}

pub fn edit_files(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = bound(ctx, map, &["files", "operation", "release_temporary"])?;
    if let Some(spec) = map.get("release_temporary") {
        if map.contains_key("files") || map.contains_key("operation") {
            return Err(bad(
                "release_temporary goes alone, without files or operation",
            ));
        }
        return crate::tools::temporary::release::call(ctx, &binding, spec);
    }
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
        out.envelope.tool = ToolName::EditFiles.into();
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
    edits::run(
        ctx,
        ToolName::EditFiles,
        &binding,
        map,
        edits,
        verify_args(map)?,
    )
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::edit::line_patch;
    use proptest::prelude::*;
    use serde_json::json;

    fn arb_number() -> impl Strategy<Value = Value> {
        prop_oneof![
            6 => (0u64..8).prop_map(|n| json!(n)),
            1 => Just(json!(u64::MAX)),
            1 => Just(json!(u64::MAX - 1)),
            1 => any::<u64>().prop_map(|n| json!(n)),
            1 => any::<i64>().prop_map(|n| json!(n)),
            1 => Just(json!(1.5)),
            1 => Just(json!("3")),
            1 => Just(Value::Null),
        ]
    }

    fn arb_patch_item() -> impl Strategy<Value = Value> {
        let field = (
            prop::sample::select(vec![
                "start_line",
                "start_line",
                "delete_lines",
                "delete_lines",
                "replacement",
                "other",
            ]),
            prop_oneof![
                3 => arb_number(),
                2 => "[a-z\n]{0,8}".prop_map(Value::String),
                1 => Just(json!([])),
            ],
        );
        let line = prop_oneof![
            6 => 0u64..8,
            1 => Just(u64::MAX),
            1 => Just(u64::MAX - 1),
            1 => any::<u64>(),
        ];
        let well_formed = (line.clone(), line, proptest::option::of("[a-z\n]{0,8}")).prop_map(
            |(start, delete, rep)| match rep {
                Some(r) => json!({"start_line": start, "delete_lines": delete, "replacement": r}),
                None => json!({"start_line": start, "delete_lines": delete}),
            },
        );
        prop_oneof![
            12 => well_formed,
            4 => proptest::collection::btree_map(field.0, field.1, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
            1 => Just(json!("not an object")),
            1 => Just(Value::Null),
        ]
    }

    fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
        prop_oneof![
            8 => proptest::collection::vec(arb_patch_item(), 0..4).prop_map(Value::Array),
            1 => Just(json!({})),
            1 => Just(Value::Null),
        ]
        .prop_map(|patches| {
            let mut m = Map::new();
            m.insert("patches".into(), patches);
            m
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// ApplyPatch's `patches` argument: arbitrary JSON parses to patches that mirror it
        /// or to `invalid_tool_input`; parsed patches (any u64 line numbers) can be spanned
        /// and applied without a panic.
        #[test]
        fn patches_parse_and_apply_without_panicking(
            args in arb_args(),
            content in "[ab\n]{0,12}",
        ) {
            match patches(&args) {
                Err(e) => prop_assert!(matches!(e, ToolError::InvalidInput { .. }), "{:?}", e),
                Ok(list) => {
                    let items = args["patches"].as_array().unwrap();
                    prop_assert_eq!(list.len(), items.len());
                    for (p, item) in list.iter().zip(items) {
                        prop_assert_eq!(Some(p.start_line as u64), item["start_line"].as_u64());
                        prop_assert_eq!(Some(p.delete_lines as u64), item["delete_lines"].as_u64());
                        prop_assert_eq!(p.replacement.as_str(), item["replacement"].as_str().unwrap_or(""));
                        let (start, end) = p.span();
                        prop_assert!(start == p.start_line && end >= start);
                    }
                    if let Err(e) = line_patch::apply(&content, &list) {
                        prop_assert!(e.starts_with("patch "), "{}", e);
                    }
                }
            }
        }
    }

    /// Regression (fuzz): the largest JSON line numbers are refused, not overflowed.
    #[test]
    fn huge_line_numbers_from_json_are_refused() {
        let args = json!({"patches": [{"start_line": 1, "delete_lines": u64::MAX}]});
        let list = patches(args.as_object().unwrap()).unwrap();
        assert_eq!(list[0].span(), (1, usize::MAX));
        let e = line_patch::apply("a\nb\n", &list).unwrap_err();
        assert!(e.contains("beyond the end of the file"), "{e}");
    }
}
