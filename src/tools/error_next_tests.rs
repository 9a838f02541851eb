//! Every `ErrorCode` has a way forward or a written reason why none exists (issue 37
//! item 5). `expect` is an exhaustive `match`: a new code does not compile until it is
//! given one. `Next` refusals are built through the real mapping (`ToolError`,
//! `EditFailure`, a history action's parser) and must carry a complete next action;
//! `Set` codes get their next action from a tool-specific path the test cannot reach
//! (a private function deep in the tool), named by its file, which must name the code
//! and build a next action; `None` codes carry the reason.

use crate::tools::envelope::Envelope;

/// An envelope read, never built, here (`tests/it/tidy.rs` keeps envelope literals and
/// `errorCode` writes in the error mappings).
type Env = Envelope;
use crate::tools::error::{SessionPair, ToolError};
use crate::tools::error_code::ErrorCode;
use crate::tools::execution::{self, WaitProfile};
use crate::tools::files::edit_error::EditFailure;
use crate::tools::name::ToolName;
use serde_json::{Map, Value, json};

enum Expect {
    Next(Env),
    Set {
        file: &'static str,
        source: &'static str,
    },
    None(&'static str),
}

fn pair() -> SessionPair {
    SessionPair {
        thread_id: "t1".into(),
        workspace_root: "/w".into(),
    }
}

fn call(action: Value) -> Map<String, Value> {
    json!({"thread_id": "t1", "workspace_root": "/w", "action": action})
        .as_object()
        .cloned()
        .unwrap()
}

/// A history action refused by its real parser, as `Execution` answers it.
fn parsed(action: Value) -> Env {
    let map = call(action);
    let a = map["action"].as_object().unwrap();
    let kind = a["type"].as_str().unwrap();
    let e = match execution::parse(kind, a, WaitProfile::Local) {
        Err(e) => e.with_call(&map),
        Ok(_) => panic!("{a:?} was accepted"),
    };
    e.into_output(ToolName::Execution).envelope
}

fn err(e: ToolError) -> Env {
    e.into_output(ToolName::Execution).envelope
}

fn edit(f: EditFailure) -> Env {
    f.into_output(ToolName::FileWriteOrEdit, &pair()).envelope
}

/// Herdr's failures, mapped (with an `Agent` next action) in the Herdr backend.
const HERDR: Expect = Expect::Set {
    file: "tools/agent/herdr/errors.rs",
    source: include_str!("agent/herdr/errors.rs"),
};

const RETRY_SAME: &str = "retrySameCall is true: the same call, unchanged, is the way forward";
const OPERATOR: &str = "only the operator can change this (configuration or policy); the \
                        message says what to ask for";
const PATH: &str = "the path itself is unusable for this tool; only the caller knows which \
                    path it meant";

fn expect(code: ErrorCode) -> Expect {
    use ErrorCode as C;
    match code {
        C::InvalidToolInput => Expect::Next(parsed(json!({"type": "read",
            "execution_id": "1a-1", "page_bytes": 0}))),
        C::UnknownTool => Expect::None(
            "the name is no tool; data.available_tools lists every name, and which one was \
             meant is the caller's guess",
        ),
        C::PolicyBlocked => Expect::None(OPERATOR),
        C::NeedsInitialize => Expect::Next(err(ToolError::NeedsInitialize {
            reason: "no pair".into(),
            workspace_root: Some("/w".into()),
        })),
        C::SessionBindingConflict => Expect::Next(err(ToolError::BindingConflict {
            thread_id: "t1".into(),
            bound_workspace: "/w".into(),
            supplied_workspace: "/v".into(),
        })),
        C::WorkspaceChangeRequiresNewSession => {
            Expect::Next(err(ToolError::WorkspaceChangeRequiresNewSession {
                thread_id: "t1".into(),
                bound_workspace: "/w".into(),
                requested_workspace: "/v".into(),
            }))
        }
        C::WorkspaceInvalid => Expect::None(PATH),
        C::InitializeWorkspaceAlreadyBound => Expect::Next(err(ToolError::WorkspaceAlreadyBound {
            thread_id: "t1".into(),
            bound_workspace: "/w".into(),
            requested_workspace: "/v".into(),
        })),
        C::StateStoreUnavailable | C::HistoryUnavailable | C::EditLockUnavailable => {
            Expect::None(RETRY_SAME)
        }
        C::CommandAlreadyRunning => Expect::Next(err(ToolError::CommandAlreadyRunning {
            execution_id: "1a-1".into(),
            elapsed_ms: 5,
            pair: pair(),
        })),
        C::ShellUnavailable => Expect::Next(err(ToolError::ShellUnavailable {
            detail: "gone".into(),
            pair: pair(),
        })),
        C::CommandDeniedByMode => Expect::None(
            "the session's mode is the user's choice: changing it (Initialize \
             user_asked_mode_change) needs the user's request, never the agent's",
        ),
        C::WaitPolicyIncompatibleWithAction => {
            Expect::Next(err(ToolError::WaitPolicyIncompatible {
                corrected: json!({"action_json": {"status_check": true}}),
            }))
        }
        C::NoSuchBackgroundCommand | C::BackgroundLimit => Expect::None(
            "built by BashCommand without the session pair a call needs; the message says \
             what to do (a status_check lists the running background commands)",
        ),
        C::TaskOutcomeUnknown => Expect::Next(err(ToolError::TaskOutcomeUnknown {
            detail: "restart".into(),
            pair: Some(pair()),
        })),
        C::NotRegularFile | C::PathNotAllowed | C::FileUnusable | C::PathOutsideAllowedRoots => {
            Expect::None(PATH)
        }
        C::IsDirectory | C::FileNotFound | C::PermissionDenied | C::FileTooLarge => {
            Expect::None(PATH)
        }
        C::ImageTooLarge | C::ImageDecodeFailed | C::ImageEncodeFailed | C::IoError => {
            Expect::None(PATH)
        }
        C::ShellExited => Expect::Set {
            file: "tools/bash/render.rs",
            source: include_str!("bash/render.rs"),
        },
        // As `execution::find` and `wait` build it.
        C::ExecutionNotFound => Expect::Next(err(ToolError::ExecutionNotFound {
            execution_id: "1a-1".into(),
            fix: Some(execution::list_fix()),
        })),
        C::InvalidCursor => Expect::Next(err(ToolError::InvalidCursor {
            detail: "forged".into(),
            fix: Some(crate::tools::error::Fix::boxed(
                "read without a cursor",
                json!({"type": "read", "execution_id": "1a-1"}),
            )),
        })),
        C::ExecutionObservationIssues => Expect::None(
            "a partial result, not a refusal: each item's errors say what failed, and the \
             answered items stand",
        ),
        C::AgentPromptUnavailable => Expect::None(
            "the guardian cannot take a protected prompt; no other call sends input safely",
        ),
        // Herdr's refusals name an Agent call on the same target (a native prompt's
        // refusal of these two leaves the choice to the caller: nothing was sent).
        C::AgentTargetNotReady | C::AgentTargetUnavailable => HERDR,
        C::PromptIdConflict | C::AgentReceiptLimit | C::AgentReceiptNotFound => Expect::None(
            "the prompt_id is the caller's own name: choosing another is the caller's call",
        ),
        C::AgentDeliveryUncertain => Expect::None(
            "the input may have arrived: no call may be suggested that could send it again",
        ),
        // An inspection of the target, never a resend.
        C::HerdrDeliveryUncertain => HERDR,
        C::AgentRequestRejected => Expect::None(
            "data.receipt_class says why (busy, stale incarnation, …); each asks a different \
             decision of the orchestrator",
        ),
        C::HerdrDisabled | C::HerdrConfiguration | C::HerdrScopeDenied => Expect::None(OPERATOR),
        C::HerdrUnavailable | C::InvalidHerdrResponse | C::HerdrOutputLimit => HERDR,
        C::HerdrTimeout | C::HerdrFailed | C::InvalidHerdrRequest => HERDR,
        C::ReadRequired => Expect::Next(edit(EditFailure::NeedsRead {
            path: "/w/a.rs".into(),
            ranges: vec![(1, 3)],
            reason: "not read".into(),
        })),
        C::SearchBlockNotFound | C::SearchBlockAmbiguous => {
            Expect::Next(edit(EditFailure::SearchConflict {
                path: "/w/a.rs".into(),
                code,
                message: "no match".into(),
                region: Some((2, 9)),
            }))
        }
        C::SearchBlockMalformed | C::InvalidPatch => Expect::None(
            "the caller's own blocks or patches do not parse; the message names the fault",
        ),
        C::PartialCommit => Expect::None(
            "some files were committed: data lists committed, failed and untouched files; \
             what to do with them is the caller's decision",
        ),
        C::RecoveryExhausted => Expect::None(
            "by design: it tells the caller to stop retrying blocks and change strategy",
        ),
        C::MutationPostconditionChanged => Expect::Set {
            file: "tools/files/receipts.rs",
            source: include_str!("files/receipts.rs"),
        },
        C::VerificationFailed => Expect::Set {
            file: "tools/files/verify.rs",
            source: include_str!("files/verify.rs"),
        },
        C::UndoRefused => {
            Expect::None("the file changed since the edit: undoing now would overwrite newer work")
        }
        C::StaleCursor => Expect::Next(err(ToolError::MapCursor {
            stale: true,
            snapshot_hash: Some("h".into()),
            retry: json!({"operation": "outline", "path": "."}),
        })),
        C::TemporaryArtifactPolicy | C::TemporaryBudgetExceeded => Expect::Set {
            file: "tools/temporary/mod.rs",
            source: include_str!("temporary/mod.rs"),
        },
        C::TemporaryGenerationChanged | C::TemporaryReleaseBlocked => Expect::Set {
            file: "tools/temporary/release.rs",
            source: include_str!("temporary/release.rs"),
        },
        C::DerivedCodeMapBudgetExhausted => {
            Expect::None("a per-session budget: no call restores it within this session")
        }
        C::TemporaryReleasePartial | C::ReadFailed => {
            Expect::None("a partial result: each file's own outcome is in data; the rest stands")
        }
    }
}

#[test]
fn every_error_code_has_a_next_action_or_a_reason_why_not() {
    for &code in ErrorCode::ALL {
        match expect(code) {
            Expect::Next(env) => {
                let built = env.error_code;
                assert_eq!(built, Some(code), "{code}: built another code");
                let next = env
                    .next_action
                    .unwrap_or_else(|| panic!("{code}: no next action"));
                assert!(
                    !next.tool.is_empty() && !next.instruction.is_empty(),
                    "{code}"
                );
                assert!(next.arguments.is_object(), "{code}: {next:?}");
            }
            Expect::Set { file, source } => {
                let variant = format!("{code:?}");
                assert!(
                    source.contains(&format!("ErrorCode::{variant}")),
                    "{code}: {file} does not build it"
                );
                assert!(
                    source.contains("NextAction {") || source.contains("next_action ="),
                    "{code}: {file} builds no next action"
                );
            }
            Expect::None(why) => assert!(why.len() > 20, "{code}: say why"),
        }
    }
}

/// The refusals issue 37 names each say what to call instead, as a complete call.
#[test]
fn history_refusals_say_what_to_call_instead() {
    let next = |action: Value| parsed(action).next_action.unwrap();
    let n = next(json!({"type": "explode"}));
    assert_eq!(n.arguments["action"], json!({"type": "list"}));
    assert_eq!(n.arguments["thread_id"], "t1");
    assert_eq!(n.arguments["workspace_root"], "/w");
    assert_eq!(n.tool, "Execution");
    let n = next(json!({"type": "get", "execution_id": ""}));
    assert_eq!(n.arguments["action"], json!({"type": "list"}));
    let n = next(json!({"type": "read", "execution_id": "1a-1", "page_bytes": 0}));
    assert_eq!(n.arguments["action"]["page_bytes"], 4);
    assert!(n.instruction.contains("4..=65536"), "{n:?}");
    let n = next(json!({"type": "read", "execution_id": "1a-1", "page_bytes": 65537}));
    assert_eq!(
        n.arguments["action"],
        json!({"type": "read", "execution_id": "1a-1", "page_bytes": 65536})
    );
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"execution_id": format!("1a-{i}"), "page_bytes": 30000}))
        .collect();
    let n = next(json!({"type": "observe", "items": items}));
    let fitted: u64 = n.arguments["action"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["page_bytes"].as_u64().unwrap())
        .sum();
    assert!(fitted <= 65536, "{n:?}");
    let n = next(json!({"type": "observe", "items": [{"execution_id": "1a-1", "page_bytes": 1}]}));
    assert_eq!(n.arguments["action"]["items"][0]["page_bytes"], 4);
    let n = next(json!({"type": "wait", "execution_ids": ["1a-1"], "timeout_seconds": 99}));
    assert_eq!(n.arguments["action"]["timeout_seconds"], 30.0);
    let n = next(json!({"type": "get", "execution_id": "1a-1", "colour": 1}));
    assert_eq!(
        n.arguments["action"],
        json!({"type": "get", "execution_id": "1a-1"})
    );
}
