//! The `BashCommand` tool: run, observe and drive the session's shell.
//!
//! The envelope's status is decided from the runtime's typed `CommandState` alone; the
//! output text is presentation and can never make a command look finished.

pub mod action;
mod known;
pub(crate) mod record;
pub(crate) mod render;
mod spill;
pub mod task;
pub mod turn;

use super::ToolContext;
use super::envelope::ToolOutput;
use super::error::{SessionPair, ToolError};
use crate::runtime::{ClientError, session_key};
use crate::session::{Binding, Mode};
use crate::shell::cmdpolicy;
use crate::tools::name::ToolName;
use crate::usage::Phase;
use crate::wire::guardian::{
    Expect, GuardianError, ProcessStatus, RUN_EXPECT, Request, Response, Snapshot, Wait,
};
use action::{Action, POLICIES};
use serde_json::{Map, Value, json};
use std::time::Duration;

const TOOL: ToolName = ToolName::BashCommand;
/// A command whose `Expect` no longer held is judged again against the fresh state this
/// many times before the call gives up (only a shell changing directory on its own, or
/// a guardian replaced again and again, gets that far).
const STALE_RETRIES: usize = 3;

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    match start(ctx, map, TaskMode::Inline)? {
        Step::Done(out) => Ok(out),
        Step::Running(p) => Ok(p.render(ctx)),
    }
}

/// Where a call stands when its inline wait ends.
pub enum Step {
    Done(ToolOutput),
    /// A foreground command that a task will follow to completion (`task::finish`).
    Running(task::Pending),
}

/// Whether a call may hand its foreground command to an MCP Task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskMode {
    /// No tasks: every answer is inline.
    Inline,
    /// 2026-07-28, tasks offered: `until_complete` hands over at once, `adaptive` once its
    /// inline wait ends with the command still running.
    Offered,
    /// 2025-11-25, the call is a task already: hand over at once.
    Requested,
}

/// Whether `map` runs a foreground command a task can follow (not `return_early`).
pub fn followable(map: &Map<String, Value>) -> bool {
    let foreground = matches!(
        action::parse_action(map.get("action_json")),
        Ok(Action::Command {
            background: false,
            ..
        })
    );
    foreground && map.get("wait_policy").and_then(Value::as_str) != Some("return_early")
}

