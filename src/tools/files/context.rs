//! `ContextSave`: a task memory (description, workspace facts, the matched files' contents
//! within caps, redacted) that `Initialize` can resume with `task_id_to_resume`.
//!
//! Invariant: memories are private files (0600 in 0700 directories) under the state
//! directory, one namespace per principal; contents are redacted before they are written.

use crate::deadline::unix_ms;
use crate::files::beneath::{self, Roots};
use crate::files::policy;
use crate::fsutil::ensure_private_dir;
use crate::session::overview;
use crate::shell::cmdpolicy::path_in_globs;
use crate::shell::secrets::{KnownSecrets, redact_all};
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, ToolOutput};
use crate::tools::error::ToolError;
use crate::tools::name::ToolName;
use crate::wire::guardian::{Request, Response, SecretValues};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Files captured per memory, bytes per file and in all: a memory is context for a fresh
/// conversation, not a backup.
const MAX_FILES: usize = 32;
const MAX_FILE_BYTES: usize = 32 * 1024;
const MAX_TOTAL_BYTES: usize = 256 * 1024;
/// Bytes read of one matched file: the read file limit, so a huge file is never loaded
/// whole (a file cut here that then fails UTF-8 decoding is skipped, as before).
const READ_LIMIT: u64 = crate::files::read::MAX_FILE_BYTES;
/// How long a save waits for the session's guardian to list its known secrets.
const SECRETS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const FIELDS: &[&str] = &[
    "thread_id",
    "workspace_root",
    "id",
    "project_root_path",
    "description",
    "relevant_file_globs",
];

#[derive(Serialize, Deserialize)]
pub struct Memory {
    pub id: String,
    pub project_root: String,
    pub description: String,
    pub saved_at_unix_ms: i64,
    /// (workspace-relative path, text, truncated)
    pub files: Vec<(String, String, bool)>,
    /// Matching files left out by the caps.
    pub omitted_files: usize,
}

fn bad(detail: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        detail: detail.into(),
    }
}

