//! Task runners: the threads that finish tasks, writing every change to the state store,
//! and the take-over of tasks whose runner died with another adapter process.
//!
//! Invariant: at most one runner per task per process (`Task::claim_runner`), and every
//! runner holds a `RunnerSlot`, so working tasks stay within `WINX_MAX_TASKS`.

use super::context::{CallContext, OwnedCall, Shared};
use crate::deadline::{Deadline, unix_ms};
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::tasks::durable;
use crate::tasks::store::{CANCELLED_MESSAGE, Outcome, RunnerSlot, Status, Task, TaskStore};
use crate::tools::ToolContext;
use crate::tools::bash::task::Pending;
use crate::tools::envelope::{CalledTool, ToolOutput};
use crate::tools::error::ToolError;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Run `work` for `task` on its own thread; its result is stored and persisted, and the
/// slot is freed before the outcome becomes visible (a client that sees the task end can
/// start the next one at once). If the thread cannot start, the task fails visibly.
pub(super) fn spawn(
    shared: &Arc<Shared>,
    store: &Arc<TaskStore>,
    task: &Arc<Task>,
    slot: RunnerSlot,
    owned: OwnedCall,
    work: impl FnOnce(&ToolContext, &Arc<Task>) -> ToolOutput + Send + 'static,
) -> Result<(), RpcError> {
    let (sh, st, t) = (shared.clone(), store.clone(), task.clone());
    let spawned = std::thread::Builder::new()
        .name("task-runner".into())
        .spawn(move || {
            let call = owned.borrow();
            let tctx = sh.tool_ctx(&call, crate::usage::CallTrace::none());
            let out = work(&tctx, &t);
            drop(slot);
            finish(&sh, &st, &t, out.to_result());
        });
    spawned.map(|_| ()).map_err(|e| {
        let err = RpcError::new(
            ErrorCode::InternalError,
            format!("cannot start task {}: {e}", task.id),
        );
        store.finish(
            task,
            Outcome::Error(err.clone()),
            Status::Failed,
            err.message.clone(),
        );
        save(shared, task);
        err
    })
}

/// Record what `task` follows (before its handle is answered, so a restarted adapter can
/// always take over), then follow it on a runner thread.
pub(super) fn follow_in_background(
    shared: &Arc<Shared>,
    store: &Arc<TaskStore>,
    task: &Arc<Task>,
    slot: RunnerSlot,
    owned: OwnedCall,
    pending: Pending,
) -> Result<(), RpcError> {
    task.set_follow(pending.follow_info());
    save(shared, task);
    let sh = shared.clone();
    spawn(shared, store, task, slot, owned, move |tctx, t| {
        follow(&sh, t, tctx, pending)
    })
}

/// Follow a running shell command until it ends, the task's TTL, or cancellation.
pub(super) fn follow(
    shared: &Shared,
    task: &Arc<Task>,
    tctx: &ToolContext,
    pending: Pending,
) -> ToolOutput {
    task.set_interrupt(Box::new(pending.interrupter()));
    if task.status() == Status::Cancelled
        && let Some(interrupt) = task.take_interrupt()
    {
        // Cancelled before the interrupt was in place: deliver it now.
        interrupt();
    }
    let left = (task.created_ms + task.ttl_ms.min(i64::MAX as u64) as i64 - unix_ms()).max(0);
    let deadline = Deadline::after("task ttl", Duration::from_millis(left as u64));
    // Checked between waits: a cancel here, or one another process recorded in the store.
    let cancelled = || {
        if task.status() == Status::Cancelled {
            return true;
        }
        if cancelled_in_store(shared, task) {
            let _ = task.cancel();
            return true;
        }
        false
    };
    pending.finish(tctx, deadline, &cancelled, shared.task_cancel_check)
}

/// Record a cancel of a task another live process runs; false if it was no longer working.
pub(super) fn cancel_in_store(shared: &Shared, task: &Task) -> bool {
    db(shared)
        .and_then(|s| {
            s.task_cancel(&task.principal, &task.id, CANCELLED_MESSAGE, unix_ms())
                .ok()
        })
        .unwrap_or(false)
}

/// Whether another process recorded a cancel of this task in the state store.
fn cancelled_in_store(shared: &Shared, task: &Task) -> bool {
    db(shared)
        .and_then(|s| s.task_get(&task.principal, &task.id).ok().flatten())
        .is_some_and(|row| row.status == Status::Cancelled.as_str())
}

