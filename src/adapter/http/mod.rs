//! MCP over Streamable HTTP (seed 003): `winx-code-agent serve --http`.
//!
//! Threads and channels:
//! - `main` (the accept loop, `serve`): selects over requests from the listener and
//!   SIGTERM/SIGINT; runs admission (`front.rs`) and hands every request on — it never
//!   reads a body or writes a socket.
//! - `http-forward` (one per tiny_http server) and `http-accept-keeper`: `listener.rs`.
//! - `http-io-N` (`--max-concurrency` of them): one admitted POST each (`exchange.rs`).
//! - `mcp-worker-N`: `mcp::Server::handle`, the same entry point stdio uses.
//! - `http-reply-N`, `http-drain`, `http-unauthorized-delay`: writing rejections
//!   (`reply.rs`, `delay.rs`); `http-signals`: `signals.rs`.
//!
//! Invariant: a request reaches `Server::handle` only after rate limit, Host/Origin,
//! authentication, concurrency and body checks passed, with a `CallContext` naming its
//! principal and that principal's tool policy.

mod auth;
mod delay;
mod exchange;
mod front;
mod legacy;
mod limits;
mod listener;
mod reply;
mod routes;
mod signals;

use crate::adapter::pool::Pool;
use crate::config::Config;
use crate::config::http::HttpConfig;
use crate::deadline::Deadline;
use crate::mcp::Server;
use crossbeam_channel::{Receiver, Sender, select};
use listener::Event;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use auth::UNAUTHORIZED_DELAY;

/// State shared by the accept loop and the workers.
impl Shared {
    pub(crate) fn affinity(&self) -> crate::session::Affinity {
        self.cfg.affinity
    }
}

pub(crate) struct Shared {
    cfg: HttpConfig,
    server: Arc<Server>,
    auth: auth::Authenticator,
    rate: limits::RateLimiter,
    concurrency: Arc<limits::Concurrency>,
    /// Admitted requests whose answer is not written yet (the drain waits for these; a
    /// concurrency permit is released earlier, before the answer is written).
    answering: Arc<limits::Concurrency>,
    sessions: legacy::Sessions,
    draining: AtomicBool,
    io: Pool,
    handlers: Pool,
    replier: reply::Replier,
    delayed: Sender<delay::Delayed>,
}

impl Shared {
    /// Answer 401 after `UNAUTHORIZED_DELAY`, without holding any worker meanwhile.
    fn unauthorized(&self, rq: tiny_http::Request) {
        let d = delay::Delayed {
            rq,
            reply: routes::unauthorized(),
            due: Deadline::after("unauthorized delay", UNAUTHORIZED_DELAY),
        };
        if let Err(e) = self.delayed.try_send(d) {
            let d = e.into_inner();
            self.replier.send(d.rq, d.reply);
        }
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

/// Serve until SIGTERM/SIGINT, then drain. Prints `listening on http://ADDR/mcp` on stderr
/// once the socket accepts (the readiness line tests and supervisors wait for).
pub fn serve(config: &Config, http: HttpConfig) -> Result<(), ServeError> {
    let socket =
        listener::bind(http.bind, http.io_timeout).map_err(|e| ServeError::Bind(http.bind, e))?;
    let addr = socket.local_addr().map_err(ServeError::Start)?;
    let signals = signals::install().map_err(ServeError::Start)?;
    let shared = Arc::new(shared(config, http).map_err(ServeError::Start)?);
    let (mut listener, events) =
        listener::start(socket, shared.cfg.io_timeout).map_err(ServeError::Start)?;
    log::info!(
        "serving MCP over HTTP: {} principal(s) from the {}, {} concurrent requests, {} \
         requests/min per address",
        shared.cfg.principals.len(),
        shared.cfg.credential_source,
        shared.cfg.max_concurrency,
        shared.cfg.requests_per_minute
    );
    eprintln!("winx-code-agent listening on http://{addr}/mcp");
    accept_until_signal(&shared, &mut listener, &events, &signals);
    shared.draining.store(true, Ordering::SeqCst);
    log::info!(
        "draining: {} request(s) in flight",
        shared.answering.active()
    );
    drain(&shared, &mut listener, &events, &signals);
    listener.stop();
    Ok(())
}

fn shared(config: &Config, http: HttpConfig) -> std::io::Result<Shared> {
    let replier = reply::Replier::new()?;
    let delayed = delay::spawn(replier.clone())?;
    let n = http.max_concurrency;
    Ok(Shared {
        auth: auth::Authenticator::new(http.principals.clone(), http.allow_query_token),
        rate: limits::RateLimiter::new(http.requests_per_minute),
        concurrency: limits::Concurrency::new(n),
        answering: limits::Concurrency::new(usize::MAX),
        sessions: legacy::Sessions::default(),
        draining: AtomicBool::new(false),
        // One queue slot per permit: admission never waits on a full queue.
        io: Pool::new("http-io", n, n)?,
        // Long shell waits park a handler, so there is one per admitted request too.
        handlers: Pool::new("mcp-worker", n.max(config.workers), n)?,
        server: Arc::new(Server::new(config)),
        replier,
        delayed,
        cfg: http,
    })
}

fn on_event(shared: &Arc<Shared>, listener: &mut listener::Listener, ev: Event) {
    match ev {
        Event::Request(rq) => front::on_request(shared, rq),
        Event::AcceptStopped(e) => {
            log::warn!("the accept thread stopped ({e}); starting a new one");
            if let Err(e) = listener.restart() {
                log::error!("cannot restart accepting: {e}");
            }
        }
    }
}

fn accept_until_signal(
    shared: &Arc<Shared>,
    listener: &mut listener::Listener,
    events: &Receiver<Event>,
    signals: &Receiver<i32>,
) {
    loop {
        select! {
            recv(events) -> ev => match ev {
                Ok(ev) => on_event(shared, listener, ev),
                Err(_) => return,
            },
            recv(signals) -> sig => {
                log::info!("signal {} received; no longer admitting requests", sig.unwrap_or(0));
                return;
            }
        }
    }
}

/// Keep answering (readiness and new MCP requests get 503) until in-flight requests are
/// done, the drain grace passes, or a second signal asks to stop now.
fn drain(
    shared: &Arc<Shared>,
    listener: &mut listener::Listener,
    events: &Receiver<Event>,
    signals: &Receiver<i32>,
) {
    let grace = Deadline::after("drain grace", shared.cfg.drain_grace);
    let timeout = grace.receiver();
    while shared.answering.active() > 0 {
        select! {
            recv(events) -> ev => match ev {
                Ok(ev) => on_event(shared, listener, ev),
                Err(_) => return,
            },
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
