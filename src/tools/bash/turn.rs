//! `inspect` and `wait_for_turn`: turn recognition of the program running in the
//! session's foreground terminal (an agent TUI, an installer's prompt), from the guardian's
//! whole visible screen and its quiet time. Neither consumes the delivery cursor.
//!
//! `wait_for_turn` is event-driven: each `Watch` answers on new activity, and at most
//! `RECHECK` after the last one, because quiescence ("no output for 1.5 s") is itself a
//! signal the generic recognizer needs.

use super::TOOL;
use crate::deadline::Deadline;
use crate::ipc::GuardianClient;
use crate::shell::turn::{self, Choice, Detection, RecognitionInput, TurnState};
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, NextAction, Status, ToolOutput};
use crate::tools::error::{SessionPair, ToolError};
use crate::wire::guardian::Facts;
use serde_json::json;
use std::time::Duration;

/// Longest pause between two recognitions while waiting (quiet time must be re-read).
const RECHECK: Duration = Duration::from_millis(500);

/// The recognition of the foreground program now (`None` screen: nothing runs there).
pub fn detect(f: &Facts, choice: &Choice, ctx: &ToolContext) -> Result<Detection, String> {
    let rules = ctx.history.turn_rules();
    let input = match &f.screen {
        Some(s) => RecognitionInput {
            screen: &s.text,
            quiet_ms: s.quiet_ms,
            running: true,
        },
        None => RecognitionInput {
            screen: "",
            quiet_ms: 0,
            running: false,
        },
    };
    turn::recognize(choice, &input, rules.as_deref())
}

/// A running foreground answer also says whether the program awaits input or approval
/// (seed 003's `BashCommandState`), recognised by `auto` from the screen now. Nothing is
/// added when the screen cannot be read or the program is busy.
pub fn annotate(ctx: &ToolContext, client: &GuardianClient, out: &mut ToolOutput) {
    let Ok(f) = client.facts(0, Duration::ZERO, u64::MAX) else {
        return;
    };
    let Ok(d) = detect(&f, &Choice::Auto, ctx) else {
        return;
    };
    if matches!(
        d.state,
        TurnState::AwaitingInput | TurnState::AwaitingApproval
    ) {
        let state = crate::history::turn::state_name(d.state);
        out.envelope.data["state"]["turn_state"] = json!(state);
        out.envelope.data["turn_state"] = json!(state);
        out.text
            .push_str(&format!("turn: {state} (recognizer {})\n", d.recognizer));
    }
}

fn reached(d: &Detection) -> bool {
    matches!(
        d.state,
        TurnState::AwaitingInput | TurnState::AwaitingApproval | TurnState::Idle
    )
}

pub fn run(
    ctx: &ToolContext,
    client: &GuardianClient,
    pair: &SessionPair,
    wait: bool,
    recognizer: &str,
    budget: Duration,
) -> Result<ToolOutput, ToolError> {
    let choice = Choice::parse(recognizer).map_err(|detail| ToolError::InvalidInput { detail })?;
    let unavailable = |detail: String| ToolError::ShellUnavailable {
        detail,
        pair: pair.clone(),
    };
    let deadline = Deadline::after("wait_for_turn", if wait { budget } else { Duration::ZERO });
    let mut after = 0;
    loop {
        let pause = deadline.remaining().unwrap_or_default().min(RECHECK);
        let watch = if after == 0 { Duration::ZERO } else { pause };
        let f = client
            .facts(after, watch, u64::MAX)
            .map_err(|e| unavailable(e.to_string()))?;
        after = f.seq;
        let d = detect(&f, &choice, ctx).map_err(|detail| ToolError::InvalidInput { detail })?;
        if !wait || reached(&d) || deadline.expired() {
            return Ok(answer(pair, wait, &f, d));
        }
    }
}

fn answer(pair: &SessionPair, wait: bool, f: &Facts, d: Detection) -> ToolOutput {
    let state = crate::history::turn::state_name(d.state);
    let action = if wait { "wait_for_turn" } else { "inspect" };
    let screen = f.screen.as_ref().map(|s| s.text.as_str()).unwrap_or("");
    let tail: Vec<&str> = screen.lines().rev().take(12).collect();
    let mut text = format!(
        "turn: {state} ({}, {}{})\n",
        d.recognizer,
        d.source,
        d.rule
            .as_deref()
            .map(|r| format!(", rule {r}"))
            .unwrap_or_default()
    );
    if !tail.is_empty() {
        text.push_str("---\n");
        for l in tail.iter().rev() {
            text.push_str(l);
            text.push('\n');
        }
    }
    let still_busy = wait && !reached(&d);
    let data = json!({
        "action": action,
        "turn_state": state,
        "detection": d,
        "execution_id": f.screen.as_ref().map(|s| s.execution_id.clone()),
        "quiet_ms": f.screen.as_ref().map(|s| s.quiet_ms),
    });
    let mut envelope = Envelope::completed(TOOL, format!("BashCommand {action}: {state}"), data);
    if still_busy {
        envelope.status = Status::Running;
        envelope.retryable = true;
        envelope.next_action = Some(NextAction {
            tool: TOOL.as_str().into(),
            instruction: "The program is still working; wait for its turn again.".into(),
            arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root,
                              "action_json": {"wait_for_turn": true}}),
        });
    }
    ToolOutput {
        images: Vec::new(),
        text,
        envelope,
    }
}
