//! MCP Tasks at the protocol surface: which `tools/call` becomes a task, and `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel` and `tasks/update`. The threads that finish
//! tasks, and their persistence, are in `task_runner`.
//!
//! Invariant: every lookup is by (principal, task ID); another principal's ID answers
//! exactly like an ID that never existed.
//! Invariant: a task result is the `tools/call` result the request would have answered
//! inline, envelope included.

use super::context::{CallContext, OwnedCall, Shared};
use super::protocol::META_CLIENT_CAPABILITIES;
use super::task_runner;
use crate::deadline::Deadline;
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::tasks::store::{CreateError, Outcome, RESULT_WAIT, Status, Task, TaskStore};
use crate::tasks::wire::{self, Dialect, RELATED_TASK};
use crate::tools::bash::{self, Step, TaskMode};
use crate::tools::catalog::task_capable;
use crate::tools::dispatch;
use crate::tools::envelope::ToolOutput;
use crate::tools::name::ToolName;
use crate::tools::usage_facts::Route;
use crate::usage::CallTrace;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Tasks per `tasks/list` page.
const PAGE: usize = 100;
/// Without tasks, `until_complete` waits inline at most this long.
const SYNC_FALLBACK: Duration =
    Duration::from_secs(crate::tools::bash::action::MAX_WAIT_SECONDS as u64);

/// How a `tools/call` asked for (or allowed) a task.
pub enum Augment {
    None,
    /// 2025-11-25: `params.task` is present; the answer must be a task.
    Requested {
        ttl_ms: Option<u64>,
    },
    /// 2026-07-28: the client declared the tasks extension; the server decides.
    Offered,
}

pub fn augmentation(dialect: Dialect, params: &Map<String, Value>) -> Result<Augment, RpcError> {
    match dialect {
        Dialect::Modern if declares_extension(params) => Ok(Augment::Offered),
        Dialect::Modern => Ok(Augment::None),
        Dialect::Handshake => match params.get("task") {
            None | Some(Value::Null) => Ok(Augment::None),
            Some(Value::Object(t)) => match t.get("ttl") {
                None | Some(Value::Null) => Ok(Augment::Requested { ttl_ms: None }),
                Some(v) => v
                    .as_u64()
                    .map(|ttl| Augment::Requested { ttl_ms: Some(ttl) })
                    .ok_or_else(|| {
                        RpcError::invalid_params("params.task.ttl must be a non-negative integer")
                    }),
            },
            Some(_) => Err(RpcError::invalid_params("params.task must be an object")),
        },
    }
}

/// Whether this request's `_meta` declares the tasks extension (2026-07-28).
fn declares_extension(params: &Map<String, Value>) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(wire::EXTENSION))
        .is_some()
}

/// A task-capable call's answer and, for its usage record, how it was routed.
pub struct Routed {
    /// What goes on the wire: a Task handle, or the tool result answered inline.
    pub answer: Value,
    /// The tool's output when the call was answered inline.
    pub out: Option<Box<ToolOutput>>,
    pub route: Route,
}

impl Routed {
    fn task(answer: Value, route: Route) -> Routed {
        Routed {
            answer,
            out: None,
            route,
        }
    }

    fn inline(out: ToolOutput, route: Route) -> Routed {
        Routed {
            answer: out.to_result(),
            out: Some(Box::new(out)),
            route,
        }
    }
}

