//! `Server::handle`: one JSON-RPC request in, one response out. Shared by every transport.

use super::call_log::CallLog;
use super::context::{CallContext, Shared};
use super::protocol::{self, META_SERVER_INFO};
use super::tasks::{self, Augment};
use super::{prompts, resources};
use crate::build_info;
use crate::config::Config;
use crate::jsonrpc::{ErrorCode, Notification, Request, Response, RpcError};
use crate::runtime::Runtime;
use crate::session::SessionService;
use crate::tasks::store::TaskStore;
use crate::tasks::wire::{self, Dialect};
use crate::tools::catalog;
use crate::tools::dispatch;
use serde_json::{Map, Value, json};
use std::sync::Arc;

pub const SERVER_NAME: &str = "winx-code-agent";

/// How long a client may cache `server/discover` and the lists (tools, prompts,
/// resources): each is fixed for the life of the process, and a restart starts a new
/// connection anyway.
pub const LIST_TTL_MS: u64 = 3_600_000;

/// A list result for `dialect`: stateless requests also get `ttlMs` and `cacheScope`.
fn list_result(mut list: Value, dialect: Dialect) -> Value {
    if let (Dialect::Modern, Value::Object(obj)) = (dialect, &mut list) {
        obj.insert("ttlMs".into(), json!(LIST_TTL_MS));
        obj.insert("cacheScope".into(), json!("private"));
    }
    list
}

/// The orchestration contract sent with the handshake (seed 003).
const INSTRUCTIONS: &str = "winx gives you a durable shell and file tools. Call Initialize once \
(type=first_call, workspace_root=<project>) and pass the returned thread_id and workspace_root \
unchanged on every later call. Use CodeMap before broad reads; batch related files in one \
ReadFiles; read before editing; compose related fail-fast checks with && in one BashCommand; \
never repeat a rejected call unchanged: follow the result's nextAction.";

pub struct Server {
    shared: Arc<Shared>,
    /// `tools` arrays by served tool set.
    catalogs: parking_lot::Mutex<std::collections::HashMap<String, Value>>,
    instructions: String,
    tasks: Arc<TaskStore>,
    usage: crate::usage::Sink,
}

impl Server {
    /// A server without a usage log.
    pub fn new(config: &Config) -> Server {
        Server::with_usage(config, crate::usage::Sink::off())
    }

    /// A server whose tool calls are recorded in `usage` (started once by the binary).
    pub fn with_usage(config: &Config, usage: crate::usage::Sink) -> Server {
        let mut instructions = INSTRUCTIONS.to_string();
        if let Some(extra) = &config.server_instructions {
            instructions.push_str("\n\n");
            instructions.push_str(extra);
        }
        Server {
            shared: Arc::new(Shared {
                sessions: SessionService::new(config.state_dir.clone(), config.session_states),
                states: crate::tools::state::SessionStates::new(config.session_states),
                allow_paths: config.allow_paths.clone(),
                read_parallelism: config.read_parallelism,
                task_cancel_check: config.task_cancel_check,
                runtime: Runtime::new(config.runtime.clone()),
                redact: config.redact,
                extra_instructions: config.server_instructions.clone(),
                history: crate::history::History::new(
                    config.state_dir.clone(),
                    config.redact,
                    config.history.clone(),
                ),
                herdr: config.herdr.clone(),
            }),
            catalogs: Default::default(),
            instructions,
            tasks: Arc::new(TaskStore::new(config.max_tasks)),
            usage,
        }
    }

    /// The usage log the transports record HTTP requests in.
    pub fn usage(&self) -> &crate::usage::Sink {
        &self.usage
    }

    /// End the embedded runtime's sessions: what a server does before its process exits
    /// (`Runtime::end_embedded_sessions`).
    pub fn end_embedded_sessions(&self) {
        self.shared.runtime.end_embedded_sessions();
    }

    pub fn sessions(&self) -> &SessionService {
        &self.shared.sessions
    }

    /// Answer one request. Era-specific fields go only to requests of the era that
    /// defines them: `resultType` (and `ttlMs`/`cacheScope` on lists) to stateless
    /// 2026-07-28 requests; a handshake-era client gets exactly its era's shapes (strict
    /// clients such as the TypeScript SDK refuse unknown keys, even on `ping`).
    pub fn handle(&self, ctx: &CallContext, req: Request) -> Response {
        let id = req.id.clone();
        match self.dispatch(ctx, req) {
            Ok((mut result, Dialect::Modern)) => {
                // A modern task handle already says `task`; every other result is complete.
                if let Value::Object(obj) = &mut result {
                    obj.entry("resultType").or_insert(json!("complete"));
                }
                Response::ok(id, result)
            }
            Ok((result, Dialect::Handshake)) => Response::ok(id, result),
            Err(e) => Response::err(Some(id), e),
        }
    }

    /// Notifications need no answer; the transport handles `notifications/cancelled`.
    pub fn on_notification(&self, n: &Notification) {
        log::debug!("notification {}", n.method);
    }

