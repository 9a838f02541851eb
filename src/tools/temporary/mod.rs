//! The managed temporary directory, tool side (engine: `crate::temporary`): made and
//! reported by `Initialize`, stale sessions pruned there; commands judged before they
//! reach the shell (`temporary_artifact_policy`, `temporary_budget_exceeded`); the audit
//! after every Bash action (`data.temporary`); helper maps' budget for `CodeMap`;
//! `EditFiles` `release_temporary` (`release.rs`).
//!
//! Invariant: an overage never deletes anything; it only refuses ordinary commands until
//! an audit finds the directory back under budget.

pub mod release;

use crate::session::Binding;
use crate::temporary::audit::Audit;
use crate::temporary::policy::{self, Place};
use crate::temporary::watch;
use crate::temporary::{self as engine, prune};
use crate::tools::ToolContext;
use crate::tools::envelope::{NextAction, Status, ToolOutput};
use crate::tools::error::{SessionPair, ToolError};
use crate::tools::error_code::ErrorCode;
pub use crate::tools::refusal::Refusal;
use crate::tools::state::temporary::{HELPER_MAP_CALLS, HELPER_MAP_FILES, HelperUse, Verdict};
use crate::usage::Phase;
use serde_json::{Value, json};
use std::path::Path;

/// A helper map's navigation payload (text and listed items), at most (seed 003).
pub const HELPER_MAP_PAYLOAD: usize = 12 * 1024;

pub(crate) fn refuse(r: Refusal) -> ToolError {
    ToolError::Temporary(Box::new(r))
}

/// The runtime's session key, which names the directory.
pub fn key(ctx: &ToolContext, b: &Binding) -> String {
    crate::runtime::session_key(ctx.principal, &b.thread_id)
}

/// The lifecycle clock: `WINX_CLOCK_SKEW_SECS` moves it in tests, as for session TTLs.
fn now_ms(ctx: &ToolContext) -> i64 {
    crate::deadline::unix_ms() + ctx.history.clock_skew_ms()
}

/// `data.temporary` of a result: measured usage, limits, generation.
pub fn usage_json(a: &Audit) -> Value {
    let mut v = json!({
        "dir": a.dir, "bytes": a.session.bytes, "files": a.session.files,
        "limit_bytes": engine::SESSION_BYTES, "limit_files": engine::SESSION_FILES,
        "workspace_bytes": a.workspace_bytes, "workspace_limit_bytes": engine::WORKSPACE_BYTES,
        "over_budget": a.over_budget(), "generation": a.generation,
    });
    if let Some(p) = &a.problem {
        v["problem"] = json!(p.to_string());
    }
    if a.session.truncated {
        v["truncated"] = json!(true);
    }
    if a.recreated {
        v["recreated"] = json!(true);
    }
    if let Some(e) = &a.unavailable {
        v["unavailable"] = json!(e);
    }
    v
}

/// Audit the session's directory (the last audit while inotify saw no change to it:
/// `temporary::watch`) and remember the verdict. `fresh` walks the directory whatever the
/// cache says (`release_temporary`, which compares generations).
pub fn audit(ctx: &ToolContext, b: &Binding, fresh: bool) -> Audit {
    let _phase = ctx.trace.phase(Phase::TemporaryAudit);
    let state = ctx.states.of(ctx.principal, &b.thread_id);
    let mut t = state.temporary.lock();
    if fresh {
        t.watch = None;
    }
    let a = watch::audit(&mut t.watch, &b.workspace_root, &key(ctx, b), now_ms(ctx));
    t.verdict = if a.over_budget() {
        Verdict::Over
    } else {
        Verdict::Under
    };
    a
}

