//! `CodeMap`: the outline of a file, a ranked map of a directory (the workspace by
//! default), or the references of a name — what an agent calls before reading whole
//! files. The engine is `crate::codemap`; this module parses arguments, decides path
//! authority (`files::policy`, `files::beneath`), and renders the envelope.
//!
//! Invariant: read-only. Every path is canonicalised and authorised like `ReadFiles`'
//! (a symlink out of the workspace is outside it); a file is opened beneath its root
//! without following symlinks; a directory is walked with `codemap::walk`, which never
//! follows one.

mod nearest;
mod render;

use crate::codemap::walk::Limits;
use crate::codemap::{self, Language, MAX_SCAN_BYTES, references, repo_map};
use crate::deadline::Deadline;
use crate::files::beneath::{self, BeneathError, Roots};
use crate::files::policy;
use crate::tools::ToolContext;
use crate::tools::envelope::ToolOutput;
use crate::tools::error::ToolError;
use crate::tools::error_code::ErrorCode;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FIELDS: &[&str] = &[
    "thread_id",
    "workspace_root",
    "operation",
    "path",
    "query",
    "name",
    "cursor",
];
/// Files per repository-map page: enough to see the shape of a project, a few thousand
/// tokens of context.
pub const PAGE_FILES: usize = 30;
/// Occurrences per `references` answer.
pub const MAX_REFERENCES: usize = 100;
/// Longest `name`: longer than any identifier in real code, short enough to refuse a
/// pasted file.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest `query`.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Directory entries one map or search reads: a 100,000-file directory is listed whole
/// within it, and a larger tree gives a truncated (but ranked) answer.
pub const MAX_WALK_ENTRIES: usize = 200_000;
/// How long one map or search may walk and scan before it answers with what it has.
pub const WALK_BUDGET: Duration = Duration::from_secs(5);
/// Files the session touched most recently that rank higher in a map.
const RECENT_FILES: usize = 32;

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let operation = a
        .opt_enum("operation", &["outline", "references"])?
        .ok_or_else(|| bad("missing required field operation (outline or references)"))?;
    let workspace = binding.workspace_root.as_path();
    let target = resolve(ctx, workspace, a.opt_str("path")?.unwrap_or("."))?;
    let query = a.opt_str("query")?.unwrap_or_default();
    if query.len() > MAX_QUERY_BYTES {
        return Err(bad(&format!("query is over {MAX_QUERY_BYTES} bytes")));
    }
    let name = a.opt_str("name")?;
    let cursor = a.opt_str("cursor")?;
    let base = if target.path.starts_with(workspace) {
        workspace
    } else if target.dir {
        target.path.as_path()
    } else {
        target.path.parent().unwrap_or(Path::new("/"))
    };
    // The server's own state and credentials are never walked, even inside a workspace.
    let exclude: Vec<String> = ctx
        .allow_paths
        .protected_within(workspace, &target.path)
        .iter()
        .filter_map(|p| Some(p.strip_prefix(base).ok()?.to_string_lossy().into_owned()))
        .collect();
    let limits = || Limits {
        max_entries: MAX_WALK_ENTRIES,
        deadline: Deadline::after("CodeMap walk", WALK_BUDGET),
        exclude: exclude.clone(),
    };
    // A map of a helper in `.winx/tmp` is charged to the session's helper budget and capped
    // at 12 KiB; canonical maps are neither.
    let helper =
        crate::tools::temporary::charge_helper_map(ctx, &binding, &target.path, target.dir)?;
    let out: Result<ToolOutput, ToolError> = match operation {
        "references" => {
            let name = valid_name(name)?;
            let root = if target.dir {
                target.path.as_path()
            } else {
                target.path.parent().unwrap_or(base)
            };
            let only = (!target.dir).then(|| rel(base, &target.path));
            let req = references::RefRequest {
                base,
                root,
                name,
                only: only.as_deref(),
                limit: MAX_REFERENCES,
                threads: ctx.read_parallelism,
                limits: limits(),
            };
            let refs = references::references(req, &ctx.states.codemap).map_err(io_error(root))?;
            Ok(render::references(name, &rel(base, &target.path), &refs))
        }
        _ if !target.dir => {
            if cursor.is_some() || name.is_some() {
                return Err(bad("a file's outline takes no cursor or name"));
            }
            outline_file(ctx, workspace, &target.path, base)
        }
        _ => {
            if name.is_some() {
                return Err(bad("name is for operation references"));
            }
            let state = ctx.states.of(ctx.principal, &binding.thread_id);
            let recent = state.coverage.recent(RECENT_FILES);
            let req = repo_map::MapRequest {
                base,
                root: &target.path,
                query,
                cursor,
                limit: PAGE_FILES,
                recent: &recent,
                threads: ctx.read_parallelism,
                limits: limits(),
            };
            match repo_map::map(req, &ctx.states.codemap) {
                Ok(page) => Ok(render::map(&rel(base, &target.path), query, &page)),
                Err(repo_map::MapError::Io(e)) => Err(io_error(&target.path)(e)),
                Err(e) => {
                    let (stale, snapshot_hash) = match e {
                        repo_map::MapError::StaleCursor { current } => (true, Some(current)),
                        _ => (false, None),
                    };
                    let mut retry = map.clone();
                    retry.remove("cursor");
                    Err(ToolError::MapCursor {
                        stale,
                        snapshot_hash,
                        retry: Value::Object(retry),
                    })
                }
            }
        }
    };
    let mut out = out?;
    if let Some(used) = helper {
        crate::tools::temporary::cap_helper_map(&mut out, used);
    }
    Ok(out)
}

