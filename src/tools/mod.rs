//! MCP tools: names, the result envelope, typed errors, the catalog and each tool.
//!
//! Invariant: tools never see JSON-RPC; they take parsed arguments and return a
//! `ToolOutput` (or a `ToolError`, mapped to an envelope in `error.rs` only).

pub mod agent;
pub mod args;
pub mod bash;
pub mod catalog;
pub mod codemap;
pub mod envelope;
pub mod error;
pub mod error_code;
pub mod execution;
pub mod files;
pub mod initialize;
pub mod name;
pub mod policy;
pub mod refusal;
pub mod state;
pub mod temporary;
pub mod usage_facts;

use crate::runtime::Runtime;
use crate::session::SessionService;
use crate::tools::policy::ToolPolicy;
use crate::usage::Phase;
use envelope::ToolOutput;
use error::ToolError;
use name::ToolName;
use serde_json::{Map, Value};

/// How much of an unknown tool name is echoed back.
const MAX_ECHOED_NAME_CHARS: usize = 128;

/// What a tool call may use.
pub struct ToolContext<'a> {
    pub sessions: &'a SessionService,
    pub runtime: &'a Runtime,
    pub principal: &'a str,
    /// How first calls map to logical sessions, and the transport's conversation identity.
    pub affinity: crate::session::Affinity,
    pub conversation: Option<&'a str>,
    /// Redact secrets in command output.
    pub redact: bool,
    /// The in-memory state of every session (read permits, undo, receipts in flight,
    /// conflict counts, image fingerprints), owned by the MCP layer.
    pub states: &'a state::SessionStates,
    pub allow_paths: &'a crate::files::policy::AllowPaths,
    pub read_parallelism: usize,
    pub policy: &'a ToolPolicy,
    /// `WINX_SERVER_INSTRUCTIONS`, repeated in full Initialize answers.
    pub extra_instructions: Option<&'a str>,
    /// The execution history (records every accepted command; `Execution` reads it).
    pub history: &'a crate::history::History,
    /// This call's phases for the usage log (`CallTrace::off()` without a log).
    pub trace: &'a crate::usage::CallTrace,
    /// The Herdr backend's operator setting (`Agent` with `backend: herdr`).
    pub herdr: &'a agent::herdr::Setting,
    /// Who is calling, for the default budget of `Execution`/`Agent` waits.
    pub wait_profile: execution::WaitProfile,
    /// The client declared `io.winx/compact-bash-output`: `BashCommand` text carries no
    /// status trailer (seed 003).
    pub compact_bash: bool,
}

/// The start of every session-bound tool: strict arguments, then the verified
/// `thread_id` + `workspace_root` pair (nothing else runs before it is accepted).
pub fn session_args<'m>(
    ctx: &ToolContext,
    map: &'m Map<String, Value>,
    fields: &[&str],
) -> Result<(args::Args<'m>, crate::session::Binding), ToolError> {
    let a = args::Args::strict(map, fields)?;
    let admission = ctx.trace.phase(Phase::SessionAdmission);
    let (binding, _) = ctx.sessions.verify(
        ctx.principal,
        a.opt_str("thread_id")?,
        a.opt_str("workspace_root")?,
    )?;
    drop(admission);
    let _validation = ctx.trace.phase(Phase::WorkspaceValidation);
    workspace_permitted(ctx, &binding.workspace_root)?;
    Ok((a, binding))
}

/// May the caller work in `workspace` (canonical)? Inside its `workspace_roots` (when its
/// principal has them), and never inside the server's private state except its own scratch
/// directory. Checked when a session is bound and again on every call, so a binding made
/// under an older configuration cannot outlive a narrower one.
pub fn workspace_permitted(
    ctx: &ToolContext,
    workspace: &std::path::Path,
) -> Result<(), ToolError> {
    let refuse = |reason: String| ToolError::WorkspaceNotPermitted {
        path: workspace.display().to_string(),
        reason,
    };
    if let Some(dir) = ctx.allow_paths.private_dir_containing(workspace) {
        let own = ctx.sessions.scratch_root(ctx.principal);
        if !workspace.starts_with(&own) {
            return Err(refuse(format!(
                "it is inside {}, this server's private state",
                dir.display()
            )));
        }
        return Ok(());
    }
    match &ctx.policy.workspace_roots {
        Some(roots) if !ctx.policy.permits_workspace(workspace) => {
            let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            Err(refuse(format!(
                "this principal may bind workspaces only under {}",
                shown.join(", ")
            )))
        }
        _ => Ok(()),
    }
}

