//! `ReadFiles`: line-numbered reads with revisions and continuation lines; every read is
//! recorded as the permit for later edits of those lines.

use super::absolute;
use crate::files::beneath::Roots;
use crate::files::policy;
use crate::files::ranges::{PathSpec, parse_spec};
use crate::files::read::{DEFAULT_CALL_BUDGET_BYTES, read_batch};
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, Status, ToolOutput};
use crate::tools::error::ToolError;
use crate::tools::error::mark;
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use serde_json::{Map, Value, json};

const TOOL: ToolName = ToolName::ReadFiles;
const FIELDS: &[&str] = &["thread_id", "workspace_root", "file_paths"];
/// Most paths in one call: a batch beyond this is better split (and bounds the pool).
pub const MAX_PATHS: usize = 64;

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let paths = a.opt_str_list("file_paths")?.unwrap_or_default();
    if paths.is_empty() || paths.len() > MAX_PATHS {
        return Err(ToolError::InvalidInput {
            detail: format!("file_paths needs 1..={MAX_PATHS} paths (optionally with :A-B ranges)"),
        });
    }
    let state = ctx.states.of(ctx.principal, &binding.thread_id);
    // Parse and authorise every path first; refused ones become per-file failures.
    let mut specs: Vec<Result<PathSpec, (String, String, &'static str)>> = Vec::new();
    for raw in &paths {
        let spec = match parse_spec(raw) {
            Ok(s) => s,
            Err(e) => {
                specs.push(Err((raw.clone(), e, "invalid_path_spec")));
                continue;
            }
        };
        let abs = absolute(&binding.workspace_root, &spec.path);
        let checked = policy::canonical(&abs).and_then(|c| {
            policy::may_read(&binding.workspace_root, ctx.allow_paths, &c).map(|()| c)
        });
        specs.push(match checked {
            Ok(c) => Ok(PathSpec {
                path: c.to_string_lossy().into_owned(),
                range: spec.range,
            }),
            Err(e) => Err((raw.clone(), e, "path_outside_allowed_roots")),
        });
    }
    let readable: Vec<PathSpec> = specs
        .iter()
        .filter_map(|s| s.as_ref().ok().cloned())
        .collect();
    let roots = Roots {
        workspace: &binding.workspace_root,
        allow: ctx.allow_paths,
    };
    let mut results = read_batch(
        &roots,
        &readable,
        ctx.read_parallelism,
        DEFAULT_CALL_BUDGET_BYTES,
    )
    .into_iter();
    let (mut text, mut files, mut failures) = (String::new(), Vec::new(), Vec::new());
    let mut granted = Vec::new();
    for (raw, spec) in paths.iter().zip(&specs) {
        let outcome = match spec {
            Err((p, msg, code)) => Err((p.clone(), msg.clone(), *code)),
            Ok(_) => match results.next() {
                Some(Ok(r)) => Ok(r),
                Some(Err((p, e))) => Err((p, e.to_string(), e.code())),
                None => Err((raw.clone(), "internal: missing result".into(), "io_error")),
            },
        };
        match outcome {
            Ok(r) => {
                let path = r.canonical.to_string_lossy().into_owned();
                // Reads of the same revision in an earlier adapter add to this one's.
                state.coverage.hydrate(&r.canonical, &r.revision, || {
                    super::permits::load(ctx, &binding.thread_id, &r.canonical)
                });
                if r.visible.0 > 0 {
                    state.coverage.grant(&r.canonical, &r.revision, r.visible);
                } else {
                    state.coverage.grant(&r.canonical, &r.revision, (1, 0));
                }
                granted.push(r.canonical.clone());
                let shown = if r.visible.0 == 0 {
                    "empty file".to_string()
                } else {
                    format!("lines {}-{} of {}", r.visible.0, r.visible.1, r.total_lines)
                };
                text.push_str(&format!("## {path} ({shown}; {})\n{}", r.revision, r.text));
                if let Some(next) = r.next_start_line {
                    text.push_str(&format!("… continue with ReadFiles \"{path}:{next}-\"\n"));
                }
                text.push('\n');
                files.push(json!({"path": path, "revision": r.revision, "totalLines": r.total_lines,
                    "ranges": if r.visible.0 == 0 { vec![] } else { vec![format!("{}-{}", r.visible.0, r.visible.1)] },
                    "nextStartLine": r.next_start_line, "bytes": r.bytes}));
            }
            Err((p, msg, code)) => {
                text.push_str(&format!("## {p}\nError ({code}): {msg}\n\n"));
                failures.push(json!({"path": p, "errorCode": code, "message": msg}));
            }
        }
    }
    super::permits::save(ctx, &binding.thread_id, &state.coverage, &granted);
    let (ok, failed) = (files.len(), failures.len());
    let status = if failed == 0 {
        Status::Completed
    } else {
        Status::PartiallyFailed
    };
    let mut env = Envelope::completed(
        TOOL,
        format!("ReadFiles: {ok} read, {failed} failed"),
        json!({"files": files, "failures": failures, "successful_files": ok, "failed_files": failed}),
    );
    env.status = status;
    if failed > 0 {
        mark(&mut env, status, ErrorCode::ReadFailed);
    }
    Ok(ToolOutput {
        images: Vec::new(),
        text,
        envelope: env,
    })
}