/// One `tools/call` that may become a task.
pub(super) struct Call<'a> {
    shared: &'a Arc<Shared>,
    store: &'a Arc<TaskStore>,
    ctx: &'a CallContext<'a>,
    name: String,
    args: Map<String, Value>,
    /// The call's phase trace, for the work done before the answer (a runner thread's
    /// work is not traced).
    trace: &'a CallTrace,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        shared: &'a Arc<Shared>,
        store: &'a Arc<TaskStore>,
        ctx: &'a CallContext<'a>,
        name: String,
        args: Map<String, Value>,
        trace: &'a CallTrace,
    ) -> Call<'a> {
        Call {
            shared,
            store,
            ctx,
            name,
            args,
            trace,
        }
    }

    /// 2025-11-25: the client asked for a task, so the answer is one (or an error).
    pub fn requested(self, ttl_ms: Option<u64>) -> Result<Routed, RpcError> {
        let tool = ToolName::parse(&self.name)
            .filter(|t| t.implemented() && self.ctx.policy.permits(*t) && task_capable(*t))
            .ok_or_else(|| {
                let shown: String = self.name.chars().take(128).collect();
                RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("tool {shown:?} does not support task-augmented execution"),
                )
            })?;
        let (task, slot) = self
            .store
            .create(self.ctx.principal, tool.as_str(), ttl_ms, true)
            .map_err(busy)?;
        task_runner::save(self.shared, &task);
        let owned = OwnedCall::of(self.ctx);
        if tool == ToolName::BashCommand && bash::followable(&self.args) {
            // The command starts now, so the task records what it follows before the
            // handle is answered (a restarted adapter can always take over).
            let tctx = self.shared.tool_ctx(self.ctx, self.trace);
            let out = match bash::start(&tctx, &self.args, TaskMode::Requested) {
                Ok(Step::Running(pending)) => {
                    task_runner::follow_in_background(
                        self.shared,
                        self.store,
                        &task,
                        slot,
                        owned,
                        pending,
                    )?;
                    return Ok(Routed::task(
                        wire::created(&task, Dialect::Handshake),
                        Route::Requested,
                    ));
                }
                Ok(Step::Done(out)) => out,
                Err(e) => e.into_output(tool),
            };
            drop(slot);
            task_runner::complete(self.shared, self.store, &task, out);
            return Ok(Routed::task(
                wire::created(&task, Dialect::Handshake),
                Route::Requested,
            ));
        }
        let args = self.args;
        // Everything else (edits with their checks, non-foreground shell actions) runs whole
        // on the runner, exactly as inline.
        task_runner::spawn(
            self.shared,
            self.store,
            &task,
            slot,
            owned,
            move |tctx, _| dispatch(tctx, tool.as_str(), &args),
        )?;
        Ok(Routed::task(
            wire::created(&task, Dialect::Handshake),
            Route::Requested,
        ))
    }

    /// 2026-07-28: the client accepts tasks; a foreground shell command that outlives its
    /// inline wait (or runs under `until_complete`) becomes one, everything else answers
    /// inline as usual.
    pub fn offered(self) -> Routed {
        let call = self.ctx;
        let tctx = self.shared.tool_ctx(call, self.trace);
        let is_bash = ToolName::parse(&self.name) == Some(ToolName::BashCommand)
            && call.policy.permits(ToolName::BashCommand);
        if !is_bash {
            let out = dispatch(&tctx, &self.name, &self.args);
            return Routed::inline(out, Route::Synchronous);
        }
        let pending = match bash::start(&tctx, &self.args, TaskMode::Offered) {
            Ok(Step::Done(out)) => return Routed::inline(out, Route::Offered),
            Ok(Step::Running(p)) => p,
            Err(e) => {
                let out = e.into_output(ToolName::BashCommand);
                return Routed::inline(out, Route::Offered);
            }
        };
        let until_complete =
            self.args.get("wait_policy").and_then(Value::as_str) == Some("until_complete");
        let (task, slot) = match self.store.create(call.principal, &self.name, None, false) {
            Ok(created) => created,
            Err(e) => {
                // No task: the documented synchronous fallback (or the running result).
                log::info!("task not created ({e:?}); answering inline");
                let out = if until_complete {
                    pending.finish(
                        &tctx,
                        Deadline::after("task fallback", SYNC_FALLBACK),
                        &|| false,
                        self.shared.task_cancel_check,
                    )
                } else {
                    pending.render(&tctx)
                };
                return Routed::inline(out, Route::OfferedFallback);
            }
        };
        let spawned = task_runner::follow_in_background(
            self.shared,
            self.store,
            &task,
            slot,
            OwnedCall::of(call),
            pending,
        );
        if let Err(e) = spawned {
            // The task already ended `failed` with this error; its handle says so.
            log::error!("{}", e.message);
        }
        Routed::task(wire::created(&task, Dialect::Modern), Route::Offered)
    }
}