/// The argument of this call that would run a shell command, if any. Such calls need
/// `BashCommand` as well as their own tool (seed 003: "A principal must permit the edit
/// tool and `BashCommand`"). `BashCommand` and `VerifyEdit` are themselves the permission
/// (a policy with `VerifyEdit` but not `BashCommand` is refused at startup).
pub fn starts_process(tool: ToolName, args: &Map<String, Value>) -> Option<&'static str> {
    const VERIFY: &str = "verify_command";
    let edits = matches!(
        tool,
        ToolName::FileWriteOrEdit
            | ToolName::MultiFileEdit
            | ToolName::ApplyPatch
            | ToolName::EditFiles
    );
    // Any present value counts, even one the tool would reject or ignore: the refusal
    // must not depend on how the tool reads it.
    (edits && args.get(VERIFY).is_some_and(|v| !v.is_null())).then_some(VERIFY)
}

/// Resolve the name, enforce policy, run the tool. Never panics on bad input.
pub fn dispatch(ctx: &ToolContext, name: &str, args: &Map<String, Value>) -> ToolOutput {
    // Any call in the daemon runtime keeps winxd alive (rate-limited, off this path).
    ctx.runtime.watch_daemon();
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
            .into_output(envelope::CalledTool::Unknown(shown));
        }
    };
    if !ctx.policy.permits(tool) {
        return ToolError::PolicyBlocked {
            tool: tool.as_str().into(),
        }
        .into_output(tool);
    }
    if let Some(argument) = starts_process(tool, args)
        && !ctx.policy.permits(ToolName::BashCommand)
    {
        return ToolError::ArgumentNeedsTool {
            argument,
            needs: ToolName::BashCommand.as_str(),
        }
        .into_output(tool);
    }
    let result = match tool {
        ToolName::Initialize => initialize::call(ctx, args),
        ToolName::BashCommand => bash::call(ctx, args),
        ToolName::ReadFiles => files::read_files::call(ctx, args),
        ToolName::ReadImage => files::image::call(ctx, args),
        ToolName::FileWriteOrEdit => files::write::call(ctx, args),
        ToolName::MultiFileEdit => files::multi::multi_file_edit(ctx, args),
        ToolName::ApplyPatch => files::multi::apply_patch(ctx, args),
        ToolName::EditFiles => files::multi::edit_files(ctx, args),
        ToolName::UndoEdit => files::undo::call(ctx, args),
        ToolName::ContextSave => files::context::call(ctx, args),
        ToolName::VerifyEdit => files::verify::verify_edit(ctx, args),
        ToolName::Execution => execution::call(ctx, args),
        ToolName::CodeMap => codemap::call(ctx, args),
        ToolName::Agent => agent::call(ctx, args),
    };
    result.unwrap_or_else(|e| e.into_output(tool))
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::tools::policy::{Profile, ToolPolicy};
    use proptest::prelude::*;
    use serde_json::json;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[ -~\\PC]{0,12}".prop_map(Value::String),
            prop_oneof![
                Just("first_call"),
                Just("status"),
                Just("reset_shell"),
                Just("user_asked_mode_change"),
                Just("user_asked_change_workspace"),
                Just("code_writer"),
                Just("/"),
                Just("/tmp"),
            ]
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
        let key = prop_oneof![
            Just("type".to_string()),
            Just("workspace_root".to_string()),
            Just("thread_id".to_string()),
            Just("mode".to_string()),
            Just("allowed_commands".to_string()),
            Just("allowed_globs".to_string()),
            "[a-z]{1,6}",
        ];
        proptest::collection::btree_map(key, arb_json(), 0..6).prop_map(|m| m.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]
        /// Arbitrary arguments never panic and always produce a schema-shaped envelope.
        #[test]
        fn dispatch_never_panics(args in arb_args(), name in prop_oneof![Just("Initialize".to_string()), "[A-Za-z]{0,10}"]) {
            let tmp = tempfile::tempdir().unwrap();
            let sessions = SessionService::new(tmp.path().join("state"), 8);
            let runtime = crate::runtime::tests::embedded(tmp.path());
            let policy = ToolPolicy::profile(Profile::Full);
            let states = state::SessionStates::new(8);
            let allow = crate::files::policy::AllowPaths::default();
            let history = crate::history::History::new(tmp.path().join("state"), true, Default::default());
            let ctx = ToolContext { sessions: &sessions, runtime: &runtime, principal: "p", affinity: Default::default(), conversation: None, policy: &policy, extra_instructions: None, redact: true, states: &states, allow_paths: &allow, read_parallelism: 2, history: &history, trace: &crate::usage::CallTrace::off(), herdr: &Default::default(), wait_profile: Default::default(), compact_bash: false };
            let out = dispatch(&ctx, &name, &args).to_result();
            let sc = &out["structuredContent"];
            prop_assert!(sc["status"].is_string() && sc["message"].is_string() && sc["data"].is_object());
            prop_assert_eq!(out["isError"].as_bool().unwrap(), sc["errorCode"].is_string());
        }
    }
}