/// Run the action. A foreground command a task may follow (see `TaskMode`) comes back as
/// `Running` instead of a `running` result.
pub fn start(
    ctx: &ToolContext,
    map: &Map<String, Value>,
    mode: TaskMode,
) -> Result<Step, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, action::FIELDS)?;
    let act = action::parse_action(map.get("action_json"))?;
    action::check_sizes(&act)?;
    let policy = a.opt_enum("wait_policy", POLICIES)?.unwrap_or("adaptive");
    let seconds = action::wait_seconds(map)?;
    let pair = SessionPair {
        thread_id: binding.thread_id.clone(),
        workspace_root: binding.workspace_str(),
    };
    let mut plan = action::plan_wait(&act, policy, seconds).ok_or_else(|| {
        let mut corrected = Value::Object(map.clone());
        corrected["wait_policy"] = json!("return_early");
        ToolError::WaitPolicyIncompatible { corrected }
    })?;
    let foreground = matches!(
        act,
        Action::Command {
            background: false,
            ..
        }
    );
    let promote = mode != TaskMode::Inline && foreground && policy != "return_early";
    if promote && (policy == "until_complete" || mode == TaskMode::Requested) {
        // The task follows the command; the call itself returns at once.
        plan.timeout_ms = 0;
    }
    let key = session_key(ctx.principal, &binding.thread_id);
    let inspecting = ctx.trace.phase(Phase::RuntimeInspection);
    // A command may be judged against the state the previous one left: it travels with
    // an `Expect` the guardian checks, so a stale judgement is redone, never acted on.
    let attached = match act {
        Action::Command { .. } => ctx.runtime.attach_remembered(&key),
        _ => ctx.runtime.attach(&key),
    };
    let no_shell = || ToolError::ShellUnavailable {
        detail: "no live shell for this session (the adapter restarted or the shell was killed)"
            .into(),
        pair: pair.clone(),
    };
    let mut ensured = attached.ok_or_else(no_shell)?;
    if let Err(refused) = judge(ctx, &binding, &pair, &act, &ensured.snapshot) {
        // Refused against a remembered state: only the session as it is now may refuse.
        if !ensured.remembered {
            return Err(refused);
        }
        ensured = ctx.runtime.attach(&key).ok_or_else(no_shell)?;
        judge(ctx, &binding, &pair, &act, &ensured.snapshot)?;
    }
    drop(inspecting);
    if let Action::Turn { wait, recognizer } = &act {
        let budget = Duration::from_millis(plan.timeout_ms);
        let mut out = turn::run(ctx, &ensured.client, &pair, *wait, recognizer, budget)?;
        crate::tools::temporary::after_action(ctx, &binding, &mut out);
        return Ok(Step::Done(out));
    }
    let wait = Wait {
        timeout_ms: plan.timeout_ms,
        settle_ms: plan.settle_ms,
    };
    let waiting = ctx.trace.phase(Phase::Wait);
    let send = |snapshot: &Snapshot| {
        let req = request(ctx, &pair, &act, wait, snapshot)?;
        ensured
            .client
            .call(&req, Duration::from_millis(plan.timeout_ms))
            .map_err(|e| {
                if matches!(e, ClientError::Gone(_)) {
                    ctx.runtime.forget(&key);
                }
                ToolError::runtime(e.into(), pair.clone())
            })
    };
    let mut resp = send(&ensured.snapshot)?;
    for _ in 0..STALE_RETRIES {
        let Response::Stale(now) = resp else { break };
        judge(ctx, &binding, &pair, &act, &now)?;
        resp = send(&now)?;
        ensured.snapshot = now;
    }
    drop(waiting);
    if let (Action::Command { command, .. }, Response::Action(r)) = (&act, &resp) {
        record::admitted(ctx, &pair, &key, &ensured, command, r);
    }
    remember(ctx, &key, &ensured.snapshot, &resp);
    let done = |mut out: ToolOutput| {
        crate::tools::temporary::after_action(ctx, &binding, &mut out);
        Ok(Step::Done(out))
    };
    match resp {
        Response::Action(r) if promote && r.state.process_status == ProcessStatus::Running => Ok(
            Step::Running(task::Pending::new(key, pair, ensured.client, act.name(), r)),
        ),
        Response::Action(r) => {
            let foreground = r.state.bg_command_id.is_none();
            let mut out = render::action(ctx, &key, &pair, act.name(), r);
            if foreground && out.envelope.status == super::envelope::Status::Running {
                turn::annotate(ctx, &ensured.client, &mut out);
            }
            done(out)
        }
        Response::Screen {
            text,
            rows,
            cols,
            secrets,
        } => done(render::screen(ctx, text, (rows, cols), &secrets)),
        Response::Error(e) => Err(guardian_error(e, pair)),
        Response::Stale(_) => Err(ToolError::ShellUnavailable {
            detail: format!(
                "the session's shell kept changing directory while this command was checked \
                 ({STALE_RETRIES} tries); nothing was run"
            ),
            pair,
        }),
        other => Err(ToolError::ShellUnavailable {
            detail: format!("unexpected guardian answer {other:?}"),
            pair,
        }),
    }
}

/// What the shell is like after `resp`, for the next command's judgement: where a
/// foreground command or input that finished left it; unknown while one runs.
fn remember(ctx: &ToolContext, key: &str, before: &Snapshot, resp: &Response) {
    let Response::Action(r) = resp else { return };
    if r.state.bg_command_id.is_some() {
        return;
    }
    match r.state.process_status {
        ProcessStatus::Exited | ProcessStatus::Idle => {
            let mut after = before.clone();
            after.cwd.clone_from(&r.state.cwd);
            after.running = None;
            ctx.runtime.remember(key, after);
        }
        _ => ctx.runtime.unremember(key),
    }
}