fn bad(detail: &str) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.to_string(),
    }
}

/// A `references` name: an identifier, as the scanners see one.
fn valid_name(name: Option<&str>) -> Result<&str, ToolError> {
    let name = name.ok_or_else(|| bad("operation references needs name (an identifier)"))?;
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(bad(&format!(
            "name must be 1..={MAX_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    let ident = name
        .bytes()
        .all(|b| codemap::lex::ident_byte(b) || b == b'$');
    if !ident {
        return Err(bad(
            "name must be one identifier (letters, digits, _ or $), e.g. spawn_guardian, not a path or an expression",
        ));
    }
    Ok(name)
}

/// A path argument, canonical and authorised, and whether it is a directory.
struct Target {
    path: PathBuf,
    dir: bool,
}

fn resolve(ctx: &ToolContext, workspace: &Path, raw: &str) -> Result<Target, ToolError> {
    let unusable = |code, detail: String| ToolError::PathUnusable {
        path: raw.to_string(),
        code,
        detail,
    };
    let abs = crate::tools::files::absolute(workspace, raw);
    let canonical = policy::canonical(&abs)
        .and_then(|c| policy::may_read(workspace, ctx.allow_paths, &c).map(|()| c))
        .map_err(|e| unusable(ErrorCode::PathOutsideAllowedRoots, e))?;
    let meta = std::fs::symlink_metadata(&canonical).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            let near = nearest::suggestions(workspace, &canonical);
            let detail = match near.is_empty() {
                true => "no such file or directory".to_string(),
                false => format!(
                    "no such file or directory; nearest existing: {}",
                    near.join(", ")
                ),
            };
            unusable(ErrorCode::FileNotFound, detail)
        }
        _ => unusable(ErrorCode::IoError, e.to_string()),
    })?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(unusable(
            ErrorCode::NotRegularFile,
            "neither a regular file nor a directory; CodeMap reads only those".into(),
        ));
    }
    Ok(Target {
        path: canonical,
        dir: meta.is_dir(),
    })
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ToolError + '_ {
    move |e| ToolError::PathUnusable {
        path: path.display().to_string(),
        code: ErrorCode::IoError,
        detail: e.to_string(),
    }
}

/// `path` relative to `base` (`.` for the base itself).
fn rel(base: &Path, path: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(r) if r.as_os_str().is_empty() => ".".into(),
        Ok(r) => r.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

fn outline_file(
    ctx: &ToolContext,
    workspace: &Path,
    path: &Path,
    base: &Path,
) -> Result<ToolOutput, ToolError> {
    let shown = rel(base, path);
    let Some(lang) = Language::of_path(path) else {
        return Ok(render::unsupported(&shown, path));
    };
    let roots = Roots {
        workspace,
        allow: ctx.allow_paths,
    };
    let (canonical, file) = beneath::open_read(&roots, path).map_err(|e| {
        let (code, detail) = match &e {
            BeneathError::NotFound => (ErrorCode::FileNotFound, e.to_string()),
            BeneathError::Denied(_) => (ErrorCode::PathOutsideAllowedRoots, e.to_string()),
            BeneathError::NotRegular(_) => (ErrorCode::NotRegularFile, e.to_string()),
            _ => (ErrorCode::IoError, e.to_string()),
        };
        ToolError::PathUnusable {
            path: shown.clone(),
            code,
            detail,
        }
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_SCAN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(&canonical))?;
    if bytes.len() as u64 > MAX_SCAN_BYTES {
        return Ok(render::too_large(&shown, &canonical));
    }
    if codemap::cache::is_binary(&bytes) {
        return Ok(render::binary(&shown, lang));
    }
    let lx = codemap::lex::lex(lang, &bytes);
    let symbols = codemap::outline::outline_lexed(lang, &lx);
    Ok(render::outline(
        &shown, &canonical, lang, lx.lines, &symbols,
    ))
}
