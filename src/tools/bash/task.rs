//! Following a foreground command for an MCP Task: keep collecting its output until it
//! ends (or the task's deadline), then render one ordinary `BashCommand` result.
//!
//! Invariant: the result is rendered from the runtime's typed state, exactly as an inline
//! call would be; output collected across several waits is merged in journal order, and
//! anything that did not fit memory stays in the journal (the spill file names it).

use super::render;
use crate::deadline::Deadline;
use crate::runtime::GuardianClient;
use crate::tools::ToolContext;
use crate::tools::envelope::ToolOutput;
use crate::tools::error::{SessionPair, ToolError};
use crate::wire::guardian::{ActionResult, ProcessStatus, Request, Response, Wait};
use crossbeam_channel::{Receiver, Sender, bounded, select};
use serde_json::{Value, json};
use std::time::Duration;

/// Output kept in memory while following (the inline answer renders only this much of the end);
/// older bytes are counted and left in the journal.
const MAX_KEPT_BYTES: usize = 256 * 1024;
/// After a cancellation, how long the interrupted command may take to end.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A foreground command still running when its call returned.
pub struct Pending {
    key: String,
    pair: SessionPair,
    client: GuardianClient,
    action: &'static str,
    /// Deliveries of this execution's output, merged in journal order when rendering.
    parts: Vec<ActionResult>,
    /// The interrupt's own delivery: sending Ctrl-C also hands over undelivered output,
    /// which belongs in the result.
    interrupted_tx: Sender<Option<ActionResult>>,
    interrupted_rx: Receiver<Option<ActionResult>>,
}

impl Pending {
    pub fn new(
        key: String,
        pair: SessionPair,
        client: GuardianClient,
        action: &'static str,
        first: ActionResult,
    ) -> Pending {
        let (interrupted_tx, interrupted_rx) = bounded(1);
        Pending {
            key,
            pair,
            client,
            action,
            parts: vec![first],
            interrupted_tx,
            interrupted_rx,
        }
    }

    /// Where this command runs, for a process that takes the task over after a restart.
    pub fn follow_info(&self) -> Value {
        json!({
            "key": self.key,
            "thread_id": self.pair.thread_id,
            "workspace_root": self.pair.workspace_root,
            "execution_id": self.last().state.execution_id,
        })
    }

