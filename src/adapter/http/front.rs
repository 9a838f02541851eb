//! Admission of one request from its head alone: route, rate limit, drain state, Host and
//! Origin, authentication, method and media types, the declared body size. An admitted
//! POST goes on to `exchange.rs`; everything else is answered here.
//!
//! Invariant: admission reads no body and takes no dispatch slot; a rejected request's
//! body is never buffered — up to 64 KiB declared by length is skipped so the connection
//! stays usable, anything else is answered with `Connection: close`.

use super::Shared;
use super::conn::Conn;
use super::exchange::{self, Admitted};
use super::record::{self, Exchange};
use super::routes::{self, Framing, Reply, Route};
use super::wire::{BodyFraming, Head};
use crate::config::http::Principal;
use crate::deadline::{Deadline, Stopwatch};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Serve one request whose head has been read; returns whether the connection stays open.
pub fn serve(shared: &Arc<Shared>, conn: &mut Conn, head: Head) -> bool {
    let clock = Stopwatch::start();
    let head_only = head.method() == "HEAD";
    let framing = match head.body() {
        Ok(f) => f,
        Err(why) => {
            conn.finish(
                &routes::plain(400, &format!("bad request: {why}")),
                head_only,
            );
            return false;
        }
    };
    let (route, query) = routes::route(head.target());
    // Why an `/mcp` request was refused here, and the principal if it authenticated.
    let mut refused: Option<(&'static str, Option<Arc<Principal>>)> = None;
    let reply = match route {
        Route::Healthz => probe(&head, routes::plain(200, "ok")),
        Route::Readyz if shared.draining.load(Ordering::SeqCst) => {
            probe(&head, routes::plain(503, "draining"))
        }
        Route::Readyz => probe(&head, routes::plain(200, "ready")),
        Route::NotFound if rate_ok(shared, conn.peer.ip()) => routes::plain(404, "not found"),
        Route::NotFound => routes::retry_later(429, "too many requests"),
        Route::Mcp => match admit(shared, &head, conn.peer.ip(), query, framing) {
            Verdict::Reject(reason, principal, reply) => {
                refused = Some((reason, principal));
                reply
            }
            Verdict::Unauthorized => {
                // Slow for a guesser, on this connection's own thread only.
                let delay = Deadline::after("unauthorized delay", super::UNAUTHORIZED_DELAY);
                let _ = delay.receiver().recv();
                refused = Some(("auth", None));
                routes::unauthorized()
            }
            Verdict::EndSession(p) => {
                let reply = end_session(shared, &head, &p.name);
                if reply.status == 404 {
                    refused = Some(("foreign_session", Some(p)));
                }
                reply
            }
            Verdict::Admit(principal, rpc_framing) => {
                let request_id = shared.usage.new_id('r');
                let a = Admitted {
                    principal: principal.clone(),
                    framing: rpc_framing,
                    answering: match shared.answering.try_acquire() {
                        Some(p) => p,
                        // The answering count has no limit of its own; this cannot happen.
                        None => {
                            let reply = routes::retry_later(503, "too many requests in flight");
                            return conn.answer(&reply, false, false);
                        }
                    },
                    deadline: Deadline::after("request timeout", shared.cfg.request_timeout),
                    request_id: request_id.clone(),
                };
                let served = exchange::run(shared, conn, &head, framing, a);
                let at = Exchange {
                    clock: &clock,
                    peer: conn.peer.ip(),
                    method: head.method(),
                    request_id,
                };
                record::served(shared, at, &principal.name, &served);
                return served.open;
            }
        },
    };
    // A large or chunked rejected body stays unread, and its connection closes.
    let keep = head.keep_alive() && conn.discard_small_body(framing, head.expects_continue());
    let open = conn.answer(&reply, head_only, keep);
    if let Some((reason, principal)) = refused {
        let at = Exchange {
            clock: &clock,
            peer: conn.peer.ip(),
            method: head.method(),
            request_id: shared.usage.new_id('r'),
        };
        let name = principal.as_ref().map(|p| p.name.as_str());
        record::rejected(shared, at, reason, reply.status, name);
    }
    open
}

fn probe(head: &Head, reply: Reply) -> Reply {
    match head.method() {
        "GET" | "HEAD" => reply,
        _ => routes::method_not_allowed("GET, HEAD"),
    }
}

fn rate_ok(shared: &Shared, ip: IpAddr) -> bool {
    shared.rate.allow(ip)
}

/// What admission decided for an `/mcp` request.
enum Verdict {
    Admit(Arc<Principal>, Framing),
    /// Refused: why (for the usage log), who (when known), and the answer.
    Reject(&'static str, Option<Arc<Principal>>, Reply),
    Unauthorized,
    EndSession(Arc<Principal>),
}

/// The checks, in the order of docs/architecture.md ("Order of checks on /mcp").
fn admit(
    shared: &Shared,
    rq: &Head,
    ip: IpAddr,
    query: Option<&str>,
    body: BodyFraming,
) -> Verdict {
    let cfg = &shared.cfg;
    let reject = |reason: &'static str, reply: Reply| Verdict::Reject(reason, None, reply);
    if !rate_ok(shared, ip) {
        let reply = routes::retry_later(429, "too many requests from this address");
        return reject("rate_limit", reply);
    }
    if shared.draining.load(Ordering::SeqCst) {
        return reject(
            "draining",
            routes::retry_later(503, "server is shutting down"),
        );
    }
    // Exactly one non-empty Host: with two, a proxy and this server may each check a
    // different one.
    let bad = |text: &str| reject("bad_request", routes::plain(400, text));
    match (rq.count("Host"), rq.header("Host").map(str::trim)) {
        (0, _) => return bad("missing Host header"),
        (1, Some(h)) if !routes::host_is_empty(h) => {
            if !routes::host_allowed(h, cfg.bind, &cfg.allowed_hosts) {
                let reply = routes::plain(421, "Host not allowed; see --allowed-host");
                return reject("host", reply);
            }
        }
        (1, _) => return bad("empty Host header"),
        _ => return bad("more than one Host header"),
    }
    if rq.count("Origin") > 1 {
        return bad("more than one Origin header");
    }
    if let Some(o) = rq.header("Origin")
        && !routes::origin_allowed(o, cfg.bind, &cfg.allowed_hosts)
    {
        let reply = routes::plain(
            403,
            "Origin not allowed; another local port is another site (see --allowed-host)",
        );
        return reject("origin", reply);
    }
    let Some(principal) = shared.auth.authenticate(rq.header("Authorization"), query) else {
        return Verdict::Unauthorized;
    };
    let after_auth = |reason, reply| Verdict::Reject(reason, Some(principal.clone()), reply);
    match rq.method() {
        "POST" => {}
        "DELETE" => return Verdict::EndSession(principal),
        // No server-initiated stream (GET): every answer travels on its POST.
        _ => return after_auth("method", routes::method_not_allowed("POST, DELETE")),
    }
    if !routes::content_type_ok(rq.header("Content-Type")) {
        let reply = routes::plain(415, "Content-Type must be application/json");
        return after_auth("media_type", reply);
    }
    let Some(framing) = routes::framing(rq.header("Accept")) else {
        let reply = routes::plain(
            406,
            "Accept must allow application/json or text/event-stream",
        );
        return after_auth("media_type", reply);
    };
    if let BodyFraming::Length(n) = body
        && n > cfg.max_body_bytes as u64
    {
        let reply = routes::plain(413, "request body exceeds 64 MiB");
        return after_auth("too_large", reply);
    }
    Verdict::Admit(principal, framing)
}

fn end_session(shared: &Shared, rq: &Head, principal: &str) -> Reply {
    match rq.header(routes::SESSION_HEADER) {
        None => routes::plain(400, "missing Mcp-Session-Id header"),
        Some(id) if shared.sessions.end(id.trim(), principal) => routes::no_content(),
        Some(_) => routes::plain(404, "unknown or ended session"),
    }
}