/// Apply the session's mode and the temporary-directory rules to what `act` would run,
/// in the session as `snapshot` shows it.
fn judge(
    ctx: &ToolContext,
    binding: &Binding,
    pair: &SessionPair,
    act: &Action,
    snapshot: &Snapshot,
) -> Result<(), ToolError> {
    let running = snapshot.running.is_some();
    enforce_mode(binding, act, running)?;
    if let Some(line) = shell_line(binding, act, running)? {
        crate::tools::temporary::before_command(ctx, binding, pair, line, &snapshot.cwd)?;
    }
    Ok(())
}

/// The guardian request of `act`; a command carries the `Expect` of the `snapshot` it was
/// judged against, when the guardian checks one.
fn request(
    ctx: &ToolContext,
    pair: &SessionPair,
    act: &Action,
    wait: Wait,
    snapshot: &Snapshot,
) -> Result<Request, ToolError> {
    let expect = snapshot
        .capabilities
        .iter()
        .any(|c| c == RUN_EXPECT)
        .then(|| Expect::of(snapshot));
    Ok(match act {
        Action::Command {
            command,
            background,
        } => Request::Run {
            command: command.clone(),
            background: *background,
            wait,
            scope: Some(record::scope(ctx, pair)),
            expect,
        },
        Action::StatusCheck { bg } => Request::Status {
            bg_id: bg.clone(),
            wait,
        },
        Action::Input { bytes, bg, .. } => Request::Input {
            bytes: bytes.clone(),
            bg_id: bg.clone(),
            wait,
        },
        Action::Screen { lines, diff } => Request::Screen {
            lines: *lines,
            diff: *diff,
        },
        // Answered before any request; kept as a refusal rather than a panic should that
        // ever change.
        Action::Turn { .. } => {
            return Err(ToolError::InvalidInput {
                detail: "inspect and wait_for_turn take no guardian request".into(),
            });
        }
    })
}

fn guardian_error(e: GuardianError, pair: SessionPair) -> ToolError {
    match e {
        GuardianError::CommandAlreadyRunning {
            execution_id,
            elapsed_ms,
        } => ToolError::CommandAlreadyRunning {
            execution_id,
            elapsed_ms,
            pair,
        },
        GuardianError::ShellNotRunning => ToolError::ShellUnavailable {
            detail: "the shell has exited".into(),
            pair,
        },
        GuardianError::NoSuchBackgroundCommand { bg_id } => {
            ToolError::NoSuchBackgroundCommand { bg_id }
        }
        GuardianError::BackgroundLimit { limit } => ToolError::BackgroundLimit { limit },
        GuardianError::Io { detail } => ToolError::ShellUnavailable { detail, pair },
    }
}

/// What would reach the shell as a command line: a command action, or text submitted at
/// an idle prompt (raw keys there are refused in a restricted mode).
fn shell_line<'a>(
    binding: &Binding,
    act: &'a Action,
    running: bool,
) -> Result<Option<&'a str>, ToolError> {
    match act {
        Action::Command { command, .. } => Ok(Some(command.as_str())),
        Action::Input {
            text_as_command: Some(t),
            bg: None,
            ..
        } if !running => Ok(Some(t.as_str())),
        Action::Input { bg: None, .. } if !running && !matches!(binding.mode, Mode::Wcgw) => {
            Err(ToolError::CommandDenied {
                reason: "raw keys at an idle prompt are not allowed in a restricted mode".into(),
            })
        }
        _ => Ok(None),
    }
}

/// Apply the session mode to what would reach the shell as a command.
pub(crate) fn enforce_mode(
    binding: &Binding,
    act: &Action,
    running: bool,
) -> Result<(), ToolError> {
    let Some(src) = shell_line(binding, act, running)? else {
        return Ok(());
    };
    let mode = match &binding.mode {
        Mode::Wcgw => cmdpolicy::Mode::Wcgw,
        Mode::Architect => cmdpolicy::Mode::Architect,
        Mode::CodeWriter {
            allowed_commands,
            allowed_globs,
        } => cmdpolicy::Mode::CodeWriter {
            allowed_commands,
            allowed_globs,
            workspace: &binding.workspace_root,
        },
    };
    cmdpolicy::check(src, &mode).map_err(|d| ToolError::CommandDenied { reason: d.reason })
}
