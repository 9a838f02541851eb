//! The HTTP transport's usage events: `http_request` for an admitted `/mcp` request once
//! it is answered, `http_rejected` for one refused on the way (auth, rate limit,
//! concurrency, another principal's or an unknown session, …). The `request_id` of an
//! admitted request is the one its `tool_call` carries, so a report can subtract the
//! tool's duration from the request's and see the adapter's overhead.
//!
//! Invariant: no URL, header value, body or token is written: the peer's IP address, a
//! closed method name, the status, the duration and server-made or hashed ids only.

use super::Shared;
use super::exchange::Served;
use crate::deadline::Stopwatch;
use crate::usage::Event;
use crate::usage::event::{HttpRejected, HttpRequest, http_method};
use std::net::IpAddr;

/// Where and when one exchange happened.
pub struct Exchange<'a> {
    pub clock: &'a Stopwatch,
    pub peer: IpAddr,
    pub method: &'a str,
    pub request_id: Option<String>,
}

fn ms(clock: &Stopwatch) -> f64 {
    (clock.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// An admitted request was served (or refused after admission, e.g. over its share).
pub fn served(shared: &Shared, at: Exchange, principal: &str, s: &Served) {
    let usage = &shared.usage;
    let (Some(status), Some(request_id)) = (s.status, at.request_id) else {
        return;
    };
    let event = match s.rejected {
        Some(reason) => Event::HttpRejected(HttpRejected {
            request_id,
            peer: at.peer.to_string(),
            method: http_method(at.method),
            reason,
            status,
            duration_ms: ms(at.clock),
            principal: Some(principal.to_string()),
            build: crate::build_info::identity(),
        }),
        None => Event::HttpRequest(HttpRequest {
            request_id,
            peer: at.peer.to_string(),
            method: http_method(at.method),
            rpc_method: s.rpc_method,
            status,
            duration_ms: ms(at.clock),
            principal: principal.to_string(),
            mcp_session: s.mcp_session.clone(),
            build: crate::build_info::identity(),
        }),
    };
    usage.emit(event);
}

/// A request was refused at admission.
pub fn rejected(
    shared: &Shared,
    at: Exchange,
    reason: &'static str,
    status: u16,
    principal: Option<&str>,
) {
    let Some(request_id) = at.request_id else {
        return;
    };
    shared.usage.emit(Event::HttpRejected(HttpRejected {
        request_id,
        peer: at.peer.to_string(),
        method: http_method(at.method),
        reason,
        status,
        duration_ms: ms(at.clock),
        principal: principal.map(str::to_string),
        build: crate::build_info::identity(),
    }));
}
