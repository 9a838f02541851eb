//! Admission of one request, on the accept loop: route, rate limit, drain state, Host and
//! Origin, authentication, method and media types, the concurrency cap. Cheap checks
//! only: every answer is handed to the replier, every admitted POST to the `http-io` pool.
//!
//! Invariant: nothing here reads a body, waits, or writes to a socket.

use super::Shared;
use super::exchange::{self, Admitted};
use super::limits::Permit;
use super::routes::{self, Framing, Reply, Route};
use crate::config::http::Principal;
use crate::deadline::Deadline;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tiny_http::{Method, Request};

pub fn on_request(shared: &Arc<Shared>, rq: Request) {
    if routes::head_too_large(&rq) {
        let reply = routes::plain(431, "request header fields too large (64 KiB, 128 fields)");
        return shared.replier.send(rq, reply);
    }
    let (route, query) = routes::route(rq.url());
    let query = query.map(str::to_string);
    match route {
        Route::Healthz => probe(shared, rq, routes::plain(200, "ok")),
        Route::Readyz if shared.draining.load(Ordering::SeqCst) => {
            probe(shared, rq, routes::plain(503, "draining"))
        }
        Route::Readyz => probe(shared, rq, routes::plain(200, "ready")),
        Route::NotFound => {
            let reply = if rate_ok(shared, &rq) {
                routes::plain(404, "not found")
            } else {
                routes::retry_later(429, "too many requests")
            };
            shared.replier.send(rq, reply);
        }
        Route::Mcp => mcp(shared, rq, query.as_deref()),
    }
}

fn probe(shared: &Shared, rq: Request, reply: routes::Reply) {
    let reply = match rq.method() {
        Method::Get | Method::Head => reply,
        _ => routes::method_not_allowed("GET, HEAD"),
    };
    shared.replier.send(rq, reply);
}

fn rate_ok(shared: &Shared, rq: &Request) -> bool {
    // tiny_http always knows the TCP peer; without one there is nothing to key on.
    rq.remote_addr().is_none_or(|a| shared.rate.allow(a.ip()))
}

/// What admission decided for an `/mcp` request.
enum Verdict {
    Admit(Arc<Principal>, Framing, Permit),
    Reject(Reply),
    Unauthorized,
    EndSession(Arc<Principal>),
}

fn mcp(shared: &Arc<Shared>, rq: Request, query: Option<&str>) {
    let (principal, framing, permit) = match admit(shared, &rq, query) {
        Verdict::Admit(p, f, permit) => (p, f, permit),
        Verdict::Reject(reply) => return shared.replier.send(rq, reply),
        Verdict::Unauthorized => return shared.unauthorized(rq),
        Verdict::EndSession(p) => return end_session(shared, rq, &p.name),
    };
    // The answering count has no limit of its own; `None` cannot happen in practice.
    let Some(answering) = shared.answering.try_acquire() else {
        return shared
            .replier
            .send(rq, routes::retry_later(503, "too many requests in flight"));
    };
    let admitted = Admitted {
        rq,
        principal,
        framing,
        permit,
        answering,
        deadline: Deadline::after("request timeout", shared.cfg.request_timeout),
    };
    let job_shared = shared.clone();
    // The pool queues one job per permit, so this never waits; it fails only at exit.
    if shared
        .io
        .submit(Box::new(move || exchange::run(&job_shared, admitted)))
        .is_err()
    {
        log::error!("the http-io pool is gone; a request was dropped");
    }
}

/// The checks, in the order of docs/architecture.md ("Order of checks on /mcp").
fn admit(shared: &Arc<Shared>, rq: &Request, query: Option<&str>) -> Verdict {
    use Verdict::Reject;
    let cfg = &shared.cfg;
    if !rate_ok(shared, rq) {
        return Reject(routes::retry_later(
            429,
            "too many requests from this address",
        ));
    }
    if shared.draining.load(Ordering::SeqCst) {
        return Reject(routes::retry_later(503, "server is shutting down"));
    }
    match routes::header(rq, "Host") {
        None => return Reject(routes::plain(400, "missing Host header")),
        Some(h) if !routes::host_allowed(h, cfg.bind, &cfg.allowed_hosts) => {
            return Reject(routes::plain(421, "Host not allowed; see --allowed-host"));
        }
        Some(_) => {}
    }
    if let Some(o) = routes::header(rq, "Origin")
        && !routes::origin_allowed(o, cfg.bind, &cfg.allowed_hosts)
    {
        return Reject(routes::plain(403, "Origin not allowed"));
    }
    let Some(principal) = shared
        .auth
        .authenticate(routes::header(rq, "Authorization"), query)
    else {
        return Verdict::Unauthorized;
    };
    match rq.method() {
        Method::Post => {}
        Method::Delete => return Verdict::EndSession(principal),
        // No server-initiated stream (GET): every answer travels on its POST.
        _ => return Reject(routes::method_not_allowed("POST, DELETE")),
    }
    if !routes::content_type_ok(routes::header(rq, "Content-Type")) {
        return Reject(routes::plain(415, "Content-Type must be application/json"));
    }
    let Some(framing) = routes::framing(routes::header(rq, "Accept")) else {
        return Reject(routes::plain(
            406,
            "Accept must allow application/json or text/event-stream",
        ));
    };
    if rq.body_length().is_some_and(|n| n > cfg.max_body_bytes) {
        return Reject(routes::plain(413, "request body exceeds 64 MiB"));
    }
    match shared.concurrency.try_acquire() {
        Some(permit) => Verdict::Admit(principal, framing, permit),
        None => Reject(routes::retry_later(503, "too many concurrent requests")),
    }
}

fn end_session(shared: &Shared, rq: Request, principal: &str) {
    let reply = match routes::header(&rq, routes::SESSION_HEADER) {
        None => routes::plain(400, "missing Mcp-Session-Id header"),
        Some(id) if shared.sessions.end(id.trim(), principal) => routes::no_content(),
        Some(_) => routes::plain(404, "unknown or ended session"),
    };
    shared.replier.send(rq, reply);
}
