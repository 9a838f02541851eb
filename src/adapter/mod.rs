//! The adapter process (`winx-code-agent`): transports that feed one bounded worker pool
//! and one `mcp::Server`.
//!
//! Invariant: only this module and `jsonrpc/` touch transport bytes; everything below
//! `mcp::Server::handle` is transport-free.

use crate::config::Config;
use crate::jsonrpc::{Notification, Request, Response};
use crate::mcp::{CallContext, Server};
use std::sync::Arc;

pub mod http;
mod json_log;
pub mod pool;
pub mod progress;
pub mod signals;
pub mod stdio;
pub mod writer;

/// Logs go to stderr only: stdout carries protocol bytes and nothing else.
pub fn init_logging(level: log::LevelFilter) {
    init_logging_as(level, false);
}

/// As `init_logging`, as JSON lines when `json` (`WINX_LOG_FORMAT=json`).
pub fn init_logging_as(level: log::LevelFilter, json: bool) {
    if json {
        if log::set_boxed_logger(Box::new(json_log::JsonLogger { level })).is_ok() {
            log::set_max_level(level);
        }
        return;
    }
    let config = simplelog::ConfigBuilder::new()
        .set_thread_level(log::LevelFilter::Error)
        .set_target_level(log::LevelFilter::Off)
        .build();
    let _ = simplelog::WriteLogger::init(level, config, std::io::stderr());
}

/// What a transport needs from the layer above: answer a request, observe a notification.
/// Implemented by `LocalHandler` for stdio; tests plug in their own.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request) -> Response;
    fn on_notification(&self, n: &Notification);
    /// The transport is about to return and the process to exit: end what must not
    /// outlive it (the embedded runtime's sessions). Requests may still be running.
    fn before_exit(&self) {}
}

/// The stdio handler: one local principal with the configured tool policy, and the one
/// client on the other end of the pipe (remembered from its `initialize`).
pub struct LocalHandler {
    pub server: Arc<Server>,
    pub config: Arc<Config>,
    client: parking_lot::Mutex<Option<crate::mcp::origin::Client>>,
}

impl LocalHandler {
    pub fn new(server: Arc<Server>, config: Arc<Config>) -> LocalHandler {
        LocalHandler {
            server,
            config,
            client: parking_lot::Mutex::new(None),
        }
    }
}

impl Handler for LocalHandler {
    fn handle(&self, req: Request) -> Response {
        let usage = self.server.usage();
        // Remembered with or without a usage log: the client also sets wait defaults.
        if req.method == "initialize" {
            *self.client.lock() = Some(crate::mcp::origin::from_initialize(&req.params));
        }
        let origin = match req.method == "tools/call" {
            true => crate::mcp::origin::origin(
                "stdio",
                usage.new_id('r'),
                None,
                self.client.lock().as_ref(),
                &req.params,
            ),
            false => Default::default(),
        };
        let ctx = CallContext {
            principal: &self.config.principal,
            policy: &self.config.policy,
            affinity: crate::session::Affinity::Workspace,
            conversation: None,
            origin,
        };
        self.server.handle(&ctx, req)
    }

    fn on_notification(&self, n: &Notification) {
        self.server.on_notification(n);
    }

    fn before_exit(&self) {
        self.server.end_embedded_sessions();
    }
}