/// A task whose work ended before any runner was needed: store and persist its result.
pub(super) fn complete(shared: &Shared, store: &TaskStore, task: &Task, out: ToolOutput) {
    finish(shared, store, task, out.to_result());
}

/// Store a runner's result, durably before it is visible; its status follows the creating
/// era's rule for `isError`.
fn finish(shared: &Shared, store: &TaskStore, task: &Task, mut result: Value) {
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let message = result["structuredContent"]["message"]
        .as_str()
        .unwrap_or("done")
        .to_string();
    // The stored result is what the call would have answered in its era.
    if !task.legacy {
        result["resultType"] = json!("complete");
    }
    // 2025-11-25 counts a tool error as a failed task; 2026-07-28 keeps `failed` for
    // JSON-RPC errors only.
    let status = if is_error && task.legacy {
        Status::Failed
    } else {
        Status::Completed
    };
    store.finish_persisted(task, Outcome::Result(result), status, message, |st| {
        put_row(shared, durable::to_row_with(task, st.clone()), &task.id);
    });
}

/// Write the task's current state to the state store. Best effort: on failure the task
/// goes on in this process and the failure is logged.
pub(super) fn save(shared: &Shared, task: &Task) {
    put_row(shared, durable::to_row(task), &task.id);
}

/// The state store, if it can be opened (task persistence is best effort).
fn db(shared: &Shared) -> Option<Arc<crate::store::Store>> {
    shared.sessions().store().ok()
}

fn put_row(shared: &Shared, row: crate::store::tasks::TaskRow, id: &str) {
    let written = shared
        .sessions()
        .store()
        .map_err(|e| crate::tools::error::ToolError::from(e).message())
        .and_then(|s| s.task_put(&row, unix_ms()).map_err(|e| e.to_string()));
    if let Err(e) = written {
        log::warn!("task {id}: not persisted: {e}");
    }
}

/// The caller's task: from this process, else from the state store (written by an
/// earlier adapter process), in which case a runner here takes it over.
pub(super) fn lookup(
    shared: &Arc<Shared>,
    store: &Arc<TaskStore>,
    ctx: &CallContext,
    id: &str,
) -> Option<Arc<Task>> {
    let task = match store.get(ctx.principal, id) {
        Some(t) => t,
        // Held here but expired: gone.
        None if store.contains(ctx.principal, id) => return None,
        None => {
            let row = db(shared)?.task_get(ctx.principal, id).ok()??;
            let mut task = durable::from_row(row)?;
            let me = crate::process::this_process();
            let (pid, started) = task.owner;
            if !task.has_outcome() && task.owner != me && crate::process::is_running(pid, started) {
                // Another live process runs it: answer from a fresh copy each time, never
                // run it here.
                task.foreign = true;
                return Some(Arc::new(task));
            }
            if !task.has_outcome() {
                task.owner = me;
            }
            store.insert_restored(task);
            store.get(ctx.principal, id)?
        }
    };
    take_over(shared, store, ctx, &task);
    Some(task)
}

/// The caller's task IDs in the state store, newest first.
pub(super) fn stored_ids(shared: &Shared, principal: &str) -> Vec<String> {
    db(shared)
        .and_then(|s| s.task_ids(principal).ok())
        .unwrap_or_default()
}

/// Give a task without an outcome and without a runner in this process a runner: it
/// follows the recorded shell command, or reports the outcome as unknown when there is
/// nothing to follow. Without a free slot, a later lookup tries again.
fn take_over(shared: &Arc<Shared>, store: &Arc<TaskStore>, ctx: &CallContext, task: &Arc<Task>) {
    if task.foreign || task.has_outcome() || !task.claim_runner() {
        return;
    }
    let Some(slot) = store.reserve() else {
        task.release_runner();
        return;
    };
    log::info!("task {}: taking over from an earlier process", task.id);
    // The row now names this process as the owner.
    save(shared, task);
    let sh = shared.clone();
    let result = spawn(
        shared,
        store,
        task,
        slot,
        OwnedCall::of(ctx),
        move |tctx, t| {
            let followed = match t.follow() {
                Some(f) if t.tool == "BashCommand" => Pending::resume(tctx, &f),
                _ => Err(ToolError::TaskOutcomeUnknown {
                    detail: "the server restarted while this task was working".into(),
                    pair: None,
                }),
            };
            match followed {
                Ok(p) => follow(&sh, t, tctx, p),
                Err(e) => e.into_output(CalledTool::parse(&t.tool)),
            }
        },
    );
    if let Err(e) = result {
        log::warn!("task {}: take-over failed: {}", task.id, e.message);
    }
}
