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
pub mod pool;
pub mod progress;
pub mod stdio;
pub mod writer;

/// Logs go to stderr only: stdout carries protocol bytes and nothing else.
pub fn init_logging(level: log::LevelFilter) {
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
}

/// The stdio handler: one local principal with the configured tool policy.
pub struct LocalHandler {
    pub server: Arc<Server>,
    pub config: Arc<Config>,
}

impl Handler for LocalHandler {
    fn handle(&self, req: Request) -> Response {
        let ctx = CallContext {
            principal: &self.config.principal,
            policy: &self.config.policy,
            affinity: crate::session::Affinity::Workspace,
            conversation: None,
        };
        self.server.handle(&ctx, req)
    }

    fn on_notification(&self, n: &Notification) {
        self.server.on_notification(n);
    }
}