fn busy(e: CreateError) -> RpcError {
    RpcError::new(
        ErrorCode::InternalError,
        format!("cannot start a task: too many tasks are working ({e:?}); retry later"),
    )
    .with_data(json!({"retryAfterMs": 1000}))
}

/// Serve one `tasks/*` method.
pub(super) fn method(
    shared: &Arc<Shared>,
    store: &Arc<TaskStore>,
    ctx: &CallContext,
    dialect: Dialect,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let known = [
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
    ];
    if !known.contains(&method) {
        return Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!(
                "method not found: {}",
                method.chars().take(64).collect::<String>()
            ),
        ));
    }
    if dialect == Dialect::Modern && !declares_extension(params) {
        return Err(RpcError::new(
            ErrorCode::MissingClientCapability,
            format!("{method} needs the {} extension", wire::EXTENSION),
        )
        .with_data(json!({"requiredCapabilities": {"extensions": {wire::EXTENSION: {}}}})));
    }
    if method == "tasks/list" {
        return list(shared, store, ctx, dialect, params);
    }
    let id = params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("{method}: taskId must be a string")))?;
    let task = task_runner::lookup(shared, store, ctx, id).ok_or_else(|| {
        RpcError::invalid_params("Failed to retrieve task: task not found (or expired)")
    })?;
    match method {
        "tasks/get" => Ok(wire::detailed(&task, dialect)),
        "tasks/result" => result(&task),
        "tasks/cancel" => match (cancel(shared, &task), dialect) {
            (Ok(()), Dialect::Handshake) => Ok(wire::detailed(&task, dialect)),
            (Err(s), Dialect::Handshake) => Err(RpcError::invalid_params(format!(
                "Cannot cancel task: already in terminal status {:?}",
                s.as_str()
            ))),
            // 2026-07-28: an acknowledgement; a task that already ended keeps its outcome.
            (_, Dialect::Modern) => Ok(json!({})),
        },
        // No winx task ever asks for input, so no response key is outstanding: the
        // responses are acknowledged and ignored, as the extension prescribes.
        _ => Ok(json!({})),
    }
}

/// 2025-11-25 `tasks/result`: block until the task ends, then answer exactly what the
/// `tools/call` would have answered.
fn result(task: &Task) -> Result<Value, RpcError> {
    if task.foreign && !task.has_outcome() {
        return Err(RpcError::new(
            ErrorCode::InternalError,
            format!(
                "task {} is still working in another server process (pid {}); poll tasks/get",
                task.id, task.owner.0
            ),
        )
        .with_data(
            json!({"taskId": task.id, "status": task.status().as_str(), "retryable": true}),
        ));
    }
    let finished = task.wait_finished(Deadline::after("tasks/result", RESULT_WAIT));
    let st = task.state();
    match st.outcome {
        Some(Outcome::Result(mut r)) => {
            r["_meta"] = json!({RELATED_TASK: {"taskId": task.id}});
            Ok(r)
        }
        Some(Outcome::Error(e)) => Err(e),
        None => Err(RpcError::new(
            ErrorCode::InternalError,
            format!(
                "task {} is still {} after {} s{}; call tasks/result again",
                task.id,
                st.status.as_str(),
                RESULT_WAIT.as_secs(),
                if finished {
                    ""
                } else {
                    " (its work has not ended)"
                }
            ),
        )
        .with_data(json!({"taskId": task.id, "status": st.status.as_str(), "retryable": true}))),
    }
}