/// Where `principal`'s memory `id` lives.
fn memory_path(ctx: &ToolContext, id: &str) -> Result<PathBuf, ToolError> {
    let valid = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !valid || id.starts_with('.') {
        return Err(bad(
            "task ids are 1-64 characters of letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(namespace(ctx.sessions.state_dir(), ctx.principal).join(format!("{id}.json")))
}

/// The directory of `principal`'s memories.
fn namespace(state_dir: &Path, principal: &str) -> PathBuf {
    let ns = crate::hex::lower(&Sha256::digest(principal.as_bytes())[..8]);
    state_dir.join("tasks").join(ns)
}

/// Memories read when looking for the latest one: bounds the work on a state directory
/// that has accumulated many.
const MAX_MEMORIES_SCANNED: usize = 256;

/// The most recently saved memory of `principal` whose project lies in `workspace`, if any.
/// Read-only: used by the handoff prompt.
pub fn latest_for(state_dir: &Path, principal: &str, workspace: &Path) -> Option<Memory> {
    let entries = std::fs::read_dir(namespace(state_dir, principal)).ok()?;
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .take(MAX_MEMORIES_SCANNED)
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|raw| serde_json::from_str::<Memory>(&raw).ok())
        .filter(|m| Path::new(&m.project_root).starts_with(workspace))
        .max_by_key(|m| m.saved_at_unix_ms)
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let id = a.req_str("id")?;
    let path = memory_path(ctx, id)?;
    let root = match a
        .opt_str("project_root_path")?
        .filter(|p| !p.trim().is_empty())
    {
        Some(p) => policy::canonical(&super::absolute(&binding.workspace_root, p)).map_err(bad)?,
        None => binding.workspace_root.clone(),
    };
    policy::may_read(&binding.workspace_root, ctx.allow_paths, &root)
        .map_err(|reason| ToolError::InvalidInput { detail: reason })?;
    let globs = a.opt_str_list("relevant_file_globs")?.unwrap_or_default();
    let (mut files, mut total, mut omitted) = (Vec::new(), 0usize, 0usize);
    let roots = Roots {
        workspace: &binding.workspace_root,
        allow: ctx.allow_paths,
    };
    if !globs.is_empty() {
        for rel in overview::list_files(&root).0 {
            if !path_in_globs(&root, &globs, &rel) {
                continue;
            }
            // Special files are skipped (never opened for I/O), and so are paths that
            // leave the allowed roots through a symlink or change while being opened.
            let Ok((_, file)) = beneath::open_read(&roots, &root.join(&rel)) else {
                continue;
            };
            let mut bytes = Vec::new();
            if file.take(READ_LIMIT).read_to_end(&mut bytes).is_err() {
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            if files.len() >= MAX_FILES || total >= MAX_TOTAL_BYTES {
                omitted += 1;
                continue;
            }
            let cap = MAX_FILE_BYTES.min(MAX_TOTAL_BYTES - total);
            let mut end = text.len().min(cap);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            total += end;
            files.push((rel, text[..end].to_string(), end < text.len()));
        }
    }
    let description = a.opt_str("description")?.unwrap_or_default();
    let mut description = description.to_string();
    if ctx.redact {
        let known = session_secrets(ctx, &binding.thread_id, &files, &description);
        for text in files
            .iter_mut()
            .map(|(_, t, _)| t)
            .chain([&mut description])
        {
            *text = redact_all(text, &known).0.into_owned();
        }
    }
    let memory = Memory {
        id: id.to_string(),
        project_root: root.to_string_lossy().into_owned(),
        description,
        saved_at_unix_ms: unix_ms(),
        files,
        omitted_files: omitted,
    };
    let io = |e: std::io::Error| ToolError::StoreUnavailable {
        detail: format!("save task memory: {e}"),
    };
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir).map_err(|e| ToolError::StoreUnavailable {
            detail: e.to_string(),
        })?;
    }
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(
        serde_json::to_string(&memory)
            .unwrap_or_default()
            .as_bytes(),
    )
    .map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    let names: Vec<&str> = memory.files.iter().map(|(p, _, _)| p.as_str()).collect();
    let text = format!(
        "Saved task memory {id:?}: {} file(s){}. Resume it in a new conversation with Initialize task_id_to_resume={id:?}.\n",
        names.len(),
        if omitted > 0 {
            format!(", {omitted} more matching files left out by the caps")
        } else {
            String::new()
        }
    );
    Ok(ToolOutput {
        images: Vec::new(),
        text,
        envelope: Envelope::completed(
            ToolName::ContextSave,
            format!("ContextSave: saved {id}"),
            json!({"id": id, "files": names, "omitted_files": omitted, "project_root": memory.project_root}),
        ),
    })
}

/// The secret values this save must not write: those of the shell's starting
/// environment, those the session's guardian has seen (when one is live; it also learns
/// the values assigned in the files read here, so later output hides them too), and
/// those assigned in the files and the description themselves.
fn session_secrets(
    ctx: &ToolContext,
    thread_id: &str,
    files: &[(String, String, bool)],
    description: &str,
) -> KnownSecrets {
    let mut known = KnownSecrets::from_env(ctx.runtime.base_env());
    let mut seen = KnownSecrets::new();
    seen.learn_text(description);
    for (_, text, _) in files {
        seen.learn_text(text);
    }
    known.learn_all(seen.values());
    let key = crate::runtime::session_key(ctx.principal, thread_id);
    if let Some(live) = ctx.runtime.attach(&key) {
        let learn = SecretValues(seen.values().to_vec());
        if let Ok(Response::Secrets { values }) =
            (live.client).call(&Request::Secrets { learn }, SECRETS_WAIT)
        {
            known.learn_all(&values.0);
        }
    }
    known
}

/// The saved memory `id` of this principal.
pub fn load(ctx: &ToolContext, id: &str) -> Result<Memory, ToolError> {
    let path = memory_path(ctx, id)?;
    let raw = std::fs::read_to_string(&path)
        .map_err(|_| bad(format!("no saved task {id:?} for this principal")))?;
    serde_json::from_str(&raw).map_err(|e| bad(format!("saved task {id:?} is unreadable: {e}")))
}

/// A saved memory rendered for an Initialize answer.
pub fn render(m: &Memory) -> String {
    let mut out = format!(
        "\n# Resumed task {} (project {})\n{}\n",
        m.id, m.project_root, m.description
    );
    for (p, text, truncated) in &m.files {
        out.push_str(&format!(
            "\n## {p}{}\n{text}\n",
            if *truncated { " (truncated)" } else { "" }
        ));
    }
    if m.omitted_files > 0 {
        out.push_str(&format!(
            "\n({} more matching files were not saved)\n",
            m.omitted_files
        ));
    }
    out
}