/// `Initialize`: on first calls make the directory (0700) and prune stale sessions of the
/// workspace; audit; the `data.temporary` object and one line of text. Other calls (a
/// status) leave the making to the audit, which makes a missing directory again and
/// tightens a loosened one to 0700: 11 system calls fewer on the cheap call.
pub fn initialize(ctx: &ToolContext, b: &Binding, prune_stale: bool) -> (Value, String) {
    let k = key(ctx, b);
    let (made, pruned) = if prune_stale {
        let made = engine::ensure(&b.workspace_root, &k).map(|_| ());
        (made, prune::prune(&b.workspace_root, &k, now_ms(ctx)))
    } else {
        (Ok(()), prune::Pruned::default())
    };
    let a = audit(ctx, b, false);
    let mut v = usage_json(&a);
    if let Err(p) = made {
        let field = match p {
            engine::DirProblem::Io(_) => "unavailable",
            _ => "problem",
        };
        v[field] = json!(p.to_string());
    }
    if !pruned.sessions.is_empty() {
        v["pruned_stale_sessions"] = json!(pruned.sessions.len());
    }
    let text = format!(
        "temporary dir (helpers only; $WINX_TEMP_DIR in every shell): {} — {} of {} MiB, {} of {} files\n",
        a.dir.display(),
        mib(a.session.bytes),
        engine::SESSION_BYTES >> 20,
        a.session.files,
        engine::SESSION_FILES
    );
    (v, text)
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Before a command line (or text submitted as one) reaches the shell: refuse a write
/// that bypasses the managed directory, and, while the directory is over budget, every
/// command that does more than inspect or remove.
pub fn before_command(
    ctx: &ToolContext,
    b: &Binding,
    pair: &SessionPair,
    src: &str,
    cwd: &str,
) -> Result<(), ToolError> {
    let dir = engine::session_dir(&b.workspace_root, &key(ctx, b));
    let place = Place {
        workspace: &b.workspace_root,
        cwd: Path::new(cwd),
    };
    if let Some(bypass) = policy::judge(src, &place, &policy::Disk) {
        let name = Path::new(&bypass.target)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "helper".into());
        let message = format!(
            "`{}` writes outside the managed temporary directory ({}); write helpers under \
             $WINX_TEMP_DIR ({}) instead, e.g. \"$WINX_TEMP_DIR/{name}\"; nothing was run",
            bypass.target,
            bypass.rule.as_str().replace('_', " "),
            dir.display()
        );
        return Err(refuse(Refusal {
            code: ErrorCode::TemporaryArtifactPolicy,
            status: Status::PolicyBlocked,
            retryable: true,
            message,
            data: json!({"target": bypass.target, "rule": bypass.rule.as_str(), "temp_dir": dir}),
            next: Some(NextAction {
                tool: "BashCommand".into(),
                instruction: format!(
                    "Run the command again writing to \"$WINX_TEMP_DIR/{name}\" instead of {}.",
                    bypass.target
                ),
                arguments: retry_arguments(pair, policy::rewritten(src, &place, &policy::Disk)),
            }),
        }));
    }
    let verdict = ctx
        .states
        .of(ctx.principal, &b.thread_id)
        .temporary
        .lock()
        .verdict;
    if verdict == Verdict::Under || policy::only_inspects_or_removes(src) {
        return Ok(());
    }
    let a = audit(ctx, b, false);
    if !a.over_budget() {
        return Ok(());
    }
    Err(refuse(Refusal {
        code: ErrorCode::TemporaryBudgetExceeded,
        status: Status::PolicyBlocked,
        retryable: true,
        message: format!(
            "the managed temporary directory is over budget ({}); only commands that inspect \
             or remove (ls, du, rm, find -delete…) run until it is back under; nothing is \
             ever deleted automatically",
            over_text(&a)
        ),
        data: json!({"temporary": usage_json(&a)}),
        next: Some(NextAction {
            tool: "BashCommand".into(),
            instruction: "See what the helpers hold, then remove the obsolete ones (rm).".into(),
            arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                              "action_json": {"command": "du -ah \"$WINX_TEMP_DIR\""}}),
        }),
    }))
}

/// The call that would pass: the same command with its refused write targets written
/// under `"$WINX_TEMP_DIR"` (`policy::rewritten`), when they can be rewritten where they
/// stand; else the pair alone (the instruction says what to change).
fn retry_arguments(pair: &SessionPair, command: Option<String>) -> Value {
    let mut args = json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root});
    if let Some(command) = command {
        args["action_json"] = json!({"command": command});
    }
    args
}

/// `before_command` for a `verify_command` (edit tools, `VerifyEdit`), judged against the
/// shell's current directory (the workspace when no shell answers yet).
pub fn before_verify(
    ctx: &ToolContext,
    b: &Binding,
    pair: &SessionPair,
    command: &str,
) -> Result<(), ToolError> {
    let cwd = ctx
        .runtime
        .attach(&key(ctx, b))
        .map(|e| e.snapshot.cwd)
        .unwrap_or_else(|| b.workspace_str());
    before_command(ctx, b, pair, command, &cwd)
}