    /// Take over following a command from `follow_info` written by another process. The
    /// bytes that process already received count as omitted, so the spill file (built
    /// from the start of the execution) holds the whole output.
    pub fn resume(ctx: &ToolContext, follow: &Value) -> Result<Pending, ToolError> {
        let field = |k: &str| follow.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(key), Some(thread_id), Some(workspace_root), Some(exec)) = (
            field("key"),
            field("thread_id"),
            field("workspace_root"),
            field("execution_id"),
        ) else {
            return Err(ToolError::TaskOutcomeUnknown {
                detail: "the task does not say which command it follows".into(),
                pair: None,
            });
        };
        let pair = SessionPair {
            thread_id,
            workspace_root,
        };
        let unknown = |detail: &str, pair: &SessionPair| ToolError::TaskOutcomeUnknown {
            detail: detail.into(),
            pair: Some(pair.clone()),
        };
        let ensured = ctx.runtime.attach(&key).ok_or_else(|| {
            unknown(
                "the server restarted and the session's shell is gone",
                &pair,
            )
        })?;
        let req = Request::Status {
            bg_id: None,
            wait: Wait {
                timeout_ms: 0,
                settle_ms: None,
            },
        };
        match ensured.client.call(&req, Duration::from_secs(5)) {
            Ok(Response::Action(mut r)) if r.state.execution_id.as_deref() == Some(&exec) => {
                r.omitted_bytes = r.offset_start;
                Ok(Pending::new(key, pair, ensured.client, "command", r))
            }
            _ => Err(unknown(
                "the server restarted and the command's end was not observed; its output is \
                 in the session",
                &pair,
            )),
        }
    }

    fn last(&self) -> &ActionResult {
        self.parts
            .last()
            .expect("a pending command has its first delivery")
    }

    /// Interrupt the command (Ctrl-C), only while it is still the one running: a later
    /// command in the same shell is never touched.
    pub fn interrupter(&self) -> impl FnOnce() + Send + 'static {
        let client = self.client.clone();
        let exec = self.last().state.execution_id.clone();
        let tx = self.interrupted_tx.clone();
        move || {
            let ours = matches!(
                client.call(&Request::Snapshot, Duration::from_secs(5)),
                Ok(Response::Snapshot(s)) if s.running.is_some() && s.running == exec
            );
            let mut delivered = None;
            if ours {
                let req = Request::Input {
                    bytes: vec![0x03],
                    bg_id: None,
                    wait: Wait {
                        timeout_ms: 0,
                        settle_ms: None,
                    },
                };
                match client.call(&req, Duration::from_secs(5)) {
                    Ok(Response::Action(r)) if r.state.execution_id == exec => delivered = Some(r),
                    Ok(_) => {}
                    Err(e) => log::warn!("task cancel: interrupt failed: {e}"),
                }
            }
            let _ = tx.try_send(delivered);
        }
    }

    /// The result as it stands now (what an inline call would have answered).
    pub fn render(self, ctx: &ToolContext) -> ToolOutput {
        let whole = fold(self.parts);
        render::action(ctx, &self.key, &self.pair, self.action, whole)
    }

    /// Follow the command until it ends, `deadline` passes, or it was cancelled and did
    /// not end within the grace period; then render the whole result. Each wait on the
    /// guardian lasts at most `recheck` (`WINX_TASK_CANCEL_CHECK_MS`): `cancelled` (also a
    /// cancel another process recorded) is asked between waits.
    pub fn finish(
        mut self,
        ctx: &ToolContext,
        deadline: Deadline,
        cancelled: &dyn Fn() -> bool,
        recheck: Duration,
    ) -> ToolOutput {
        let exec = self.last().state.execution_id.clone();
        let mut grace: Option<Deadline> = None;
        while self.last().state.process_status == ProcessStatus::Running {
            if cancelled() && grace.is_none() {
                grace = Some(Deadline::after("task cancel grace", CANCEL_GRACE));
            }
            let limit = match grace {
                Some(g) => earliest(deadline, g),
                None => deadline,
            };
            let left = limit.remaining().unwrap_or(recheck).min(recheck);
            if left.is_zero() {
                break;
            }
            let req = Request::Status {
                bg_id: None,
                wait: Wait {
                    timeout_ms: left.as_millis() as u64,
                    settle_ms: None,
                },
            };
            match self.client.call(&req, left) {
                Ok(Response::Action(r)) if r.state.execution_id == exec => self.push(r),
                // Our command ended and its end was delivered elsewhere (a status_check by
                // the agent); what we hold is all we can report.
                Ok(Response::Action(_)) => break,
                Ok(other) => {
                    log::warn!("task follow: unexpected guardian answer {other:?}");
                    break;
                }
                Err(e) => {
                    return ToolError::ShellUnavailable {
                        detail: format!("lost the shell while following the command: {e}"),
                        pair: self.pair,
                    }
                    .into_output(super::TOOL);
                }
            }
        }
        if cancelled() {
            // The interrupt's delivery (if any) completes the output.
            let grace = Deadline::after("task interrupt delivery", CANCEL_GRACE);
            select! {
                recv(self.interrupted_rx) -> got => {
                    if let Ok(Some(r)) = got {
                        self.parts.push(r);
                    }
                }
                recv(grace.receiver()) -> _ => log::warn!("task cancel: no interrupt delivery"),
            }
        }
        self.render(ctx)
    }

    /// Keep a delivery; when the kept text grows large, fold what is held into one.
    fn push(&mut self, r: ActionResult) {
        self.parts.push(r);
        let held: usize = self.parts.iter().map(|p| p.output.len()).sum();
        if held > 2 * MAX_KEPT_BYTES {
            let whole = fold(std::mem::take(&mut self.parts));
            self.parts.push(whole);
        }
    }
}

/// Merge deliveries of one execution in journal order. On equal offsets a finished state
/// sorts last, so the final state wins.
fn fold(mut parts: Vec<ActionResult>) -> ActionResult {
    parts.sort_by_key(|p| {
        (
            p.offset_start,
            p.offset_end,
            p.state.process_status != ProcessStatus::Running,
        )
    });
    let mut it = parts.into_iter();
    let mut acc = it.next().expect("at least one delivery");
    for p in it {
        merge(&mut acc, p);
    }
    acc
}