/// Cancel, and record the cancellation. A task another live process runs is cancelled in
/// the store only (its runner picks it up), and only while it is still working there.
fn cancel(shared: &Shared, task: &Task) -> Result<(), Status> {
    if task.foreign {
        return match task_runner::cancel_in_store(shared, task) {
            // The answer shows the copy as the store now has it.
            true => task.cancel(),
            false => Err(task.status()),
        };
    }
    task.cancel()?;
    task_runner::save(shared, task);
    Ok(())
}

fn list(
    shared: &Arc<Shared>,
    store: &Arc<TaskStore>,
    ctx: &CallContext,
    dialect: Dialect,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let principal = ctx.principal;
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => c
            .parse::<usize>()
            .map_err(|_| RpcError::invalid_params("tasks/list: invalid cursor"))?,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "tasks/list: cursor must be a string",
            ));
        }
    };
    // Tasks written by earlier processes join this process's table (and get a runner);
    // those another live process runs are listed from fresh copies.
    let mut foreign = Vec::new();
    for id in task_runner::stored_ids(shared, principal) {
        if !store.contains(principal, &id)
            && let Some(t) = task_runner::lookup(shared, store, ctx, &id)
            && t.foreign
        {
            foreign.push(t);
        }
    }
    let mut all = store.list(principal);
    all.extend(foreign);
    all.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
    let page: Vec<Value> = all
        .iter()
        .skip(start)
        .take(PAGE)
        .map(|t| Value::Object(wire::fields(t, &t.state(), dialect)))
        .collect();
    let mut out = json!({"tasks": page});
    if start + PAGE < all.len() {
        out["nextCursor"] = json!((start + PAGE).to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::jsonrpc::{Id, Request};
    use crate::tools::policy::{Profile, ToolPolicy};
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[ -~]{0,40}".prop_map(Value::String),
            Just(json!("task_00000000000000000000000000000000")),
            Just(json!({wire::EXTENSION: {}})),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("taskId".to_string()),
                        Just("cursor".to_string()),
                        Just("ttl".to_string()),
                        Just("extensions".to_string()),
                        Just(META_CLIENT_CAPABILITIES.to_string()),
                        "[a-z_]{1,6}",
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
        /// Any params reach a structured answer: never a panic, never an unexpected code.
        #[test]
        fn task_methods_never_panic(
            name in prop_oneof![
                Just("tasks/get"), Just("tasks/result"), Just("tasks/list"),
                Just("tasks/cancel"), Just("tasks/update"), Just("tasks/other"),
            ],
            params in proptest::collection::btree_map(
                prop_oneof![Just("taskId".to_string()), Just("cursor".to_string()),
                            Just("task".to_string()), Just("_meta".to_string())],
                arb_value(), 0..4),
            modern in any::<bool>(),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let state = tmp.path().join("state").to_string_lossy().into_owned();
            let config = crate::config::Config::build(
                &Default::default(),
                vec![("WINX_STATE_DIR".into(), state), ("WINX_RUNTIME".into(), "embedded".into())],
            ).unwrap();
            let server = super::super::Server::new(&config);
            let policy = ToolPolicy::profile(Profile::Full);
            let ctx = CallContext { principal: "p", policy: &policy, origin: Default::default(),
                affinity: Default::default(), conversation: None };
            let params: Map<String, Value> = params.into_iter().collect();
            let dialect = if modern { Dialect::Modern } else { Dialect::Handshake };
            let _ = augmentation(dialect, &params);
            // No task exists, so no lookup succeeds and `tasks/result` never blocks.
            let req = Request { id: Id::Num(1), method: name.to_string(), params };
            match server.handle(&ctx, req).outcome {
                Ok(v) => prop_assert!(v.is_object()),
                // -32022: a `_meta` naming an unknown protocol version.
                Err(e) => prop_assert!(
                    [-32021, -32022, -32602, -32601].contains(&e.code.code()), "{e:?}"
                ),
            }
        }
    }
}