fn over_text(a: &Audit) -> String {
    if let Some(p) = &a.problem {
        return format!("it cannot be measured: {p}");
    }
    format!(
        "{} MiB and {} files of {} MiB / {} files per session; {} MiB of {} MiB for the workspace{}",
        mib(a.session.bytes),
        a.session.files,
        engine::SESSION_BYTES >> 20,
        engine::SESSION_FILES,
        mib(a.workspace_bytes),
        engine::WORKSPACE_BYTES >> 20,
        if a.session.truncated {
            "; too many entries to count"
        } else {
            ""
        }
    )
}

/// After every Bash action: audit, report `data.temporary`, and say so in the text when
/// over budget.
pub fn after_action(ctx: &ToolContext, b: &Binding, out: &mut ToolOutput) {
    let a = audit(ctx, b, false);
    if a.over_budget() {
        out.text.push_str(&format!(
            "\nTemporary directory over budget ({}): ordinary commands are refused until you \
             inspect $WINX_TEMP_DIR and remove obsolete helpers.\n",
            over_text(&a)
        ));
    }
    if let Some(data) = out.envelope.data.as_object_mut() {
        data.insert("temporary".into(), usage_json(&a));
    }
}

/// `CodeMap` on a path inside `.winx/tmp`: a helper map. One existing file only, charged
/// to the session's budget (24 files / 64 calls); canonical maps are never charged.
pub fn charge_helper_map(
    ctx: &ToolContext,
    b: &Binding,
    path: &Path,
    dir: bool,
) -> Result<Option<HelperUse>, ToolError> {
    if !engine::within_root(&b.workspace_root, path) {
        return Ok(None);
    }
    if dir {
        return Err(ToolError::InvalidInput {
            detail: "a helper map takes one existing file of the managed temporary directory, \
                     not a directory"
                .into(),
        });
    }
    let state = ctx.states.of(ctx.principal, &b.thread_id);
    let charged = state.temporary.lock().charge_helper_map(path);
    charged.map(Some).map_err(|used| {
        refuse(Refusal {
            code: ErrorCode::DerivedCodeMapBudgetExhausted,
            status: Status::PolicyBlocked,
            retryable: false,
            message: format!(
                "this session used its helper-map budget ({} of {HELPER_MAP_FILES} files, {} of \
                 {HELPER_MAP_CALLS} calls); map canonical workspace files instead (they do not \
                 count) or read the helper with ReadFiles",
                used.files, used.calls
            ),
            data: json!({"helper_files": used.files, "helper_calls": used.calls,
                         "limit_files": HELPER_MAP_FILES, "limit_calls": HELPER_MAP_CALLS}),
            next: None,
        })
    })
}

/// Cap a helper map's payload: the text at a line boundary, and the listed items
/// (`symbols` or `references`) to what fits, both within `HELPER_MAP_PAYLOAD`.
pub fn cap_helper_map(out: &mut ToolOutput, used: HelperUse) {
    let mut capped = false;
    if out.text.len() > HELPER_MAP_PAYLOAD {
        let mut cut = HELPER_MAP_PAYLOAD - 64;
        while !out.text.is_char_boundary(cut) {
            cut -= 1;
        }
        let cut = out.text[..cut].rfind('\n').map_or(cut, |i| i + 1);
        out.text.truncate(cut);
        out.text.push_str("… helper map capped at 12 KiB\n");
        capped = true;
    }
    // The structured answer holds the same cap (a completed CodeMap answer's
    // structuredContent is its envelope, no text copy): drop the last entries of the
    // longest lists until the envelope, with the helper_map facts below, fits.
    const FACTS_BYTES: usize = 160;
    loop {
        let size = serde_json::to_vec(&out.envelope).map_or(0, |v| v.len()) + FACTS_BYTES;
        if size <= HELPER_MAP_PAYLOAD {
            break;
        }
        let Some(items) = out.envelope.data.as_object_mut().and_then(|m| {
            m.values_mut()
                .filter_map(Value::as_array_mut)
                .filter(|a| !a.is_empty())
                .max_by_key(|a| a.len())
        }) else {
            break;
        };
        let mut excess = size - HELPER_MAP_PAYLOAD;
        while excess > 0 {
            let Some(last) = items.pop() else { break };
            excess = excess.saturating_sub(last.to_string().len() + 1);
        }
        capped = true;
    }
    let data = &mut out.envelope.data;
    data["helper_map"] = json!({"capped": capped, "files_used": used.files, "calls_used": used.calls,
        "limit_files": HELPER_MAP_FILES, "limit_calls": HELPER_MAP_CALLS, "limit_bytes": HELPER_MAP_PAYLOAD});
}