    fn dispatch(&self, ctx: &CallContext, req: Request) -> Result<(Value, Dialect), RpcError> {
        // `initialize` is the handshake itself and carries no stateless `_meta`.
        if req.method == "initialize" {
            return Ok((self.initialize(&req.params), Dialect::Handshake));
        }
        // Checked for every other method: a stateless request naming an unknown protocol
        // version is refused before anything runs.
        let era = protocol::request_era(&req.params)?;
        let dialect = match era {
            protocol::Era::Handshake => Dialect::Handshake,
            protocol::Era::Modern { .. } => Dialect::Modern,
        };
        let result = match req.method.as_str() {
            "server/discover" => self.discover(),
            "ping" => json!({}),
            "tools/list" => self.tools_list(ctx, dialect),
            "tools/call" => self.tools_call(ctx, dialect, req.params)?,
            "prompts/list" => list_result(prompts::list(), dialect),
            "prompts/get" => prompts::get(&self.shared, ctx, &req.params)?,
            "resources/list" => list_result(resources::list(), dialect),
            "resources/read" => resources::read(&req.params)?,
            m if m.starts_with("tasks/") => {
                tasks::method(&self.shared, &self.tasks, ctx, dialect, m, &req.params)?
            }
            other => {
                return Err(RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("method not found: {other}"),
                ));
            }
        };
        Ok((result, dialect))
    }

    fn server_info(&self) -> Value {
        json!({"name": SERVER_NAME, "title": "winx", "version": build_info::VERSION})
    }

    /// Tasks are advertised per era: a first-class capability in the handshake era, the
    /// `io.modelcontextprotocol/tasks` extension in the stateless one.
    fn capabilities(&self, dialect: Dialect) -> Value {
        match dialect {
            Dialect::Handshake => json!({
                "tools": {"listChanged": false},
                "prompts": {"listChanged": false},
                "resources": {"listChanged": false},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                "extensions": {protocol::COMPACT_BASH_EXTENSION: {}},
            }),
            Dialect::Modern => json!({
                "tools": {"listChanged": false},
                "prompts": {"listChanged": false},
                "resources": {"listChanged": false},
                "extensions": {wire::EXTENSION: {}, protocol::COMPACT_BASH_EXTENSION: {}},
            }),
        }
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        json!({
            "protocolVersion": protocol::negotiate_handshake(requested),
            "capabilities": self.capabilities(Dialect::Handshake),
            "serverInfo": self.server_info(),
            "instructions": self.instructions,
        })
    }

    fn discover(&self) -> Value {
        json!({
            "supportedVersions": protocol::supported_versions(),
            "capabilities": self.capabilities(Dialect::Modern),
            "instructions": self.instructions,
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: self.server_info()},
        })
    }

    /// The catalog is fixed per policy for the life of the process: build it once.
    fn tools_list(&self, ctx: &CallContext, dialect: Dialect) -> Value {
        let key: Vec<&str> = ctx.policy.served().map(|t| t.as_str()).collect();
        let key = key.join(",");
        let mut cache = self.catalogs.lock();
        let tools = cache
            .entry(key)
            .or_insert_with(|| Value::Array(ctx.policy.served().map(catalog::definition).collect()))
            .clone();
        list_result(json!({"tools": tools}), dialect)
    }

    fn tools_call(
        &self,
        ctx: &CallContext,
        dialect: Dialect,
        params: Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let name = params.get("name").and_then(Value::as_str);
        let log = CallLog::begin(&self.usage, ctx, name);
        let no_args = Map::new();
        match self.tool_call(ctx, dialect, params, &log) {
            Ok(Called::Result(args, out, result)) => {
                let out = *out;
                log.result(&args, &out, &result, self.shared.read_parallelism);
                Ok(result)
            }
            Ok(Called::Task(args, routed)) => {
                log.task(&args, &routed, self.shared.read_parallelism);
                Ok(routed.answer)
            }
            Err(e) => {
                log.rpc_error(&no_args);
                Err(e)
            }
        }
    }

    fn tool_call(
        &self,
        ctx: &CallContext,
        dialect: Dialect,
        mut params: Map<String, Value>,
        log: &CallLog,
    ) -> Result<Called, RpcError> {
        let name = match params.remove("name") {
            Some(Value::String(n)) => n,
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "tools/call: name must be a string",
                ));
            }
            None => return Err(RpcError::invalid_params("tools/call: missing name")),
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a,
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "tools/call: arguments must be an object",
                ));
            }
        };
        match tasks::augmentation(dialect, &params)? {
            Augment::None => {
                let tctx = self.shared.tool_ctx(ctx, &log.trace);
                let out = dispatch(&tctx, &name, &arguments);
                let result = {
                    let _finalising = log.trace.phase(crate::usage::Phase::Finalisation);
                    out.to_result()
                };
                Ok(Called::Result(arguments, Box::new(out), result))
            }
            Augment::Requested { ttl_ms } => {
                let call = tasks::Call::new(
                    &self.shared,
                    &self.tasks,
                    ctx,
                    name,
                    arguments.clone(),
                    &log.trace,
                );
                Ok(Called::Task(arguments, call.requested(ttl_ms)?))
            }
            Augment::Offered => {
                let call = tasks::Call::new(
                    &self.shared,
                    &self.tasks,
                    ctx,
                    name,
                    arguments.clone(),
                    &log.trace,
                );
                Ok(Called::Task(arguments, call.offered()))
            }
        }
    }
}

/// How a `tools/call` ended, for its usage record.
enum Called {
    /// The tool ran inline: its arguments, output and the result sent.
    Result(
        Map<String, Value>,
        Box<crate::tools::envelope::ToolOutput>,
        Value,
    ),
    /// Handed to a task (or answered through one): the arguments, the answer and its route.
    Task(Map<String, Value>, tasks::Routed),
}