fn earliest(a: Deadline, b: Deadline) -> Deadline {
    match (a.remaining(), b.remaining()) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

/// Append `next` (a later delivery of the same execution) to `acc`. A gap (bytes that left
/// the guardian's window) restarts the kept text; the kept text is capped at
/// `MAX_KEPT_BYTES` from the end. `offset_start - omitted_bytes` stays the start of the
/// whole range, which is what the spill file is built from.
pub fn merge(acc: &mut ActionResult, next: ActionResult) {
    let range_start = acc.offset_start - acc.omitted_bytes;
    if next.omitted_bytes > 0 || next.offset_start != acc.offset_end {
        acc.output = next.output;
        acc.offset_start = next.offset_start;
    } else {
        acc.output.push_str(&next.output);
    }
    if acc.output.len() > MAX_KEPT_BYTES {
        let mut cut = acc.output.len() - MAX_KEPT_BYTES;
        while !acc.output.is_char_boundary(cut) {
            cut += 1;
        }
        acc.output.drain(..cut);
        acc.offset_start += cut as u64;
    }
    acc.offset_start = acc.offset_start.max(range_start).min(next.offset_end);
    acc.omitted_bytes = acc.offset_start - range_start;
    acc.offset_end = next.offset_end;
    acc.state = next.state;
    if next.journal_path.is_some() {
        acc.journal_path = next.journal_path;
        acc.journal_offset = next.journal_offset;
    }
    acc.journal_error = next.journal_error.or(acc.journal_error.take());
    acc.secrets = next.secrets;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::guardian::CommandState;

    fn delivery(output: &str, start: u64, omitted: u64, running: bool) -> ActionResult {
        ActionResult {
            state: CommandState {
                process_status: if running {
                    ProcessStatus::Running
                } else {
                    ProcessStatus::Exited
                },
                exit_code: (!running).then_some(0),
                cwd: "/".into(),
                bg_command_id: None,
                elapsed_ms: 1,
                execution_id: Some("e1".into()),
            },
            output: output.into(),
            offset_start: start,
            offset_end: start + output.len() as u64,
            omitted_bytes: omitted,
            journal_path: Some("/j".into()),
            journal_offset: 0,
            journal_error: None,
            secrets: Default::default(),
        }
    }

    #[test]
    fn contiguous_deliveries_concatenate() {
        let mut acc = delivery("one\n", 0, 0, true);
        merge(&mut acc, delivery("two\n", 4, 0, false));
        assert_eq!(acc.output, "one\ntwo\n");
        assert_eq!(
            (acc.offset_start, acc.offset_end, acc.omitted_bytes),
            (0, 8, 0)
        );
        assert_eq!(acc.state.process_status, ProcessStatus::Exited);
    }

    #[test]
    fn a_gap_restarts_the_text_and_counts_what_is_missing() {
        let mut acc = delivery("one\n", 10, 10, true);
        merge(&mut acc, delivery("late\n", 100, 50, false));
        assert_eq!(acc.output, "late\n");
        // The range still starts at byte 0 of the journal.
        assert_eq!(acc.offset_start - acc.omitted_bytes, 0);
        assert_eq!(acc.omitted_bytes, 100);
        assert_eq!(acc.offset_end, 105);
    }

    #[test]
    fn out_of_order_deliveries_fold_in_journal_order() {
        // The interrupt took bytes 0..10 while the follower got 10..14 and the end.
        let first = delivery("", 0, 0, true);
        let late = delivery("^C\n", 10, 0, false);
        let interrupt = delivery("cancel-me\n", 0, 0, true);
        let whole = fold(vec![first, late, interrupt]);
        assert_eq!(whole.output, "cancel-me\n^C\n");
        assert_eq!(whole.omitted_bytes, 0);
        assert_eq!(whole.state.process_status, ProcessStatus::Exited);
    }

    #[test]
    fn kept_text_is_capped_from_the_end() {
        let big = "x".repeat(MAX_KEPT_BYTES);
        let mut acc = delivery(&big, 0, 0, true);
        merge(
            &mut acc,
            delivery("tail\n", MAX_KEPT_BYTES as u64, 0, false),
        );
        assert_eq!(acc.output.len(), MAX_KEPT_BYTES);
        assert!(acc.output.ends_with("tail\n"));
        assert_eq!(acc.omitted_bytes, 5);
        assert_eq!(acc.offset_start - acc.omitted_bytes, 0);
    }
}
