//! MCP over Streamable HTTP (seed 003): `winx-code-agent serve --http`.
//!
//! Threads and channels:
//! - `main` (`serve`): binds, starts accepting, then waits for SIGTERM/SIGINT/SIGHUP (handing
//!   free heap back whenever no connection is open: `listener::until_signal`) and drains.
//! - `http-accept` (`listener.rs`): one `http-conn` thread per connection, up to a cap.
//! - `http-conn-*` (`conn.rs`): one connection each — bounded head, admission
//!   (`front.rs`), bounded body, dispatch (`exchange.rs`), answer; keep-alive or close.
//! - `mcp-worker-N`: `mcp::Server::handle`, the same entry point stdio uses.
//! - `signals`: `adapter/signals.rs` (SIGTERM, SIGINT, SIGHUP as messages).
//!
//! Invariant: a request reaches `Server::handle` only after its head was bounded and rate
//! limit, Host/Origin, authentication and media-type checks passed, its body's memory was
//! granted from the shared body budget and the body read within the cap and the
//! deadline, and its principal got a dispatch slot — with a
//! `CallContext` naming that principal and its tool policy.

mod auth;
mod conn;
mod exchange;
mod front;
mod legacy;
mod limits;
mod listener;
mod record;
mod reply;
mod routes;
mod wire;

use crate::adapter::pool::Pool;
use crate::config::Config;
use crate::config::http::HttpConfig;
use crate::deadline::Deadline;
use crate::mcp::Server;
use crossbeam_channel::{Receiver, select};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use auth::UNAUTHORIZED_DELAY;

/// State shared by the connection threads.
pub(crate) struct Shared {
    cfg: HttpConfig,
    server: Arc<Server>,
    auth: auth::Authenticator,
    rate: limits::RateLimiter,
    slots: Arc<limits::Slots>,
    /// Memory for request bodies across connections, with each principal's share.
    bodies: Arc<limits::BodyBudget>,
    /// Admitted requests whose answer is not written yet (the drain waits for these; a
    /// dispatch slot is released earlier, before the answer is written).
    answering: Arc<limits::Concurrency>,
    sessions: legacy::Sessions,
    /// Open connections (the cap; the last to close lets the main thread trim memory).
    connections: listener::Connections,
    draining: AtomicBool,
    handlers: Pool,
    /// The usage log (`http_request`, `http_rejected`; tool calls record themselves).
    usage: crate::usage::Sink,
}

impl Shared {
    pub(crate) fn affinity(&self) -> crate::session::Affinity {
        self.cfg.affinity
    }
}

/// Why serving could not start or continue.
#[derive(Debug)]
pub enum ServeError {
    Bind(std::net::SocketAddr, std::io::Error),
    Start(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            ServeError::Start(e) => write!(f, "cannot start the HTTP server: {e}"),
        }
    }
}

/// Serve until SIGTERM, SIGINT or SIGHUP, then drain. Prints `listening on http://ADDR/mcp` on stderr
/// once the socket accepts (the readiness line tests and supervisors wait for).
pub fn serve(
    config: &Config,
    mut http: HttpConfig,
    usage: crate::usage::Sink,
) -> Result<(), ServeError> {
    let socket = listener::bind(http.bind).map_err(|e| ServeError::Bind(http.bind, e))?;
    let addr = socket.local_addr().map_err(ServeError::Start)?;
    // The port actually bound (`:0` picks one): Origin checks compare against it.
    http.bind = addr;
    let signals = super::signals::watch(&super::signals::STOP).map_err(ServeError::Start)?;
    let shared = Arc::new(shared(config, http, usage).map_err(ServeError::Start)?);
    listener::start(socket, shared.clone()).map_err(ServeError::Start)?;
    log::info!(
        "serving MCP over HTTP: {} principal(s) from the {}, {} concurrent requests ({} per \
         principal), {} MiB of request bodies at once, {} requests/min per address",
        shared.cfg.principals.len(),
        shared.cfg.credential_source,
        shared.cfg.max_concurrency,
        shared.slots.share(),
        shared.bodies.max() >> 20,
        shared.cfg.requests_per_minute
    );
    eprintln!("winx-code-agent listening on http://{addr}/mcp");
    let sig = listener::until_signal(&shared, &signals);
    log::info!("signal {sig} received; no longer admitting requests");
    shared.draining.store(true, Ordering::SeqCst);
    log::info!(
        "draining: {} request(s) in flight",
        shared.answering.active()
    );
    drain(&shared, &signals);
    // Connection threads may still hold `shared`, so the runtime is not dropped before the
    // process exits: its embedded sessions are ended here.
    shared.server.end_embedded_sessions();
    Ok(())
}

fn shared(config: &Config, http: HttpConfig, usage: crate::usage::Sink) -> std::io::Result<Shared> {
    let n = http.max_concurrency;
    Ok(Shared {
        auth: auth::Authenticator::new(http.principals.clone(), http.allow_query_token),
        rate: limits::RateLimiter::new(http.requests_per_minute),
        slots: limits::Slots::new(n, http.principals.len()),
        bodies: limits::BodyBudget::new(
            limits::BODY_BUDGET_BODIES * http.max_body_bytes,
            http.max_body_bytes,
            http.principals.len(),
        ),
        answering: limits::Concurrency::new(usize::MAX),
        sessions: legacy::Sessions::default(),
        connections: listener::Connections::default(),
        draining: AtomicBool::new(false),
        // Long shell waits park a handler, so there is one per dispatch slot.
        handlers: Pool::new("mcp-worker", n.max(config.workers), n)?,
        server: Arc::new(Server::with_usage(
            &Config {
                // Herdr bindings name HTTP principals `http:<name>`.
                herdr: crate::tools::agent::herdr::Setting {
                    http: true,
                    ..config.herdr.clone()
                },
                ..config.clone()
            },
            usage.clone(),
        )),
        usage,
        cfg: http,
    })
}

/// Keep answering (readiness and new MCP requests get 503) until in-flight requests are
/// done, the drain grace passes, or a second signal asks to stop now.
fn drain(shared: &Arc<Shared>, signals: &Receiver<i32>) {
    let grace = Deadline::after("drain grace", shared.cfg.drain_grace);
    let timeout = grace.receiver();
    while shared.answering.active() > 0 {
        select! {
            recv(shared.answering.idle_receiver()) -> _ => {}
            recv(timeout) -> _ => {
                log::warn!(
                    "{} expired with {} request(s) still running; exiting without them",
                    grace.name(),
                    shared.answering.active()
                );
                return;
            }
            recv(signals) -> _ => {
                log::warn!("second signal: exiting without waiting");
                return;
            }
        }
    }
}
